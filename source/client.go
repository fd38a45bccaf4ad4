package source

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The seam between the readers and Kafka: the calls Reader and
// GroupReader make of their client, named after franz-go's, so
// *kgo.Client is one as it is. The in-memory model of the broker-free
// tests and simulations is another (internal/testkit/memkafka.Client):
// NewReaderOn and NewGroupReaderOn run the real readers on it.

// ReaderClient is what Reader asks of its client: to consume the
// partitions it assigns, from their checkpointed offsets, and a poll.
type ReaderClient interface {
	AddConsumePartitions(partitions map[string]map[int32]kgo.Offset)
	PollRecords(ctx context.Context, max int) kgo.Fetches
	Close()
}

// GroupClient is what GroupReader asks of its client, a consumer group
// member: a poll, and a commit of the records polled before they are
// handed out.
type GroupClient interface {
	PollRecords(ctx context.Context, max int) kgo.Fetches
	CommitRecords(ctx context.Context, recs ...*kgo.Record) error
	Close()
}

var (
	_ ReaderClient = (*kgo.Client)(nil)
	_ GroupClient  = (*kgo.Client)(nil)
)
