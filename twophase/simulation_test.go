package twophase

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eoflow/pipeline/checkpoint"
)

// The simulation runs the Machine the way the engine does, against
// in-memory participants whose stores survive crashes (mem_test.go) and a
// task graph of 1 to 4 tasks, under seeded random schedules: time passes,
// input arrives, barriers are injected and acked in random order,
// participant calls complete in random interleavings (in order per
// participant) and fail before or after taking effect, tasks decline,
// savepoints and stops are asked for, checkpoints time out, the caller gives
// up, the job crashes (kill -9) at any step including during recovery, a
// second instance takes over while the first still runs (a zombie that
// goes on until it is fenced), and a phantom instance fences a participant.
// Each store checks every call it gets; after every message the
// simulation checks:
//
//   - checkpoints are triggered with contiguous ids from the restored one
//     on, only for an epoch every participant began, a periodic one no
//     sooner than Interval after the previous trigger and MinPause after
//     the previous end, a promised one (TriggerNow, Stop) next;
//   - at most MaxInFlight epochs are in flight, and no checkpoint whose
//     decision was not asked for outlives Timeout without failing the job;
//   - the decision log is asked to commit N only when every task acked N,
//     every participant prepared this attempt of N and N-1 is decided, one
//     decision at a time; Completed(N) only once it holds N;
//   - a participant commits N only after the decision log committed the
//     same attempt of N, every participant in epoch order and the decision
//     log without a gap, and never aborts what it committed;
//   - the committed outputs are the input records 0..n-1, each exactly
//     once (the decision log's store checks every epoch's span);
//   - after Fail only Completed (a decision in doubt that landed); after a
//     fenced outcome the Machine fails for good and asks no Commit;
//   - at every Resume of an instance that still owns every participant,
//     each holds nothing in doubt and committed exactly what the decision
//     log committed (recovery settled every in-doubt epoch by it);
//   - after the final checkpoint the Machine is Stopped with nothing in
//     flight, and opens no epoch after it;
//   - a message the Machine refuses changes nothing.
//
// Each run ends fault-free: a last recovery, three checkpoints that must
// commit everywhere, and a stop.

// chooser supplies the simulation's choices: a seeded *rand.Rand in
// TestSimulation, fuzz bytes in FuzzMachine.
type chooser interface{ IntN(n int) int }

type simStats struct {
	steps, triggers, periodic, promised, pipelined, completed, done, resumes int
	imports, stops, stopped, declines, aborts, crashes, takeovers, phantoms  int
	bogus, zombieCalls, staleResumes, settleCommits, lateDecisions           int
	fails                                                                    map[string]int
	permanent                                                                int
}

type world struct {
	tb    testing.TB
	name  string // "seed 42": what replays a failure
	ch    chooser
	stats *simStats

	cfg    Config
	tasks  []checkpoint.TaskID
	stores []*store // [0] is the decision log
	faults int      // a call fails 1 in faults (0: never)
	inc    int      // the last incarnation number handed out
	now    time.Time
	input  int // records written to the input so far
	cur    *incarnation
	zombie *incarnation
	trace  []string
}

// incarnation is one instance of the job: a Machine, the calls it emitted
// that were not made yet, and its task graph.
type incarnation struct {
	id      int
	m       *Machine
	handles []*handle
	// queues holds the calls taken from a Ready and not made yet, by
	// participant, plus a last lane for ReadDecision: the checkpoint topic
	// is read by a consumer of its own, not through the decision log's
	// producer.
	queues     [][]Action
	unadvanced bool // the last Ready was taken, Advance not called yet

	// The task graph: barriers injected and not acked yet, by task; who
	// acked what; where each barrier is in the input.
	started   bool
	needsAcks map[Epoch]bool // triggered once the task graph ran
	begun     map[Epoch]int  // participants that reported Begun
	prepared  map[Epoch]int  // participants that reported Prepared
	taskQ     map[checkpoint.TaskID][]Epoch
	ackedBy   map[Epoch]map[checkpoint.TaskID]bool
	barrier   map[Epoch]int
	sourcePos int

	// What the Machine said, as the model follows it.
	restored      Epoch
	lastTrigger   Epoch // newest Trigger emitted
	lastTrigAt    time.Time
	lastEndAt     time.Time
	ended         bool
	promise       Epoch // promised to TriggerNow or Stop, not yet triggered
	final         Epoch
	deciding      Epoch // decision log's commit emitted, outcome not reported
	lastCompleted Epoch
	lastDone      Epoch
	resumed       bool
	failed        *FailError
	fencedSeen    bool
}

func newWorld(tb testing.TB, name string, ch chooser, stats *simStats) *world {
	w := &world{tb: tb, name: name, ch: ch, stats: stats, now: t0}
	n := 1 + ch.IntN(4) // the decision log and 0..3 others
	interval := time.Duration(1+ch.IntN(10)) * time.Second
	w.cfg = Config{
		DecisionLog: "k",
		Interval:    interval,
		Timeout:     interval * time.Duration(2+ch.IntN(5)),
		MaxInFlight: 1 + ch.IntN(3),
	}
	if ch.IntN(3) == 0 {
		w.cfg.MinPause = time.Duration(ch.IntN(20)) * interval / 10
	}
	for i := range 1 + ch.IntN(4) {
		w.tasks = append(w.tasks, checkpoint.TaskID(fmt.Sprintf("task-%d", i)))
	}
	w.faults = []int{0, 4, 12, 40}[ch.IntN(4)]
	w.stores = []*store{newStore("k", nil, w.fatalf)}
	for i := 1; i < n; i++ {
		name := fmt.Sprintf("p%d", i)
		w.cfg.Participants = append(w.cfg.Participants, name)
		w.stores = append(w.stores, newStore(name, w.stores[0], w.fatalf))
	}
	for _, s := range w.stores {
		s.fault = w.fault
		s.maxOpen = w.cfg.MaxInFlight
	}
	return w
}

func (w *world) fatalf(format string, args ...any) {
	w.tb.Helper()
	var b strings.Builder
	for _, s := range w.stores {
		b.WriteString("\n  " + s.String())
	}
	b.WriteString("\nlast events:")
	for _, e := range w.trace {
		b.WriteString("\n  " + e)
	}
	w.tb.Fatalf("%s: %s\nconfig %+v, tasks %v, faults 1/%d; stores:%s", w.name, fmt.Sprintf(format, args...), w.cfg, w.tasks, w.faults, b.String())
}

func (w *world) tracef(format string, args ...any) {
	const keep = 60
	if len(w.trace) == keep {
		w.trace = slices.Delete(w.trace, 0, 1)
	}
	w.trace = append(w.trace, fmt.Sprintf("%5d %8v ", w.stats.steps, w.now.Sub(t0))+fmt.Sprintf(format, args...))
}

// fault decides how a store's next call fails.
func (w *world) fault(string, Epoch) faultMode {
	if w.faults == 0 || w.ch.IntN(w.faults) != 0 {
		return noFault
	}
	return faultMode(1 + w.ch.IntN(2))
}

// start starts a new incarnation: a new Machine, whose recovery begins.
func (w *world) start() *incarnation {
	w.inc++
	m, err := NewMachine(w.cfg)
	if err != nil {
		w.fatalf("%v", err)
	}
	in := &incarnation{id: w.inc, m: m, queues: make([][]Action, len(w.stores)+1),
		needsAcks: map[Epoch]bool{}, begun: map[Epoch]int{}, prepared: map[Epoch]int{}, taskQ: map[checkpoint.TaskID][]Epoch{}, ackedBy: map[Epoch]map[checkpoint.TaskID]bool{}, barrier: map[Epoch]int{}}
	for i, s := range w.stores {
		h := &handle{s: s, inc: w.inc}
		if i == decisionLog {
			h.span = func(e Epoch) [2]int { return [2]int{in.barrier[e-1], in.barrier[e]} }
		}
		in.handles = append(in.handles, h)
	}
	w.tracef("inc %d starts", in.id)
	w.checkEmitted(in, "new", 0, false, false)
	return in
}

// step feeds one message to in's Machine and checks what it emitted, read
// from the outbox (white box, so that the checks hold however the caller
// batches Readies), then mostly takes the Ready. mustFail: a fenced
// outcome, which must fail the Machine for good.
func (w *world) step(in *incarnation, msg Msg, mustFail bool) {
	w.tb.Helper()
	m := in.m
	before, wasFailed := len(m.out.acts), m.State() == StateFailed
	if err := m.Step(msg); err != nil {
		w.fatalf("inc %d: %v refused: %v", in.id, msg, err)
	}
	w.checkEmitted(in, msg.String(), before, wasFailed, mustFail)
	if w.ch.IntN(4) != 0 {
		w.pump(in)
	}
}

func (w *world) checkEmitted(in *incarnation, input string, before int, wasFailed, mustFail bool) {
	w.tb.Helper()
	m := in.m
	acts := m.out.acts[before:]
	if len(acts) > 0 {
		w.tracef("inc %d: %s -> %s", in.id, input, Ready{Actions: acts})
	}
	for k, a := range acts {
		if (wasFailed || in.failed != nil) && a.Kind != ActCompleted {
			w.fatalf("inc %d: %v after Fail", in.id, a)
		}
		if in.fencedSeen && a.Kind == ActCommit {
			w.fatalf("inc %d: %v after a fenced outcome", in.id, a)
		}
		switch a.Kind {
		case ActResume:
			// An instance fenced after it recovered every participant can
			// still read the decision log and resume: harmless, as its
			// first call is refused, but the stores belong to its
			// successor and need not look settled to it.
			if w.owns(in) {
				w.checkSettled(in, a.Epoch)
			} else {
				w.stats.staleResumes++
			}
			in.resumed, in.restored = true, a.Epoch
			in.lastTrigger, in.lastCompleted, in.lastDone = a.Epoch, a.Epoch, a.Epoch
			in.sourcePos = w.stores[0].offsets[a.Epoch]
			in.barrier[a.Epoch] = in.sourcePos
			w.stats.resumes++
		case ActTrigger:
			w.checkTrigger(in, a.Epoch)
		case ActBegin:
			if in.final != 0 && a.Epoch > in.final {
				w.fatalf("inc %d: %v after the final checkpoint %d", in.id, a, in.final)
			}
			if a.Epoch > in.lastDone+Epoch(w.cfg.MaxInFlight) {
				w.fatalf("inc %d: %v with epoch %d done, max in flight %d", in.id, a, in.lastDone, w.cfg.MaxInFlight)
			}
		case ActCommit:
			if a.Participant == w.stores[0].name && m.State() != StateRecovering {
				w.checkDecision(in, a.Epoch)
			}
		case ActCompleted:
			if at, ok := w.stores[0].committedAttempt(a.Epoch); !ok || at != in.id {
				w.fatalf("inc %d: completed %d, but the decision log holds %s", in.id, a.Epoch, w.stores[0])
			}
			if a.Epoch != in.lastCompleted+1 {
				w.fatalf("inc %d: completed %d after %d", in.id, a.Epoch, in.lastCompleted)
			}
			if in.failed != nil || wasFailed {
				w.stats.lateDecisions++
			}
			in.lastCompleted, in.deciding = a.Epoch, 0
			in.lastEndAt, in.ended = m.now, true
			w.stats.completed++
		case ActDone:
			if a.Epoch != in.lastDone+1 {
				w.fatalf("inc %d: done %d after %d", in.id, a.Epoch, in.lastDone)
			}
			in.lastDone = a.Epoch
			la, _ := w.stores[0].committedAttempt(a.Epoch)
			for _, s := range w.stores {
				if at, ok := s.committedAttempt(a.Epoch); !ok || at != la {
					w.fatalf("inc %d: done %d, but %s", in.id, a.Epoch, s)
				}
			}
			if a.Epoch == in.final {
				w.stats.stopped++
				if m.State() != StateStopped {
					w.fatalf("inc %d: the final checkpoint %d is done, state %v", in.id, a.Epoch, m.State())
				}
			}
			w.stats.done++
		case ActFail:
			if k != len(acts)-1 {
				w.fatalf("inc %d: fail is not the last action of its message: %s", in.id, Ready{Actions: acts})
			}
			if in.deciding != 0 && a.Err.InDoubt != in.deciding {
				w.fatalf("inc %d: FailError.InDoubt = %d, the outstanding decision is %d", in.id, a.Err.InDoubt, in.deciding)
			}
			in.failed = a.Err
			key := a.Err.Reason.String()
			if a.Err.Call != 0 {
				key += "/" + a.Err.Call.String()
			}
			w.stats.fails[key]++
			if a.Err.Permanent {
				w.stats.permanent++
			}
		}
	}
	if mustFail && !wasFailed {
		if fe, ok := m.failure().(*FailError); !ok || !fe.Permanent {
			w.fatalf("inc %d: fenced outcome of %s did not fail permanently: %s", in.id, input, Ready{Actions: acts})
		}
	}
	if n := len(m.inFlight); n > w.cfg.MaxInFlight {
		w.fatalf("inc %d: %d epochs in flight, max %d", in.id, n, w.cfg.MaxInFlight)
	}
	if m.State() == StateStopped && len(m.inFlight) > 0 {
		w.fatalf("inc %d: stopped with %d epochs in flight", in.id, len(m.inFlight))
	}
	if m.running() {
		for _, ep := range m.inFlight {
			if ep.phase >= PhasePending && ep.phase < PhaseDeciding && !m.now.Before(ep.triggeredAt.Add(w.cfg.Timeout)) {
				w.fatalf("inc %d: checkpoint %d (%v) outlived its timeout: %v", in.id, ep.id, ep.phase, m.now.Sub(ep.triggeredAt))
			}
		}
	}
}

// checkTrigger: ids contiguous, the epoch begun everywhere, the schedule
// kept.
func (w *world) checkTrigger(in *incarnation, e Epoch) {
	m := in.m
	if e != in.lastTrigger+1 {
		w.fatalf("inc %d: trigger %d after %d: ids must be contiguous (restored %d)", in.id, e, in.lastTrigger, in.restored)
	}
	if in.begun[e] != len(w.stores) {
		w.fatalf("inc %d: trigger %d, but only %d of %d participants began it", in.id, e, in.begun[e], len(w.stores))
	}
	switch {
	case in.promise != 0:
		if e != in.promise {
			w.fatalf("inc %d: triggered %d before the promised %d", in.id, e, in.promise)
		}
		in.promise = 0
		w.stats.promised++
	case !in.started:
		w.fatalf("inc %d: periodic trigger %d before the task graph started", in.id, e)
	default:
		if m.now.Before(in.lastTrigAt.Add(w.cfg.Interval)) {
			w.fatalf("inc %d: periodic checkpoint %d %v after the previous trigger (interval %v)", in.id, e, m.now.Sub(in.lastTrigAt), w.cfg.Interval)
		}
		if in.ended && m.now.Before(in.lastEndAt.Add(w.cfg.MinPause)) {
			w.fatalf("inc %d: periodic checkpoint %d %v after the previous end (min pause %v)", in.id, e, m.now.Sub(in.lastEndAt), w.cfg.MinPause)
		}
		w.stats.periodic++
	}
	if e > in.lastCompleted+1 {
		w.stats.pipelined++
	}
	in.lastTrigger, in.lastTrigAt = e, m.now
	in.needsAcks[e] = in.started
	w.stats.triggers++
}

// checkDecision: the decision log is asked to commit e only when every
// task acked it, every participant prepared this attempt of it and e-1 is
// decided, one at a time.
func (w *world) checkDecision(in *incarnation, e Epoch) {
	if in.deciding != 0 {
		w.fatalf("inc %d: decision %d asked while %d is outstanding", in.id, e, in.deciding)
	}
	if e != in.lastCompleted+1 {
		w.fatalf("inc %d: decision %d asked, but the last completed is %d", in.id, e, in.lastCompleted)
	}
	if in.needsAcks[e] && len(in.ackedBy[e]) != len(w.tasks) {
		w.fatalf("inc %d: decision %d asked with acks from %v only", in.id, e, in.ackedBy[e])
	}
	if in.prepared[e] != len(w.stores) {
		w.fatalf("inc %d: decision %d asked, but only %d of %d participants prepared it", in.id, e, in.prepared[e], len(w.stores))
	}
	if w.owns(in) {
		for _, s := range w.stores {
			if s.prepared[e] != in.id {
				w.fatalf("inc %d: decision %d asked, but %s has not prepared it (%s)", in.id, e, s.name, s)
			}
		}
	}
	in.deciding = e
}

// pump takes in's Ready and acts on it as the engine does: inject the
// barriers, queue the calls, follow what completes. It advances at once,
// or leaves that for the next pump, so that messages stepped between Ready
// and Advance are exercised: their actions must come with the next Ready.
func (w *world) pump(in *incarnation) {
	m := in.m
	if in.unadvanced {
		m.Advance()
		in.unadvanced = false
	}
	if !m.HasReady() {
		return
	}
	rd := m.Ready()
	for _, a := range rd.Actions {
		if a.Kind == ActTrigger { // inject barrier N
			in.barrier[a.Epoch] = in.sourcePos
			if in.needsAcks[a.Epoch] {
				in.ackedBy[a.Epoch] = map[checkpoint.TaskID]bool{}
				for _, t := range w.tasks {
					in.taskQ[t] = append(in.taskQ[t], a.Epoch)
				}
			} else {
				w.stats.imports++
			}
		}
		if a.Calls() {
			i := slices.Index(m.names, a.Participant)
			if a.Kind == ActReadDecision {
				i = len(w.stores)
			}
			in.queues[i] = append(in.queues[i], a)
		}
	}
	if w.ch.IntN(3) == 0 {
		in.unadvanced = true
	} else {
		m.Advance()
	}
}

// owns reports whether in still owns every participant.
func (w *world) owns(in *incarnation) bool {
	return !slices.ContainsFunc(w.stores, func(s *store) bool { return s.owner != in.id })
}

// checkSettled: at Resume(d) every participant committed exactly the
// decision log's epochs, which are 1..d, and holds nothing in doubt.
func (w *world) checkSettled(in *incarnation, d Epoch) {
	log := w.stores[0]
	if log.lastCommitted() != d {
		w.fatalf("inc %d: resume %d, but the decision log's last commit is %d", in.id, d, log.lastCommitted())
	}
	for _, s := range w.stores {
		if len(s.prepared) > 0 {
			w.fatalf("inc %d: resume %d with epochs in doubt at %s", in.id, d, s)
		}
		if !slices.Equal(s.committed, log.committed) {
			w.fatalf("inc %d: resume %d, but %s differs from %s", in.id, d, s, log)
		}
	}
}

// execute makes the oldest queued call of lane i for in, feeds the outcome
// back and checks what follows.
func (w *world) execute(in *incarnation, i int) {
	a := in.queues[i][0]
	in.queues[i] = in.queues[i][1:]
	if a.Kind == ActReadDecision {
		i = decisionLog
	}
	if in != w.cur {
		w.stats.zombieCalls++
	}
	ctx := context.Background()
	h := in.handles[i]
	var err error
	msg := Msg{}
	switch a.Kind {
	case ActRecover:
		var inDoubt []Epoch
		inDoubt, err = h.Recover(ctx)
		msg = Outcome(a, err)
		msg.InDoubt = inDoubt
	case ActReadDecision:
		var last *checkpoint.Record
		last, err = h.LastDecided(ctx)
		msg = Outcome(a, err)
		if last != nil {
			msg.Epoch = last.ID
		}
	case ActBegin:
		if err = h.Begin(ctx, a.Epoch); err == nil {
			in.begun[a.Epoch]++
		}
	case ActPrepare:
		if err = h.Prepare(ctx, a.Epoch); err == nil {
			in.prepared[a.Epoch]++
		}
	case ActCommit:
		if in.m.State() == StateRecovering {
			w.stats.settleCommits++
		}
		err = h.Commit(ctx, a.Epoch)
	case ActAbort:
		err = h.Abort(ctx, a.Epoch)
	default:
		w.fatalf("queued %v", a)
	}
	if msg.Type == 0 {
		msg = Outcome(a, err)
	}
	msg.Now = w.now
	if a.Kind == ActCommit && a.Participant == w.stores[0].name && err != nil {
		in.deciding = 0 // failed: in doubt, and no longer outstanding
	}
	fenced := errors.Is(err, ErrFenced)
	// Only the fenced outcomes that count must end the instance: an
	// abort after Fail is best effort, and anything after Fail changes
	// nothing.
	mustFail := fenced && in.failed == nil && in.m.State() != StateFailed && !(a.Kind == ActAbort && in.m.State() != StateRecovering)
	if fenced {
		in.fencedSeen = true
	}
	w.step(in, msg, mustFail)
	w.checkStores()
}

// checkStores checks what every participant holds against the decision
// log, after every call.
func (w *world) checkStores() {
	log := w.stores[0]
	for k, c := range log.committed {
		if c.epoch != Epoch(k+1) {
			w.fatalf("decision log commits are not 1, 2, 3...: %s", log)
		}
	}
	for _, s := range w.stores[1:] {
		for k, c := range s.committed {
			if k > 0 && c.epoch <= s.committed[k-1].epoch {
				w.fatalf("%s committed out of order", s)
			}
			if a, ok := log.committedAttempt(c.epoch); !ok || a != c.attempt {
				w.fatalf("%s committed epoch %d attempt %d, which the decision log did not decide", s.name, c.epoch, c.attempt)
			}
		}
	}
	if log.outputEnd > w.input {
		w.fatalf("committed output reaches record %d, the input has %d", log.outputEnd, w.input)
	}
}

// tick moves the clock: mostly a fraction of the interval, now and then
// past the timeout.
func (w *world) tick(in *incarnation) {
	dt := time.Duration(w.ch.IntN(20)) * w.cfg.Interval / 10
	if w.ch.IntN(40) == 0 {
		dt = w.cfg.Timeout + time.Duration(w.ch.IntN(3))*time.Second
	}
	w.now = w.now.Add(dt)
	w.step(in, Msg{Type: MsgTick, Now: w.now}, false)
}

// ack: task t acks a barrier it holds, usually its oldest.
func (w *world) ack(in *incarnation, t checkpoint.TaskID) {
	q := in.taskQ[t]
	if len(q) == 0 {
		return
	}
	i := 0
	if w.ch.IntN(4) == 0 {
		i = w.ch.IntN(len(q))
	}
	e := q[i]
	in.taskQ[t] = slices.Delete(q, i, i+1)
	msg := Msg{Type: MsgAck, Task: t, Epoch: e}
	if in.m.State() == StateFailed {
		if err := in.m.Step(msg); !errors.Is(err, ErrFailed) {
			w.fatalf("inc %d: %v after the failure: %v, want ErrFailed", in.id, msg, err)
		}
		return
	}
	in.ackedBy[e][t] = true
	w.step(in, msg, false)
}

func (w *world) decline(in *incarnation) {
	t := w.tasks[w.ch.IntN(len(w.tasks))]
	q := in.taskQ[t]
	if len(q) == 0 || in.m.State() == StateFailed {
		return
	}
	e := q[w.ch.IntN(len(q))]
	if ep := in.m.find(e); ep == nil || ep.phase >= PhaseDeciding {
		msg := Msg{Type: MsgDecline, Task: t, Epoch: e, Err: errBoom}
		before := dump(in.m)
		if err := in.m.Step(msg); !errors.Is(err, ErrStale) || dump(in.m) != before {
			w.fatalf("inc %d: %v too late: %v", in.id, msg, err)
		}
		return
	}
	w.stats.declines++
	w.step(in, Msg{Type: MsgDecline, Task: t, Epoch: e, Err: errBoom}, false)
}

// promise asks for a checkpoint now (a savepoint) or a final one (a stop)
// and checks the id promised.
func (w *world) promise(in *incarnation, typ MsgType) {
	m := in.m
	state := m.State()
	msg := Msg{Type: typ, Now: w.now}
	switch state {
	case StateRecovering, StateFailed, StateStopped:
		if typ == MsgStop && state == StateStopped {
			break
		}
		before := dump(m)
		if err := m.Step(msg); err == nil || dump(m) != before {
			w.fatalf("inc %d: %v in state %v: %v", in.id, msg, state, err)
		}
		return
	}
	want := in.final // while stopping, the final checkpoint serves
	if state == StateRunning {
		if in.promise == 0 {
			in.promise = in.lastTrigger + 1 // checkTrigger clears it once triggered
		}
		want = in.promise
	}
	w.step(in, msg, false)
	if p := m.Promised(); p != want {
		w.fatalf("inc %d: %v in state %v promised %d, want %d", in.id, msg, state, p, want)
	}
	if typ == MsgStop && state == StateRunning {
		in.final = want
		w.stats.stops++
	}
}

// bogus feeds in a message it must refuse, and checks that it changed
// nothing (nothing emitted either: the outbox is part of the state).
func (w *world) bogus(in *incarnation) {
	m := in.m
	queued := func(kind ActionKind, lane int) bool {
		return slices.ContainsFunc(in.queues[lane], func(a Action) bool { return a.Kind == kind }) ||
			slices.ContainsFunc(m.out.acts, func(a Action) bool { return a.Kind == kind })
	}
	i := w.ch.IntN(len(w.stores))
	p := w.stores[i].name
	const far = Epoch(1 << 40) // never opened, never in doubt
	var msg Msg
	switch w.ch.IntN(12) {
	case 0:
		msg = Msg{Type: MsgPrepared, Participant: "nobody", Epoch: 1}
	case 1:
		msg = Msg{Type: MsgCommitted, Participant: p, Epoch: far}
	case 2:
		msg = Msg{Type: MsgAck, Task: "ghost", Epoch: 1}
	case 3:
		msg = Msg{Type: MsgAck, Task: w.tasks[0], Epoch: far}
	case 4:
		msg = Msg{Type: MsgAborted, Participant: p, Epoch: far, Err: errBoom}
	case 5:
		if queued(ActReadDecision, len(w.stores)) {
			return
		}
		msg = Msg{Type: MsgDecisionRead, Participant: w.stores[0].name, Epoch: 3}
	case 6:
		if !in.started {
			return
		}
		msg = Msg{Type: MsgStart, Now: w.now, Tasks: w.tasks}
	case 7:
		if queued(ActRecover, i) {
			return
		}
		msg = Msg{Type: MsgRecovered, Participant: p}
	case 8:
		msg = Msg{Type: MsgDecline, Task: "ghost", Epoch: 1}
	case 9:
		msg = Msg{Type: MsgBegun, Participant: p, Epoch: far}
	case 10:
		msg = Msg{Type: MsgBegun, Participant: p, Epoch: far, Err: errBoom}
	case 11:
		msg = Msg{Type: MsgType(99), Now: w.now}
	}
	w.stats.bogus++
	before := dump(m)
	if err := m.Step(msg); err == nil {
		w.fatalf("inc %d: bogus %v accepted", in.id, msg)
	}
	if after := dump(m); after != before {
		w.fatalf("inc %d: refused %v changed the state:\nbefore %s\nafter  %s", in.id, msg, before, after)
	}
}

// move makes one random move.
func (w *world) move() {
	w.stats.steps++
	in := w.cur
	// Mostly the current instance acts; sometimes the zombie.
	if w.zombie != nil && w.ch.IntN(4) == 0 {
		in = w.zombie
	}
	m := in.m
	switch r := w.ch.IntN(1000); {
	case r < 100:
		w.tick(in)
	case r < 140: // input arrives and the sources read it
		n := 1 + w.ch.IntN(10)
		w.input += n
		if in.started && m.running() {
			in.sourcePos = w.input
		}
	case r < 300:
		w.ack(in, w.tasks[w.ch.IntN(len(w.tasks))])
	case r < 310:
		w.decline(in)
	case r < 340: // the task graph starts, after recovery (and maybe an import)
		if in.resumed && !in.started && m.running() && in.promise == 0 {
			in.started = true
			w.step(in, Msg{Type: MsgStart, Now: w.now, Tasks: w.tasks}, false)
		}
	case r < 350: // a savepoint; before the task graph runs, an import
		if m.State() == StateRunning && (in.started || in.promise == 0) {
			w.promise(in, MsgTriggerNow)
		}
	case r < 354:
		if in.started {
			w.promise(in, MsgStop)
		}
	case r < 358: // the caller gives up: the task graph stopped
		if m.State() != StateFailed && m.State() != StateStopped {
			w.stats.aborts++
			w.step(in, Msg{Type: MsgAbort, Now: w.now, Err: errBoom}, false)
		}
	case r < 380: // the failed or stopped instance restarts, maybe before making every abort
		if in == w.cur && (in.failed != nil || m.State() == StateStopped) {
			w.restart()
		}
	case r < 390: // kill -9
		w.stats.crashes++
		w.tracef("inc %d crashes", w.cur.id)
		w.cur = w.start()
	case r < 394: // a second instance takes over; the first lives on
		w.stats.takeovers++
		w.tracef("inc %d takes over from inc %d", w.inc+1, w.cur.id)
		w.zombie = w.cur
		w.cur = w.start()
	case r < 398: // a phantom instance fences one participant and dies
		s := w.stores[w.ch.IntN(len(w.stores))]
		w.inc++
		s.owner = w.inc
		w.stats.phantoms++
		w.tracef("phantom inc %d fences %s", w.inc, s.name)
	case r < 430:
		w.bogus(in)
	default: // a call completes
		if !slices.ContainsFunc(in.queues, func(q []Action) bool { return len(q) > 0 }) {
			w.pump(in) // the caller takes the Ready it left
		}
		var ready []int
		for i, q := range in.queues {
			if len(q) > 0 {
				ready = append(ready, i)
			}
		}
		if len(ready) == 0 {
			if in == w.cur && (in.failed != nil || m.State() == StateStopped) {
				w.restart()
			}
			return
		}
		w.execute(in, ready[w.ch.IntN(len(ready))])
	}
}

// restart replaces a failed or stopped current instance, as the engine's
// restart loop (or, when fenced, whoever runs the job next) does.
func (w *world) restart() {
	w.tracef("inc %d restarts after: %v (state %v)", w.cur.id, w.cur.failed, w.cur.m.State())
	w.cur = w.start()
}

// finish ends a run fault-free: the zombie dies, a last recovery runs,
// three checkpoints must commit everywhere, and the job stops.
func (w *world) finish() {
	w.faults = 0
	w.zombie = nil
	w.cur = w.start()
	in := w.cur
	drain := func(what string, until func() bool) {
		for n := 0; !until(); n++ {
			if n > 1000 {
				w.fatalf("inc %d: no progress towards %s (state %v)", in.id, what, in.m.State())
			}
			if in.failed != nil {
				w.fatalf("inc %d: fault-free run failed: %v", in.id, in.failed)
			}
			acked := false
			for _, t := range w.tasks {
				for len(in.taskQ[t]) > 0 {
					w.ack(in, t)
					acked = true
				}
			}
			if i := slices.IndexFunc(in.queues, func(q []Action) bool { return len(q) > 0 }); i >= 0 {
				w.execute(in, i)
			} else if in.m.HasReady() || in.unadvanced {
				w.pump(in)
			} else if !acked { // nothing to do but wait for the schedule
				w.now = w.now.Add(w.cfg.Interval / 2)
				w.step(in, Msg{Type: MsgTick, Now: w.now}, false)
			}
		}
	}
	drain("recovery", func() bool { return in.resumed && in.m.Open() != 0 })
	in.started = true
	w.step(in, Msg{Type: MsgStart, Now: w.now, Tasks: w.tasks}, false)
	start := in.m.LastCompleted()
	for e := start + 1; e <= start+3; e++ {
		w.input += 5
		in.sourcePos = w.input
		drain(fmt.Sprintf("checkpoint %d", e), func() bool { return in.lastDone >= e })
	}
	w.promise(in, MsgStop)
	drain("the stop", func() bool {
		return in.m.State() == StateStopped && !in.m.HasReady() && !slices.ContainsFunc(in.queues, func(q []Action) bool { return len(q) > 0 })
	})
	w.checkSettled(in, in.lastDone)
	for _, s := range w.stores {
		if len(s.begun) > 0 {
			w.fatalf("stopped, but %s holds epochs %v begun", s.name, s.begun)
		}
	}
	if end := w.stores[0].outputEnd; end != in.sourcePos {
		w.fatalf("stopped with the output at record %d, the input read to %d", end, in.sourcePos)
	}
}

func (w *world) run(steps int) {
	w.cur = w.start()
	for range steps {
		w.move()
	}
	w.finish()
}

func newStats() *simStats { return &simStats{fails: map[string]int{}} }

func TestSimulation(t *testing.T) {
	seeds := 3000
	if testing.Short() {
		seeds = 600
	}
	stats := newStats()
	for seed := range uint64(seeds) {
		w := newWorld(t, fmt.Sprintf("seed %d", seed), rand.New(rand.NewPCG(seed, 0x2fa5e)), stats)
		w.run(300)
	}
	t.Logf("%d seeds: %+v", seeds, *stats)
	// A simulation that never reaches the interesting cases proves nothing.
	for _, k := range []string{
		"job_failed/recover", "job_failed/read_decision", "declined/begin", "declined/prepare",
		"commit_failed/commit", "job_failed/abort", "job_failed", "timeout", "declined",
	} {
		if stats.fails[k] < seeds/100 {
			t.Errorf("only %d failures %s in %d seeds: the schedule does not exercise them", stats.fails[k], k, seeds)
		}
	}
	for name, n := range map[string]int{
		"periodic triggers": stats.periodic, "promised triggers": stats.promised, "pipelined triggers": stats.pipelined,
		"imports": stats.imports, "stops": stats.stops, "stops done": stats.stopped, "permanent failures": stats.permanent,
		"in-doubt commits by recovery": stats.settleCommits, "zombie calls": stats.zombieCalls,
		"decisions that landed after the failure": stats.lateDecisions, "bogus messages": stats.bogus,
	} {
		if n < seeds/100 {
			t.Errorf("only %d %s in %d seeds: the schedule does not exercise them", n, name, seeds)
		}
	}
	if stats.done < seeds*3 {
		t.Errorf("only %d epochs done in %d seeds", stats.done, seeds)
	}
}
