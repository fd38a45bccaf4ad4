package keyed

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/operator"
	"github.com/eoflow/pipeline/state"
	"github.com/eoflow/pipeline/window"
)

const ttlJob = `
name: ttl
kafka: {brokers: ["127.0.0.1:9"]}
sources:
  - topics: [in]
    ${EVENT_TIME}
steps:
  - key_by: k
  - aggregate:
      ttl: 1m
      values: {count: count()}
sinks:
  - topic: out
`

// ttlHarness is one worker's aggregate with a TTL (every key group), and
// send, which runs a value through the job's steps into it, at event time
// ts when the source has event_time.
func ttlHarness(t *testing.T, eventTime string, now *time.Time, sinks ...*Sink) (send func(value string, ts time.Time), op *Aggregate) {
	t.Helper()
	env := map[string]string{"EVENT_TIME": eventTime}
	cfg, err := config.Parse("ttl.yaml", []byte(ttlJob), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	g, err := operator.CompileGraph(cfg)
	if err != nil {
		t.Fatal(err)
	}
	clock := func() time.Time { return *now }
	timed := cfg.Sources[0].EventTime != nil
	op, err = NewAggregate(&Env{Now: clock, Recycle: g.Recycle}, sinks, g.Targets()[0].Agg, cfg.Checkpoint.KeyGroups, state.RangeFor(0, 1, cfg.Checkpoint.KeyGroups), timed)
	if err != nil {
		t.Fatal(err)
	}
	b := g.NewBranches()
	tsExpr, err := operator.CompileExpr("ts", "ts")
	if err != nil {
		t.Fatal(err)
	}
	return func(value string, ts time.Time) {
		t.Helper()
		rec := &kgo.Record{Topic: "in", Value: []byte(value), Timestamp: ts}
		in := &Input{Rec: rec, Op: &operator.Record{Key: rec.Key, Value: rec.Value, Timestamp: ts, Topic: "in"}}
		if timed {
			at, rerr := b.EventTime(0, in.Op, tsExpr)
			if rerr != nil {
				t.Fatal(rerr)
			}
			in.At = at
		}
		sent := 0
		if derr := b.Process(0, in.Op, func() *operator.Record { return new(operator.Record) }, func(_, _ int, r *operator.Record, rerr *operator.RecordError) {
			if rerr != nil {
				t.Fatalf("%s: %v", value, rerr)
			}
			in.Op, in.Hash = r, state.HashOf([]byte(r.GroupKey))
			sent++
		}); derr != nil || sent != 1 {
			t.Fatalf("%s: %v, %d routes", value, derr, sent)
		}
		op.Process(in)
	}, op
}

// tombstones are the keys the snapshot deleted.
func tombstones(t *testing.T, changes []state.ChangelogRecord) []string {
	var out []string
	for _, c := range changes {
		if c.Value == nil {
			k, err := state.DecodeChangelogKey(c.Key)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, string(k.Key))
		}
	}
	return out
}

// In event time a key goes at the first checkpoint whose watermark is at
// least its last update plus the TTL, with a tombstone in that
// checkpoint's changes; a key updated since stays.
func TestTTLInEventTime(t *testing.T) {
	now := time.Unix(0, 0)
	send, op := ttlHarness(t, "event_time: {timestamp: ts}", &now)
	base := int64(1_000_000)
	send(`{"k":"a","ts":1000000}`, now)
	send(`{"k":"b","ts":1000000}`, now)
	send(`{"k":"b","ts":1030000}`, now) // b updated 30 s later
	_, changes, _ := op.Barrier(base + 59_999)
	if got := tombstones(t, changes); len(got) != 0 || op.store.Len() != 2 {
		t.Fatalf("before the TTL: tombstones %v, keys %d", got, op.store.Len())
	}
	_, changes, sum := op.Barrier(base + 60_000)
	if got := tombstones(t, changes); len(got) != 1 || got[0] != "a" || op.store.Len() != 1 || sum[0].Keys != 1 {
		t.Fatalf("at a's TTL: tombstones %v, keys %d", got, op.store.Len())
	}
	// An old event does not move b's expiry back, nor forward.
	send(`{"k":"b","ts":1000001}`, now)
	_, changes, _ = op.Barrier(base + 90_000)
	if got := tombstones(t, changes); len(got) != 1 || got[0] != "b" {
		t.Fatalf("at b's TTL: tombstones %v", got)
	}
	// A key that comes back starts afresh.
	send(`{"k":"a","ts":1100000}`, now)
	if st, ok := op.load(op.store.Slot([]byte("a"))); !ok || string(st.Output("a")) != `{"key":"a","count":1}` {
		t.Fatalf("a back: %v", ok)
	}
	if op.Barrier(window.NoWatermark); op.store.Len() != 1 {
		t.Fatal("no watermark: nothing expires")
	}
}

// In processing time the clock at the barrier decides; a restored state
// without an update time counts from its first barrier.
func TestTTLInProcessingTime(t *testing.T) {
	now := time.Unix(1000, 0)
	send, op := ttlHarness(t, "", &now)
	send(`{"k":"a"}`, now)
	now = now.Add(59 * time.Second)
	if _, changes, _ := op.Barrier(window.NoWatermark); len(tombstones(t, changes)) != 0 {
		t.Fatal("expired early")
	}
	now = now.Add(time.Second)
	if _, changes, _ := op.Barrier(window.NoWatermark); len(tombstones(t, changes)) != 1 {
		t.Fatal("not expired after a minute")
	}

	// A state written without a TTL (update time unknown) is kept for a
	// whole TTL from the first barrier after the restore.
	_, op2 := ttlHarness(t, "", &now)
	st := op2.agg.NewState()
	op2.put(op2.store.Slot([]byte("old")), []byte("old"), st)
	op2.store.Snapshot()
	if _, changes, _ := op2.Barrier(window.NoWatermark); len(tombstones(t, changes)) != 0 {
		t.Fatal("a state of unknown age expired at once")
	}
	now = now.Add(time.Minute)
	if _, changes, _ := op2.Barrier(window.NoWatermark); len(tombstones(t, changes)) != 1 {
		t.Fatal("a state of unknown age never expired")
	}
}

// A key deleted by its TTL gets a tombstone in every upsert sink, keyed by
// the group key, at the barrier that deletes its state; a sink that is not
// an upsert gets none.
func TestTTLTombstonesInUpsertSinks(t *testing.T) {
	now := time.Unix(0, 0)
	send, op := ttlHarness(t, "event_time: {timestamp: ts}", &now,
		&Sink{Topic: "changelog", Upsert: true}, &Sink{Topic: "plain"})
	send(`{"k":"a","ts":1000000}`, now)
	send(`{"k":"b","ts":1030000}`, now)
	res, _, _ := op.Barrier(1_059_999)
	if len(res.Outputs) != 0 {
		t.Fatalf("before the TTL: %d outputs", len(res.Outputs))
	}
	res, _, _ = op.Barrier(1_060_000)
	if len(res.Outputs) != 1 {
		t.Fatalf("at a's TTL: %d outputs, want a's tombstone in the upsert sink only", len(res.Outputs))
	}
	r := res.Outputs[0]
	if r.Topic != "changelog" || string(r.Key) != "a" || r.Value != nil || !r.Timestamp.Equal(time.UnixMilli(1_060_000)) {
		t.Errorf("tombstone %s key %q value %q at %v; want changelog, a, nil, the watermark", r.Topic, r.Key, r.Value, r.Timestamp)
	}
}
