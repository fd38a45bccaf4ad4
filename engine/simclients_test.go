package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eoflow/pipeline/internal/kread"
	"github.com/eoflow/pipeline/internal/testkit/memkafka"
	"github.com/eoflow/pipeline/sink"
	"github.com/eoflow/pipeline/source"
)

// The simulations' Kafka adapters are the job's own (sink.Txn,
// sink.Plain, source.Reader) on clients of the Kafka model
// (memkafka.Client, held to the broker by its conformance tests). The
// clients below wrap the model's to add what a simulation needs and
// Kafka has anyway: a crash of the process at any call that reaches the
// brokers (world.io), the topics' size limits, and polls of a size the
// seed draws.

// simAdapters makes an attempt's adapters on the model.
type simAdapters struct {
	w *world
	// now is the simulation's clock: a transaction's age, which decides
	// between a timeout and a takeover (sink.Txn.SetClock).
	now func() time.Time
	// busy, if set, draws whether the initialization of a producer id
	// must wait (the coordinator still writes the id's last markers), and
	// hiccup whether an offset commit fails (the group coordinator is
	// loading): the group simulation's faults.
	busy, hiccup func() bool
}

var _ adapters = simAdapters{}

func (s simAdapters) txn(a *attempt) (*sink.Txn, error) {
	cfg := a.j.cfg
	cl := memkafka.NewClient(s.w.kafka, memkafka.ClientConfig{
		TransactionalID: sink.TransactionalID(cfg.Name), TransactionTimeout: cfg.Kafka.TransactionTimeout,
	})
	t := sink.NewTxnOn(s.client(cl), simLog{s.w}, cfg.Name, cfg.Kafka.TransactionTimeout)
	t.SetClock(s.now)
	return t, nil
}

func (s simAdapters) memberTxn(a *attempt, internal, mixed []string) (*sink.Txn, error) {
	cfg := a.j.cfg
	cl := memkafka.NewClient(s.w.kafka, memkafka.ClientConfig{
		TransactionalID:    sink.MemberTransactionalID(cfg.Name, a.j.instance),
		TransactionTimeout: cfg.Kafka.TransactionTimeout,
		Partitioner:        sink.MemberPartitioner(internal, mixed),
	})
	t := sink.NewMemberTxnOn(s.client(cl), simLog{s.w}, cfg.Name, a.j.instance, cfg.Kafka.TransactionTimeout)
	t.SetClock(s.now)
	return t, nil
}

func (s simAdapters) plain(*attempt) (*sink.Plain, error) {
	return sink.NewPlainOn(simPlainClient{w: s.w, cl: memkafka.NewClient(s.w.kafka, memkafka.ClientConfig{})}), nil
}

func (s simAdapters) reader(_ *attempt, offsets map[source.TopicPartition]int64) (*source.Reader, error) {
	cl := memkafka.NewClient(s.w.kafka, memkafka.ClientConfig{KeepControlRecords: true})
	return source.NewReaderOn(simReaderClient{w: s.w, cl: cl}, offsets), nil
}

func (s simAdapters) client(cl *memkafka.Client) *simTxnClient {
	return &simTxnClient{w: s.w, cl: cl, busy: s.busy, hiccup: s.hiccup}
}

// tableReader is a table's reader, as the job's (source.Reader) on a
// client of the model.
func (w *world) tableReader(offsets map[source.TopicPartition]int64) *source.Reader {
	cl := memkafka.NewClient(w.kafka, memkafka.ClientConfig{KeepControlRecords: true})
	return source.NewReaderOn(simReaderClient{w: w, cl: cl}, offsets)
}

// simTxnClient is a transactional client of the model.
type simTxnClient struct {
	w            *world
	cl           *memkafka.Client
	busy, hiccup func() bool // simAdapters'
	// initialized: the producer id is (InitProducerId was answered).
	initialized bool
}

var _ sink.TxnClient = (*simTxnClient)(nil)

func (c *simTxnClient) ProducerID(ctx context.Context) (int64, int16, error) {
	if !c.initialized && c.busy != nil && c.busy() {
		// Kafka's client retries this inside; the simulation asks again
		// at a later step.
		return -1, -1, fmt.Errorf("%w (%w)", kerr.ConcurrentTransactions, errSimWait)
	}
	after := c.w.io("init producer id")
	id, epoch, err := c.cl.ProducerID(ctx)
	if err == nil {
		c.initialized = true
		after()
	}
	return id, epoch, err
}

// BeginTransaction asks no broker anything.
func (c *simTxnClient) BeginTransaction() error { return c.cl.BeginTransaction() }

func (c *simTxnClient) Produce(ctx context.Context, rec *kgo.Record, promise func(*kgo.Record, error)) {
	after := c.w.io("produce to " + rec.Topic)
	if err := c.w.tooLarge(rec); err != nil {
		promise(rec, err)
		after()
		return
	}
	c.cl.Produce(ctx, rec, func(r *kgo.Record, err error) {
		if err == nil && c.w.pieces != nil {
			c.w.pieces.count(r)
		}
		promise(r, err)
	})
	after()
}

func (c *simTxnClient) Flush(ctx context.Context) error {
	after := c.w.io("flush")
	if err := c.cl.Flush(ctx); err != nil {
		return err
	}
	after()
	return nil
}

func (c *simTxnClient) AbortBufferedRecords(ctx context.Context) error {
	return c.cl.AbortBufferedRecords(ctx)
}

func (c *simTxnClient) EndTransaction(ctx context.Context, try kgo.TransactionEndTry) error {
	what := "abort"
	if try == kgo.TryCommit {
		what = "commit"
	}
	after := c.w.io(what + " the transaction")
	if err := c.cl.EndTransaction(ctx, try); err != nil {
		return err
	}
	after()
	return nil
}

func (c *simTxnClient) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	after := c.w.io(fmt.Sprintf("request %s", kmsg.NameForKey(req.Key())))
	if _, ok := req.(*kmsg.TxnOffsetCommitRequest); ok && c.hiccup != nil && c.hiccup() {
		return nil, kerr.CoordinatorLoadInProgress
	}
	resp, err := c.cl.Request(ctx, req)
	if err == nil {
		after()
	}
	return resp, err
}

func (c *simTxnClient) Close() { c.cl.Close() }

// tooLarge is the brokers' answer to a record larger than its topic's
// max.message.bytes (world.maxBytes), which the model does not check.
func (w *world) tooLarge(r *kgo.Record) error {
	if max := w.maxBytes[r.Topic]; max > 0 && sink.BatchBytes(r) > int(max) {
		return fmt.Errorf("%d bytes to %s: %w", sink.BatchBytes(r), r.Topic, kerr.MessageTooLarge)
	}
	return nil
}

// simPlainClient is an idempotent producer of the model.
type simPlainClient struct {
	w  *world
	cl *memkafka.Client
}

var _ sink.PlainClient = simPlainClient{}

func (c simPlainClient) Produce(ctx context.Context, rec *kgo.Record, promise func(*kgo.Record, error)) {
	after := c.w.io("produce to " + rec.Topic)
	if err := c.w.tooLarge(rec); err != nil {
		promise(rec, err)
	} else {
		c.cl.Produce(ctx, rec, promise)
	}
	after()
}

func (c simPlainClient) Flush(ctx context.Context) error {
	after := c.w.io("flush outputs")
	if err := c.cl.Flush(ctx); err != nil {
		return err
	}
	after()
	return nil
}

func (c simPlainClient) Close() { c.cl.Close() }

// simReaderClient is a consumer of the model whose polls return as many
// records as the seed draws, up to what the reader asks for.
type simReaderClient struct {
	w  *world
	cl *memkafka.Client
}

var _ source.ReaderClient = simReaderClient{}

func (c simReaderClient) AddConsumePartitions(partitions map[string]map[int32]kgo.Offset) {
	c.cl.AddConsumePartitions(partitions)
}

func (c simReaderClient) PollRecords(ctx context.Context, max int) kgo.Fetches {
	after := c.w.io("poll")
	defer after()
	return c.cl.PollRecords(ctx, 1+c.w.rng.IntN(max))
}

func (c simReaderClient) Close() { c.cl.Close() }

// simLog is the model as the decision log reads it (the checkpoint
// topic, kread): a crash may come as the read starts.
type simLog struct{ w *world }

var _ kread.Cluster = simLog{}

func (l simLog) Offsets(ctx context.Context, topic string) (map[int32]kread.Offsets, error) {
	after := l.w.io("read " + topic)
	o, err := l.w.kafka.Offsets(ctx, topic)
	if err == nil {
		after()
	}
	return o, err
}

func (l simLog) Consume(topic string, from map[int32]int64) (kread.Consumer, error) {
	c, err := l.w.kafka.Consume(topic, from)
	return simConsumer{c}, err
}

// simConsumer is a read of the model that says when it would wait. A
// read to the last stable offset cannot tell that it is there when the
// last records before it are of an aborted transaction whose marker
// comes after another producer's open one (a group member's checkpoint
// records beside another's): Kafka's read waits until that transaction
// ends and the marker is read, which on the simulation's one goroutine
// would never come. It fails with errSimWait instead, to be asked again
// at a later step.
type simConsumer struct{ kread.Consumer }

func (c simConsumer) PollFetches(ctx context.Context) kgo.Fetches {
	fs := c.Consumer.PollFetches(ctx)
	if fs.Empty() {
		return kgo.NewErrFetch(errSimWait)
	}
	return fs
}
