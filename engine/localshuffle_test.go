package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
)

// TestUnreadOnTheBroker: the local shuffle's condition (localshuffle.go)
// as Kafka answers it. Partition 0 holds a committed record after the
// offset asked about; 1 holds only an aborted one and its marker (nothing
// to read); 2 a transaction still open; 3 nothing at all; 4 a committed
// record before the offset asked about only; 5 a committed event-time
// record, which does not count.
func TestUnreadOnTheBroker(t *testing.T) {
	k := kafkatest.Broker(t)
	topic := kafkatest.Topic(t, "unread")
	kafkatest.CreateTopic(t, k.Bootstrap(), topic, 6, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// txn writes one record to partition in a transaction of its own,
	// which it commits, aborts or leaves open ("open").
	txn := func(partition int32, end string) *kgo.Client {
		cl := kafkatest.Client(t, k.Bootstrap(), kgo.TransactionalID(fmt.Sprintf("%s-%d", topic, partition)),
			kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		rec := &kgo.Record{Partition: partition, Value: []byte("x")}
		if partition == 5 {
			rec.Headers = []kgo.RecordHeader{{Key: headerEventTimes}}
		}
		if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if end != "open" {
			if err := cl.EndTransaction(ctx, end == "commit"); err != nil {
				t.Fatal(err)
			}
		}
		return cl
	}
	txn(0, "commit")
	txn(1, "abort")
	txn(4, "commit")
	txn(5, "commit")
	kafkatest.AwaitSettled(ctx, t, k.Bootstrap(), topic) // the markers of 0, 1 and 4 are written
	open := txn(2, "open")
	defer func() { _ = open.EndTransaction(context.Background(), kgo.TryAbort) }()

	cl := kafkatest.Client(t, k.Bootstrap())
	conn := []kgo.Opt{kgo.SeedBrokers(k.Bootstrap()...)}
	got, err := unread(ctx, kadm.NewClient(cl), conn, topic, map[int32]int64{0: 0, 1: 0, 2: 0, 3: 0, 4: 2, 5: 0})
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]bool{0: true, 1: false, 2: true, 3: false, 4: false, 5: false}
	for p, w := range want {
		if got[p] != w {
			t.Errorf("partition %d: unread %v, want %v (all: %v)", p, got[p], w, got)
		}
	}
}
