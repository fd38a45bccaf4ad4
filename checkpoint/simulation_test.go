package checkpoint

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// The simulation drives a Coordinator the way the runtime will, against
// fake tasks, a fake source and a fake Kafka (a commit log that survives
// crashes), under seeded random schedules: time steps, acks in random
// order, declines, slow and failed commits, savepoints, stops, kill -9 and
// restarts. After every input and every Ready it checks the coordinator's
// guarantees and, end to end, invariant 1 of DESIGN.md §3 for a
// pass-through job: the committed output is input records 0..n-1, each
// exactly once.

// chooser supplies the simulation's choices: a seeded *rand.Rand in
// TestSimulation, fuzz bytes in FuzzCoordinator.
type chooser interface{ IntN(n int) int }

type simTask struct {
	id    TaskID
	queue []ID // barriers received and not yet acked or declined, in order
}

type simStats struct {
	steps, triggers, commits, commitFails, declines, timeouts, fails, crashes, stops, savepoints, inDoubt int
}

type sim struct {
	tb    testing.TB
	name  string // "seed 42": what replays a failure
	ch    chooser
	cfg   CoordinatorConfig
	now   time.Time
	trace []traceEvent // recent events, printed on failure
	stats *simStats

	// The fake Kafka. It survives crashes.
	log       []ID // committed checkpoints, in commit order
	logOffset int  // source offset of the newest committed checkpoint
	outputLen int  // committed outputs are input records 0..outputLen-1

	// The incarnation: one Coordinator and its task graph.
	c            *Coordinator
	restored     ID
	sourcePos    int // next input record the source reads
	prevBarrier  int // position of the newest barrier (or the restore point)
	tasks        []*simTask
	barrier      map[ID]int // barrier N's position: epoch N ends here
	epochStart   map[ID]int
	ackedBy      map[ID]map[TaskID]bool
	live         map[ID]bool // triggered and injected, not completed or aborted
	lastTrigger  ID
	lastTrigAt   time.Time
	lastEndAt    time.Time
	ended        bool
	lastComplete ID
	commitOut    ID // commit handed out, outcome not reported yet
	fed          map[ID]bool
	failed       bool // Ready reported Fail
	expectFail   bool // an input must have failed the coordinator
	promised     ID   // id TriggerNow or Stop promised, not yet triggered
	beforeInput  ID   // LastTriggered before the current input
}

func (s *sim) fatalf(format string, args ...any) {
	s.tb.Helper()
	var trace strings.Builder
	for _, e := range s.trace {
		fmt.Fprintf(&trace, "\n  %8v %s", e.at, fmt.Sprintf(e.format, e.args...))
	}
	s.tb.Fatalf("%s: %s\nconfig: %+v\nlast events:%s", s.name, fmt.Sprintf(format, args...), s.cfg, trace.String())
}

// traceEvent is formatted only on failure: the fuzzer runs millions.
type traceEvent struct {
	at     time.Duration
	format string
	args   []any
}

func (s *sim) logf(format string, args ...any) {
	if len(s.trace) == 40 {
		s.trace = s.trace[1:]
	}
	s.trace = append(s.trace, traceEvent{s.now.Sub(t0), format, args})
}

func newSim(tb testing.TB, name string, ch chooser, stats *simStats) *sim {
	nTasks := 1 + ch.IntN(4)
	interval := time.Duration(1+ch.IntN(10)) * time.Second
	cfg := CoordinatorConfig{
		Interval:      interval,
		Timeout:       interval * time.Duration(2+ch.IntN(5)),
		MaxConcurrent: 1 + ch.IntN(3),
	}
	if ch.IntN(3) == 0 {
		cfg.MinPause = time.Duration(ch.IntN(20)) * interval / 10
	}
	for i := range nTasks {
		cfg.Tasks = append(cfg.Tasks, TaskID(fmt.Sprintf("task-%d", i)))
	}
	s := &sim{tb: tb, name: name, ch: ch, cfg: cfg, now: t0, stats: stats}
	s.restart("start")
	return s
}

// restart is recovery: the fake Kafka settles a commit left in doubt, and
// a new Coordinator starts from the newest committed checkpoint.
func (s *sim) restart(why string) {
	if s.commitOut != 0 {
		s.stats.inDoubt++
		if s.ch.IntN(2) == 0 {
			s.logf("in-doubt commit %d landed", s.commitOut)
			s.land(s.commitOut)
		} else {
			s.logf("in-doubt commit %d aborted by fencing", s.commitOut)
		}
	}
	var last ID
	if len(s.log) > 0 {
		last = s.log[len(s.log)-1]
	}
	cfg := s.cfg
	cfg.LastCompleted = last
	c, err := NewCoordinator(cfg, s.now)
	if err != nil {
		s.fatalf("NewCoordinator: %v", err)
	}
	s.logf("restart (%s) from checkpoint %d, offset %d", why, last, s.logOffset)
	s.c = c
	s.restored, s.lastTrigger, s.lastComplete = last, last, last
	s.sourcePos, s.prevBarrier = s.logOffset, s.logOffset
	s.tasks = nil
	for _, id := range cfg.Tasks {
		s.tasks = append(s.tasks, &simTask{id: id})
	}
	s.barrier, s.epochStart = map[ID]int{}, map[ID]int{}
	s.ackedBy, s.live, s.fed = map[ID]map[TaskID]bool{}, map[ID]bool{}, map[ID]bool{}
	s.lastTrigAt, s.lastEndAt, s.ended = s.now, time.Time{}, false
	s.commitOut, s.failed, s.expectFail, s.promised = 0, false, false, 0
}

// land commits transaction id in the fake Kafka: epoch id's outputs and
// checkpoint record id become visible together.
func (s *sim) land(id ID) {
	s.tb.Helper()
	if want := ID(len(s.log) + 1); id != want {
		s.fatalf("transaction %d committed, but the log holds %d checkpoints: want %d", id, len(s.log), want)
	}
	if start := s.epochStart[id]; start != s.outputLen {
		s.fatalf("exactly-once broken: epoch %d starts at record %d, committed output ends at %d", id, start, s.outputLen)
	}
	s.outputLen = s.barrier[id]
	s.log = append(s.log, id)
	s.logOffset = s.barrier[id]
	s.stats.commits++
}

func (s *sim) run(steps int, exhausted func() bool) {
	for range steps {
		if exhausted != nil && exhausted() {
			return
		}
		s.stats.steps++
		s.event()
		s.checkState()
		if s.ch.IntN(6) != 0 { // sometimes outputs wait for a later Ready
			s.drain()
		}
	}
}

func (s *sim) event() {
	s.tb.Helper()
	c, before := s.c, s.c.LastTriggered()
	s.beforeInput = before
	switch k := s.ch.IntN(100); {
	case k < 25:
		s.tick()
	case k < 30:
		s.sourcePos += 1 + s.ch.IntN(10)
	case k < 70:
		s.ack()
	case k < 72:
		s.decline()
	case k < 84:
		s.commitOutcome()
	case k < 86:
		s.triggerNow()
	case k < 87:
		if s.ch.IntN(3) == 0 {
			s.stop()
		}
	case k < 89:
		if s.ch.IntN(2) == 0 {
			s.stats.crashes++
			s.restart("kill -9")
		}
	case k < 95:
		s.bogus()
	default:
		switch {
		case s.failed && s.ch.IntN(3) == 0:
			s.restart("failed")
		case s.c.State() == StateStopped && s.ch.IntN(3) == 0:
			s.restart("redeploy after stop")
		}
	}
	if s.c != c {
		return // restarted: a new coordinator, nothing triggered yet
	}
	if after := s.c.LastTriggered(); after != before {
		// Checked here, at the input that triggered, because the time
		// of the trigger is the time of this input.
		if after != before+1 {
			s.fatalf("one input triggered %d..%d", before+1, after)
		}
		if s.promised == after {
			s.promised = 0
		} else {
			if s.promised != 0 {
				s.fatalf("triggered %d before the promised %d", after, s.promised)
			}
			if s.now.Before(s.lastTrigAt.Add(s.cfg.Interval)) {
				s.fatalf("periodic checkpoint %d at %v, %v after the previous trigger (interval %v)", after, s.now.Sub(t0), s.now.Sub(s.lastTrigAt), s.cfg.Interval)
			}
			if s.ended && s.now.Before(s.lastEndAt.Add(s.cfg.MinPause)) {
				s.fatalf("periodic checkpoint %d %v after the previous end (min pause %v)", after, s.now.Sub(s.lastEndAt), s.cfg.MinPause)
			}
		}
		s.lastTrigAt = s.now
	}
}

func (s *sim) tick() {
	dt := time.Duration(s.ch.IntN(20)) * s.cfg.Interval / 10
	if s.ch.IntN(40) == 0 {
		dt = s.cfg.Timeout + time.Duration(s.ch.IntN(3))*time.Second
	}
	inflight := s.c.InFlight()
	s.now = s.now.Add(dt)
	s.logf("tick +%v", dt)
	wasFailed := s.c.State() == StateFailed
	s.c.Tick(s.now)
	if wasFailed {
		return
	}
	var fe *FailError
	if errors.As(s.c.Err(), &fe) {
		if fe.Reason != ReasonTimeout {
			s.fatalf("Tick failed the job for %v", fe)
		}
		s.stats.timeouts++
		s.expectFail = true
		for _, f := range inflight {
			if f.ID == fe.Checkpoint && s.now.Sub(f.TriggeredAt) < s.cfg.Timeout {
				s.fatalf("checkpoint %d timed out %v after its trigger (timeout %v)", f.ID, s.now.Sub(f.TriggeredAt), s.cfg.Timeout)
			}
		}
		return
	}
	for _, f := range s.c.InFlight() {
		if f.ID != s.commitOut && s.now.Sub(f.TriggeredAt) >= s.cfg.Timeout {
			s.fatalf("checkpoint %d (%v) outlived its timeout: %v", f.ID, f.Phase, s.now.Sub(f.TriggeredAt))
		}
	}
}

// ack: a random task acks a barrier it holds, usually its oldest.
func (s *sim) ack() {
	t := s.tasks[s.ch.IntN(len(s.tasks))]
	if len(t.queue) == 0 {
		return
	}
	i := 0
	if s.ch.IntN(4) == 0 {
		i = s.ch.IntN(len(t.queue))
	}
	id := t.queue[i]
	t.queue = slices.Delete(t.queue, i, i+1)
	s.logf("ack %s %d", t.id, id)
	err := s.c.Ack(t.id, id)
	if s.c.State() == StateFailed {
		if !errors.Is(err, ErrFailed) {
			s.fatalf("ack %s %d after failure: %v, want ErrFailed", t.id, id, err)
		}
		return
	}
	if err != nil {
		s.fatalf("valid ack %s %d: %v", t.id, id, err)
	}
	s.ackedBy[id][t.id] = true
}

func (s *sim) decline() {
	t := s.tasks[s.ch.IntN(len(s.tasks))]
	if len(t.queue) == 0 {
		return
	}
	id := t.queue[s.ch.IntN(len(t.queue))]
	s.logf("decline %s %d", t.id, id)
	wasFailed := s.c.State() == StateFailed
	err := s.c.Decline(t.id, id, errors.New("simulated"))
	if wasFailed {
		if !errors.Is(err, ErrFailed) {
			s.fatalf("decline after failure: %v, want ErrFailed", err)
		}
		return
	}
	if err != nil {
		s.fatalf("valid decline %s %d: %v", t.id, id, err)
	}
	s.stats.declines++
	s.expectFail = true
}

// commitOutcome: the outstanding commit lands, fails, or takes longer.
func (s *sim) commitOutcome() {
	id := s.commitOut
	if id == 0 {
		return
	}
	switch k := s.ch.IntN(10); {
	case k == 0:
		s.logf("commit %d fails", id)
		wasFailed := s.c.State() == StateFailed
		if err := s.c.CommitFailed(id, errors.New("simulated broker error")); err != nil {
			s.fatalf("CommitFailed(%d): %v", id, err)
		}
		s.commitOut = 0
		s.stats.commitFails++
		if !wasFailed {
			s.expectFail = true
		}
	case k < 7:
		s.logf("commit %d lands", id)
		s.land(id)
		if err := s.c.Committed(id, s.now); err != nil {
			s.fatalf("Committed(%d): %v", id, err)
		}
		s.commitOut = 0
		s.fed[id] = true
		s.lastComplete = id
		s.lastEndAt, s.ended = s.now, true
	}
}

func (s *sim) triggerNow() {
	s.logf("trigger now")
	state := s.c.State()
	id, err := s.c.TriggerNow(s.now)
	s.checkPromise("TriggerNow", state, id, err)
	s.stats.savepoints++
}

func (s *sim) stop() {
	s.logf("stop")
	state := s.c.State()
	id, err := s.c.Stop(s.now)
	s.checkPromise("Stop", state, id, err)
	s.stats.stops++
}

func (s *sim) checkPromise(what string, state State, id ID, err error) {
	switch {
	case state == StateFailed || s.c.State() == StateFailed:
		if !errors.Is(err, ErrFailed) {
			s.fatalf("%s while failed: %d, %v", what, id, err)
		}
		s.expectFail = s.expectFail || state != StateFailed
	case state == StateStopped && what == "TriggerNow":
		if !errors.Is(err, ErrStopped) {
			s.fatalf("%s while stopped: %d, %v", what, id, err)
		}
	case err != nil:
		s.fatalf("%s: %v", what, err)
	case id <= s.restored:
		s.fatalf("%s promised %d, not after the restored %d", what, id, s.restored)
	case id > s.beforeInput:
		if s.promised != 0 && s.promised != id {
			s.fatalf("%s promised %d while %d is promised", what, id, s.promised)
		}
		if id != s.beforeInput+1 {
			s.fatalf("%s promised %d, next id is %d", what, id, s.beforeInput+1)
		}
		s.promised = id
	}
}

// bogus feeds inputs a confused or late runtime might send. They must be
// rejected unless the model says they are valid, and never panic.
func (s *sim) bogus() {
	task := TaskID("ghost")
	if k := s.ch.IntN(len(s.tasks) + 1); k < len(s.tasks) {
		task = s.tasks[k].id
	}
	id := ID(s.ch.IntN(int(s.lastTrigger) + 3))
	switch s.ch.IntN(3) {
	case 0:
		s.logf("bogus ack %s %d", task, id)
		// The coordinator cannot tell an ack for a barrier triggered but
		// not yet injected (Ready not taken) from a real one; both count.
		inFlight := slices.ContainsFunc(s.c.InFlight(), func(f InFlight) bool { return f.ID == id })
		valid := s.c.State() != StateFailed && inFlight && !s.ackedBy[id][task] && slices.Contains(s.cfg.Tasks, task)
		err := s.c.Ack(task, id)
		if valid != (err == nil) {
			s.fatalf("ack %s %d: %v; the model says valid=%v", task, id, err, valid)
		}
		if err == nil {
			if s.ackedBy[id] == nil {
				s.ackedBy[id] = map[TaskID]bool{}
			}
			s.ackedBy[id][task] = true
			for _, t := range s.tasks {
				if t.id == task {
					t.queue = slices.DeleteFunc(t.queue, func(q ID) bool { return q == id })
				}
			}
		}
	case 1:
		if id == s.commitOut {
			return
		}
		s.logf("bogus committed %d", id)
		if err := s.c.Committed(id, s.now); !errors.Is(err, ErrNotCommitting) {
			s.fatalf("Committed(%d) with no commit outstanding: %v", id, err)
		}
	default:
		if id == s.commitOut {
			return
		}
		s.logf("bogus commit failed %d", id)
		if err := s.c.CommitFailed(id, errors.New("bogus")); !errors.Is(err, ErrNotCommitting) {
			s.fatalf("CommitFailed(%d) with no commit outstanding: %v", id, err)
		}
	}
}

// drain is the runtime's loop body: Ready, act in the documented order,
// Advance. It checks every output against the model.
func (s *sim) drain() {
	s.tb.Helper()
	rd := s.c.Ready()
	defer s.c.Advance()
	if !rd.Empty() {
		s.logf("ready %s", rd) // rd is a value: later changes cannot reach it
	}
	failedBefore := s.failed

	// 1. Fail.
	if rd.Fail != nil {
		var fe *FailError
		switch {
		case failedBefore:
			s.fatalf("Fail reported twice: %v", rd.Fail)
		case rd.Commit != 0:
			s.fatalf("Fail and Commit %d in one Ready", rd.Commit)
		case !errors.As(rd.Fail, &fe):
			s.fatalf("Fail is %T, want *FailError", rd.Fail)
		case s.commitOut != 0 && fe.InDoubt != s.commitOut:
			// A commit still outstanding was handed out before the
			// failure (none is after), so it must be the one in doubt.
			// (With none outstanding, the in-doubt one may have been
			// settled between the failure and this Ready.)
			s.fatalf("FailError.InDoubt = %d, the outstanding commit is %d", fe.InDoubt, s.commitOut)
		}
		s.failed = true
		s.expectFail = false
		s.stats.fails++
	} else if s.expectFail && !failedBefore {
		s.fatalf("an input failed the coordinator but Ready has no Fail: %s", rd)
	}

	// 2. Aborted.
	aborted := map[ID]bool{}
	for _, a := range rd.Aborted {
		if !s.failed {
			s.fatalf("checkpoint %d aborted without Fail", a.ID)
		}
		if !s.live[a.ID] && !slices.Contains(rd.Trigger, a.ID) {
			s.fatalf("aborted %d, which is not in flight", a.ID)
		}
		if a.Reason < ReasonTimeout || a.Reason > ReasonJobFailed || a.Err == nil {
			s.fatalf("abort %+v: reason or error missing", a)
		}
		aborted[a.ID] = true
		delete(s.live, a.ID)
		for _, t := range s.tasks {
			t.queue = slices.DeleteFunc(t.queue, func(q ID) bool { return q == a.ID })
		}
	}

	// 3. Trigger: inject the barriers.
	for _, id := range rd.Trigger {
		if failedBefore {
			s.fatalf("trigger %d after Fail", id)
		}
		if id != s.lastTrigger+1 {
			s.fatalf("trigger %d after %d: ids must be consecutive (restored from %d)", id, s.lastTrigger, s.restored)
		}
		s.lastTrigger = id
		s.stats.triggers++
		if rd.Fail != nil {
			if !aborted[id] {
				s.fatalf("trigger %d in a failing Ready but not aborted", id)
			}
			continue
		}
		s.barrier[id], s.epochStart[id] = s.sourcePos, s.prevBarrier
		s.prevBarrier = s.sourcePos
		if s.ackedBy[id] == nil {
			s.ackedBy[id] = map[TaskID]bool{}
		}
		s.live[id] = true
		for _, t := range s.tasks {
			if !s.ackedBy[id][t.id] {
				t.queue = append(t.queue, id)
			}
		}
	}

	// 4. Commit.
	if id := rd.Commit; id != 0 {
		switch {
		case s.failed:
			s.fatalf("commit %d handed out after Fail", id)
		case s.commitOut != 0:
			s.fatalf("commit %d handed out while %d is outstanding", id, s.commitOut)
		case id != s.lastComplete+1:
			s.fatalf("commit %d handed out, but the last completed is %d", id, s.lastComplete)
		case len(s.ackedBy[id]) != len(s.cfg.Tasks):
			s.fatalf("commit %d handed out with acks from %v only", id, s.ackedBy[id])
		}
		s.commitOut = id
	}

	// 5. Completed.
	for _, id := range rd.Completed {
		if !s.fed[id] {
			s.fatalf("checkpoint %d reported completed before Committed", id)
		}
		delete(s.fed, id)
		delete(s.live, id)
	}
	s.checkState()
}

// checkState checks what must hold after every input and every Ready.
func (s *sim) checkState() {
	s.tb.Helper()
	inflight := s.c.InFlight()
	if len(inflight) > s.cfg.MaxConcurrent {
		s.fatalf("%d checkpoints in flight, max %d", len(inflight), s.cfg.MaxConcurrent)
	}
	for i, f := range inflight {
		if i > 0 && f.ID != inflight[i-1].ID+1 {
			s.fatalf("in-flight ids %v not contiguous", inflight)
		}
	}
	if s.c.State() != StateFailed && len(inflight) > 0 && inflight[0].ID != s.c.LastCompleted()+1 {
		s.fatalf("oldest in flight %d, last completed %d", inflight[0].ID, s.c.LastCompleted())
	}
	if s.c.LastCompleted() != s.lastComplete {
		s.fatalf("LastCompleted() = %d, the model says %d", s.c.LastCompleted(), s.lastComplete)
	}
	if s.c.LastTriggered() < s.lastTrigger {
		s.fatalf("LastTriggered() = %d went below %d", s.c.LastTriggered(), s.lastTrigger)
	}
}

func TestSimulation(t *testing.T) {
	const seeds, steps = 2000, 300
	var stats simStats
	for seed := range uint64(seeds) {
		ch := rand.New(rand.NewPCG(seed, 0x5eed))
		s := newSim(t, fmt.Sprintf("seed %d", seed), ch, &stats)
		s.run(steps, nil)
		s.drain()
	}
	t.Logf("%d seeds: %+v", seeds, stats)
	// A simulation that never reaches a branch proves nothing about it.
	for name, n := range map[string]int{
		"triggers": stats.triggers, "commits": stats.commits, "commit failures": stats.commitFails,
		"declines": stats.declines, "timeouts": stats.timeouts, "failures": stats.fails,
		"crashes": stats.crashes, "stops": stats.stops, "savepoints": stats.savepoints, "in-doubt commits": stats.inDoubt,
	} {
		if n < seeds/20 {
			t.Errorf("only %d %s in %d seeds: the schedule does not exercise them", n, name, seeds)
		}
	}
}

// byteChooser turns fuzz input into choices; exhausted input ends the run.
type byteChooser struct{ data []byte }

func (b *byteChooser) IntN(n int) int {
	if n <= 1 || len(b.data) == 0 {
		return 0
	}
	v := int(b.data[0])
	b.data = b.data[1:]
	if n > 256 && len(b.data) > 0 {
		v = v<<8 | int(b.data[0])
		b.data = b.data[1:]
	}
	return v % n
}

func FuzzCoordinator(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	seedRand := rand.New(rand.NewPCG(1, 2))
	for range 8 {
		b := make([]byte, 512)
		for i := range b {
			b[i] = byte(seedRand.IntN(256))
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ch := &byteChooser{data: data}
		s := newSim(t, fmt.Sprintf("fuzz input %x", data), ch, &simStats{})
		s.run(4096, func() bool { return len(ch.data) == 0 })
		s.drain()
	})
}
