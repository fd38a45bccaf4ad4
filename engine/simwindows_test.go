package engine

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/internal/testkit/memkafka"
	"github.com/eoflow/pipeline/sink"
	"github.com/eoflow/pipeline/window"
)

// The simulation of parity-windows (examples/parity-windows): inputs
// carry an event time, mostly increasing with some disorder within
// max_out_of_orderness and now and then far behind. Its oracle decides
// lateness per window from the partition's log alone, by the documented
// rule: a window is closed for an input when its end plus
// allowed_lateness is at most the input's partition watermark (the
// partition's largest earlier event time minus max_out_of_orderness); the
// input counts in each of its windows open for it and is late when none
// is (sessions: when ts + allowed_lateness is below that watermark).
// After every commit the committed
// outputs must be exactly the oracle's windows that the checkpoint's
// watermark fired, each once with its exact count and sum (each at least
// once, each exact, under at_least_once), and the late topic exactly the
// oracle's late inputs of the checkpoint's prefix. The checkpoint's
// event time is checked too: each partition's largest event time is the
// oracle's, and the watermark is max(previous, least partition's largest
// minus max_out_of_orderness).

var parityWindowsYAML = func() string {
	data, err := os.ReadFile("../examples/parity-windows/config.yaml")
	if err != nil {
		panic(err)
	}
	return string(data)
}()

var parityWindowsJob = simJob{name: "parity-windows", config: parityWindowsYAML, windowed: true,
	keyOf: func(n int64) string {
		if n%2 == 0 {
			return "even"
		}
		return "odd"
	}}

// sessionWindowsJob is parity-windows with session windows: a record late
// but within allowed_lateness may bridge two sessions of its key.
var sessionWindowsJob = simJob{name: "session-windows", windowed: true, keyOf: parityWindowsJob.keyOf,
	config: strings.Replace(parityWindowsYAML, "tumbling: ${WINDOW:-10s}", "session: {gap: ${WINDOW:-1s}}", 1)}

// hoppingWindowsJob is parity-windows with hopping windows: an input
// behind its partition's watermark counts in those of its windows still
// open for it and skips the others, whether they fired yet or not.
// exactly_once only, for the CI's time: the guarantees' commit paths are
// the tumbling job's.
var hoppingWindowsJob = simJob{name: "hopping-windows", windowed: true, keyOf: parityWindowsJob.keyOf,
	config:     strings.Replace(parityWindowsYAML, "tumbling: ${WINDOW:-10s}", "hopping: {size: ${WINDOW:-10s}, advance: ${ADVANCE:-5s}}", 1),
	guarantees: []config.Guarantee{config.ExactlyOnce}}

func init() { simJobs = append(simJobs, parityWindowsJob, sessionWindowsJob, hoppingWindowsJob) }

func (r *simRun) sessions() bool { return r.job.name == sessionWindowsJob.name }
func (r *simRun) hopping() bool  { return r.job.name == hoppingWindowsJob.name }

const (
	simLateTopic  = "late"
	simWindow     = 200 // ms
	simOutOfOrder = 50  // ms
	simGap        = 15  // ms: sessions of one key break often
	simAdvance    = 100 // ms: hopping windows of simWindow every simAdvance
)

// windowEnv sets the window's parameters: allowed lateness drawn per run.
func (r *simRun) windowEnv(env map[string]string) {
	env["LATE_TOPIC"] = simLateTopic
	env["WINDOW"] = fmt.Sprintf("%dms", simWindow)
	if r.sessions() {
		env["WINDOW"] = fmt.Sprintf("%dms", simGap)
	}
	env["ADVANCE"] = fmt.Sprintf("%dms", simAdvance)
	env["MAX_OOO"] = fmt.Sprintf("%dms", simOutOfOrder)
	env["LATENESS"] = []string{"0s", "100ms"}[r.w.rng.IntN(2)]
}

func (r *simRun) lateness() int64 {
	for _, s := range r.cfg.Steps {
		if s.Window != nil {
			return s.Window.AllowedLateness.Milliseconds()
		}
	}
	panic("no window step")
}

// drawEventTimes gives the pending inputs their event times: 10 ms apart
// in order, each moved back by up to max_out_of_orderness, and one in
// twenty further back than that (late, if its partition has seen far
// enough ahead).
func (r *simRun) drawEventTimes() {
	base := r.clock.UnixMilli()
	for i := range r.pending {
		in := &r.pending[i]
		in.ts = base + in.n*10 - int64(r.w.rng.IntN(simOutOfOrder+1))
		if r.w.rng.IntN(20) == 0 {
			in.ts -= simOutOfOrder + int64(r.w.rng.IntN(400))
		}
	}
}

type simWin struct {
	key        string
	start, end int64
}

type simTP struct {
	partition int32
	offset    int64
}

// windowOracle is what the inputs before offsets give: every window's
// aggregate, the late inputs, the bad ones, and each partition's largest
// event time (window.NoWatermark: none yet).
type windowOracle struct {
	windows map[simWin]simAgg
	late    map[simTP]bool
	bad     int
	maxTime []int64
}

func (r *simRun) windowOracle(offsets []int64) windowOracle {
	kind := simTumbling
	switch {
	case r.hopping():
		kind = simHopping
	case r.sessions():
		kind = simSessions
	}
	ins := make([][]simInput, len(offsets))
	for p, off := range offsets {
		ins[p] = r.inputs[p][:off]
	}
	return windowsOf(ins, r.job.keyOf, kind, r.lateness())
}

// simWindowKind is the window of a windowed simulation job: parity-
// windows' tumbling one, or hopping or session windows in its place.
type simWindowKind int

const (
	simTumbling simWindowKind = iota
	simHopping
	simSessions
)

// windowsOf is the windowed jobs' oracle, the same for the single-mode
// and the group simulations: what inputs (by partition, in offset order)
// give, judged partition by partition from the input alone.
func windowsOf(inputs [][]simInput, keyOf func(int64) string, kind simWindowKind, lateness int64) windowOracle {
	o := windowOracle{windows: map[simWin]simAgg{}, late: map[simTP]bool{}, maxTime: make([]int64, len(inputs))}
	ooo := int64(simOutOfOrder)
	type event struct{ ts, n int64 }
	byKey := map[string][]event{} // sessions: every counted input of a key
	for p, ins := range inputs {
		max := int64(window.NoWatermark)
		for i, in := range ins {
			if in.bad {
				o.bad++
				if in.misplaced && in.ts > max {
					max = in.ts
				}
				continue
			}
			// Its windows: [start, start+size) for every start a
			// multiple of the advance (the size, tumbling) with
			// start <= ts < start+size; closed when end+lateness is at
			// most the partition's watermark before the input.
			size, advance := int64(simWindow), int64(simWindow)
			if kind == simHopping {
				advance = simAdvance
			}
			var open []simWin
			k := keyOf(in.n)
			for start := in.ts - ((in.ts%advance)+advance)%advance; start > in.ts-size; start -= advance {
				if max == window.NoWatermark || start+size+lateness > max-ooo {
					open = append(open, simWin{k, start, start + size})
				}
			}
			if kind == simSessions {
				open = nil
				if max == window.NoWatermark || in.ts+lateness >= max-ooo {
					open = []simWin{{k, in.ts, in.ts + simGap}}
				}
			}
			if len(open) == 0 {
				o.late[simTP{int32(p), int64(i)}] = true
				continue
			}
			if in.ts > max {
				max = in.ts
			}
			if kind == simSessions {
				byKey[k] = append(byKey[k], event{in.ts, in.n})
				continue
			}
			for _, w := range open {
				a := o.windows[w]
				a.count++
				a.sum += in.n
				o.windows[w] = a
			}
		}
		o.maxTime[p] = max
	}
	// Sessions, from scratch: a key's times in order, split where two
	// are gap or more apart.
	for k, evs := range byKey {
		slices.SortFunc(evs, func(a, b event) int { return cmp.Compare(a.ts, b.ts) })
		var w simWin
		var a simAgg
		for i, e := range evs {
			if i > 0 && e.ts >= evs[i-1].ts+simGap {
				o.windows[w] = a
				a = simAgg{}
			}
			if a.count == 0 {
				w = simWin{k, e.ts, 0}
			}
			w.end = e.ts + simGap
			a.count++
			a.sum += e.n
		}
		o.windows[w] = a
	}
	return o
}

// decodeWindow is parity-windows' committed output out: its window and
// aggregate, its record key being the window's key.
func decodeWindow(out memkafka.Record) (simWin, simAgg, error) {
	var o struct {
		Key         string `json:"key"`
		WindowStart string `json:"window_start"`
		WindowEnd   string `json:"window_end"`
		Count       int64  `json:"count"`
		Sum         int64  `json:"sum"`
	}
	if err := json.Unmarshal(out.Value, &o); err != nil {
		return simWin{}, simAgg{}, fmt.Errorf("output %s: %v", out.Value, err)
	}
	start, err1 := time.Parse(time.RFC3339Nano, o.WindowStart)
	end, err2 := time.Parse(time.RFC3339Nano, o.WindowEnd)
	if err1 != nil || err2 != nil || string(out.Key) != o.Key {
		return simWin{}, simAgg{}, fmt.Errorf("output %s (key %q): bad window times or key", out.Value, out.Key)
	}
	return simWin{o.Key, start.UnixMilli(), end.UnixMilli()}, simAgg{o.Count, o.Sum}, nil
}

// catchUpWindows reads the committed window outputs, late records and
// dead letters since the last call.
func (r *simRun) catchUpWindows() error {
	v := &r.committed
	if v.windows == nil {
		v.windows, v.late, v.watermark = map[simWin][]simAgg{}, map[simTP]int{}, window.NoWatermark
		if r.base != nil {
			v.watermark = r.baseWatermark
		}
	}
	for _, out := range v.tail(r.w, "out") {
		w, a, err := decodeWindow(out)
		if err != nil {
			return err
		}
		v.windows[w] = append(v.windows[w], a)
	}
	for _, rec := range v.tail(r.w, simLateTopic) {
		kr := fromModel(rec)
		p, err1 := strconv.ParseInt(sink.Header(kr, sink.HeaderPartition), 10, 32)
		off, err2 := strconv.ParseInt(sink.Header(kr, sink.HeaderOffset), 10, 64)
		if err1 != nil || err2 != nil {
			return fmt.Errorf("late record %s without its source partition and offset", rec.Value)
		}
		v.late[simTP{int32(p), off}]++
	}
	v.dead += len(v.tail(r.w, r.cfg.Sinks[0].DeadLetterTopic))
	return nil
}

// checkWindows is check for parity-windows.
func (r *simRun) checkWindows(when string) error {
	v := &r.committed // check caught up with it
	offsets, watermark, err := r.committedCut(when, true)
	if err != nil {
		return err
	}
	want := r.windowOracle(offsets)
	if err := r.checkEventTime(when, v.newest.Record, want); err != nil {
		return err
	}
	// A continuation's outputs go on from its savepoint's: what that
	// fired, the run before committed.
	var base windowOracle
	if r.base != nil {
		base = r.windowOracle(r.base)
		for tp := range base.late {
			if !r.baseHeld[tp] { // a late input the savepoint held is the continuation's to write
				delete(want.late, tp)
			}
		}
		want.bad -= base.bad
	}
	// A join as of event time holds its late inputs too: to the late
	// topic once released.
	held, err := heldInputs(v.newest.Record)
	if err != nil {
		return fmt.Errorf("%w at %s: %v", errViolation, when, err)
	}
	if v.newest.Record == nil && r.base != nil {
		held = r.baseHeld // nothing committed yet: still where the savepoint was
	}
	for tp := range held {
		delete(want.late, tp)
	}
	exact := r.guarantee == config.ExactlyOnce
	lateness := r.lateness()
	fired := map[simWin]simAgg{}
	for w, a := range want.windows {
		if watermark != window.NoWatermark && w.end+lateness <= watermark &&
			(r.baseWatermark == window.NoWatermark || r.base == nil || w.end+lateness > r.baseWatermark) {
			fired[w] = a
		}
	}
	for w, a := range fired {
		got := v.windows[w]
		if len(got) == 0 || (exact && len(got) > 1) {
			return fmt.Errorf("%w at %s: window %+v (%+v) committed %d times; watermark %d fired it", errViolation, when, w, a, len(got), watermark)
		}
		for _, g := range got {
			if g != a {
				return fmt.Errorf("%w at %s: window %+v committed as %+v, the oracle says %+v", errViolation, when, w, g, a)
			}
		}
	}
	if exact {
		for w, got := range v.windows {
			if _, ok := fired[w]; !ok {
				return fmt.Errorf("%w at %s: window %+v committed as %+v, but the checkpoint (watermark %d) does not fire it (oracle %+v)", errViolation, when, w, got, watermark, want.windows[w])
			}
		}
	}
	for tp := range want.late {
		if n := v.late[tp]; n == 0 || (exact && n > 1) {
			return fmt.Errorf("%w at %s: late input %+v committed %d times to the late topic", errViolation, when, tp, n)
		}
	}
	for tp, n := range v.late {
		if !want.late[tp] && exact {
			return fmt.Errorf("%w at %s: input %+v committed %d times to the late topic, but it is not late or not in the checkpoint", errViolation, when, tp, n)
		}
	}
	if exact && v.dead != want.bad || !exact && v.dead < want.bad {
		return fmt.Errorf("%w at %s: %d dead letters committed; the checkpoint covers %d bad inputs", errViolation, when, v.dead, want.bad)
	}
	return nil
}

// checkEventTime compares a checkpoint's event time with the oracle's.
func (r *simRun) checkEventTime(when string, rec *checkpoint.Record, want windowOracle) error {
	if rec == nil {
		return nil
	}
	got := map[int32]int64{}
	for _, p := range rec.EventTime.Partitions {
		got[p.Partition] = p.MaxEventTime
	}
	for p, max := range want.maxTime {
		if g, ok := got[int32(p)]; (ok || max != window.NoWatermark) && g != max {
			return fmt.Errorf("%w at %s: checkpoint %d says partition %d read up to event time %d, the oracle says %d (%v)", errViolation, when, rec.ID, p, g, max, slices.Sorted(maps.Keys(got)))
		}
	}
	expect := r.committed.watermark
	if least := slices.Min(want.maxTime); least != window.NoWatermark {
		wm := least - simOutOfOrder
		// A join as of event time holds the watermark at its least held
		// record (asof.go).
		held, ok, err := heldMin(rec)
		if err != nil {
			return fmt.Errorf("%w at %s: checkpoint %d: %v", errViolation, when, rec.ID, err)
		}
		if ok {
			wm = min(wm, held)
		}
		expect = max(expect, wm)
	}
	if wm := rec.EventTime.Watermark; wm != expect {
		return fmt.Errorf("%w at %s: checkpoint %d has watermark %d; the previous one and its partitions say %d", errViolation, when, rec.ID, wm, expect)
	}
	r.committed.watermark = rec.EventTime.Watermark
	return nil
}
