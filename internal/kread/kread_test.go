package kread

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
)

func TestMain(m *testing.M) { kafkatest.Main(m) }

// The log ends in an aborted transaction: its records and markers follow
// the last committed record, and All must still stop, having returned only
// committed records.
func TestAllStopsAtLastStableOffset(t *testing.T) {
	ctx, brokers, topic := newTopic(t, "log")
	conn := []kgo.Opt{kgo.SeedBrokers(brokers...)}

	// Nothing written yet: returns at once.
	if err := All(ctx, conn, topic, func(*kgo.Record) error { t.Fatal("record in an empty topic"); return nil }); err != nil {
		t.Fatal(err)
	}
	writeEndingInAborts(ctx, t, brokers, topic)

	var got []string
	err := All(ctx, conn, topic, func(r *kgo.Record) error {
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
	if err := All(ctx, conn, topic, func(r *kgo.Record) error { only1 = append(only1, string(r.Value)); return nil }, 1); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(only1) != "[c]" {
		t.Fatalf("partition 1 alone: %v, want [c]", only1)
	}
}

// newTopic creates a topic of two partitions on the test broker, and
// gives a context for the test.
func newTopic(t *testing.T, name string) (context.Context, []string, string) {
	t.Helper()
	k := kafkatest.Broker(t)
	topic := kafkatest.Topic(t, name)
	kafkatest.CreateTopic(t, k.Bootstrap(), topic, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx, k.Bootstrap(), topic
}

// writeEndingInAborts writes, with a transactional producer: partition 0
// a, b committed (offsets 0, 1; its marker 2), then x, y aborted (3, 4;
// marker 5); partition 1 c committed (0; marker 1), then z aborted (2;
// marker 3).
func writeEndingInAborts(ctx context.Context, t *testing.T, brokers []string, topic string) {
	t.Helper()
	p := kafkatest.Client(t, brokers, kgo.TransactionalID(topic), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	txn := func(end kgo.TransactionEndTry, part int32, vals ...string) {
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, v := range vals {
			if err := p.ProduceSync(ctx, &kgo.Record{Partition: part, Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
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
func TestAfter(t *testing.T) {
	ctx, brokers, topic := newTopic(t, "after")
	conn := []kgo.Opt{kgo.SeedBrokers(brokers...)}
	after := func(from map[int32]int64) bool {
		t.Helper()
		found, err := After(ctx, conn, topic, from)
		if err != nil {
			t.Fatal(err)
		}
		return found
	}
	if after(map[int32]int64{0: 0, 1: 0}) {
		t.Fatal("a record found in an empty topic")
	}
	writeEndingInAborts(ctx, t, brokers, topic)
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
	if err := Range(ctx, conn, topic, 0, 1, 6, func(r *kgo.Record) error { got = append(got, string(r.Value)); return nil }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[b]" {
		t.Fatalf("Range(partition 0, [1, 6)) = %v, want [b]", got)
	}

	// A transaction still open: its record is past the last stable
	// offset, so not there yet; once committed, it is.
	p := kafkatest.Client(t, brokers, kgo.TransactionalID(topic+"-open"), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Partition: 1, Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if after(map[int32]int64{1: 1}) {
		t.Fatal("a record of an open transaction counted")
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if !after(map[int32]int64{1: 1}) {
		t.Fatal("the committed record after the aborted one not found")
	}
}

// Tail reads only the last n offsets of each partition, and returns the
// committed records among them.
func TestTail(t *testing.T) {
	ctx, brokers, topic := newTopic(t, "tail")
	conn := []kgo.Opt{kgo.SeedBrokers(brokers...)}
	tail := func(n int64) string {
		t.Helper()
		var got []string
		if err := Tail(ctx, conn, topic, n, func(r *kgo.Record) error {
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
	writeEndingInAborts(ctx, t, brokers, topic)
	// Partition 0: a b (0, 1), marker, x y aborted, marker: end 6.
	// Partition 1: c (0), marker, z aborted, marker: end 4.
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
