package sink

import (
	"bytes"
	"context"
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/internal/kafkatest"
)

func TestLimitsBatch(t *testing.T) {
	l := NewLimits(1_048_588, 0, map[string]int32{"small": 4096, "big": 8 << 20})
	for _, tc := range []struct {
		topic string
		want  int32
	}{
		{"small", 4096},
		{"big", 8 << 20},
		{"undescribed", 1_048_588}, // the brokers' message.max.bytes
	} {
		if got := l.Batch(tc.topic); got != tc.want {
			t.Errorf("Batch(%s) = %d, want %d", tc.topic, got, tc.want)
		}
	}
	if got := (Limits{}).Batch("any"); got != defaultBatchBytes {
		t.Errorf("zero Limits: Batch = %d, want franz-go's default %d", got, defaultBatchBytes)
	}
	// A batch never outgrows the request that carries it.
	if got := NewLimits(0, 2<<20, map[string]int32{"huge": 64 << 20}).Batch("huge"); got != 2<<20-requestOverhead {
		t.Errorf("Batch beyond socket.request.max.bytes = %d", got)
	}
	// Whatever the brokers say, the producer options are ones franz-go
	// accepts.
	for _, l := range []Limits{{}, NewLimits(math.MaxInt32, math.MaxInt32, nil), NewLimits(1, 1, map[string]int32{"t": 1})} {
		cl, err := kgo.NewClient(l.Opts()...)
		if err != nil {
			t.Errorf("%+v: %v", l, err)
			continue
		}
		cl.Close()
	}
	rec := &kgo.Record{Topic: "small", Value: make([]byte, 4096)}
	if l.Fits(rec) {
		t.Error("a 4096-byte value fits a 4096-byte batch limit")
	}
	rec.Topic = "big"
	if !l.Fits(rec) {
		t.Error("a 4096-byte value does not fit an 8 MiB batch limit")
	}
}

func TestFitDeadLetter(t *testing.T) {
	src := &kgo.Record{Topic: "in", Offset: 7, Key: []byte("k"), Value: bytes.Repeat([]byte("x"), 1_048_500)}
	const limit = 1_048_588
	dl := DeadLetter("dlq", src, "decode", "source", "invalid character 'x' looking for beginning of value")
	if BatchBytes(dl) <= limit {
		t.Fatalf("test record fits already: %d bytes", BatchBytes(dl))
	}
	if !FitDeadLetter(dl, limit) {
		t.Fatal("FitDeadLetter cut nothing")
	}
	if n := BatchBytes(dl); n > limit || n < limit-64 {
		t.Errorf("cut to %d bytes, want just under %d", n, limit)
	}
	if Header(dl, HeaderTruncated) != "1048500" || Header(dl, HeaderTruncatedKey) != "" || string(dl.Key) != "k" {
		t.Errorf("headers %v, key %q", dl.Headers, dl.Key)
	}
	if len(src.Value) != 1_048_500 || Header(dl, HeaderOffset) != "7" {
		t.Error("the source record changed, or the dead letter lost its origin")
	}
	if FitDeadLetter(dl, limit) {
		t.Error("a dead letter that fits was cut again")
	}

	// A key alone too large is cut too.
	huge := DeadLetter("dlq", &kgo.Record{Key: make([]byte, 5000), Value: make([]byte, 5000)}, "decode", "source", "r")
	if !FitDeadLetter(huge, 1024) || BatchBytes(huge) > 1024 || len(huge.Value) != 0 ||
		Header(huge, HeaderTruncatedKey) != "5000" || Header(huge, HeaderTruncated) != "5000" {
		t.Errorf("key and value of %d, %d bytes, headers %v", len(huge.Key), len(huge.Value), huge.Headers)
	}
}

// A producer sized by the brokers' settings sends a record that
// franz-go's default batch limit (1,000,012 bytes) refuses but the
// topic accepts (1,048,588 bytes by default).
func TestProducerSizedByTheBrokers(t *testing.T) {
	k := kafkatest.Broker(t)
	topic := kafkatest.Topic(t, "out")
	kafkatest.CreateTopic(t, k.Bootstrap(), topic, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := kadm.NewClient(kafkatest.Client(t, k.Bootstrap()))
	limits, err := DescribeLimits(ctx, adm, []string{topic})
	if err != nil {
		t.Fatal(err)
	}
	if got := limits.Batch(topic); got != 1_048_588 {
		t.Fatalf("Batch(%s) = %d, want the broker default max.message.bytes 1048588", topic, got)
	}
	rec := &kgo.Record{Topic: topic, Value: bytes.Repeat([]byte("x"), 1_040_000)}
	if !limits.Fits(rec) {
		t.Fatal("a 1,040,000-byte record does not fit")
	}
	txn, err := NewTxn([]kgo.Opt{kgo.SeedBrokers(k.Bootstrap()...)}, topic, time.Minute, limits.Opts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Close()
	if err := txn.Fence(ctx); err != nil {
		t.Fatal(err)
	}
	if err := txn.Begin(ctx, 1); err != nil {
		t.Fatal(err)
	}
	txn.Produce(ctx, rec)
	if err := txn.Commit(ctx, 1); err != nil {
		t.Fatalf("committing a 1,040,000-byte record: %v", err)
	}
}
