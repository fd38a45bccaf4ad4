package keyed

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/operator"
	"github.com/eoflow/pipeline/state"
	"github.com/eoflow/pipeline/window"
)

// intervalJob pairs payments with the orders of 10 ms before to 5 ms
// after them (event time: ts, in ms).
const intervalJob = `
name: ij
kafka: {brokers: ["127.0.0.1:9"]}
sources:
  - {id: payments, topics: [payments], event_time: {timestamp: ts}}
  - {id: orders, topics: [orders], event_time: {timestamp: ts}}
steps:
  - id: match
    from: payments
    join: {stream: orders, key: order, other_key: id, within: {before: 10ms, after: 5ms}, as: o, how: ${HOW}}
sinks:
  - topic: out
`

// ijHarness runs records through the job's routes into one worker's
// interval join (every key group).
type ijHarness struct {
	t      *testing.T
	g      *operator.Graph
	spec   *operator.IntervalJoin
	groups int
	b      *operator.Branches
	op     *IntervalJoin
	late   []*kgo.Record
	dead   []*kgo.Record
	offset int64
}

func newIJHarness(t *testing.T, how string) *ijHarness {
	t.Helper()
	env := map[string]string{"HOW": how}
	cfg, err := config.Parse("ij.yaml", []byte(intervalJob), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	g, err := operator.CompileGraph(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var spec *operator.IntervalJoin
	for _, tg := range g.Targets() {
		if tg.Interval != nil {
			spec = tg.Interval
		}
	}
	if spec == nil {
		t.Fatal("no interval join target")
	}
	h := &ijHarness{t: t, g: g, spec: spec, groups: cfg.Checkpoint.KeyGroups, b: g.NewBranches()}
	h.op = h.newOp()
	return h
}

func (h *ijHarness) newOp() *IntervalJoin {
	h.t.Helper()
	env := &Env{Recycle: h.g.Recycle, DeadLetters: func(src *kgo.Record, err *operator.RecordError) []*kgo.Record {
		return []*kgo.Record{{Topic: "dead", Value: []byte(err.Reason)}}
	}}
	op, err := NewIntervalJoin(env, Sinks{{Topic: "out", Format: config.FormatJSON}}, h.spec, h.groups, state.RangeFor(0, 1, h.groups))
	if err != nil {
		h.t.Fatal(err)
	}
	return op
}

// send runs value, read from topic (payments: left, orders: right) at
// event time at with its partition's watermark wm, into the join.
func (h *ijHarness) send(topic, value string, at, wm int64) {
	h.t.Helper()
	src := 0
	if topic == "orders" {
		src = 1
	}
	h.offset++
	rec := &kgo.Record{Topic: topic, Value: []byte(value), Offset: h.offset}
	in := &Input{Rec: rec, Op: &operator.Record{Value: rec.Value, Topic: topic, Offset: h.offset}, At: at, Wm: wm}
	sent := 0
	if derr := h.b.Process(src, in.Op, func() *operator.Record { return new(operator.Record) }, func(_, _ int, r *operator.Record, rerr *operator.RecordError) {
		if rerr != nil {
			h.t.Fatalf("%s: %v", value, rerr)
		}
		in.Op, in.Hash = r, state.HashOf([]byte(r.GroupKey))
		sent++
	}); derr != nil {
		h.t.Fatalf("%s: %v", value, derr)
	}
	if sent == 0 {
		return // dropped by its key step (a nil key)
	}
	res := h.op.Process(in)
	if len(res.Outputs) > 0 {
		h.t.Fatalf("%s: outputs on arrival: %v", value, res.Outputs)
	}
	h.late = append(h.late, res.Late...)
	h.dead = append(h.dead, res.DeadLetters...)
}

// barrier is the join's barrier at watermark w: its outputs as
// "key@ts value" lines.
func (h *ijHarness) barrier(w int64) []string {
	h.t.Helper()
	res, _, _ := h.op.Barrier(w)
	h.dead = append(h.dead, res.DeadLetters...)
	var out []string
	for _, r := range res.Outputs {
		out = append(out, fmt.Sprintf("%s@%d %s", r.Key, r.Timestamp.UnixMilli(), r.Value))
	}
	return out
}

// restore replaces the join with a new one restored from its state,
// resuming from watermark.
func (h *ijHarness) restore(watermark int64) {
	h.t.Helper()
	restored := h.newOp()
	rs, err := state.NewRestorer(h.groups, state.RangeFor(0, 1, h.groups))
	if err != nil {
		h.t.Fatal(err)
	}
	if err := rs.Register(restored.Store()); err != nil {
		h.t.Fatal(err)
	}
	for e := range h.op.Store().All() {
		for _, rec := range h.op.Store().EntryRecords(e) {
			if err := rs.Add(rec); err != nil {
				h.t.Fatal(err)
			}
		}
	}
	if err := rs.Finish(); err != nil {
		h.t.Fatal(err)
	}
	restored.Resume(watermark)
	h.op = restored
}

func TestIntervalJoinBounds(t *testing.T) {
	h := newIJHarness(t, "inner")
	nw := int64(window.NoWatermark)
	h.send("payments", `{"p":1,"order":"a","o":"hidden"}`, 100, nw)
	h.send("orders", `{"id":"a","n":89}`, 89, nw)   // 100-11: outside
	h.send("orders", `{"id":"a","n":90}`, 90, nw)   // 100-10: the lower bound, included
	h.send("orders", `{"id":"a","n":105}`, 105, nw) // 100+5: the upper bound, included
	h.send("orders", `{"id":"a","n":106}`, 106, nw) // outside
	h.send("orders", `{"id":"b","n":100}`, 100, nw) // another key
	if got := h.barrier(100); len(got) != 0 {
		t.Errorf("at watermark 100 (no pair closed below it): %v", got)
	}
	want := []string{`a@100 {"p":1,"order":"a","o":{"id":"a","n":90}}`}
	if got := h.barrier(101); !slices.Equal(got, want) {
		t.Errorf("at 101: %q, want %q", got, want)
	}
	want = []string{`a@105 {"p":1,"order":"a","o":{"id":"a","n":105}}`}
	if got := h.barrier(200); !slices.Equal(got, want) {
		t.Errorf("at 200: %q, want %q", got, want)
	}
	if n := h.op.Store().Len(); n != 0 {
		t.Errorf("%d keys left after the watermark passed every record", n)
	}
	if len(h.late)+len(h.dead) > 0 {
		t.Errorf("late %v, dead %v", h.late, h.dead)
	}
}

// A record stays buffered exactly as long as a record still to come could
// match it; after that one that would have matched is late, never missed
// silently.
func TestIntervalJoinExpiry(t *testing.T) {
	h := newIJHarness(t, "inner")
	nw := int64(window.NoWatermark)
	h.send("payments", `{"order":"a"}`, 100, nw) // kept while W <= 105
	h.send("orders", `{"id":"b"}`, 100, nw)      // kept while W <= 110
	h.barrier(105)
	if n := h.op.Store().Len(); n != 2 {
		t.Fatalf("%d keys at 105, want both", n)
	}
	h.barrier(106)
	if b, ok := h.op.store.Get([]byte("a")); ok {
		t.Errorf("the left record outlived t+after: %+v", b)
	}
	if _, ok := h.op.store.Get([]byte("b")); !ok {
		t.Error("the right record went before t'+before")
	}
	h.send("orders", `{"id":"a"}`, 105, 106) // would match a: late at its partition's watermark
	h.send("orders", `{"id":"a"}`, 105, 90)  // its partition behind the job: late at the job's
	if len(h.late) != 2 || h.late[0].Topic != "ij-late" {
		t.Fatalf("late = %v, want both to ij-late", h.late)
	}
	var side, wm string
	for _, hd := range h.late[1].Headers {
		switch hd.Key {
		case HeaderLateJoinSide:
			side = string(hd.Value)
		case HeaderLateWatermark:
			wm = string(hd.Value)
		}
	}
	if side != "right" || wm != "1970-01-01T00:00:00.106Z" {
		t.Errorf("late headers: side %q, watermark %q", side, wm)
	}
	h.barrier(111)
	if n := h.op.Store().Len(); n != 0 {
		t.Errorf("%d keys left", n)
	}
}

func TestIntervalJoinLeft(t *testing.T) {
	h := newIJHarness(t, "left")
	nw := int64(window.NoWatermark)
	h.send("payments", `{"p":1,"order":"a"}`, 100, nw) // matched
	h.send("orders", `{"id":"a"}`, 97, nw)
	h.send("payments", `{"p":2,"order":"c"}`, 101, nw)  // never matched
	h.send("payments", `{"p":3,"order":null}`, 102, nw) // no key: matches nothing
	h.send("orders", `{"id":null}`, 102, nw)            // a right record without a key: dropped
	want := []string{`a@100 {"p":1,"order":"a","o":{"id":"a"}}`}
	if got := h.barrier(106); !slices.Equal(got, want) {
		t.Errorf("at 106: %q, want %q", got, want)
	}
	if b, ok := h.op.store.Get([]byte("a")); !ok || len(b.Left) != 0 || len(b.Right) != 1 {
		t.Errorf("a at 106: %+v, want its order only (kept till 107)", b)
	}
	// p:2's interval closes at 106 and p:3's at 107: each alone, with its
	// own time, once the watermark passes the close.
	want = []string{`c@101 {"p":2,"order":"c","o":null}`, `@102 {"p":3,"order":null,"o":null}`}
	if got := h.barrier(108); !slices.Equal(got, want) {
		t.Errorf("at 108: %q, want %q", got, want)
	}
	if n := h.op.Store().Len(); n != 0 {
		t.Errorf("%d keys left", n)
	}
}

func TestIntervalJoinLeftNotObject(t *testing.T) {
	h := newIJHarness(t, "inner")
	h.send("payments", `{"order":"a"}`, 100, window.NoWatermark)
	// A left value that is not an object after the key step cannot hold
	// the match: the key expression reads a field, so only an object
	// reaches the operator. Feed one directly.
	in := &Input{Rec: &kgo.Record{Topic: "payments"}, Op: &operator.Record{Value: []byte(`[1]`), GroupKey: "a", JoinSide: operator.SideLeft}, At: 100, Wm: window.NoWatermark}
	res := h.op.Process(in)
	if len(res.DeadLetters) != 1 || !strings.Contains(string(res.DeadLetters[0].Value), "not a JSON object") {
		t.Errorf("dead letters %v", res.DeadLetters)
	}
}

// A restore from the state a barrier wrote (its changelog records) and
// the barrier's watermark continues exactly where the join was: the same
// outputs as a run without the restore.
func TestIntervalJoinRestore(t *testing.T) {
	nw := int64(window.NoWatermark)
	type in struct {
		topic, value string
		at           int64
	}
	first := []in{{"payments", `{"p":1,"order":"a"}`, 100}, {"orders", `{"id":"a","n":1}`, 95}, {"payments", `{"p":2,"order":"b"}`, 104}}
	second := []in{{"orders", `{"id":"a","n":2}`, 103}, {"orders", `{"id":"b","n":3}`, 110}, {"payments", `{"p":4,"order":"a"}`, 120}}
	run := func(restore bool) []string {
		h := newIJHarness(t, "left")
		for _, r := range first {
			h.send(r.topic, r.value, r.at, nw)
		}
		out := h.barrier(101)
		if restore {
			h.restore(101)
		}
		for _, r := range second {
			h.send(r.topic, r.value, r.at, 101)
		}
		out = append(out, h.barrier(112)...)
		return append(out, h.barrier(200)...)
	}
	want := run(false)
	if len(want) != 4 {
		t.Fatalf("the run without a restore: %q", want)
	}
	if got := run(true); !slices.Equal(got, want) {
		t.Errorf("after a restore:\n%q\nwant\n%q", got, want)
	}
}

// The output does not depend on the order records arrive in, only on
// their event times and which epoch's watermark they are read under: every
// arrival order within the epochs gives the same results in the same
// order.
func TestIntervalJoinArrivalOrder(t *testing.T) {
	type in struct {
		topic, value string
		at           int64
	}
	rng := rand.New(rand.NewPCG(7, 7))
	// Epoch e's records have times at or above the watermark before it
	// (else they would be late), 50 ms per epoch.
	var epochs [][]in
	for e := range 6 {
		var recs []in
		for range 12 {
			at := int64(e*50 + rng.IntN(80))
			k := string(rune('a' + rng.IntN(3)))
			if rng.IntN(2) == 0 {
				recs = append(recs, in{"payments", fmt.Sprintf(`{"order":%q,"at":%d}`, k, at), at})
			} else {
				recs = append(recs, in{"orders", fmt.Sprintf(`{"id":%q,"at":%d}`, k, at), at})
			}
		}
		epochs = append(epochs, recs)
	}
	run := func(seed uint64) []string {
		h := newIJHarness(t, "left")
		shuffle := rand.New(rand.NewPCG(seed, 1))
		var out []string
		for e, recs := range epochs {
			recs = slices.Clone(recs)
			shuffle.Shuffle(len(recs), func(i, j int) { recs[i], recs[j] = recs[j], recs[i] })
			for _, r := range recs {
				h.send(r.topic, r.value, r.at, int64(e*50))
			}
			out = append(out, h.barrier(int64((e+1)*50))...)
		}
		return append(out, h.barrier(1000)...)
	}
	want := run(0)
	if len(want) < 20 {
		t.Fatalf("only %d results: the case tests little", len(want))
	}
	for seed := uint64(1); seed < 20; seed++ {
		if got := run(seed); !slices.Equal(got, want) {
			t.Fatalf("arrival order %d:\n%s\nwant\n%s", seed, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// In group mode a key group moves between processes that fire at
// different watermarks (each the least of its repartition partitions'),
// so a restored join resumes at a watermark above or below the one each
// key fired at. Each key's results are emitted once all the same: none
// again, none lost, at the first barrier.
func TestIntervalJoinResumesEachKeyWhereItFired(t *testing.T) {
	nw := int64(window.NoWatermark)
	run := func(resume, next int64) []string {
		h := newIJHarness(t, "inner")
		h.send("payments", `{"p":1,"order":"a"}`, 100, nw)
		h.send("orders", `{"id":"a","n":1}`, 95, nw)
		h.send("payments", `{"p":2,"order":"b"}`, 104, nw)
		h.send("orders", `{"id":"b","n":2}`, 103, nw)
		out := h.barrier(101)
		if resume != 0 {
			h.restore(resume)
		}
		return append(out, h.barrier(next)...)
	}
	// Resumed at 110, the next barrier at 110 too: the watermark does
	// not move, but key b has fired below it only.
	for _, c := range []struct{ resume, next int64 }{{nw, 130}, {50, 130}, {101, 130}, {110, 130}, {110, 110}} {
		want := run(0, c.next)
		if len(want) != 2 {
			t.Fatalf("the run without a restore: %q", want)
		}
		if got := run(c.resume, c.next); !slices.Equal(got, want) {
			t.Errorf("resumed at %d, then a barrier at %d:\n%q\nwant\n%q", c.resume, c.next, got, want)
		}
	}
}

// State of the first format (no watermark per key) fired at the
// watermark the operator resumes from.
func TestJoinCodecReadsTheFirstFormat(t *testing.T) {
	b := &JoinBuffers{Fired: 7, Left: []JoinEntry{{At: 3, Value: []byte(`{}`)}}}
	enc := joinCodec{}.Append(nil, b)
	v1 := append([]byte{joinCodecV1}, enc[2:]...) // without the varint 7
	got, err := joinCodec{}.Decode(v1)
	if err != nil {
		t.Fatal(err)
	}
	if !got.firedAtResume || len(got.Left) != 1 || got.Left[0].At != 3 {
		t.Errorf("decoded %+v", got)
	}
	o := &IntervalJoin{}
	if f := o.fired(got, 42); f != 42 {
		t.Errorf("fired at %d, want the resumed 42", f)
	}
}

func TestJoinCodecRoundTrip(t *testing.T) {
	b := &JoinBuffers{
		Fired: -3,
		Left:  []JoinEntry{{At: -5, Topic: "p", Partition: 3, Offset: 9, Matched: true, Value: []byte(`{"a":1}`)}, {At: 7, NoKey: true, Value: []byte(`{}`)}},
		Right: []JoinEntry{{At: 1 << 40, Topic: "o", Offset: 1, Value: []byte(`"x"`)}},
	}
	enc := joinCodec{}.Append(nil, b)
	got, err := joinCodec{}.Decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(b) {
		t.Errorf("decoded %+v, want %+v", got, b)
	}
	for n := range enc {
		if _, err := (joinCodec{}).Decode(enc[:n]); err == nil {
			t.Errorf("a state cut to %d bytes decodes", n)
		}
	}
}
