package engine

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/operator"
	"github.com/eoflow/pipeline/operator/keyed"
	"github.com/eoflow/pipeline/sink"
	"github.com/eoflow/pipeline/state"
	"github.com/eoflow/pipeline/window"
)

// windowHarness runs a windowed job's router and one worker's window
// operator (every key group) without Kafka: records go in, barriers
// advance the watermark exactly as workers do, and outputs and late
// records come out.
type windowHarness struct {
	tb        testing.TB
	r         *router
	op        *targetOp
	win       *keyed.Window
	watermark int64
	parts     []checkpoint.SourceOffset
	outputs   []windowOutput
	late      []*kgo.Record
	dead      int
	deadRecs  []*kgo.Record
}

type windowOutput struct {
	Key         string `json:"key"`
	WindowStart string `json:"window_start"`
	WindowEnd   string `json:"window_end"`
	Count       int64  `json:"count"`
	Sum         int64  `json:"sum"`
}

func newWindowHarness(tb testing.TB, yaml string, env map[string]string, partitions int) *windowHarness {
	tb.Helper()
	cfg := parseConfig(tb, []byte(yaml), env)
	p, err := compile(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if p.targets[0].window == nil {
		tb.Fatal("no window in the job")
	}
	groups := cfg.Checkpoint.KeyGroups
	t := p.targets[0]
	win, err := keyed.NewWindow(p.env(time.Now), t.sinks, t.window, t.agg, groups, state.RangeFor(0, 1, groups), new(atomic.Int64))
	if err != nil {
		tb.Fatal(err)
	}
	h := &windowHarness{tb: tb, r: p.newRouter(1), watermark: window.NoWatermark, op: newTargetOp(win, 0, cfg.Name), win: win}
	h.r.clocks = newClocks(p.time, nil, time.Now)
	for i := range partitions {
		h.parts = append(h.parts, checkpoint.SourceOffset{Topic: "in", Partition: int32(i)})
	}
	return h
}

func (h *windowHarness) send(partition int32, offset int64, value string) {
	rec := &kgo.Record{Topic: "in", Partition: partition, Offset: offset, Value: []byte(value), Timestamp: time.UnixMilli(1)}
	msgs, _ := h.r.route1(rec)
	for _, m := range msgs {
		switch m.kind {
		case msgRecord:
			outs, side := h.op.process(m)
			h.collect(outs)
			for _, sm := range side {
				if sm.kind == msgLate {
					h.late = append(h.late, sm.rec)
					continue
				}
				h.dead++
				h.deadRecs = append(h.deadRecs, sm.rec)
			}
		case msgLate:
			h.late = append(h.late, m.rec)
		case msgDeadLetter:
			h.dead++
			h.deadRecs = append(h.deadRecs, m.rec)
		}
	}
}

// barrier is one checkpoint barrier: W advances, windows fire.
func (h *windowHarness) barrier() {
	h.watermark = jobWatermark(h.watermark, h.r.clocks.at(h.parts))
	outs, _, _ := h.op.snapshot(h.watermark)
	h.collect(outs)
}

func (h *windowHarness) collect(outs []*kgo.Record) {
	for _, o := range outs {
		var w windowOutput
		if err := json.Unmarshal(o.Value, &w); err != nil {
			h.tb.Fatalf("output %s: %v", o.Value, err)
		}
		if string(o.Key) != w.Key {
			h.tb.Fatalf("output key %q, value key %q", o.Key, w.Key)
		}
		h.outputs = append(h.outputs, w)
	}
}

func (h *windowHarness) sorted() []windowOutput {
	out := slices.Clone(h.outputs)
	slices.SortFunc(out, func(a, b windowOutput) int {
		return strings.Compare(a.WindowStart+a.Key, b.WindowStart+b.Key)
	})
	return out
}

const windowTestJob = `
name: w
kafka: {brokers: ["127.0.0.1:9"]}
sources:
  - topics: [in]
    event_time: {timestamp: ts, max_out_of_orderness: ${OOO}}
steps:
  - key_by: 'n % 2 == 0 ? "even" : "odd"'
  - window:
      ${SHAPE}
      allowed_lateness: ${LATENESS}
      values: {count: count(), sum: sum(n)}
sinks:
  - topic: out
`

func windowEnv(shape, ooo, lateness string) map[string]string {
	return map[string]string{"SHAPE": shape, "OOO": ooo, "LATENESS": lateness}
}

// A record that arrives late but within allowed_lateness and falls between
// two sessions of its key bridges them: one session with all three.
func TestSessionBridgedByALateRecord(t *testing.T) {
	h := newWindowHarness(t, windowTestJob, windowEnv("session: {gap: 100ms}", "0s", "1s"), 1)
	h.send(0, 0, `{"n": 1, "ts": 1000}`)
	h.send(0, 1, `{"n": 3, "ts": 1150}`)
	h.barrier()
	if len(h.outputs) != 0 || h.win.Open() != 2 {
		t.Fatalf("before the bridge: outputs %v, open %d", h.outputs, h.win.Open())
	}
	h.send(0, 2, `{"n": 5, "ts": 1090}`) // behind by 60 ms, within lateness: [1090, 1190) bridges both
	h.send(0, 3, `{"n": 7, "ts": 2240}`) // another session; the watermark reaches 2240
	h.barrier()
	if len(h.outputs) != 0 {
		t.Fatalf("fired before end + lateness (1250 + 1000 > %d): %v", h.watermark, h.outputs)
	}
	h.send(0, 4, `{"n": 9, "ts": 2250}`)
	h.barrier()
	want := []windowOutput{{Key: "odd", WindowStart: "1970-01-01T00:00:01Z", WindowEnd: "1970-01-01T00:00:01.25Z", Count: 3, Sum: 9}}
	if got := h.sorted(); !slices.Equal(got, want) {
		t.Fatalf("outputs %+v, want %+v", got, want)
	}
	if len(h.late) != 0 || h.win.Open() != 1 {
		t.Fatalf("late %d, open %d", len(h.late), h.win.Open())
	}
}

// Lateness is per window (Flink's rule): a record further behind its
// partition's largest event time than max_out_of_orderness, but whose
// window is still open at its partition's watermark, counts in that
// window; only a record whose window has closed (end + allowed_lateness
// <= the watermark) is late. 10 s windows, max_out_of_orderness 1 s, as
// in the issue: :15.285 after :18.5 (watermark :17.5) counts in [10, 20).
func TestLateIsPerWindow(t *testing.T) {
	h := newWindowHarness(t, windowTestJob, windowEnv("tumbling: 10s", "1s", "0s"), 1)
	h.send(0, 0, `{"n": 1, "ts": 15000}`)
	h.send(0, 1, `{"n": 3, "ts": 18500}`) // the watermark: 17.5 s
	h.send(0, 2, `{"n": 5, "ts": 15285}`) // 3.2 s behind, more than max_out_of_orderness: [10 s, 20 s) is open
	h.send(0, 3, `{"n": 7, "ts": 10001}`) // 8.5 s behind, [10 s, 20 s) still open
	h.send(0, 4, `{"n": 9, "ts": 9999}`)  // [0, 10 s) closed at 17.5 s: late
	h.barrier()
	h.send(0, 5, `{"n": 11, "ts": 21000}`) // the watermark: 20 s; [10 s, 20 s) fires at the next barrier
	h.send(0, 6, `{"n": 13, "ts": 19999}`) // closed at 20 s, though not fired yet: late all the same
	h.barrier()
	want := []windowOutput{{Key: "odd", WindowStart: "1970-01-01T00:00:10Z", WindowEnd: "1970-01-01T00:00:20Z", Count: 4, Sum: 16}}
	if got := h.sorted(); !slices.Equal(got, want) {
		t.Fatalf("outputs %+v, want %+v", got, want)
	}
	if len(h.late) != 2 {
		t.Fatalf("%d late records, want 2 (ts 9999 and 19999)", len(h.late))
	}
	for i, w := range []struct{ start, end, watermark string }{
		{"1970-01-01T00:00:00Z", "1970-01-01T00:00:10Z", "1970-01-01T00:00:17.5Z"},
		{"1970-01-01T00:00:10Z", "1970-01-01T00:00:20Z", "1970-01-01T00:00:20Z"},
	} {
		l := h.late[i]
		if sinkHeader(l, HeaderLateWindowStart) != w.start || sinkHeader(l, HeaderLateWindowEnd) != w.end ||
			sinkHeader(l, HeaderLateWatermark) != w.watermark || sinkHeader(l, HeaderLateWindows) != "1" {
			t.Errorf("late record %d: headers %v, want window [%s, %s), 1 window, watermark %s", i, l.Headers, w.start, w.end, w.watermark)
		}
	}
}

// A hopping record counts in each of its windows open at its partition's
// watermark and skips the closed ones silently, even one that has not
// fired yet (else its count would depend on where the barriers fell); it
// is late only when every window is closed, as in Flink.
func TestHoppingRecordSkipsOnlyItsClosedWindows(t *testing.T) {
	h := newWindowHarness(t, windowTestJob, windowEnv("hopping: {size: 10s, advance: 5s}", "0s", "0s"), 1)
	h.send(0, 0, `{"n": 1, "ts": 12000}`) // [5, 15) and [10, 20)
	h.send(0, 1, `{"n": 3, "ts": 16000}`) // the watermark: 16 s
	h.send(0, 2, `{"n": 5, "ts": 14000}`) // [5, 15) closed (not fired: no barrier yet), [10, 20) open
	h.send(0, 3, `{"n": 7, "ts": 9000}`)  // [0, 10) and [5, 15) closed: late
	h.send(0, 4, `{"n": 9, "ts": 30000}`)
	h.barrier()
	want := []windowOutput{
		{Key: "odd", WindowStart: "1970-01-01T00:00:05Z", WindowEnd: "1970-01-01T00:00:15Z", Count: 1, Sum: 1},
		{Key: "odd", WindowStart: "1970-01-01T00:00:10Z", WindowEnd: "1970-01-01T00:00:20Z", Count: 3, Sum: 9},
		{Key: "odd", WindowStart: "1970-01-01T00:00:15Z", WindowEnd: "1970-01-01T00:00:25Z", Count: 1, Sum: 3},
	}
	if got := h.sorted(); !slices.Equal(got, want) {
		t.Fatalf("outputs %+v, want %+v", got, want)
	}
	if len(h.late) != 1 || sinkHeader(h.late[0], HeaderLateWindows) != "2" ||
		sinkHeader(h.late[0], HeaderLateWindowStart) != "1970-01-01T00:00:05Z" || sinkHeader(h.late[0], HeaderLateWindowEnd) != "1970-01-01T00:00:15Z" {
		t.Fatalf("late records %v, want ts 9000 with its 2 windows, [5 s, 15 s) the last", h.late)
	}
}

// A session record is judged by [ts, ts+1), not by its proto-window
// [ts, ts+gap): a record behind its partition's watermark may overlap a
// session that fired at one barrier schedule and is still open at
// another, and which of the two happened must not change the output. Here
// [1000, 1100) has fired at the barrier or not; 1050 would merge it with
// [1100, 1200) in one case and not in the other. It is late in both.
func TestSessionRecordNeverMeetsAFiredSession(t *testing.T) {
	var runs [2][]windowOutput
	var late [2][]*kgo.Record
	for i, barrier := range []bool{false, true} {
		h := newWindowHarness(t, windowTestJob, windowEnv("session: {gap: 100ms}", "0s", "0s"), 1)
		h.send(0, 0, `{"n": 1, "ts": 1000}`) // [1000, 1100)
		h.send(0, 1, `{"n": 3, "ts": 1100}`) // [1100, 1200): the watermark is 1100
		if barrier {
			h.barrier() // [1000, 1100) fires
		}
		h.send(0, 2, `{"n": 5, "ts": 1050}`) // [1050, 1150) is open at 1100, but overlaps [1000, 1100)
		h.send(0, 3, `{"n": 7, "ts": 5000}`)
		h.barrier()
		runs[i], late[i] = h.sorted(), h.late
	}
	if !slices.Equal(runs[0], runs[1]) {
		t.Fatalf("the output depends on the barriers:\nwithout %+v\nwith    %+v", runs[0], runs[1])
	}
	for i := range late {
		if len(late[i]) != 1 || sinkHeader(late[i][0], HeaderLateWatermark) != "1970-01-01T00:00:01.1Z" {
			t.Fatalf("run %d: late %v, want the record at 1050, judged at 1100", i, late[i])
		}
	}
	want := []windowOutput{ // sorted as text
		{Key: "odd", WindowStart: "1970-01-01T00:00:01.1Z", WindowEnd: "1970-01-01T00:00:01.2Z", Count: 1, Sum: 3},
		{Key: "odd", WindowStart: "1970-01-01T00:00:01Z", WindowEnd: "1970-01-01T00:00:01.1Z", Count: 1, Sum: 1},
	}
	if !slices.Equal(runs[0], want) || !slices.Equal(runs[1], want) {
		t.Fatalf("without the barrier %+v\nwith it %+v\nwant %+v", runs[0], runs[1], want)
	}
}

// Input shuffled within max_out_of_orderness per partition gives the same
// windows as sorted input, whatever the barriers, with no late record;
// records behind by more go to the late output, each once, and count in
// no window.
func TestWindowsShuffledWithinBoundAsSorted(t *testing.T) {
	const parts, perPart, ooo = 3, 400, 50
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		type in struct {
			n, ts int64
			late  bool
		}
		inputs := make([][]in, parts)
		n := int64(0)
		for p := range parts {
			for i := range perPart {
				n++
				inputs[p] = append(inputs[p], in{n: n, ts: 10_000 + int64(i)*10 + int64(rng.IntN(ooo+1))})
			}
		}
		sortedIn := make([][]in, parts)
		for p := range inputs {
			sortedIn[p] = slices.Clone(inputs[p])
			slices.SortStableFunc(sortedIn[p], func(a, b in) int { return int(a.ts - b.ts) })
		}
		// Some far-late records at the end of partition 0: more than the
		// bound behind its largest time.
		lateIn := []in{{n: 1_000_001, ts: 10_000, late: true}, {n: 1_000_003, ts: 12_000, late: true}}
		run := func(data [][]in) *windowHarness {
			h := newWindowHarness(t, windowTestJob, windowEnv("tumbling: 200ms", fmt.Sprintf("%dms", ooo), "0s"), parts)
			pos := make([]int, parts)
			for left := parts * perPart; left > 0; {
				for p := range parts {
					for k := rng.IntN(8); k > 0 && pos[p] < len(data[p]); k-- {
						x := data[p][pos[p]]
						h.send(int32(p), int64(pos[p]), fmt.Sprintf(`{"n": %d, "ts": %d}`, x.n, x.ts))
						pos[p]++
						left--
					}
				}
				if rng.IntN(5) == 0 {
					h.barrier()
				}
			}
			for i, x := range lateIn {
				h.send(0, int64(len(data[0])+i), fmt.Sprintf(`{"n": %d, "ts": %d}`, x.n, x.ts))
			}
			h.barrier()
			return h
		}
		a, b := run(inputs), run(sortedIn)
		if !slices.Equal(a.sorted(), b.sorted()) || len(a.outputs) == 0 {
			t.Fatalf("seed %d: shuffled input gave %d outputs, sorted %d; first difference in\n%+v\n%+v", seed, len(a.outputs), len(b.outputs), a.sorted(), b.sorted())
		}
		for _, h := range []*windowHarness{a, b} {
			if len(h.late) != len(lateIn) || h.dead != 0 {
				t.Fatalf("seed %d: %d late records (want %d), %d dead letters", seed, len(h.late), len(lateIn), h.dead)
			}
			var count, sum int64
			for _, o := range h.outputs {
				count += o.Count
				sum += o.Sum
			}
			if sum >= 1_000_000 {
				t.Fatalf("seed %d: a late record was also counted (sum %d)", seed, sum)
			}
			for _, o := range h.late {
				if got := sinkHeader(o, HeaderLateWindowStart); got == "" {
					t.Fatalf("late record without its window: %v", o.Headers)
				}
			}
		}
		// Every output is the naive oracle's window.
		want := map[string]windowOutput{}
		least := int64(1 << 62)
		for p := range inputs {
			max := int64(0)
			for _, x := range inputs[p] {
				max = mx(max, x.ts)
				start := x.ts / 200 * 200
				key := map[bool]string{true: "even", false: "odd"}[x.n%2 == 0]
				id := fmt.Sprint(key, start)
				o := want[id]
				o.Key, o.WindowStart, o.WindowEnd = key, string(operator.AppendTime(nil, start)), string(operator.AppendTime(nil, start+200))
				o.Count++
				o.Sum += x.n
				want[id] = o
			}
			least = min(least, max)
		}
		var fired []windowOutput
		for _, o := range want {
			end, _ := time.Parse(time.RFC3339Nano, o.WindowEnd)
			if end.UnixMilli() <= least-ooo {
				fired = append(fired, o)
			}
		}
		slices.SortFunc(fired, func(a, b windowOutput) int { return strings.Compare(a.WindowStart+a.Key, b.WindowStart+b.Key) })
		if !slices.Equal(a.sorted(), fired) {
			t.Fatalf("seed %d: outputs differ from the oracle:\n got %+v\nwant %+v", seed, a.sorted(), fired)
		}
	}
}

func mx(a, b int64) int64 { return max(a, b) }

func sinkHeader(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// With idle_timeout a partition silent for that long stops holding the
// watermark back; without it, it holds it for ever.
func TestIdlePartitionReleasesTheWatermark(t *testing.T) {
	for _, idle := range []string{"0s", "5s"} {
		now := time.Unix(100, 0)
		cfg := parseConfig(t, []byte(strings.Replace(windowTestJob, "max_out_of_orderness: ${OOO}", "max_out_of_orderness: ${OOO}, idle_timeout: "+idle, 1)),
			windowEnv("tumbling: 1s", "0s", "0s"))
		p, err := compile(cfg)
		if err != nil {
			t.Fatal(err)
		}
		c := newClocks(p.time, nil, func() time.Time { return now })
		parts := []checkpoint.SourceOffset{{Topic: "in", Partition: 0}, {Topic: "in", Partition: 1}}
		cl := c.of("in", 0)
		cl.Observe(7000, 0)
		cl.lastRead = now
		now = now.Add(6 * time.Second)
		cl.lastRead = now // partition 0 keeps reading; partition 1 never did
		wm := jobWatermark(window.NoWatermark, c.at(parts))
		want := int64(window.NoWatermark)
		if idle == "5s" {
			want = 7000
		}
		if wm != want {
			t.Errorf("idle_timeout %s: watermark %d, want %d", idle, wm, want)
		}
		// The input stops: every partition goes idle, none is left to
		// move the watermark, and it stays (docs/event-time.md says so: the last
		// windows do not fire until records arrive).
		now = now.Add(time.Hour)
		if got := jobWatermark(wm, c.at(parts)); got != wm {
			t.Errorf("idle_timeout %s, every partition silent: watermark %d, want it held at %d", idle, got, wm)
		}
	}
}

// A record whose windows all fired already (possible only when an idle
// partition delivers again) goes to the late output, not into a second
// result of a fired window.
func TestRecordForAFiredWindowIsLate(t *testing.T) {
	h := newWindowHarness(t, windowTestJob, windowEnv("tumbling: 1s", "0s", "0s"), 1)
	h.send(0, 0, `{"n": 1, "ts": 500}`)
	h.send(0, 1, `{"n": 3, "ts": 2500}`)
	h.barrier()
	if len(h.outputs) != 1 {
		t.Fatalf("outputs %v", h.outputs)
	}
	// As if from a partition taken for idle: not late at its source, but
	// its window [0, 1s) fired.
	msgs := []message{{kind: msgRecord, rec: &kgo.Record{Topic: "in", Partition: 1, Offset: 0, Value: []byte(`{"n": 5, "ts": 700}`)}, at: 700, wm: window.NoWatermark}}
	msgs[0].op = &operator.Record{Value: msgs[0].rec.Value, Topic: "in"}
	if _, err := h.r.lin.Process(msgs[0].op); err != nil {
		t.Fatal(err)
	}
	outs, side := h.op.process(msgs[0])
	if len(outs) != 0 || len(side) != 1 || side[0].kind != msgLate || sinkHeader(side[0].rec, HeaderLateWindowEnd) != "1970-01-01T00:00:01Z" {
		t.Fatalf("outputs %v, side %+v", outs, side)
	}
	h.send(0, 2, `{"n": 7, "ts": 3500}`)
	h.barrier()
	for _, o := range h.outputs {
		if o.WindowStart == "1970-01-01T00:00:00Z" && o.Count != 1 {
			t.Fatalf("the fired window counted again: %+v", h.outputs)
		}
	}
}

// The two event times the window arithmetic reserves (the smallest int64
// is "no watermark", no window can hold the largest) are dead letters:
// two such records do not open two sessions with the same start, and the
// partition's clock is not stuck at "no watermark".
func TestExtremeEventTimesAreDeadLetters(t *testing.T) {
	h := newWindowHarness(t, windowTestJob, windowEnv("session: {gap: 100ms}", "0s", "0s"), 1)
	h.send(0, 0, `{"n": 1, "ts": 9223372036854775807}`)
	h.send(0, 1, `{"n": 3, "ts": 9223372036854775807}`)
	h.send(0, 2, `{"n": 5, "ts": -9223372036854775808}`)
	if h.dead != 3 || h.win.Open() != 0 {
		t.Fatalf("dead letters %d (want 3), open windows %d (want 0)", h.dead, h.win.Open())
	}
	h.send(0, 3, `{"n": 7, "ts": 1000}`)
	h.send(0, 4, `{"n": 9, "ts": 5000}`)
	h.barrier()
	want := []windowOutput{{Key: "odd", WindowStart: "1970-01-01T00:00:01Z", WindowEnd: "1970-01-01T00:00:01.1Z", Count: 1, Sum: 7}}
	if got := h.sorted(); !slices.Equal(got, want) {
		t.Fatalf("outputs %+v, want %+v", got, want)
	}
}

// A far-future event time (ts 1e15, the year 33658) moves its partition's
// watermark there, and every later record of the partition is late; the
// late headers still print it (as epoch milliseconds: RFC 3339 stops at
// the year 9999). With max_future the record is a dead letter (code
// future) instead and never moves the watermark; a record ahead by less
// is kept.
func TestFarFutureEventTime(t *testing.T) {
	now := time.Now().UnixMilli() / 1000 * 1000
	rec := func(n, ts int64) string { return fmt.Sprintf(`{"n": %d, "ts": %d}`, n, ts) }
	h := newWindowHarness(t, windowTestJob, windowEnv("tumbling: 1s", "0s", "0s"), 1)
	h.send(0, 0, rec(1, now))
	h.send(0, 1, rec(3, 1e15))
	h.send(0, 2, rec(5, now+1))
	if h.dead != 0 || len(h.late) != 1 || sinkHeader(h.late[0], HeaderLateWatermark) != "1000000000000000" {
		t.Fatalf("without max_future: %d dead letters, late %v; want the record after 1e15 late, judged at 1000000000000000", h.dead, h.late)
	}

	yaml := strings.Replace(windowTestJob, "max_out_of_orderness: ${OOO}", "max_out_of_orderness: ${OOO}, max_future: 1h", 1)
	h = newWindowHarness(t, yaml, windowEnv("tumbling: 1s", "0s", "0s"), 1)
	h.send(0, 0, rec(1, now))
	h.send(0, 1, rec(3, 1e15))
	h.send(0, 2, rec(5, now+1))
	h.send(0, 3, rec(7, now+2000))
	h.send(0, 4, rec(9, now+59*60*1000)) // within max_future: kept
	h.barrier()
	if len(h.late) != 0 || h.dead != 1 {
		t.Fatalf("with max_future 1h: %d late, %d dead letters; want 0 and 1", len(h.late), h.dead)
	}
	dl := h.deadRecs[0]
	if sinkHeader(dl, sink.HeaderCode) != "future" || sinkHeader(dl, sink.HeaderStep) != "sources[0].event_time.max_future" ||
		!strings.Contains(sinkHeader(dl, sink.HeaderReason), "event time 1000000000000000 is ") || sinkHeader(dl, sink.HeaderOffset) != "1" {
		t.Fatalf("dead letter headers %v", dl.Headers)
	}
	start := string(operator.AppendTime(nil, now))
	if got := h.sorted(); len(got) < 2 || got[0].WindowStart != start || got[0].Count != 2 || got[0].Sum != 6 {
		t.Fatalf("outputs %+v; want [%s, +1s) with 2 records, summing 6", got, start)
	}
}
