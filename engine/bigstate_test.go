package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/checkpoint/kstore"
	"github.com/eoflow/pipeline/internal/kread"
	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
	"github.com/eoflow/pipeline/metrics"
	"github.com/eoflow/pipeline/metrics/metricstest"
	"github.com/eoflow/pipeline/sink"
	"github.com/eoflow/pipeline/state"
)

// Issue 31, item 15: one key's open windows outgrow a record of the state
// topic while a silent partition holds the watermark back. Before, every
// checkpoint failed with MESSAGE_TOO_LARGE and the job restarted for ever
// without writing anything. Here the state topic takes 64 KiB records and
// one key holds 6,000 one-second windows (about 130 KiB of state): the
// job writes the key in pieces, a restarted job restores it from them,
// and once the other partitions speak every window fires exactly once.
func TestOneKeysStateLargerThanARecord(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	const windows = 6000
	name := e.env["JOB_NAME"]
	limit := "65536"
	kafkatest.CreateTopic(t, e.brokers, kstore.StateTopic(name), 1, map[string]*string{
		"cleanup.policy": ptr("compact"), "max.message.bytes": &limit,
	})
	yaml := fmt.Sprintf(`
name: %s
kafka: {brokers: %s}
checkpoint: {interval: 100ms}
admin: {listen: "off"}
sources:
  - topics: %s
    event_time: {timestamp: ts, max_out_of_orderness: 0s}
steps:
  - key_by: '"all"'
  - window:
      tumbling: 1s
      late_records: drop
      values: {count: count(), sum: sum(n)}
sinks: [{topic: %s}]
`, name, e.env["KAFKA_BROKERS"], e.env["INPUT_TOPIC"], e.env["OUTPUT_TOPIC"])
	cfg := parseConfig(t, []byte(yaml), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// One record per window, all in partition 0, hours in the past: the
	// other three partitions are silent, so no window fires.
	base := time.Now().Add(-3 * time.Hour).Truncate(time.Second).UnixMilli()
	p := kafkatest.Client(t, e.brokers, kgo.DefaultProduceTopic(e.env["INPUT_TOPIC"]), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce := func(partition int32, n, ts int64) *kgo.Record {
		return &kgo.Record{Partition: partition, Value: fmt.Appendf(nil, `{"n":%d,"ts":%d}`, n, ts)}
	}
	var recs []*kgo.Record
	for i := range int64(windows) {
		recs = append(recs, produce(0, i+1, base+i*1000))
	}
	if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	m := metrics.New(prometheus.NewRegistry(), name)
	r := startWith(t, cfg, WithMetrics(m))
	// The key's state is committed in pieces, each within the limit.
	for pieces := 0; pieces == 0; {
		select {
		case <-ctx.Done():
			t.Fatalf("no state committed in pieces (restarts: %v)", scrapeRestarts(t, m, name))
		case <-time.After(200 * time.Millisecond):
		}
		pieces = 0
		if err := kread.All(ctx, e.conn, kstore.StateTopic(name), func(rec *kgo.Record) error {
			if state.IsPiece(rec.Key) && rec.Value != nil {
				pieces++
				if n := sink.BatchBytes(rec); n > 65536 {
					return fmt.Errorf("a piece of %d bytes", n)
				}
			}
			return nil
		}); err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
			t.Fatal(err)
		}
	}
	if err := r.finish(); err != nil {
		t.Fatal(err)
	}
	text := metricstest.Scrape(t, m.Handler())
	if v, _ := metricstest.Value(text, fmt.Sprintf(`pipeline_state_piece_records_total{pipeline=%q}`, name)); v < 2 {
		t.Errorf("pipeline_state_piece_records_total = %v, want pieces counted", v)
	}
	if n := scrapeRestarts(t, m, name); n != 0 {
		t.Errorf("%v restarts, want none", n)
	}

	// A new process restores the key from its pieces; the other
	// partitions then move the watermark past every window but the last.
	r = start(t, cfg)
	var more []*kgo.Record
	for part := int32(1); part < 4; part++ {
		more = append(more, produce(part, 0, base+int64(windows)*1000))
	}
	if err := p.ProduceSync(ctx, more...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{} // window start -> outputs
	for len(seen) < windows-1 {
		select {
		case <-ctx.Done():
			t.Fatalf("%d of %d windows fired", len(seen), windows-1)
		case <-time.After(200 * time.Millisecond):
		}
		clear(seen)
		if err := kread.All(ctx, e.conn, e.env["OUTPUT_TOPIC"], func(rec *kgo.Record) error {
			var o struct {
				WindowStart time.Time `json:"window_start"`
				Count, Sum  int64
			}
			if err := json.Unmarshal(rec.Value, &o); err != nil {
				return err
			}
			start := o.WindowStart.UnixMilli()
			i := (start - base) / 1000
			if o.Count != 1 || o.Sum != i+1 {
				return fmt.Errorf("window at %d: count %d, sum %d; want 1 and %d", start, o.Count, o.Sum, i+1)
			}
			seen[start]++
			return nil
		}); err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
			t.Fatal(err)
		}
	}
	if err := r.finish(); err != nil {
		t.Fatal(err)
	}
	for i := range int64(windows - 1) {
		if n := seen[base+i*1000]; n != 1 {
			t.Fatalf("window %d written %d times", i, n)
		}
	}
	if len(seen) != windows-1 {
		t.Fatalf("%d windows written, want %d", len(seen), windows-1)
	}
}

// A key too long for its value to be split beside it stops the job at
// once, with the error and the metric, instead of restarting it for ever:
// a running aggregate's last() of a 33,000-byte field under a
// 33,000-byte key, with a state topic of 64 KiB records.
func TestStateKeyTooLongStopsTheJob(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	name := e.env["JOB_NAME"]
	limit := "65536"
	kafkatest.CreateTopic(t, e.brokers, kstore.StateTopic(name), 1, map[string]*string{
		"cleanup.policy": ptr("compact"), "max.message.bytes": &limit,
	})
	cfg := parseConfig(t, fmt.Appendf(nil, `
name: %s
kafka: {brokers: %s}
checkpoint: {interval: 100ms}
admin: {listen: "off"}
sources: [{topics: %s}]
steps:
  - key_by: k
  - aggregate: {values: {latest: last(pad)}}
sinks: [{topic: %s}]
`, name, e.env["KAFKA_BROKERS"], e.env["INPUT_TOPIC"], e.env["OUTPUT_TOPIC"]), nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := kafkatest.Client(t, e.brokers, kgo.DefaultProduceTopic(e.env["INPUT_TOPIC"]))
	value := fmt.Appendf(nil, `{"k":%q,"pad":%q}`, strings.Repeat("k", 33_000), strings.Repeat("p", 33_000))
	if err := p.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	m := metrics.New(prometheus.NewRegistry(), name)
	r := startWith(t, cfg, WithMetrics(m))
	var err error
	select {
	case err = <-r.done:
	case <-ctx.Done():
		t.Fatalf("the job did not stop (restarts: %v)", scrapeRestarts(t, m, name))
	}
	if !errors.Is(err, ErrUnfit) || !strings.Contains(err.Error(), "(33000 bytes) of operator") || !strings.Contains(err.Error(), "too long to split") {
		t.Fatalf("Run: %v", err)
	}
	text := metricstest.Scrape(t, m.Handler())
	if v, _ := metricstest.Value(text, fmt.Sprintf(`pipeline_internal_records_too_large_total{pipeline=%q,topic=%q}`, name, kstore.StateTopic(name))); v != 1 {
		t.Errorf("pipeline_internal_records_too_large_total = %v, want 1", v)
	}
	if n := scrapeRestarts(t, m, name); n != 0 {
		t.Errorf("%v restarts, want none", n)
	}
}

func ptr(s string) *string { return &s }

func scrapeRestarts(t *testing.T, m *metrics.Metrics, job string) float64 {
	t.Helper()
	total := 0.0
	for line := range strings.Lines(metricstest.Scrape(t, m.Handler())) {
		if strings.HasPrefix(line, "pipeline_restarts_total{") && strings.Contains(line, fmt.Sprintf("pipeline=%q", job)) {
			var v float64
			if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err == nil {
				total += v
			}
		}
	}
	return total
}

// A state record that cannot fit its topic even in pieces (a key too long
// to leave room for them) stops the job with what to change, counted;
// it never fails checkpoint after checkpoint.
func TestStateTooLargeStopsTheJob(t *testing.T) {
	limits := sink.NewLimits(1024, 0, nil)
	key := strings.Repeat("k", 700)
	rec := kstore.StateRecord("job", state.ChangelogKey{Operator: "windows", Group: state.KeyGroupOf([]byte(key), 8), Key: []byte(key)}.Append(nil), make([]byte, 600))
	m := metrics.New(prometheus.NewRegistry(), "job")
	err := stateTooLarge(rec, limits, m)
	if !permanent(err) || !errors.Is(err, ErrUnfit) {
		t.Fatalf("err %v is not permanent", err)
	}
	for _, want := range []string{`key "kkkk`, "(700 bytes) of operator windows", "job-state", "max.message.bytes 1024", "too long to split"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	if v, _ := metricstest.Value(metricstest.Scrape(t, m.Handler()), `pipeline_internal_records_too_large_total{pipeline="job",topic="job-state"}`); v != 1 {
		t.Errorf("pipeline_internal_records_too_large_total = %v", v)
	}
	// A short key's value that reached the sink whole was not split: the
	// message must not blame the key.
	short := kstore.StateRecord("job", state.ChangelogKey{Operator: "windows", Group: state.KeyGroupOf([]byte("k"), 8), Key: []byte("k")}.Append(nil), make([]byte, 2000))
	if err := stateTooLarge(short, limits, nil); !permanent(err) || !strings.Contains(err.Error(), "it was not split") {
		t.Errorf("a short key: %v", err)
	}

	// A checkpoint record likewise, when the checkpoint topic leaves no
	// room beside its key; one that fits the room is split instead.
	rec2 := &checkpoint.Record{ID: 1, Job: "job", ConfigFingerprint: "f", KeyGroups: 8, OperatorIDs: []string{"src"},
		CreatedUnixMilli: 1, Guarantee: "exactly_once"}
	for p := range 400 {
		rec2.Offsets = append(rec2.Offsets, checkpoint.SourceOffset{Topic: "in", Partition: int32(p), Offset: 1 << 40})
	}
	recs, err := checkpointRecords(rec2, "", sink.NewLimits(1024, 0, nil), m)
	if err != nil || len(recs) < 3 || string(recs[len(recs)-1].Key) != "job" {
		t.Fatalf("a checkpoint record of 400 partitions: %d records, %v", len(recs), err)
	}
	_, err = checkpointRecords(rec2, "job/"+strings.Repeat("i", 500), sink.NewLimits(1024, 0, nil), m)
	if !permanent(err) || !strings.Contains(err.Error(), "raise max.message.bytes of job-checkpoints") {
		t.Fatalf("err %v", err)
	}
}
