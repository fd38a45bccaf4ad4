package kread

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/internal/kafkatest"
)

func TestMain(m *testing.M) { kafkatest.Main(m) }

// The log ends in an aborted transaction: its records and markers follow
// the last committed record, and All must still stop, having returned only
// committed records.
func TestAllStopsAtLastStableOffset(t *testing.T) {
	k := kafkatest.Broker(t)
	topic := kafkatest.Topic(t, "log")
	kafkatest.CreateTopic(t, k.Bootstrap(), topic, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := []kgo.Opt{kgo.SeedBrokers(k.Bootstrap()...)}

	// Nothing written yet: returns at once.
	if err := All(ctx, conn, topic, func(*kgo.Record) error { t.Fatal("record in an empty topic"); return nil }); err != nil {
		t.Fatal(err)
	}

	p := kafkatest.Client(t, k.Bootstrap(), kgo.TransactionalID(topic), kgo.DefaultProduceTopic(topic),
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
