package sink

import (
	"bytes"
	"context"
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
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

// A record keeps its timestamp when its topic takes it, with a margin
// for the broker's clock; otherwise it gets the processing time. Kafka
// (LogValidator) checks CreateTime topics only: a timestamp more than
// message.timestamp.after.max.ms ahead of the broker's clock, or more
// than before.max.ms behind it, is INVALID_TIMESTAMP.
func TestTimestampLimits(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	l := NewLimits(0, 0, nil).WithTimestamps(map[string]TimestampLimits{
		"append": {LogAppendTime: true, BeforeMax: 1, AfterMax: 1},
		"week":   {BeforeMax: 7 * 24 * 3_600_000, AfterMax: math.MaxInt64},
		"tight":  {BeforeMax: 1000, AfterMax: 1000},
		"kafka4": KafkaDefaultTimestamps,
	})
	const minute, hour = 60_000, 3_600_000
	at := func(ms int64) time.Time { return now.Add(time.Duration(ms) * time.Millisecond) }
	for _, c := range []struct {
		topic string
		ts    time.Time
		keep  bool
	}{
		{"kafka4", at(hour - minute), true}, // the margin: a minute
		{"kafka4", at(hour - minute + 1), false},
		{"kafka4", at(2 * hour), false}, // a window output 2 h ahead
		{"kafka4", at(-100 * 24 * hour), true},
		{"undescribed", at(2 * hour), false}, // Kafka 4's defaults
		{"undescribed", at(-100 * 24 * hour), true},
		{"append", at(1e12), true}, // the broker sets it
		{"week", at(1e12), true},
		{"week", at(-7*24*hour + minute), true},
		{"week", at(-7*24*hour + minute - 1), false},
		{"tight", at(500), true}, // the margin: half the limit
		{"tight", at(501), false},
		{"tight", at(-501), false},
		{"kafka4", time.UnixMilli(math.MaxInt64), false},
		{"week", time.UnixMilli(math.MinInt64), false},
		{"kafka4", time.Time{}, true}, // the producer stamps it
	} {
		ts, ok := l.Timestamp(&kgo.Record{Topic: c.topic, Timestamp: c.ts}, now)
		if ok != c.keep || (ok && !ts.Equal(c.ts)) || (!ok && !ts.Equal(now)) {
			t.Errorf("%s, %d ms from now: %v, %v; want kept %v", c.topic, c.ts.Sub(now).Milliseconds(), ts, ok, c.keep)
		}
	}
	if _, ok := (Limits{}).Timestamp(&kgo.Record{Topic: "t", Timestamp: at(2 * hour)}, now); ok {
		t.Error("the zero Limits assume no Kafka 4 defaults")
	}

	rec := &kgo.Record{Topic: "out", Key: []byte("k"), Value: []byte("v"), Timestamp: at(2 * hour), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("1")}}}
	c := Restamp(rec, now)
	if !c.Timestamp.Equal(now) || string(c.Key) != "k" || string(c.Value) != "v" || c.Topic != "out" || len(c.Headers) != 2 ||
		Header(c, HeaderOriginalTimestamp) != "1800007200000" || len(rec.Headers) != 1 || !rec.Timestamp.Equal(at(2*hour)) {
		t.Errorf("Restamp: %+v from %+v", c, rec)
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
	if got := limits.times[topic]; got != KafkaDefaultTimestamps {
		t.Fatalf("timestamp limits of %s: %+v, want Kafka 4's defaults %+v", topic, got, KafkaDefaultTimestamps)
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

// DescribeLimits reads each topic's timestamp settings, and what
// Timestamp keeps the broker takes while what it replaces the broker
// refuses (INVALID_TIMESTAMP).
func TestTimestampLimitsMatchTheBroker(t *testing.T) {
	k := kafkatest.Broker(t)
	str := func(s string) *string { return &s }
	tight, appendTime, plain := kafkatest.Topic(t, "tight"), kafkatest.Topic(t, "append"), kafkatest.Topic(t, "plain")
	kafkatest.CreateTopic(t, k.Bootstrap(), tight, 1, map[string]*string{
		"message.timestamp.before.max.ms": str("600000"), "message.timestamp.after.max.ms": str("600000")})
	kafkatest.CreateTopic(t, k.Bootstrap(), appendTime, 1, map[string]*string{"message.timestamp.type": str("LogAppendTime")})
	kafkatest.CreateTopic(t, k.Bootstrap(), plain, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	limits, err := DescribeLimits(ctx, kadm.NewClient(kafkatest.Client(t, k.Bootstrap())), []string{tight, appendTime, plain})
	if err != nil {
		t.Fatal(err)
	}
	for topic, want := range map[string]TimestampLimits{
		tight:      {BeforeMax: 600_000, AfterMax: 600_000},
		appendTime: {LogAppendTime: true, BeforeMax: math.MaxInt64, AfterMax: 3_600_000},
		plain:      KafkaDefaultTimestamps,
	} {
		if got := limits.times[topic]; got != want {
			t.Errorf("%s: %+v, want %+v", topic, got, want)
		}
	}
	cl := kafkatest.Client(t, k.Bootstrap())
	now := time.Now()
	for _, c := range []struct {
		topic string
		ahead time.Duration
	}{{tight, 5 * time.Minute}, {tight, 20 * time.Minute}, {tight, -20 * time.Minute}, {plain, 2 * time.Hour}, {plain, -1000 * time.Hour}, {appendTime, 2 * time.Hour}} {
		rec := &kgo.Record{Topic: c.topic, Value: []byte("x"), Timestamp: now.Add(c.ahead)}
		_, keep := limits.Timestamp(rec, now)
		err := cl.ProduceSync(ctx, rec).FirstErr()
		if keep != (err == nil) {
			t.Errorf("%s, %v ahead: Timestamp keeps it: %v; the broker: %v", c.topic, c.ahead, keep, err)
		}
	}
}
