package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/internal/kread"
	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
)

// coAsOfYAML is a join as of event time before tumbling windows keyed by
// the record key, in group mode without a repartition.
const coAsOfYAML = `name: ${JOB_NAME}
kafka:
  brokers: ${KAFKA_BROKERS}
checkpoint:
  interval: 100ms
sources:
  - id: numbers
    topics: [${IN}]
    start: earliest
    event_time: {timestamp: ts, max_out_of_orderness: 0s}
tables:
  - id: tiers
    topic: ${TIERS}
steps:
  - id: enrich
    join: {table: tiers, key: _key, as: t, how: left, time: event_time, history: 1h}
  - id: by-key
    key_by: _key
  - id: windows
    window:
      tumbling: 1s
      late_topic: ${LATE}
      values: {count: count(), sum: sum(n)}
sinks:
  - topic: ${OUT}
admin:
  listen: "off"
scale:
  mode: group
  partitions: 2
  session_timeout: 6s
  key_by_is_record_key: true
`

// Two processes on a real broker share a co-partitioned job whose join
// as of event time holds every record while the table's event time is
// behind them: each partition's watermark is far past the window's end
// (a record of each key at +5s), yet no window fires, the held records
// are committed per source partition, and one partition moves to the
// second process with its held records. Once the table moves past them,
// each key's window fires once with all of its records, and none is
// late.
func TestGroupCopartitionedAsOfJoinHoldsTheWindows(t *testing.T) {
	k := kafkatest.Broker(t)
	base := kafkatest.Topic(t, "coasof")
	env := map[string]string{"KAFKA_BROKERS": strings.Join(k.Bootstrap(), ","), "JOB_NAME": base,
		"IN": base + "-in", "TIERS": base + "-tiers", "OUT": base + "-out", "LATE": base + "-late"}
	compact := "compact"
	kafkatest.CreateTopic(t, k.Bootstrap(), env["IN"], 2, nil)
	kafkatest.CreateTopic(t, k.Bootstrap(), env["TIERS"], 1, map[string]*string{"cleanup.policy": &compact})
	kafkatest.CreateTopic(t, k.Bootstrap(), env["OUT"], 1, nil)
	kafkatest.CreateTopic(t, k.Bootstrap(), env["LATE"], 1, nil)
	prod := kafkatest.Client(t, k.Bootstrap())
	conn := []kgo.Opt{kgo.SeedBrokers(k.Bootstrap()...)}
	produce := func(recs ...*kgo.Record) {
		t.Helper()
		if err := prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	keys := []string{"k0", "k1", "k2", "k3"}
	parts := map[int32]bool{}
	var tiers, inputs []*kgo.Record
	for _, key := range keys {
		parts[kafkaPartition([]byte(key), 2)] = true
		tiers = append(tiers, &kgo.Record{Topic: env["TIERS"], Key: []byte(key), Value: []byte(`{"tier":"gold"}`), Timestamp: t0})
	}
	if len(parts) != 2 {
		t.Fatalf("keys %v fill partitions %v of 2", keys, parts)
	}
	want := map[string][2]int64{} // key -> count, sum in [t0, t0+1s)
	for n := int64(1); n <= 40; n++ {
		key := keys[n%4]
		ts := t0.Add(time.Duration(100+10*n) * time.Millisecond)
		inputs = append(inputs, &kgo.Record{Topic: env["IN"], Key: []byte(key), Value: fmt.Appendf(nil, `{"n":%d,"ts":%d}`, n, ts.UnixMilli())})
		w := want[key]
		want[key] = [2]int64{w[0] + 1, w[1] + n}
	}
	for i, key := range keys {
		// Far ahead: each partition's watermark passes the window's end.
		inputs = append(inputs, &kgo.Record{Topic: env["IN"], Key: []byte(key), Value: fmt.Appendf(nil, `{"n":%d,"ts":%d}`, 1000+i, t0.Add(5*time.Second).UnixMilli())})
	}
	produce(tiers...)
	produce(inputs...)

	cfg := parseConfig(t, []byte(coAsOfYAML), env)
	a := startWith(t, cfg, WithInstanceID("a"))
	// Every record is held, committed per source partition, and no
	// window fires.
	heldIn := map[int32]int{}
	waitFor(t, "a to commit both partitions' held records", func() bool {
		heldIn = committedHeld(t, conn, cfg.Name)
		return heldIn[0] > 0 && heldIn[1] > 0 && heldIn[0]+heldIn[1] == len(inputs)
	})
	waitFor(t, "a to complete more checkpoints", func() bool { return strings.Count(a.logs.String(), "checkpoint completed") >= 5 })
	if outs := readAll(t, conn, env["OUT"]); len(outs) > 0 {
		t.Fatalf("windows fired while every record was held: %s", outs)
	}

	// b joins: one input partition moves to it, with its held records.
	jb, logs := newJob(t, cfg, WithInstanceID("b"))
	ctx, cancel := context.WithCancel(context.Background())
	b := &running{job: jb, cancel: cancel, done: make(chan error, 1), logs: logs}
	go func() { b.done <- jb.Run(ctx) }()
	t.Cleanup(cancel)
	waitFor(t, "b to own an input partition", func() bool {
		g := jb.Status().Group
		return g != nil && slices.ContainsFunc(g.Assigned, func(p string) bool { return strings.HasPrefix(p, env["IN"]+"/") }) &&
			strings.Contains(logs.String(), "checkpoint completed")
	})
	if outs := readAll(t, conn, env["OUT"]); len(outs) > 0 {
		t.Fatalf("windows fired while every record was held: %s", outs)
	}

	// The table passes every record: each key's window fires once, whole.
	produce(&kgo.Record{Topic: env["TIERS"], Key: []byte("k0"), Value: []byte(`{"tier":"silver"}`), Timestamp: t0.Add(10 * time.Second)})
	got := map[string][2]int64{}
	waitFor(t, "every key's window", func() bool {
		if late := readAll(t, conn, env["LATE"]); len(late) > 0 {
			t.Fatalf("records went late: the window fired before they were released: %s", late)
		}
		got = map[string][2]int64{}
		for _, v := range readAll(t, conn, env["OUT"]) {
			var o struct {
				Key        string `json:"key"`
				Count, Sum int64
			}
			if err := json.Unmarshal([]byte(v), &o); err != nil {
				t.Fatalf("output %s: %v", v, err)
			}
			if _, dup := got[o.Key]; dup {
				t.Fatalf("key %s's window written twice: %s", o.Key, v)
			}
			got[o.Key] = [2]int64{o.Count, o.Sum}
		}
		return len(got) == len(want)
	})
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("windows (count, sum) %v, want %v", got, want)
	}
	for _, r := range []*running{a, b} {
		if err := r.finish(); err != nil {
			t.Fatal(err)
		}
	}
}

// waitFor polls cond until it holds, for at most a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
	}
}

// readAll is the committed values of topic.
func readAll(t *testing.T, conn []kgo.Opt, topic string) []string {
	t.Helper()
	var out []string
	for _, r := range readCommitted(t, conn, topic) {
		out = append(out, string(r.Value))
	}
	return out
}

// readCommitted is the committed records of topic (none before it
// exists).
func readCommitted(t *testing.T, conn []kgo.Opt, topic string) []*kgo.Record {
	t.Helper()
	var out []*kgo.Record
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := kread.All(ctx, conn, topic, func(r *kgo.Record) error {
		out = append(out, r)
		return nil
	})
	if err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) { // the job creates its checkpoint topic
		t.Fatal(err)
	}
	return out
}

// committedHeld is how many records the newest committed #held record of
// each source partition of job holds (groupheld.go).
func committedHeld(t *testing.T, conn []kgo.Opt, job string) map[int32]int {
	t.Helper()
	held := map[int32]int{}
	for _, r := range readCommitted(t, conn, checkpoint.TopicName(job)) {
		rest, ok := strings.CutPrefix(string(r.Key), heldPrefix(job))
		if !ok {
			continue
		}
		var p int32
		if _, err := fmt.Sscanf(rest, "%d/", &p); err != nil {
			t.Fatalf("%s: %v", r.Key, err)
		}
		if r.Value == nil {
			delete(held, p)
			continue
		}
		_, h, err := decodeHeldValue(r.Value)
		if err != nil {
			t.Fatalf("%s: %v", r.Key, err)
		}
		held[p] = h.Len()
	}
	return held
}
