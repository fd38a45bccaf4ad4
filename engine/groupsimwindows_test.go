package engine

import (
	"fmt"
	"strconv"

	"github.com/eoflow/pipeline/checkpoint/savepoint"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/internal/testkit/memkafka"
	"github.com/eoflow/pipeline/operator"
	"github.com/eoflow/pipeline/sink"
	"github.com/eoflow/pipeline/state"
	"github.com/eoflow/pipeline/window"
)

// The group simulation of parity-windows (TestSimulationGroupMode/windows):
// the three processes run tumbling windows of event time over gsimKeys
// keys, through the same crashes, pauses, zombies and rebalances as the
// sum. The oracle is computed from the input alone, partition by
// partition, by the documented rule (docs/windows.md): an input is late
// when its window's end plus allowed_lateness is at most its partition's
// watermark (the largest earlier event time of the partition, minus
// max_out_of_orderness); otherwise it counts in its window. So:
//   - after every commit, every committed window holds exactly the
//     oracle's inputs of that window (a window that fired can gain no
//     later input: that input would be late), once; every committed late
//     record is one the oracle calls late, once; no input becomes two
//     dead letters;
//   - at the end, the committed windows are exactly the oracle's windows
//     whose end plus allowed_lateness is at most the least partition
//     watermark (every partition's records are read, and the event times
//     crossed the repartition topic), and the late records exactly the
//     oracle's.
//
// A co-partitioned job (gsimCoWindows, gsimCoSessions: no repartition,
// scale.key_by_is_record_key) is judged by the same oracle: its windows
// and late records must be the same. Only when a window fires differs: a
// process fires at the least watermark of the partitions it owns, so at
// the end a window may have fired past the least partition watermark,
// but never past the watermark of its key's own partition. gsimAsOfCoWindows
// puts a join as of event time before them (asof_copartitioned): the
// process that holds a record also fires its key's windows, and must not
// fire one before the record is released; a savepoint of it holds the
// open windows of the inputs its offsets cover but the held ones
// (withoutHeld), and those held records.

// gsimWindowView is what the windowed oracle has read of the committed
// outputs.
type gsimWindowView struct {
	gsimTail
	windows map[simWin]simAgg
}

// gsimTail is what the check of an event-time job (windows, the interval
// join) has read of the committed topics: where it is in each, and the
// late records and dead letters so far.
type gsimTail struct {
	next map[memkafka.TP]int64
	late map[simTP]bool
	dead map[string]bool
}

// read returns topic's records committed since the last read.
func (t *gsimTail) read(s *gsim, topic string) []memkafka.Record {
	if t.next == nil {
		t.next, t.late, t.dead = map[memkafka.TP]int64{}, map[simTP]bool{}, map[string]bool{}
	}
	tp := memkafka.TP{Topic: topic}
	recs, next, err := s.w.kafka.ReadCommitted(tp, t.next[tp], 1<<20)
	if err != nil {
		panic(err)
	}
	t.next[tp] = next
	return recs
}

// lateAndDead judges the late records and dead letters committed since
// the last call: each late record one the oracle calls late (late), once;
// no input dead-lettered twice.
func (t *gsimTail) lateAndDead(s *gsim, late map[simTP]bool) error {
	for _, r := range t.read(s, simLateTopic) {
		kr := fromModel(r)
		p, err1 := strconv.ParseInt(sink.Header(kr, sink.HeaderPartition), 10, 32)
		off, err2 := strconv.ParseInt(sink.Header(kr, sink.HeaderOffset), 10, 64)
		if err1 != nil || err2 != nil {
			return s.violation("late record %s without its source partition and offset", r.Value)
		}
		tp := simTP{int32(p), off}
		if topic := sink.Header(kr, sink.HeaderTopic); topic != "in" {
			var err error
			if tp, err = s.inputCrossed(topic, tp); err != nil {
				return err
			}
		}
		switch {
		case t.late[tp]:
			return s.violation("input %+v committed twice to the late topic", tp)
		case !late[tp]:
			return s.violation("input %+v committed to the late topic; from the input alone it is not late", tp)
		}
		t.late[tp] = true
	}
	for _, r := range t.read(s, s.cfg.Sinks[0].DeadLetterTopic) {
		kr := fromModel(r)
		at := sink.Header(kr, sink.HeaderPartition) + "/" + sink.Header(kr, sink.HeaderOffset)
		if t.dead[at] {
			return s.violation("input %s dead-lettered twice", at)
		}
		t.dead[at] = true
	}
	return nil
}

// allLateAndDead: at the end, every input the oracle calls late went to
// the late topic, and every bad input (bad of them) to the dead letters.
func (t *gsimTail) allLateAndDead(s *gsim, late map[simTP]bool, bad int) error {
	for tp := range late {
		if !t.late[tp] {
			return s.violation("late input %+v never committed to the late topic", tp)
		}
	}
	if len(t.dead) != bad {
		return s.violation("%d dead letters committed for %d bad inputs", len(t.dead), bad)
	}
	return nil
}

// leastWatermark is the least partition watermark of the partitions'
// largest event times (window.NoWatermark if a partition has none).
func leastWatermark(maxTime []int64) int64 {
	least := int64(window.NoWatermark)
	for p, largest := range maxTime {
		wm := window.PartitionClock{Max: largest}.Watermark(simOutOfOrder)
		if p == 0 || wm < least {
			least = wm
		}
	}
	return least
}

// windowsConfig is parity-windows' configuration with windows of the
// given kind (tumbling, hopping or session, as the single-mode
// simulation's jobs have them), its settings in env: 200 ms windows
// (hopping every 100 ms; sessions with a 15 ms gap), 50 ms out of order,
// an allowed lateness drawn per seed.
func (s *gsim) windowsConfig(env map[string]string, kind simWindowKind) string {
	s.windowed, s.windowKind = true, kind
	s.lateness = []int64{0, 100}[s.w.rng.IntN(2)]
	env["LATE_TOPIC"] = simLateTopic
	env["WINDOW"] = fmt.Sprintf("%dms", simWindow)
	env["ADVANCE"] = fmt.Sprintf("%dms", simAdvance)
	env["MAX_OOO"] = fmt.Sprintf("%dms", simOutOfOrder)
	env["LATENESS"] = fmt.Sprintf("%dms", s.lateness)
	env["INPUT_TOPIC"] = "in"
	switch kind {
	case simHopping:
		return hoppingWindowsJob.config
	case simSessions:
		env["WINDOW"] = fmt.Sprintf("%dms", simGap)
		return sessionWindowsJob.config
	}
	return parityWindowsJob.config
}

// eventTime is input n's event time: 10 ms apart in order, moved back by
// up to max_out_of_orderness, and one in twenty further back than that
// (late, if its partition has seen far enough ahead).
func (s *gsim) eventTime(n int64) int64 {
	ts := s.began.UnixMilli() + n*10 - int64(s.w.rng.IntN(simOutOfOrder+1))
	if s.w.rng.IntN(20) == 0 {
		ts -= simOutOfOrder + int64(s.w.rng.IntN(400))
	}
	return ts
}

// windowOracle is the windows, late inputs and bad ones of every input
// written so far (windowsOf, the single-mode simulation's oracle), and
// the least partition watermark (window.NoWatermark if a partition has no
// input).
func (s *gsim) windowOracle() (o windowOracle, least int64) {
	o = windowsOf(s.inputs, s.key, s.windowKind, s.lateness)
	return o, leastWatermark(o.maxTime)
}

// keyWatermark is the watermark of the partition that holds key's
// inputs in a co-partitioned job, from the partitions' largest event
// times.
func keyWatermark(maxTime []int64, key string) int64 {
	return window.PartitionClock{Max: maxTime[kafkaPartition([]byte(key), len(maxTime))]}.Watermark(simOutOfOrder)
}

// firedPast: w, committed, fired past the watermark it may fire at: the
// least partition watermark, or, co-partitioned, its key's partition's.
func (s *gsim) firedPast(w simWin, maxTime []int64, least int64) bool {
	if s.copartitioned {
		return w.end+s.lateness > keyWatermark(maxTime, w.key)
	}
	return w.end+s.lateness > least
}

// windowsDue reports whether every window the least partition watermark
// passed has been committed: a co-partitioned process fires its
// partitions' windows at the first checkpoint after its last records of
// them, or of its other partitions, which may follow the group's last
// committed offsets (the end waits for it).
func (s *gsim) windowsDue() bool {
	if !s.windowed || !s.copartitioned {
		return true
	}
	o, least := s.windowOracle()
	if least == window.NoWatermark {
		return true
	}
	for w := range o.windows {
		if _, ok := s.wview.windows[w]; !ok && w.end+s.lateness <= least {
			return false
		}
	}
	return true
}

// checkWindows reads what was committed since its last call and judges
// it by the oracle; at the end (drained), the whole of it.
func (s *gsim) checkWindows(end bool) error {
	v := &s.wview
	if v.windows == nil {
		v.windows = map[simWin]simAgg{}
	}
	o, least := s.windowOracle()
	windows, late, bad := o.windows, o.late, o.bad
	for _, r := range v.read(s, "out") {
		w, got, err := decodeWindow(r)
		if err != nil {
			return s.violation("%v", err)
		}
		switch want, ok := windows[w]; {
		case v.windows[w] != (simAgg{}):
			return s.violation("window %+v committed twice (%+v, then %+v)", w, v.windows[w], got)
		case !ok || got != want:
			return s.violation("window %+v committed as %+v; from the input alone it holds %+v: its contents depend on the schedule", w, got, want)
		}
		v.windows[w] = got
	}
	if err := v.lateAndDead(s, late); err != nil {
		return err
	}
	if !end {
		return nil
	}
	for w, a := range windows {
		if _, ok := v.windows[w]; !ok && least != window.NoWatermark && w.end+s.lateness <= least {
			return s.violation("window %+v (%+v) never committed, though every partition's watermark passed its end (least %d)", w, a, least)
		}
	}
	for w := range v.windows {
		if s.firedPast(w, o.maxTime, least) {
			return s.violation("window %+v committed, though a partition's watermark (least %d) never passed its end", w, least)
		}
	}
	if err := v.allLateAndDead(s, late, bad); err != nil {
		return err
	}
	s.counts["windows committed"] += len(v.windows)
	s.counts["late inputs"] += len(v.late)
	return nil
}

// savepointInputs opens the group savepoint in dir and returns its
// source offsets and the inputs they cover, by partition (a violation
// when it does not open).
func (s *gsim) savepointInputs(dir string) (*savepoint.Reader, []int64, [][]simInput, error) {
	r, err := savepoint.Open(dir)
	if err != nil {
		return nil, nil, nil, s.violation("opening savepoint %s: %v", dir, err)
	}
	offsets := make([]int64, gsimInParts)
	for _, o := range r.Manifest().Offsets() {
		if o.Topic == "in" {
			offsets[o.Partition] = o.Offset
		}
	}
	ins := make([][]simInput, gsimInParts)
	for p := range ins {
		ins[p] = s.inputs[p][:offsets[p]]
	}
	return r, offsets, ins, nil
}

// checkWindowSavepoint: a savepoint of the running group, of a windowed
// job, holds exactly what its source offsets cover: each partition's
// largest event time is the oracle's over the inputs before its offset,
// and the windows state holds exactly the oracle's windows of those
// inputs that the savepoint's watermark has not fired (end plus allowed
// lateness after it), with their exact contents. A restore then fires
// each of them once, as the group would have.
func (s *gsim) checkWindowSavepoint(dir string, j *Job) error {
	r, offsets, ins, err := s.savepointInputs(dir)
	if err != nil {
		return err
	}
	want := windowsOf(ins, s.key, s.windowKind, s.lateness)
	if err := s.withoutHeld(r, ins, want.windows); err != nil {
		return s.violation("savepoint %s: %v", dir, err)
	}
	if s.joinTopic != "" {
		// Read from "in" but past the savepoint's offsets of the join's
		// repartition topic: in flight there, in no window yet.
		at := map[int32]int64{}
		for _, o := range r.Manifest().Offsets() {
			if o.Topic == s.joinTopic {
				at[o.Partition] = o.Offset
			}
		}
		if err := s.inFlightAt(at); err != nil {
			return err
		}
		var crossing []simTP
		for p, part := range ins {
			for off, in := range part {
				if s.inFlight[in.n] {
					crossing = append(crossing, simTP{int32(p), int64(off)})
				}
			}
		}
		s.inFlight = nil
		withoutInputs(ins, crossing, s.key, s.windowKind, s.lateness, want.windows)
		s.counts["inputs in flight in savepoints"] += len(crossing)
	}
	et := r.Manifest().EventTime.Checkpoint()
	if et == nil {
		return s.violation("savepoint %s holds no event time", dir)
	}
	got := map[int32]int64{}
	for _, pt := range et.Partitions {
		if pt.Topic == "in" {
			got[pt.Partition] = pt.MaxEventTime
		}
	}
	for p, max := range want.maxTime {
		if g, ok := got[int32(p)]; (ok || max != window.NoWatermark) && g != max {
			return s.violation("savepoint %s: partition %d read up to event time %d, its offsets %v cover %d", dir, p, g, offsets, max)
		}
	}
	held := map[simWin]simAgg{}
	var agg *operator.Aggregator // the windows' (a join's repartition topic is a target too)
	for _, tg := range j.plan.targets {
		if tg.window != nil {
			agg = tg.agg
			break
		}
	}
	err = r.Scan("windows", state.Range{End: state.KeyGroup(s.cfg.Checkpoint.KeyGroups)}, func(e savepoint.Entry) error {
		ws, err := agg.DecodeWindowState(e.Value)
		if err != nil {
			return err
		}
		for _, w := range ws.Windows {
			c, _ := w.State.Value("count")
			sum, _ := w.State.Value("sum")
			held[simWin{string(e.Key), w.Start, w.End}] = simAgg{c.(int64), sum.(int64)}
		}
		return nil
	})
	if err != nil {
		return s.violation("reading savepoint %s: %v", dir, err)
	}
	// Open at the savepoint: not fired. Co-partitioned, a window is
	// open while its key's partition's watermark has not passed it (its
	// process fired at most there; whether it fired earlier depends on
	// what else the process owned), and the savepoint's watermark must
	// pass no partition's, since a restore resumes the windows at it.
	open := func(w simWin) bool {
		return et.Watermark == window.NoWatermark || w.end+s.lateness > et.Watermark
	}
	if s.copartitioned {
		if least := leastWatermark(want.maxTime); et.Watermark > least {
			return s.violation("savepoint %s: watermark %d, past the least partition watermark %d its offsets %v cover", dir, et.Watermark, least, offsets)
		}
		open = func(w simWin) bool { return w.end+s.lateness > keyWatermark(want.maxTime, w.key) }
	}
	for w, a := range want.windows {
		if g, ok := held[w]; open(w) && (!ok || g != a) {
			return s.violation("savepoint %s (watermark %d): window %+v holds %+v (held %v); its offsets %v cover %+v", dir, et.Watermark, w, g, ok, offsets, a)
		}
	}
	for w, g := range held {
		a, ok := want.windows[w]
		closed := !s.copartitioned && !open(w)
		if !ok || closed || g != a {
			return s.violation("savepoint %s (watermark %d): it holds window %+v (%+v), which its offsets %v do not cover open (%+v, %v)", dir, et.Watermark, w, g, offsets, a, ok)
		}
	}
	s.counts["windows in savepoints"] += len(held)
	s.log("savepoint %s holds exactly the open windows of the inputs before %v", dir, offsets)
	return nil
}

// withoutHeld takes out of windows (the oracle's over ins) what the
// inputs savepoint r holds for a join as of event time would add: they
// are read (their event times moved their partitions' clocks) but not
// joined yet, so no window holds them. An input's share is the
// difference its partition's oracle makes with it and without it
// (tumbling and hopping windows: each input adds to its open windows
// alone).
func (s *gsim) withoutHeld(r *savepoint.Reader, ins [][]simInput, windows map[simWin]simAgg) error {
	held, err := r.Held()
	if err != nil {
		return err
	}
	var inputs []simTP
	for _, h := range held {
		at := simTP{h.Partition, h.Offset}
		if h.Topic != "in" {
			// Held where the join reads: the record of the input there.
			var err error
			if at, err = s.inputCrossed(h.Topic, at); err != nil {
				return err
			}
		}
		if int(at.partition) >= len(ins) || at.offset >= int64(len(ins[at.partition])) {
			return fmt.Errorf("it holds in/%d@%d, past its offsets", at.partition, at.offset)
		}
		inputs = append(inputs, at)
	}
	withoutInputs(ins, inputs, s.key, s.windowKind, s.lateness, windows)
	s.counts["held inputs in savepoints"] += len(held)
	return nil
}

// withoutInputs takes out of windows (the oracle's over ins) what the
// inputs at add: an input's share is the difference its partition's
// oracle makes with it and without it (tumbling and hopping windows: each
// input adds to its open windows alone).
func withoutInputs(ins [][]simInput, inputs []simTP, key func(int64) string, kind simWindowKind, lateness int64, windows map[simWin]simAgg) {
	for _, at := range inputs {
		p, off := at.partition, at.offset
		only := func(n int64) [][]simInput {
			part := make([][]simInput, len(ins))
			part[p] = ins[p][:n]
			return part
		}
		with := windowsOf(only(off+1), key, kind, lateness).windows
		without := windowsOf(only(off), key, kind, lateness).windows
		for w, a := range with {
			b := without[w]
			d := windows[w]
			d.count -= a.count - b.count
			d.sum -= a.sum - b.sum
			if d == (simAgg{}) {
				delete(windows, w)
			} else {
				windows[w] = d
			}
		}
	}
}

// inputCrossed is the input whose record a job read at at of topic, its
// join's repartition topic (a late record names where it was read): the
// record there has the input's number.
func (s *gsim) inputCrossed(topic string, at simTP) (simTP, error) {
	if topic != s.joinTopic {
		return at, s.violation("a late record names topic %q, which the job does not read", topic)
	}
	recs, _, err := s.w.kafka.ReadCommitted(memkafka.TP{Topic: topic, Partition: at.partition}, at.offset, 1)
	if err != nil || len(recs) == 0 || recs[0].Offset != at.offset {
		return at, s.violation("a late record names %s %+v, which holds no committed input (%v)", topic, at, err)
	}
	// A join record (operator/joinrecord.go), read as the join reads it.
	rec := operator.Record{Value: recs[0].Value, Format: config.FormatJoinRecord}
	v, ferr := rec.Fields()
	n, ok := v["n"].(int)
	if ferr != nil || !ok {
		return at, s.violation("a late record names %s %+v, which holds %q: %v", topic, at, recs[0].Value, ferr)
	}
	for p, ins := range s.inputs {
		for off, in := range ins {
			if in.n == int64(n) && !in.bad {
				return simTP{int32(p), int64(off)}, nil
			}
		}
	}
	return at, s.violation("a late record names %s %+v, whose number %d is no input's", topic, at, n)
}
