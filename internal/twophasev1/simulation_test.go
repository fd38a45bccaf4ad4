package twophasev1

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// The simulation runs the protocol the way the runtime will, against
// in-memory participants whose stores survive crashes, under seeded random
// schedules: epochs begin and are decided at random moments, participant
// calls complete in random interleavings (in order per participant), fail
// before or after taking effect, the job crashes (kill -9) at any step,
// including during recovery, a second instance takes over while the first
// still runs (a zombie that keeps calling until it is fenced), and a
// phantom instance fences a participant. The stores check every call
// (mem_test.go); after every step the simulation checks:
//
//   - a participant commits epoch e only after the decision log committed
//     the same attempt of e, and never aborts an epoch it committed;
//   - every participant commits in epoch order, the decision log with no gap;
//   - no Protocol has more than MaxInFlight epochs in flight;
//   - after a fenced outcome, a Protocol fails permanently and emits no
//     Commit again; after Fail it emits nothing but Decided;
//   - at every Resume (recovery done) of an instance that still owns every
//     participant, each participant holds nothing in doubt and has
//     committed exactly what the decision log committed;
//   - each input a Protocol refuses changes nothing.
//
// Each run ends fault-free: a last recovery, then a few epochs that must
// commit everywhere.

// chooser supplies the simulation's choices: a seeded *rand.Rand in
// TestSimulation, fuzz bytes in FuzzProtocol.
type chooser interface{ IntN(n int) int }

type simStats struct {
	steps, barriers, opened, decided, done, resumes int
	pipelined                                       int // barriers while another epoch was in flight
	crashes, takeovers, phantoms                    int
	bogus, requestedAborts, openAborts              int
	fails                                           map[Stage]int
	permanent                                       int
	settleCommit                                    int // in-doubt epochs committed by recovery
	zombieCalls                                     int
	staleResumes                                    int // resumes of an instance fenced meanwhile
}

type world struct {
	tb    testing.TB
	name  string // "seed 42": what replays a failure
	ch    chooser
	stats *simStats

	stores []*store // [0] is the decision log
	max    int
	faults int // a call fails 1 in faults (0: never)
	inc    int // the last incarnation number handed out
	cur    *incarnation
	zombie *incarnation
	trace  []string
}

// incarnation is one instance of the job: a Protocol and the calls it
// emitted that were not made yet, per participant, in emission order.
type incarnation struct {
	id      int
	m       *Protocol
	handles []*handle
	// queues holds the calls emitted and not made yet, by participant,
	// plus a last lane for ReadDecision: the checkpoint topic is read by a
	// consumer of its own, not through the decision log's producer, so
	// nothing orders the read after the decision log's other calls but
	// the Protocol itself.
	queues [][]Action
	// failed is set once a Ready held Fail; fencedSeen once an outcome
	// reported ErrFenced.
	failed      *FailError
	fencedSeen  bool
	resumed     bool
	unadvanced  bool  // the last Ready was taken, Advance not called yet
	lastDecided Epoch // newest Decided seen
	lastDone    Epoch
}

func newWorld(tb testing.TB, name string, ch chooser, stats *simStats) *world {
	w := &world{tb: tb, name: name, ch: ch, stats: stats}
	n := 1 + ch.IntN(4) // the decision log and 0..3 others
	w.max = 1 + ch.IntN(3)
	w.faults = []int{0, 4, 12, 40}[ch.IntN(4)]
	w.stores = []*store{newStore("k", nil, w.fatalf)}
	for i := 1; i < n; i++ {
		w.stores = append(w.stores, newStore(fmt.Sprintf("p%d", i), w.stores[0], w.fatalf))
	}
	for _, s := range w.stores {
		s.fault = w.fault
		s.maxOpen = w.max
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
	w.tb.Fatalf("%s: %s\nparticipants %d, max in flight %d, faults 1/%d; stores:%s", w.name, fmt.Sprintf(format, args...), len(w.stores), w.max, w.faults, b.String())
}

func (w *world) tracef(format string, args ...any) {
	const keep = 60
	if len(w.trace) == keep {
		w.trace = slices.Delete(w.trace, 0, 1)
	}
	w.trace = append(w.trace, fmt.Sprintf("%5d ", w.stats.steps)+fmt.Sprintf(format, args...))
}

// fault decides how a store's next call fails.
func (w *world) fault(op string, e Epoch) faultMode {
	if w.faults == 0 || w.ch.IntN(w.faults) != 0 {
		return noFault
	}
	return faultMode(1 + w.ch.IntN(2))
}

// start starts a new incarnation: a new Protocol, starting recovery.
func (w *world) start() *incarnation {
	w.inc++
	names := make([]string, 0, len(w.stores)-1)
	for _, s := range w.stores[1:] {
		names = append(names, s.name)
	}
	m, err := NewProtocol(Config{DecisionLog: w.stores[0].name, Participants: names, MaxInFlight: w.max})
	if err != nil {
		w.fatalf("%v", err)
	}
	in := &incarnation{id: w.inc, m: m, queues: make([][]Action, len(w.stores)+1)}
	for _, s := range w.stores {
		in.handles = append(in.handles, &handle{s: s, inc: w.inc})
	}
	w.tracef("inc %d starts", in.id)
	w.feed(in, "start", m.Start, false)
	return in
}

// feed makes one input to in's Protocol, checks what it emitted (read from
// the outbox, white box, so the checks hold however the caller batches
// Readies) and then, mostly, pumps the Ready; sometimes it leaves the
// actions in the outbox to be batched with the next input's. mustFail: the
// input is a fenced outcome that must fail the Protocol for good.
func (w *world) feed(in *incarnation, input string, f func() error, mustFail bool) {
	w.tb.Helper()
	m := in.m
	before := len(m.out.acts)
	wasFailed := m.State() == StateFailed
	if err := f(); err != nil {
		w.fatalf("inc %d: %s refused: %v", in.id, input, err)
	}
	acts := m.out.acts[before:]
	if len(acts) > 0 {
		w.tracef("inc %d: %s -> %s", in.id, input, brief(acts))
	}
	for k, a := range acts {
		if wasFailed && a.Kind != ActDecided {
			w.fatalf("inc %d: %v after Fail", in.id, a)
		}
		if in.fencedSeen && a.Kind == ActCommit {
			w.fatalf("inc %d: %v after a fenced outcome", in.id, a)
		}
		switch a.Kind {
		case ActResume:
			// An instance fenced after it recovered every participant can
			// still read the decision log and resume: harmless, as its
			// first call will be refused, but the stores belong to its
			// successor and need not look settled to it.
			if w.owns(in) {
				w.checkSettled(in, a.Epoch)
			} else {
				w.stats.staleResumes++
			}
		case ActFail:
			if k != len(acts)-1 {
				w.fatalf("inc %d: fail is not the last action of its input: %s", in.id, brief(acts))
			}
		}
	}
	if mustFail && !wasFailed {
		if fe, ok := m.Err().(*FailError); !ok || !fe.Permanent {
			w.fatalf("inc %d: fenced outcome of %s did not fail permanently: %s", in.id, input, brief(acts))
		}
	}
	if n := len(m.InFlight()); n > w.max {
		w.fatalf("inc %d: %d epochs in flight, max %d", in.id, n, w.max)
	}
	if w.ch.IntN(4) != 0 {
		w.pump(in)
	}
}

// pump takes in's Ready, as the runtime does, and queues its calls. It
// advances at once, or leaves that for the next pump, so that inputs fed
// between Ready and Advance are exercised: their actions must come with
// the next Ready.
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
		if in.failed != nil && a.Kind != ActDecided {
			w.fatalf("inc %d: %v after Fail in its Ready: %s", in.id, a, rd)
		}
		switch a.Kind {
		case ActCommit:
			if a.Participant != w.stores[0].name {
				if _, ok := w.stores[0].committedAttempt(a.Epoch); !ok {
					w.fatalf("inc %d: %v before the decision log committed epoch %d", in.id, a, a.Epoch)
				}
			}
		case ActDecided:
			if _, ok := w.stores[0].committedAttempt(a.Epoch); !ok {
				w.fatalf("inc %d: decided %d, but the decision log does not hold it", in.id, a.Epoch)
			}
			if in.lastDecided != 0 && a.Epoch != in.lastDecided+1 {
				w.fatalf("inc %d: decided %d after %d", in.id, a.Epoch, in.lastDecided)
			}
			in.lastDecided = a.Epoch
			w.stats.decided++
		case ActDone:
			if in.lastDone != 0 && a.Epoch != in.lastDone+1 {
				w.fatalf("inc %d: done %d after %d", in.id, a.Epoch, in.lastDone)
			}
			in.lastDone = a.Epoch
			la, _ := w.stores[0].committedAttempt(a.Epoch)
			for _, s := range w.stores {
				if at, ok := s.committedAttempt(a.Epoch); !ok || at != la {
					w.fatalf("inc %d: done %d, but %s", in.id, a.Epoch, s)
				}
			}
			w.stats.done++
		case ActBegin:
			if a.Epoch > in.lastDone+Epoch(w.max) {
				w.fatalf("inc %d: %v with epoch %d done, max in flight %d", in.id, a, in.lastDone, w.max)
			}
			w.stats.opened++
		case ActResume:
			in.resumed = true
			in.lastDecided, in.lastDone = a.Epoch, a.Epoch
			w.stats.resumes++
		case ActFail:
			in.failed = a.Err
			w.stats.fails[a.Err.Stage]++
			if a.Err.Permanent {
				w.stats.permanent++
			}
		}
		if a.Calls() {
			i := slices.Index(in.m.names, a.Participant)
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

// checkSettled: at Resume(d) every participant committed exactly the decision
// log's epochs, which are 1..d, and holds nothing in doubt.
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

// execute makes the oldest queued call of participant i for in, feeds the
// outcome back and checks what follows.
func (w *world) execute(in *incarnation, i int) {
	a := in.queues[i][0]
	in.queues[i] = in.queues[i][1:]
	if a.Kind == ActReadDecision {
		i = 0
	}
	if in != w.cur {
		w.stats.zombieCalls++
	}
	ctx := context.Background()
	h := in.handles[i]
	m := in.m
	var perr error
	var f func() error
	switch a.Kind {
	case ActRecover:
		var inDoubt []Epoch
		inDoubt, perr = h.Recover(ctx)
		if perr != nil {
			f = func() error { return m.RecoverFailed(a.Participant, perr) }
		} else {
			f = func() error { return m.Recovered(a.Participant, inDoubt) }
		}
	case ActReadDecision:
		var last Epoch
		last, perr = h.LastDecided(ctx)
		if perr != nil {
			f = func() error { return m.DecisionReadFailed(perr) }
		} else {
			f = func() error { return m.DecisionRead(last) }
		}
	case ActBegin:
		if perr = h.Begin(ctx, a.Epoch); perr != nil {
			f = func() error { return m.BeginFailed(a.Participant, a.Epoch, perr) }
		} else {
			f = func() error { return m.Begun(a.Participant, a.Epoch) }
		}
	case ActPrepare:
		if perr = h.Prepare(ctx, a.Epoch); perr != nil {
			f = func() error { return m.PrepareFailed(a.Participant, a.Epoch, perr) }
		} else {
			f = func() error { return m.Prepared(a.Participant, a.Epoch) }
		}
	case ActCommit:
		if m.State() == StateRecovering {
			w.stats.settleCommit++
		}
		if perr = h.Commit(ctx, a.Epoch); perr != nil {
			f = func() error { return m.CommitFailed(a.Participant, a.Epoch, perr) }
		} else {
			f = func() error { return m.Committed(a.Participant, a.Epoch) }
		}
	case ActAbort:
		if perr = h.Abort(ctx, a.Epoch); perr != nil {
			f = func() error { return m.AbortFailed(a.Participant, a.Epoch, perr) }
		} else {
			f = func() error { return m.Aborted(a.Participant, a.Epoch) }
		}
	default:
		w.fatalf("queued %v", a)
	}
	fenced := errors.Is(perr, ErrFenced)
	// Only the decision's and the settling calls' fenced outcomes must
	// end the instance: an abort made after Fail is best effort.
	mustFail := fenced && !(a.Kind == ActAbort && m.State() != StateRecovering)
	if fenced {
		in.fencedSeen = true
	}
	outcome := fmt.Sprintf("%v -> %v", a, perr)
	if perr == nil {
		outcome = fmt.Sprintf("%v ok", a)
	}
	running := m.State() == StateRunning
	w.feed(in, outcome, f, mustFail)
	if a.Kind == ActBegin && perr != nil && running {
		w.checkBeginFailure(in, a)
	}
	w.checkStores()
}

// checkBeginFailure: a failed Begin of epoch e fails the job at StageBegin
// and aborts e at every participant (the aborts are queued, or still in the
// outbox).
func (w *world) checkBeginFailure(in *incarnation, a Action) {
	fe, ok := in.m.Err().(*FailError)
	if !ok || fe.Stage != StageBegin || fe.Epoch != a.Epoch || fe.Participant != a.Participant {
		w.fatalf("inc %d: failed %v did not fail the job at stage begin: %v", in.id, a, in.m.Err())
	}
	for _, s := range w.stores {
		q := in.queues[slices.Index(in.m.names, s.name)]
		aborted := slices.ContainsFunc(q, func(b Action) bool { return b.Kind == ActAbort && b.Epoch == a.Epoch }) ||
			slices.ContainsFunc(in.m.out.acts, func(b Action) bool {
				return b.Kind == ActAbort && b.Epoch == a.Epoch && b.Participant == s.name
			})
		if !aborted {
			w.fatalf("inc %d: failed %v, but epoch %d is not aborted at %s", in.id, a, a.Epoch, s.name)
		}
	}
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
}

// bogus feeds cur an input it must refuse, and checks that it changed
// nothing (nothing emitted either: the outbox is part of the state).
func (w *world) bogus(in *incarnation) {
	m := in.m
	queued := func(kind ActionKind, i int) bool {
		return slices.ContainsFunc(in.queues[i], func(a Action) bool { return a.Kind == kind }) ||
			slices.ContainsFunc(m.out.acts, func(a Action) bool { return a.Kind == kind })
	}
	i := w.ch.IntN(len(w.stores))
	p := w.stores[i].name
	const far = Epoch(1 << 40) // never opened, never in doubt
	var (
		name string
		f    func() error
	)
	switch w.ch.IntN(11) {
	case 0:
		name, f = "prepared by nobody", func() error { return m.Prepared("nobody", 1) }
	case 1:
		name, f = "committed far ahead", func() error { return m.Committed(p, far) }
	case 2:
		name, f = "barrier far ahead", func() error { return m.Barrier(far) }
	case 3:
		name, f = "decide 0", func() error { return m.Decide(0) }
	case 4:
		name, f = "aborted far ahead", func() error { return m.AbortFailed(p, far, errBoom) }
	case 5:
		if queued(ActReadDecision, len(w.stores)) {
			return
		}
		name, f = "decision read unasked", func() error { return m.DecisionRead(3) }
	case 6:
		name, f = "start again", m.Start
	case 7:
		if queued(ActRecover, i) {
			return
		}
		name, f = "recovered unasked", func() error { return m.Recovered(p, nil) }
	case 8:
		name, f = "abort far ahead", func() error { return m.Abort(far, errBoom) }
	case 9:
		name, f = "begun far ahead", func() error { return m.Begun(p, far) }
	case 10:
		name, f = "begin failed far ahead", func() error { return m.BeginFailed(p, far, errBoom) }
	}
	w.stats.bogus++
	before := dump(m)
	if err := f(); err == nil {
		w.fatalf("inc %d: bogus input %q accepted", in.id, name)
	}
	if after := dump(m); after != before {
		w.fatalf("inc %d: refused input %q changed the state:\nbefore %s\nafter  %s", in.id, name, before, after)
	}
}

// step makes one random move.
func (w *world) step() {
	w.stats.steps++
	in := w.cur
	// Mostly the current instance acts; sometimes the zombie.
	if w.zombie != nil && w.ch.IntN(4) == 0 {
		in = w.zombie
	}
	switch r := w.ch.IntN(1000); {
	case r < 120: // barrier e reaches the participants
		m := in.m
		if m.State() != StateRunning {
			return
		}
		e := m.LastBarrier() + 1
		if e > m.LastOpened() {
			before := dump(m)
			if err := m.Barrier(e); !errors.Is(err, ErrTooManyInFlight) || dump(m) != before {
				w.fatalf("inc %d: barrier %d, not open (last opened %d): %v", in.id, e, m.LastOpened(), err)
			}
			return
		}
		w.stats.barriers++
		if slices.ContainsFunc(m.inFlight, func(ep *epochState) bool { return ep.phase != PhaseOpen }) {
			w.stats.pipelined++
		}
		w.feed(in, fmt.Sprintf("barrier %d", e), func() error { return m.Barrier(e) }, false)
	case r < 240: // the checkpoint coordinator hands out commit e
		m := in.m
		if m.State() != StateRunning {
			return
		}
		e := m.lastRequested + 1
		if e > m.LastBarrier() {
			return
		}
		w.feed(in, fmt.Sprintf("decide %d", e), func() error { return m.Decide(e) }, false)
	case r < 260: // the failed instance restarts before making every abort
		if in == w.cur && in.failed != nil {
			w.restart()
		}
	case r < 270: // kill -9
		w.stats.crashes++
		w.tracef("inc %d crashes", w.cur.id)
		w.cur = w.start()
	case r < 275: // a second instance takes over; the first lives on
		w.stats.takeovers++
		w.tracef("inc %d takes over from inc %d", w.inc+1, w.cur.id)
		w.zombie = w.cur
		w.cur = w.start()
	case r < 280: // a phantom instance fences one participant and dies
		s := w.stores[w.ch.IntN(len(w.stores))]
		w.inc++
		s.owner = w.inc
		w.stats.phantoms++
		w.tracef("phantom inc %d fences %s", w.inc, s.name)
	case r < 310:
		w.bogus(in)
	case r < 320: // the runtime aborts an epoch (timeout, decline, shutdown)
		m := in.m
		if m.State() != StateRunning || len(m.inFlight) == 0 {
			return
		}
		ep := m.inFlight[w.ch.IntN(len(m.inFlight))]
		if ep.phase == PhaseDeciding || ep.phase == PhaseCommitting {
			before := dump(m)
			if err := m.Abort(ep.epoch, errBoom); !errors.Is(err, ErrDecided) || dump(m) != before {
				w.fatalf("inc %d: abort of %v epoch %d: %v", in.id, ep.phase, ep.epoch, err)
			}
			return
		}
		w.stats.requestedAborts++
		if ep.phase == PhaseOpen {
			w.stats.openAborts++
		}
		e := ep.epoch
		w.feed(in, fmt.Sprintf("abort %d", e), func() error { return m.Abort(e, errBoom) }, false)
	default: // a call completes
		if !slices.ContainsFunc(in.queues, func(q []Action) bool { return len(q) > 0 }) {
			w.pump(in) // the runtime takes the Ready it left
		}
		var ready []int
		for i, q := range in.queues {
			if len(q) > 0 {
				ready = append(ready, i)
			}
		}
		if len(ready) == 0 {
			if in == w.cur && in.failed != nil {
				w.restart()
			}
			return
		}
		w.execute(in, ready[w.ch.IntN(len(ready))])
	}
}

// restart replaces a failed current instance, as the runtime's restart
// loop (or, when fenced, whoever runs the job next) does.
func (w *world) restart() {
	w.tracef("inc %d restarts after: %v", w.cur.id, w.cur.failed)
	w.cur = w.start()
}

// finish ends a run fault-free: the zombie dies, a last recovery runs, and
// three epochs must commit everywhere.
func (w *world) finish() {
	w.faults = 0
	w.zombie = nil
	w.cur = w.start()
	in := w.cur
	drain := func(until func() bool) {
		for n := 0; !until(); n++ {
			if n > 1000 {
				w.fatalf("inc %d: no progress (state %v)", in.id, in.m.State())
			}
			i := slices.IndexFunc(in.queues, func(q []Action) bool { return len(q) > 0 })
			if i < 0 {
				w.pump(in)
				i = slices.IndexFunc(in.queues, func(q []Action) bool { return len(q) > 0 })
			}
			if i < 0 {
				w.fatalf("inc %d: nothing to do, state %v", in.id, in.m.State())
			}
			w.execute(in, i)
		}
	}
	drain(func() bool { return in.resumed })
	if in.failed != nil {
		w.fatalf("fault-free recovery failed: %v", in.failed)
	}
	start := in.m.LastDecided()
	for e := start + 1; e <= start+3; e++ {
		w.feed(in, fmt.Sprintf("barrier %d", e), func() error { return in.m.Barrier(e) }, false)
		w.feed(in, fmt.Sprintf("decide %d", e), func() error { return in.m.Decide(e) }, false)
		drain(func() bool { return in.lastDone == e })
	}
	w.checkSettled(in, start+3)
}

func (w *world) run(steps int) {
	w.cur = w.start()
	for range steps {
		w.step()
	}
	w.finish()
}

func newStats() *simStats { return &simStats{fails: map[Stage]int{}} }

func TestSimulation(t *testing.T) {
	seeds := 2000
	if testing.Short() {
		seeds = 300
	}
	stats := newStats()
	for seed := range uint64(seeds) {
		name := fmt.Sprintf("seed %d", seed)
		w := newWorld(t, name, rand.New(rand.NewPCG(seed, 0x2fa5e)), stats)
		w.run(250)
	}
	t.Logf("%d seeds, %d steps: %d begins, %d barriers (%d while another was in flight), %d decided, %d done, %d resumed (%d after being fenced), %d crashes, %d takeovers (%d zombie calls), %d phantom fences, %d bogus inputs, %d requested aborts (%d of an open epoch), %d in-doubt commits by recovery, fails %v (%d permanent)",
		seeds, stats.steps, stats.opened, stats.barriers, stats.pipelined, stats.decided, stats.done, stats.resumes, stats.staleResumes, stats.crashes, stats.takeovers, stats.zombieCalls,
		stats.phantoms, stats.bogus, stats.requestedAborts, stats.openAborts, stats.settleCommit, stats.fails, stats.permanent)
	// A simulation that never reaches the interesting cases proves nothing.
	for _, st := range []Stage{StageRecover, StageReadDecision, StageBegin, StagePrepare, StageDecide, StageCommit, StageAbort, StageRequested} {
		if stats.fails[st] == 0 {
			t.Errorf("no failure at stage %v was simulated", st)
		}
	}
	if stats.permanent == 0 || stats.settleCommit == 0 || stats.zombieCalls == 0 || stats.pipelined == 0 || stats.openAborts == 0 || stats.done < seeds*3 {
		t.Errorf("schedules too tame: %+v", *stats)
	}
}
