package engine

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

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

// ttlHarness is one worker's aggregate with a TTL and its router.
func ttlHarness(t *testing.T, eventTime string, now *time.Time) (*router, *aggregateOp) {
	t.Helper()
	cfg := parseConfig(t, []byte(ttlJob), map[string]string{"EVENT_TIME": eventTime})
	p, err := compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	agg := p.targets[0].agg.Clone()
	op, err := newAggregateOp(p, p.targets[0], agg, cfg.Checkpoint.KeyGroups, state.RangeFor(0, 1, cfg.Checkpoint.KeyGroups))
	if err != nil {
		t.Fatal(err)
	}
	clock := func() time.Time { return *now }
	op.expiry = &expiry{ttl: agg.TTL().Milliseconds(), eventTime: p.time != nil && len(p.time.byTopic) > 0, now: clock}
	r := p.newRouter(1)
	if p.time != nil {
		r.clocks = newClocks(p.time, nil, clock)
	}
	return r, op
}

func sendTo(t *testing.T, r *router, op *aggregateOp, value string, ts time.Time) {
	t.Helper()
	msgs, _ := r.route1(&kgo.Record{Topic: "in", Value: []byte(value), Timestamp: ts})
	if len(msgs) != 1 || msgs[0].kind != msgRecord {
		t.Fatalf("route %s: %+v", value, msgs)
	}
	op.process(msgs[0])
}

// tombstones are the keys the snapshot deleted.
func tombstones(t *testing.T, changes stateChanges) []string {
	var out []string
	for _, c := range changeRecords(changes) {
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
	r, op := ttlHarness(t, "event_time: {timestamp: ts}", &now)
	base := int64(1_000_000)
	sendTo(t, r, op, `{"k":"a","ts":1000000}`, now)
	sendTo(t, r, op, `{"k":"b","ts":1000000}`, now)
	sendTo(t, r, op, `{"k":"b","ts":1030000}`, now) // b updated 30 s later
	_, changes, _ := op.snapshot(base + 59_999)
	if got := tombstones(t, changes); len(got) != 0 || op.store.Len() != 2 {
		t.Fatalf("before the TTL: tombstones %v, keys %d", got, op.store.Len())
	}
	_, changes, sum := op.snapshot(base + 60_000)
	if got := tombstones(t, changes); len(got) != 1 || got[0] != "a" || op.store.Len() != 1 || sum[0].Keys != 1 {
		t.Fatalf("at a's TTL: tombstones %v, keys %d", got, op.store.Len())
	}
	// An old event does not move b's expiry back, nor forward.
	sendTo(t, r, op, `{"k":"b","ts":1000001}`, now)
	_, changes, _ = op.snapshot(base + 90_000)
	if got := tombstones(t, changes); len(got) != 1 || got[0] != "b" {
		t.Fatalf("at b's TTL: tombstones %v", got)
	}
	// A key that comes back starts afresh.
	sendTo(t, r, op, `{"k":"a","ts":1100000}`, now)
	if st, ok := op.load(op.store.Slot([]byte("a"))); !ok || string(st.Output("a")) != `{"key":"a","count":1}` {
		t.Fatalf("a back: %v", ok)
	}
	if op.snapshot(window.NoWatermark); op.store.Len() != 1 {
		t.Fatal("no watermark: nothing expires")
	}
}

// In processing time the clock at the barrier decides; a restored state
// without an update time counts from its first barrier.
func TestTTLInProcessingTime(t *testing.T) {
	now := time.Unix(1000, 0)
	r, op := ttlHarness(t, "", &now)
	sendTo(t, r, op, `{"k":"a"}`, now)
	now = now.Add(59 * time.Second)
	if _, changes, _ := op.snapshot(window.NoWatermark); len(tombstones(t, changes)) != 0 {
		t.Fatal("expired early")
	}
	now = now.Add(time.Second)
	if _, changes, _ := op.snapshot(window.NoWatermark); len(tombstones(t, changes)) != 1 {
		t.Fatal("not expired after a minute")
	}

	// A state written without a TTL (update time unknown) is kept for a
	// whole TTL from the first barrier after the restore.
	_, op2 := ttlHarness(t, "", &now)
	st := op2.agg.NewState()
	op2.put(op2.store.Slot([]byte("old")), []byte("old"), st)
	op2.store.Snapshot()
	if _, changes, _ := op2.snapshot(window.NoWatermark); len(tombstones(t, changes)) != 0 {
		t.Fatal("a state of unknown age expired at once")
	}
	now = now.Add(time.Minute)
	if _, changes, _ := op2.snapshot(window.NoWatermark); len(tombstones(t, changes)) != 1 {
		t.Fatal("a state of unknown age never expired")
	}
}
