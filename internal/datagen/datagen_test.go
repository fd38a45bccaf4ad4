package datagen

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/internal/kread"
	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
)

func TestMain(m *testing.M) { kafkatest.Main(m) }

func TestValue(t *testing.T) {
	for n, want := range map[int64]string{0: `{"n":0}`, 7: `{"n":7}`, -3: `{"n":-3}`, 1 << 40: `{"n":1099511627776}`} {
		if got := string(Value(n)); got != want {
			t.Errorf("Value(%d) = %s, want %s", n, got, want)
		}
	}
}

// KeyParity keys each record by its parity and places it where Kafka's
// default partitioner puts the key: murmur2, as a Java producer would
// (of 3 partitions, "even" in 2 and "odd" in 1), which a job with
// scale.key_by_is_record_key checks per record. Without it, no key.
func TestKeyParity(t *testing.T) {
	o := Options{KeyParity: true}
	for n, want := range map[int64]struct {
		key       string
		partition int32
	}{4: {"even", 2}, 7: {"odd", 1}} {
		r := o.record(n)
		if string(r.Key) != want.key {
			t.Errorf("record(%d) key %q, want %q", n, r.Key, want.key)
		}
		if p := o.partitioner().ForTopic("t").Partition(r, 3); int32(p) != want.partition {
			t.Errorf("record(%d) (key %q) goes to partition %d of 3, want %d", n, r.Key, p, want.partition)
		}
	}
	if r := (&Options{}).record(4); r.Key != nil {
		t.Errorf("without KeyParity: key %q", r.Key)
	}
}

// The record value under each option: "ts" and "parity" added to {"n":n}.
func TestOptionsValue(t *testing.T) {
	for _, c := range []struct {
		o    Options
		n    int64
		want string
	}{
		{Options{}, 7, `{"n":7}`},
		{Options{Parity: true}, 7, `{"n":7,"parity":"odd"}`},
		{Options{Parity: true}, -4, `{"n":-4,"parity":"even"}`},
	} {
		if got := string(c.o.value(c.n)); got != c.want {
			t.Errorf("%+v: value(%d) = %s, want %s", c.o, c.n, got, c.want)
		}
	}
	var v struct {
		N      int64  `json:"n"`
		TS     int64  `json:"ts"`
		Parity string `json:"parity"`
	}
	before := time.Now().UnixMilli()
	if err := json.Unmarshal((&Options{EventTime: true, Parity: true}).value(8), &v); err != nil {
		t.Fatal(err)
	}
	if v.N != 8 || v.Parity != "even" || v.TS < before || v.TS > time.Now().UnixMilli() {
		t.Errorf("with ts and parity: %+v", v)
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

// A resuming generator continues after the highest number the topic holds,
// whatever stopped the one before: a graceful end, a crash with a
// transaction open (its numbers never become visible, and are written
// again), and non-number records at the end of the topic. The topic then
// holds 1..n, each once, as a restarted compose stack's datagen must
// leave it for the parity sums to stay right.
func TestResumeContinuesWithoutGapsOrRepeats(t *testing.T) {
	k := kafkatest.Broker(t)
	topic := kafkatest.Topic(t, "numbers")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn := []kgo.Opt{kgo.SeedBrokers(k.Bootstrap()...)}
	run := func(count int64, wantFrom int64) {
		t.Helper()
		var from int64
		n, err := Numbers(ctx, conn, Options{Topic: topic, Partitions: 3, From: 1, Count: count, Resume: true,
			Started: func(f int64) { from = f }})
		if err != nil || n != count || from != wantFrom {
			t.Fatalf("Numbers(resume, %d) = %d, %v, from %d; want %d from %d", count, n, err, from, count, wantFrom)
		}
	}
	run(500, 1)   // an empty topic: From
	run(300, 501) // after a graceful end

	// A crash: the generator's transaction is open with 801..900
	// written, and the process gone.
	crashed := kafkatest.Client(t, k.Bootstrap(), kgo.TransactionalID(transactionalID(topic)),
		kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err := crashed.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := int64(801); i <= 900; i++ {
		if err := crashed.ProduceSync(ctx, &kgo.Record{Value: Value(i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	run(200, 801)

	// Records that are not numbers at the end of every partition.
	other := kafkatest.Client(t, k.Bootstrap(), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := int32(0); p < 3; p++ {
		for _, v := range []string{"not json", `{"m": 5000}`, `{"n": "7000"}`} {
			if err := other.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	run(100, 1001)

	kafkatest.AwaitSettled(ctx, t, k.Bootstrap(), topic) // the last run's markers
	seen := map[int64]int{}
	if err := kread.All(ctx, conn, topic, func(r *kgo.Record) error {
		var v struct {
			N *int64 `json:"n"`
		}
		if json.Unmarshal(r.Value, &v) == nil && v.N != nil {
			seen[*v.N]++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i := int64(1); i <= 1100; i++ {
		if seen[i] != 1 {
			t.Fatalf("number %d is in the topic %d times, want once", i, seen[i])
		}
	}
	if len(seen) != 1100 {
		t.Fatalf("%d distinct numbers committed, want 1..1100", len(seen))
	}
}

// The last number may lie far behind a partition's end, behind records
// that are not numbers: the read back from the end widens until it finds
// one, or reaches the start.
func TestLastNumberLooksPastOtherRecords(t *testing.T) {
	k := kafkatest.Broker(t)
	topic := kafkatest.Topic(t, "numbers")
	kafkatest.CreateTopic(t, k.Bootstrap(), topic, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := []kgo.Opt{kgo.SeedBrokers(k.Bootstrap()...)}
	adm := kadm.NewClient(kafkatest.Client(t, k.Bootstrap()))
	if _, ok, err := lastNumber(ctx, conn, adm, topic); ok || err != nil {
		t.Fatalf("lastNumber of an empty topic = %v, %v; want none", ok, err)
	}
	cl := kafkatest.Client(t, k.Bootstrap(), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for i := int64(1); i <= 5; i++ {
		recs = append(recs, &kgo.Record{Partition: 0, Value: Value(i * 10)})
	}
	for range 3 * lastWindow {
		recs = append(recs, &kgo.Record{Partition: 0, Value: []byte("x")}, &kgo.Record{Partition: 1, Value: []byte("y")})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if n, ok, err := lastNumber(ctx, conn, adm, topic); n != 50 || !ok || err != nil {
		t.Fatalf("lastNumber = %d, %v, %v; want 50", n, ok, err)
	}
}
