package datagen

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/internal/kafkatest"
	"github.com/eoflow/pipeline/internal/kread"
)

func TestMain(m *testing.M) { kafkatest.Main(m) }

func TestValue(t *testing.T) {
	for n, want := range map[int64]string{0: `{"n":0}`, 7: `{"n":7}`, -3: `{"n":-3}`, 1 << 40: `{"n":1099511627776}`} {
		if got := string(Value(n)); got != want {
			t.Errorf("Value(%d) = %s, want %s", n, got, want)
		}
	}
}

func TestNumbersWritesEachOnce(t *testing.T) {
	k := kafkatest.Broker(t)
	topic := kafkatest.Topic(t, "numbers")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := []kgo.Opt{kgo.SeedBrokers(k.Bootstrap()...)}
	n, err := Numbers(ctx, conn, Options{Topic: topic, Partitions: 3, From: 1, Count: 1000})
	if err != nil || n != 1000 {
		t.Fatalf("Numbers = %d, %v", n, err)
	}
	seen := map[string]int{}
	parts := map[int32]bool{}
	if err := kread.All(ctx, conn, topic, func(r *kgo.Record) error {
		seen[string(r.Value)]++
		parts[r.Partition] = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i := int64(1); i <= 1000; i++ {
		if c := seen[string(Value(i))]; c != 1 {
			t.Fatalf("number %d written %d times", i, c)
		}
	}
	if len(seen) != 1000 || len(parts) != 3 {
		t.Fatalf("%d distinct values over %d partitions; want 1000 over 3", len(seen), len(parts))
	}
}
