package kread_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	. "github.com/eoflow/pipeline/internal/kread"
	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
	"github.com/eoflow/pipeline/internal/testkit/memkafka"
)

func TestMain(m *testing.M) { kafkatest.Main(m) }

// The log ends in an aborted transaction: its records and markers follow
// the last committed record, and All must still stop, having returned only
// committed records.
func TestAllStopsAtLastStableOffset(t *testing.T) { onBoth(t, testAllStopsAtLastStableOffset) }

func testAllStopsAtLastStableOffset(t *testing.T, w *world) {
	ctx, cl, topic := w.ctx, w.cl, w.topic

	// Nothing written yet: returns at once.
	if err := AllOn(ctx, cl, topic, func(*kgo.Record) error { t.Fatal("record in an empty topic"); return nil }); err != nil {
		t.Fatal(err)
	}
	writeEndingInAborts(ctx, t, w.producer(topic), topic)

	var got []string
	err := AllOn(ctx, cl, topic, func(r *kgo.Record) error {
		got = append(got, fmt.Sprintf("%d:%s", r.Partition, r.Value))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("All returned %v, want the 3 committed records", got)
	}
	var only1 []string
	if err := AllOn(ctx, cl, topic, func(r *kgo.Record) error { only1 = append(only1, string(r.Value)); return nil }, 1); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(only1) != "[c]" {
		t.Fatalf("partition 1 alone: %v, want [c]", only1)
	}
}

// world is a topic of two partitions, on the test broker or on the
// in-memory model, and the test's context.
type world struct {
	ctx      context.Context
	cl       Cluster
	topic    string
	producer func(id string) producer
}

// producer is a transactional producer: franz-go's, or the model's
// client.
type producer interface {
	BeginTransaction() error
	Produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error))
	Flush(ctx context.Context) error
	EndTransaction(ctx context.Context, try kgo.TransactionEndTry) error
}

// onBoth runs test on the broker (not under -short) and on the model
// (internal/testkit/memkafka), which must read alike.
func onBoth(t *testing.T, test func(*testing.T, *world)) {
	t.Run("kafka", func(t *testing.T) {
		k := kafkatest.Broker(t)
		topic := kafkatest.Topic(t, "log")
		kafkatest.CreateTopic(t, k.Bootstrap(), topic, 2, nil)
		test(t, &world{ctx: testContext(t), cl: Dial([]kgo.Opt{kgo.SeedBrokers(k.Bootstrap()...)}), topic: topic,
			producer: func(id string) producer {
				return kafkatest.Client(t, k.Bootstrap(), kgo.TransactionalID(id), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			}})
	})
	t.Run("model", func(t *testing.T) {
		m := memkafka.New(time.Unix(1_800_000_000, 0))
		if err := m.CreateTopic("log", 2); err != nil {
			t.Fatal(err)
		}
		test(t, &world{ctx: testContext(t), cl: m, topic: "log",
			producer: func(id string) producer {
				return memkafka.NewClient(m, memkafka.ClientConfig{TransactionalID: id, Partitioner: kgo.ManualPartitioner()})
			}})
	})
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// produceSync writes r and waits for the outcome.
func produceSync(ctx context.Context, t *testing.T, p producer, r *kgo.Record) {
	t.Helper()
	var err error
	p.Produce(ctx, r, func(_ *kgo.Record, perr error) { err = perr })
	if ferr := p.Flush(ctx); ferr != nil {
		t.Fatal(ferr)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// writeEndingInAborts writes, with a transactional producer: partition 0
// a, b committed (offsets 0, 1; its marker 2), then x, y aborted (3, 4;
// marker 5); partition 1 c committed (0; marker 1), then z aborted (2;
// marker 3).
func writeEndingInAborts(ctx context.Context, t *testing.T, p producer, topic string) {
	t.Helper()
	txn := func(end kgo.TransactionEndTry, part int32, vals ...string) {
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, v := range vals {
			produceSync(ctx, t, p, &kgo.Record{Topic: topic, Partition: part, Value: []byte(v)})
		}
		if err := p.EndTransaction(ctx, end); err != nil {
			t.Fatal(err)
		}
	}
	txn(kgo.TryCommit, 0, "a", "b")
	txn(kgo.TryCommit, 1, "c")
	txn(kgo.TryAbort, 0, "x", "y")
	txn(kgo.TryAbort, 1, "z")
}

// After finds a committed record at or after an offset, and nothing when
// only markers and aborted records follow it; records of a transaction
// still open are not there yet. It reads to the end it listed, so the
// answer does not hang on how soon the broker answers a fetch.
func TestAfter(t *testing.T) { onBoth(t, testAfter) }

func testAfter(t *testing.T, w *world) {
	ctx, cl, topic := w.ctx, w.cl, w.topic
	after := func(from map[int32]int64) bool {
		t.Helper()
		found, err := AfterOn(ctx, cl, topic, from)
		if err != nil {
			t.Fatal(err)
		}
		return found
	}
	if after(map[int32]int64{0: 0, 1: 0}) {
		t.Fatal("a record found in an empty topic")
	}
	writeEndingInAborts(ctx, t, w.producer(topic), topic)
	for _, c := range []struct {
		from map[int32]int64
		want bool
	}{
		{map[int32]int64{0: 0}, true},
		{map[int32]int64{0: 1}, true},
		{map[int32]int64{0: 2}, false}, // the marker, then aborted records
		{map[int32]int64{0: 4}, false},
		{map[int32]int64{0: 6}, false}, // the end
		{map[int32]int64{1: 0}, true},
		{map[int32]int64{1: 1}, false},
		{map[int32]int64{0: 2, 1: 0}, true},
		{map[int32]int64{0: 2, 1: 1}, false},
		{map[int32]int64{}, false},
	} {
		if got := after(c.from); got != c.want {
			t.Errorf("After(%v) = %v, want %v", c.from, got, c.want)
		}
	}

	// Range reads one partition's committed records in a span, through
	// the markers and aborted records after them.
	var got []string
	if err := RangeOn(ctx, cl, topic, 0, 1, 6, func(r *kgo.Record) error { got = append(got, string(r.Value)); return nil }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[b]" {
		t.Fatalf("Range(partition 0, [1, 6)) = %v, want [b]", got)
	}

	// A transaction still open: its record is past the last stable
	// offset, so not there yet; once committed, it is.
	p := w.producer(topic + "-open")
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produceSync(ctx, t, p, &kgo.Record{Topic: topic, Partition: 1, Value: []byte("open")})
	if after(map[int32]int64{1: 1}) {
		t.Fatal("a record of an open transaction counted")
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	// The transaction coordinator answers the commit before it writes the
	// markers, so the last stable offset moves a moment after
	// EndTransaction returns: After answers as of its call, and is asked
	// until the marker is there.
	deadline := time.Now().Add(30 * time.Second)
	for !after(map[int32]int64{1: 1}) {
		if time.Now().After(deadline) {
			t.Fatal("the committed record after the aborted one not found")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Tail reads only the last n offsets of each partition, and returns the
// committed records among them.
func TestTail(t *testing.T) { onBoth(t, testTail) }

func testTail(t *testing.T, w *world) {
	ctx, cl, topic := w.ctx, w.cl, w.topic
	tail := func(n int64) string {
		t.Helper()
		var got []string
		if err := TailOn(ctx, cl, topic, n, func(r *kgo.Record) error {
			got = append(got, fmt.Sprintf("%d:%s", r.Partition, r.Value))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		sort.Strings(got)
		return fmt.Sprint(got)
	}
	if got := tail(10); got != "[]" {
		t.Fatalf("Tail of an empty topic = %s", got)
	}
	writeEndingInAborts(ctx, t, w.producer(topic), topic)
	// Partition 0: a b (0, 1), marker, x y aborted, marker: end 6.
	// Partition 1: c (0), marker, z aborted, marker: end 4 (or 2 while
	// the last abort's marker is on its way: the answers are the same).
	for n, want := range map[int64]string{
		1:  "[]", // the last offsets are markers
		4:  "[1:c]",
		5:  "[0:b 1:c]",
		6:  "[0:a 0:b 1:c]",
		99: "[0:a 0:b 1:c]",
	} {
		if got := tail(n); got != want {
			t.Errorf("Tail(%d) = %s, want %s", n, got, want)
		}
	}
}
