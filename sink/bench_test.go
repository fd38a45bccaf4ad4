package sink

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkTxnProduce is the transactional producer's per-record path, on
// franz-go's in-process fake broker: Produce in transactions of 1,000
// records, each committed. It is the path a seam between Txn and its
// client must not slow down.
func BenchmarkTxnProduce(b *testing.B) {
	const topic, perTxn = "out", 1000
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	txn, err := NewTxn([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}, "bench", time.Minute, kgo.DefaultProduceTopic(topic))
	if err != nil {
		b.Fatal(err)
	}
	defer txn.Close()
	if err := txn.Fence(ctx); err != nil {
		b.Fatal(err)
	}
	recs := make([]kgo.Record, perTxn)
	value := make([]byte, 100)
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; {
		if err := txn.Begin(ctx, 1); err != nil {
			b.Fatal(err)
		}
		for i := 0; i < perTxn && n < b.N; i, n = i+1, n+1 {
			recs[i] = kgo.Record{Value: value}
			txn.Produce(ctx, &recs[i])
		}
		if err := txn.Commit(ctx, 1); err != nil {
			b.Fatal(err)
		}
	}
}
