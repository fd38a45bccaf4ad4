package memkafka

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The Client's own behaviour, where it adds to the model what franz-go's
// client adds to Kafka; the conformance tests hold its answers to the
// broker's.

// A transactional client fences its id's older clients when it first
// needs its producer id, not when it is made or begins a transaction.
func TestClientFencesAtItsFirstProducerID(t *testing.T) {
	ctx := context.Background()
	c := New(time.Unix(0, 0))
	if err := c.CreateTopic("out", 1); err != nil {
		t.Fatal(err)
	}
	produce := func(cl *Client) error {
		var err error
		cl.Produce(ctx, &kgo.Record{Topic: "out", Value: []byte("v")}, func(_ *kgo.Record, perr error) { err = perr })
		return err
	}
	old := NewClient(c, ClientConfig{TransactionalID: "x"})
	if err := produce(old); err == nil || err.Error() != errNotInTransaction.Error() {
		t.Fatalf("a write outside a transaction: %v", err)
	}
	if err := old.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := old.BeginTransaction(); err == nil {
		t.Fatal("a second BeginTransaction was taken")
	}
	if err := produce(old); err != nil {
		t.Fatal(err)
	}
	successor := NewClient(c, ClientConfig{TransactionalID: "x"})
	if err := successor.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if c.OpenTransactions() == nil {
		t.Fatal("BeginTransaction alone fenced the older client")
	}
	if _, _, err := successor.ProducerID(ctx); err != nil {
		t.Fatal(err)
	}
	if err := produce(old); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("the fenced client's write: %v", err)
	}
	if err := old.EndTransaction(ctx, kgo.TryCommit); !errors.Is(err, kerr.OperationNotAttempted) {
		t.Fatalf("the fenced client's commit: %v", err)
	}
}

// A poll with nothing to read returns at once, or, with WaitForRecords,
// waits until a record arrives, its context ends or the client closes.
func TestClientPollWaits(t *testing.T) {
	c := New(time.Unix(0, 0))
	if err := c.CreateTopic("in", 1); err != nil {
		t.Fatal(err)
	}
	assign := map[string]map[int32]kgo.Offset{"in": {0: kgo.NewOffset().At(0)}}
	now := NewClient(c, ClientConfig{})
	now.AddConsumePartitions(assign)
	if fs := now.PollRecords(context.Background(), 10); fs.NumRecords() != 0 || fs.Err0() != nil {
		t.Fatalf("a poll of nothing: %v records, %v", fs.NumRecords(), fs.Err0())
	}

	waiting := NewClient(c, ClientConfig{WaitForRecords: true})
	waiting.AddConsumePartitions(assign)
	got := make(chan kgo.Fetches)
	go func() { got <- waiting.PollRecords(context.Background(), 10) }()
	if _, err := c.Append(Record{Topic: "in", Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	if fs := <-got; fs.NumRecords() != 1 {
		t.Fatalf("the waiting poll returned %d records, %v", fs.NumRecords(), fs.Err0())
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { got <- waiting.PollRecords(ctx, 10) }()
	cancel()
	if fs := <-got; !errors.Is(fs.Err0(), context.Canceled) {
		t.Fatalf("a cancelled wait: %v", fs.Err0())
	}
	go func() { got <- waiting.PollRecords(context.Background(), 10) }()
	waiting.Close()
	if fs := <-got; !fs.IsClientClosed() {
		t.Fatalf("a wait of a closed client: %v", fs.Err0())
	}
}

// Group consumers share the topics' partitions, see a rebalance at their
// next poll, and commit as the member of the generation they last polled
// in.
func TestClientGroupConsumers(t *testing.T) {
	ctx := context.Background()
	c := New(time.Unix(0, 0))
	if err := c.CreateTopic("in", 2); err != nil {
		t.Fatal(err)
	}
	for p := range int32(2) {
		if _, err := c.Append(Record{Topic: "in", Partition: p, Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := ClientConfig{Group: "g", Topics: []string{"in"}}
	a := NewClient(c, cfg)
	if fs := a.PollFetches(ctx); fs.NumRecords() != 2 {
		t.Fatalf("the only member read %d records, want both partitions'", fs.NumRecords())
	}
	b := NewClient(c, cfg)
	b.PollFetches(ctx)
	if err := a.CommitRecords(ctx, &kgo.Record{Topic: "in", Partition: 0}); !errors.Is(err, kerr.IllegalGeneration) {
		t.Fatalf("a commit of the generation before the rebalance: %v", err)
	}
	a.PollFetches(ctx)
	if len(a.pos)+len(b.pos) != 2 || len(a.pos) != 1 {
		t.Fatalf("assignments after the rebalance: %v and %v", a.pos, b.pos)
	}
	if err := a.CommitRecords(ctx, &kgo.Record{Topic: "in", Partition: 0}); err != nil {
		t.Fatal(err)
	}
	if got := c.GroupOffsets("g")[TP{"in", 0}]; got != 1 {
		t.Fatalf("committed %d, want 1: the offset after the record", got)
	}
	if id, gen := a.GroupMetadata(); id == "" || gen != c.Generation("g") {
		t.Fatalf("GroupMetadata = %q, %d", id, gen)
	}
	b.Close() // a dynamic member leaves
	a.PollFetches(ctx)
	if len(a.pos) != 2 {
		t.Fatalf("after the other member left: %v", a.pos)
	}
}

// franz-go's own partitioners, its default among them, partition by the
// load of their buffers (PartitionByBackup, never Partition): the model
// places a keyed record where the key hashes, as the Java client does,
// and keyless ones round-robin.
func TestClientRunsFranzGosDefaultPartitioner(t *testing.T) {
	ctx := context.Background()
	c := New(time.Unix(0, 0))
	if err := c.CreateTopic("out", 4); err != nil {
		t.Fatal(err)
	}
	byDefault := NewClient(c, ClientConfig{Partitioner: kgo.UniformBytesPartitioner(64<<10, true, true, nil)})
	byHash := NewClient(c, ClientConfig{})
	for i := range 20 {
		key := []byte{byte(i), 'k'}
		a, b := &kgo.Record{Topic: "out", Key: key}, &kgo.Record{Topic: "out", Key: key}
		byDefault.Produce(ctx, a, nil)
		byHash.Produce(ctx, b, nil)
		if a.Partition != b.Partition {
			t.Fatalf("key %q: partition %d by franz-go's default, %d by the key's murmur2 hash", key, a.Partition, b.Partition)
		}
	}
	for want := range int32(8) {
		r := &kgo.Record{Topic: "out"}
		byDefault.Produce(ctx, r, nil)
		if r.Partition != want%4 {
			t.Fatalf("keyless record %d went to partition %d, want %d (round-robin)", want, r.Partition, want%4)
		}
	}
}
