package checkpoint

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Coordinator decides when checkpoints start, when each may commit, and when
// the job must restart. It is a pure state machine: inputs arrive through
// its methods, outputs collect in Ready, and the caller does all I/O. It is
// not safe for concurrent use; one goroutine owns it. See the package
// documentation for the contract.
type Coordinator struct {
	cfg       CoordinatorConfig
	taskIndex map[TaskID]int // position of a task in pending.acked
	tasks     []TaskID       // sorted, for stable messages

	state State
	now   time.Time // latest time seen; inputs never move it backwards

	lastTriggered   ID
	lastTriggeredAt time.Time // construction time until the first trigger
	lastEndedAt     time.Time // last commit or abort, for MinPause
	ended           bool      // lastEndedAt is set

	lastCompleted   ID
	lastCompletedAt time.Time

	// inFlight holds every checkpoint that is neither completed nor
	// aborted, in id order. Its ids are contiguous: an abort fails the job,
	// so no gap can open while running.
	inFlight []*pending
	// forced is the id promised to TriggerNow or Stop and not yet
	// triggered (0: none). The next trigger is always this one.
	forced ID
	// final is the id of the last checkpoint, once Stop was called.
	final ID

	completed, aborted int
	err                *FailError

	out outbox
}

// pending is one checkpoint in flight.
type pending struct {
	id          ID
	phase       Phase
	triggeredAt time.Time
	acked       []bool // by taskIndex
	nAcked      int
	// handedOut: Ready returned this checkpoint's commit request, so the
	// caller may be committing it; from then on only the caller knows the
	// outcome.
	handedOut bool
}

// NewCoordinator returns a running coordinator. now is the start of its
// schedule: the first periodic checkpoint is triggered one Interval later.
func NewCoordinator(cfg CoordinatorConfig, now time.Time) (*Coordinator, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	cfg.Tasks = slices.Clone(cfg.Tasks)
	c := &Coordinator{
		cfg:             cfg,
		taskIndex:       make(map[TaskID]int, len(cfg.Tasks)),
		tasks:           slices.Sorted(slices.Values(cfg.Tasks)),
		state:           StateRunning,
		now:             now,
		lastTriggered:   cfg.LastCompleted,
		lastTriggeredAt: now,
		lastCompleted:   cfg.LastCompleted,
		lastCompletedAt: cfg.LastCompletedAt,
	}
	for i, t := range cfg.Tasks {
		c.taskIndex[t] = i
	}
	return c, nil
}

// Tick advances time: it aborts checkpoints older than Timeout (which fails
// the job) and triggers a checkpoint when one is due. Call it periodically,
// e.g. every Interval/10. Committed, TriggerNow and Stop carry a time too
// and do the same, so a checkpoint that fell due while MaxConcurrent were
// in flight starts at the Committed that frees a slot.
func (c *Coordinator) Tick(now time.Time) {
	c.observe(now)
	c.step()
}

// TriggerNow asks for a checkpoint regardless of Interval and MinPause, for
// a savepoint. MaxConcurrent still holds: with no free slot the request is
// queued and served, before any periodic checkpoint, as soon as a
// checkpoint ends. It returns the id that will serve the request, so the
// caller can wait for it in Ready.Completed. Requests made while one is
// queued share its id. While stopping, the final checkpoint serves it.
func (c *Coordinator) TriggerNow(now time.Time) (ID, error) {
	c.observe(now)
	switch c.state {
	case StateFailed:
		return 0, fmt.Errorf("trigger: %w: %w", ErrFailed, c.err)
	case StateStopped:
		return 0, fmt.Errorf("trigger: %w", ErrStopped)
	case StateStopping:
		return c.final, nil
	}
	if c.forced == 0 {
		c.forced = c.lastTriggered + 1
	}
	id := c.forced
	c.step()
	if c.state == StateFailed {
		return 0, fmt.Errorf("trigger: %w: %w", ErrFailed, c.err)
	}
	return id, nil
}

// Stop asks for a final checkpoint, triggered like TriggerNow, after which
// no checkpoint is triggered. It returns the final id; once it appears in
// Ready.Completed the state is StateStopped and the caller stops its tasks
// with nothing lost (invariant 6, on SIGTERM). Stop is idempotent.
func (c *Coordinator) Stop(now time.Time) (ID, error) {
	c.observe(now)
	switch c.state {
	case StateFailed:
		return 0, fmt.Errorf("stop: %w: %w", ErrFailed, c.err)
	case StateStopping, StateStopped:
		return c.final, nil
	}
	if c.forced == 0 {
		c.forced = c.lastTriggered + 1
	}
	c.final = c.forced
	c.state = StateStopping
	c.step()
	if c.state == StateFailed {
		return 0, fmt.Errorf("stop: %w: %w", ErrFailed, c.err)
	}
	return c.final, nil
}

// Ack records that task snapshotted checkpoint id (the caller keeps the
// snapshot itself). When the last task acks, the checkpoint becomes Acked,
// and is handed out for commit once every earlier one committed. An error
// means the ack was ignored; see the Err* variables.
func (c *Coordinator) Ack(task TaskID, id ID) error {
	if c.state == StateFailed {
		return fmt.Errorf("ack of checkpoint %d from task %q: %w", id, task, ErrFailed)
	}
	i, ok := c.taskIndex[task]
	if !ok {
		return fmt.Errorf("ack of checkpoint %d from task %q: %w", id, task, ErrUnknownTask)
	}
	p, err := c.lookup(id)
	if err != nil {
		return fmt.Errorf("ack of checkpoint %d from task %q: %w", id, task, err)
	}
	if p.acked[i] {
		return fmt.Errorf("ack of checkpoint %d from task %q: %w", id, task, ErrDuplicateAck)
	}
	p.acked[i] = true
	p.nAcked++
	if p.nAcked == len(p.acked) {
		p.phase = PhaseAcked
		c.requestCommit()
	}
	return nil
}

// Decline reports that task could not snapshot checkpoint id. The
// checkpoint is aborted and the job fails (see FailError for why). A
// decline after the commit was requested is too late and returns ErrStale:
// the commit's outcome decides.
func (c *Coordinator) Decline(task TaskID, id ID, reason error) error {
	if c.state == StateFailed {
		return fmt.Errorf("decline of checkpoint %d by task %q: %w", id, task, ErrFailed)
	}
	if _, ok := c.taskIndex[task]; !ok {
		return fmt.Errorf("decline of checkpoint %d by task %q: %w", id, task, ErrUnknownTask)
	}
	p, err := c.lookup(id)
	if err != nil {
		return fmt.Errorf("decline of checkpoint %d by task %q: %w", id, task, err)
	}
	if p.phase == PhaseCommitting {
		return fmt.Errorf("decline of checkpoint %d by task %q: commit already requested: %w", id, task, ErrStale)
	}
	if reason == nil {
		reason = errors.New("no reason given")
	}
	c.fail(p, ReasonDeclined, fmt.Errorf("%w by task %q: %w", ErrDeclined, task, reason))
	return nil
}

// Committed reports that checkpoint id's commit succeeded at now: the
// checkpoint is complete. The next checkpoint, if fully acked, is handed
// out for commit. After a failure this is still accepted for the commit
// that was in doubt, so LastCompleted tells the truth.
func (c *Coordinator) Committed(id ID, now time.Time) error {
	c.observe(now)
	p, err := c.committing(id)
	if err != nil {
		return fmt.Errorf("checkpoint %d committed: %w", id, err)
	}
	p.phase = PhaseCompleted
	c.remove(p)
	c.completed++
	c.lastCompleted, c.lastCompletedAt = id, c.now
	c.lastEndedAt, c.ended = c.now, true
	c.out.rd.Completed = append(c.out.rd.Completed, id)
	if c.state == StateStopping && id == c.final {
		c.state = StateStopped
	}
	c.requestCommit()
	c.step()
	return nil
}

// CommitFailed reports that checkpoint id's commit failed: the job fails
// and restarts from the last completed checkpoint.
func (c *Coordinator) CommitFailed(id ID, err error) error {
	p, lerr := c.committing(id)
	if lerr != nil {
		return fmt.Errorf("checkpoint %d commit failed (%v): %w", id, err, lerr)
	}
	if err == nil {
		err = errors.New("no error given")
	}
	cause := fmt.Errorf("%w: %w", ErrCommitFailed, err)
	if c.state == StateFailed {
		// The commit that was in doubt when the job failed did not land.
		c.abort(p, ReasonCommitFailed, cause)
		return nil
	}
	c.fail(p, ReasonCommitFailed, cause)
	return nil
}

// observe moves the coordinator's notion of now forward, never backward,
// so a clock step back cannot un-expire a timeout or re-trigger early.
func (c *Coordinator) observe(now time.Time) {
	if now.After(c.now) {
		c.now = now
	}
}

// step applies the passage of time: timeouts first (a timeout fails the job
// and so must win over a trigger), then at most one trigger.
func (c *Coordinator) step() {
	if c.state != StateRunning && c.state != StateStopping {
		return
	}
	for _, p := range c.inFlight {
		// Once handed out for commit, the outcome is the caller's to
		// report: timing it out here would make it "aborted" while the
		// transaction might still commit.
		if p.handedOut {
			continue
		}
		if !c.now.Before(p.triggeredAt.Add(c.cfg.Timeout)) {
			c.fail(p, ReasonTimeout, c.timeoutCause(p))
			return
		}
	}
	if len(c.inFlight) >= c.cfg.MaxConcurrent {
		return
	}
	switch {
	case c.forced != 0:
	case c.state == StateStopping:
		return // the final checkpoint was triggered; nothing after it
	case c.now.Before(c.lastTriggeredAt.Add(c.cfg.Interval)):
		return
	case c.ended && c.now.Before(c.lastEndedAt.Add(c.cfg.MinPause)):
		return
	}
	c.forced = 0
	c.lastTriggered++
	c.lastTriggeredAt = c.now
	c.inFlight = append(c.inFlight, &pending{
		id:          c.lastTriggered,
		phase:       PhasePending,
		triggeredAt: c.now,
		acked:       make([]bool, len(c.cfg.Tasks)),
	})
	c.out.rd.Trigger = append(c.out.rd.Trigger, c.lastTriggered)
}

// requestCommit hands out the oldest checkpoint for commit when it is fully
// acked and nothing is committing. Only the oldest may commit, so commits
// are strictly in id order and at most one is outstanding.
func (c *Coordinator) requestCommit() {
	if c.state != StateRunning && c.state != StateStopping {
		return
	}
	if len(c.inFlight) == 0 || c.inFlight[0].phase != PhaseAcked {
		return
	}
	p := c.inFlight[0]
	p.phase = PhaseCommitting
	c.out.rd.Commit = p.id
}

// fail aborts p for reason and every other checkpoint in flight except one
// whose commit was already handed out (in doubt), and reports Fail.
func (c *Coordinator) fail(p *pending, reason AbortReason, cause error) {
	c.err = &FailError{
		Checkpoint:  p.id,
		Reason:      reason,
		RestartFrom: c.lastCompleted,
		Err:         cause,
	}
	c.state = StateFailed
	c.forced = 0
	for _, q := range slices.Clone(c.inFlight) {
		if q.phase == PhaseCommitting && !q.handedOut {
			c.out.rd.Commit = 0 // the caller never saw it: withdraw it
		}
		switch {
		case q == p:
			c.abort(q, reason, cause)
		case q.handedOut:
			c.err.InDoubt = q.id
		default:
			c.abort(q, ReasonJobFailed, c.err)
		}
	}
	c.out.rd.Fail = c.err
}

func (c *Coordinator) abort(p *pending, reason AbortReason, cause error) {
	p.phase = PhaseAborted
	c.remove(p)
	c.aborted++
	c.lastEndedAt, c.ended = c.now, true
	c.out.rd.Aborted = append(c.out.rd.Aborted, Abort{ID: p.id, Reason: reason, Err: cause})
}

func (c *Coordinator) remove(p *pending) {
	c.inFlight = slices.DeleteFunc(c.inFlight, func(q *pending) bool { return q == p })
}

func (c *Coordinator) find(id ID) *pending {
	for _, p := range c.inFlight {
		if p.id == id {
			return p
		}
	}
	return nil
}

// lookup finds a checkpoint that still takes acks or declines.
func (c *Coordinator) lookup(id ID) (*pending, error) {
	if p := c.find(id); p != nil {
		return p, nil
	}
	if id == 0 || id > c.lastTriggered {
		return nil, ErrUnknownCheckpoint
	}
	return nil, ErrStale
}

// committing finds the checkpoint whose commit Ready handed out; an outcome
// for anything else is the caller's mistake and changes nothing.
func (c *Coordinator) committing(id ID) (*pending, error) {
	p := c.find(id)
	if p == nil || p.phase != PhaseCommitting || !p.handedOut {
		return nil, ErrNotCommitting
	}
	return p, nil
}

// waiting lists the tasks that have not acked p, sorted.
func (c *Coordinator) waiting(p *pending) []TaskID {
	var w []TaskID
	for _, t := range c.tasks {
		if !p.acked[c.taskIndex[t]] {
			w = append(w, t)
		}
	}
	return w
}

// timeoutCause says what p was waiting for when it timed out: tasks that
// did not ack, or, fully acked, the commit of an earlier checkpoint.
func (c *Coordinator) timeoutCause(p *pending) error {
	if w := c.waiting(p); len(w) > 0 {
		return fmt.Errorf("%w after %v waiting for tasks %q", ErrTimeout, c.cfg.Timeout, w)
	}
	if p.phase == PhaseCommitting {
		return fmt.Errorf("%w after %v, acked but not handed out for commit (no Ready was taken)", ErrTimeout, c.cfg.Timeout)
	}
	return fmt.Errorf("%w after %v, acked but waiting for checkpoint %d to commit", ErrTimeout, c.cfg.Timeout, c.inFlight[0].id)
}
