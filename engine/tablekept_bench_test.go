package engine

import (
	"context"
	"fmt"
	"runtime/debug"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/internal/kread"
	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
	"github.com/eoflow/pipeline/operator"
)

// BenchmarkTableAtRebalance is what the table phase of an attempt costs
// with a 1M-key broadcast table on the broker, when a rebalance starts
// the attempt: read from the start (every attempt before tablekept.go,
// readTable), or kept and read on past 1,000 updates written since
// (readOn). bench/results/2026-12-06-table-keep.md has a run.
func BenchmarkTableAtRebalance(b *testing.B) {
	k := kafkatest.Broker(b)
	topic := fmt.Sprintf("bench-table-%d", time.Now().UnixNano())
	compact := "compact"
	kafkatest.CreateTopic(b, k.Bootstrap(), topic, 4, map[string]*string{"cleanup.policy": &compact})
	cl := kafkatest.Client(b, k.Bootstrap(), kgo.ProducerLinger(5*time.Millisecond))
	ctx := context.Background()
	produce := func(n int, value func(i int) string) {
		b.Helper()
		for i := range n {
			cl.Produce(ctx, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "c%07d", i), Value: []byte(value(i))}, func(_ *kgo.Record, err error) {
				if err != nil {
					b.Error(err)
				}
			})
		}
		if err := cl.Flush(ctx); err != nil {
			b.Fatal(err)
		}
	}
	const keys = 1_000_000
	produce(keys, func(i int) string { return fmt.Sprintf(`{"tier":"t%d","n":%d}`, i%7, i) })
	conn := []kgo.Opt{kgo.SeedBrokers(k.Bootstrap()...)}
	cfg := config.Table{ID: "t", Topic: topic, Format: config.FormatJSON}
	fromStart := func(tb *operator.Table) map[int32]int64 {
		b.Helper()
		ends, err := kread.AllTo(ctx, conn, topic, func(r *kgo.Record) error { tb.Apply(r.Key, r.Value); return nil })
		if err != nil {
			b.Fatal(err)
		}
		debug.FreeOSMemory() // as readTable does
		return ends
	}
	b.Run("from_start", func(b *testing.B) {
		for b.Loop() {
			tb := operator.NewTable(cfg)
			fromStart(tb)
			if tb.Len() != keys {
				b.Fatalf("%d keys, want %d", tb.Len(), keys)
			}
		}
	})
	b.Run("kept_read_on_1000", func(b *testing.B) {
		tb := operator.NewTable(cfg)
		ends := fromStart(tb)
		for b.Loop() {
			b.StopTimer()
			produce(1000, func(int) string { return `{"tier":"x"}` })
			b.StartTimer()
			read := 0
			next, err := kread.FromTo(ctx, conn, topic, func(p int32) (int64, bool) { return ends[p], true }, func(r *kgo.Record) error {
				read++
				tb.Apply(r.Key, r.Value)
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			if read != 1000 {
				b.Fatalf("read on %d records, want 1000", read)
			}
			ends = next
		}
	})
}
