package sink

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The seam between the producers and Kafka: the calls Txn and Plain make
// of their client, named after franz-go's, so *kgo.Client is one as it
// is. The in-memory model of the broker-free tests and simulations is
// another (internal/testkit/memkafka.Client): NewTxnOn and NewPlainOn run
// the real producers on it.

// TxnClient is what Txn asks of its client: a transactional producer's
// calls (the producer id and epoch, which InitProducerId fences, and the
// transaction's begin, records and end), and the requests Txn sends the
// coordinators itself: AddOffsetsToTxn and TxnOffsetCommit on behalf of a
// group member (CommitOffsets), EndTxn to ask why an epoch went stale
// (probe).
type TxnClient interface {
	ProducerID(ctx context.Context) (int64, int16, error)
	BeginTransaction() error
	Produce(ctx context.Context, rec *kgo.Record, promise func(*kgo.Record, error))
	Flush(ctx context.Context) error
	AbortBufferedRecords(ctx context.Context) error
	EndTransaction(ctx context.Context, commit kgo.TransactionEndTry) error
	Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
	Close()
}

// PlainClient is what Plain asks of its client: an idempotent producer.
type PlainClient interface {
	Produce(ctx context.Context, rec *kgo.Record, promise func(*kgo.Record, error))
	Flush(ctx context.Context) error
	Close()
}

var (
	_ TxnClient   = (*kgo.Client)(nil)
	_ PlainClient = (*kgo.Client)(nil)
)
