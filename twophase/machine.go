package twophase

import (
	"fmt"
	"slices"
	"time"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/internal/mutant"
)

// Machine is the lifecycle of every epoch of one incarnation of a job: it
// recovers the participants, opens epochs, triggers their checkpoints,
// collects the tasks' acks, prepares, decides and commits each epoch at
// every participant, and fails the job when that cannot go on. It is the
// checkpoint coordinator and the two-phase commit in one state machine,
// because they are one protocol: checkpoint N is complete exactly when the
// decision log committed epoch N.
//
// It is pure, like etcd raft: deterministic, no I/O, no goroutine, no
// clock (time arrives in messages). Every input goes in through Step as a
// Msg; actions accumulate until the caller takes them with Ready, carries
// them out, reports each call's outcome back as a Msg, and calls Advance.
// It is not safe for concurrent use: one goroutine owns it. The package
// documentation states the protocol and the caller's contract.
type Machine struct {
	cfg   Config
	names []string // names[0] is the decision log, then Config.Participants
	index map[string]int

	// tasks must ack every checkpoint once the task graph started
	// (MsgStart); sorted, for stable messages.
	tasks     []checkpoint.TaskID
	taskIndex map[checkpoint.TaskID]int
	started   bool

	state State
	err   *FailError
	now   time.Time // latest time seen; messages never move it backward

	// outstanding holds every participant call emitted whose outcome was
	// not reported yet. An outcome for anything else is refused, so a
	// confused caller cannot forge progress (a commit nobody asked for).
	outstanding map[call]struct{}
	rec         *recovery // until ActResume

	lastOpened    Epoch // newest epoch opened (ActBegin); the restored one before that
	lastTriggered Epoch // newest checkpoint triggered
	lastDecided   Epoch // newest epoch the decision log committed
	deciding      Epoch // the decision log's commit in flight, 0 if none
	// committed[i] is the newest epoch participant i committed (index 0
	// is the decision log and follows lastDecided); committing[i] is its
	// commit in flight, 0 if none. One commit per participant at a time
	// keeps its commits in epoch order even if one fails.
	committed  []Epoch
	committing []Epoch
	// inFlight holds the epochs opened and not yet done everywhere, in
	// epoch order: at most MaxInFlight, contiguous. An abort fails the
	// job, so no gap can open while running.
	inFlight []*epoch

	lastTriggeredAt time.Time // the schedule's start until the first trigger
	lastEndedAt     time.Time // last decision or abort, for MinPause
	ended           bool      // lastEndedAt is set
	// forced is the checkpoint promised to TriggerNow or Stop and not yet
	// triggered (0: none): the next trigger is this one. promised is the
	// latest promise, for Promised; final the final checkpoint once
	// stopping.
	forced, promised, final Epoch

	out outbox
}

// epoch is one epoch in flight.
type epoch struct {
	id        Epoch
	phase     Phase
	begun     []bool // by participant
	nBegun    int
	prepared  []bool // by participant
	nPrepared int
	// From the trigger on: when, and which tasks acked.
	triggeredAt time.Time
	acked       []bool // by task index
	nAcked      int
}

// call identifies an emitted participant call.
type call struct {
	kind ActionKind
	p    int
	e    Epoch
}

// outbox accumulates actions between Advances and remembers how many the
// last Ready handed out, so that actions emitted by messages stepped
// between Ready and Advance stay for the next Ready.
type outbox struct {
	acts   []Action
	handed int
}

// decisionLog is the index of the decision log in names.
const decisionLog = 0

// NewMachine returns a Machine in StateRecovering whose first Ready asks
// every participant to recover, the decision log first: no epoch opens
// before every participant fenced its predecessors and every epoch they
// hold in doubt was settled by the decision log.
func NewMachine(cfg Config) (*Machine, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	cfg.Participants = slices.Clone(cfg.Participants)
	names := append([]string{cfg.DecisionLog}, cfg.Participants...)
	m := &Machine{
		cfg:         cfg,
		names:       names,
		index:       make(map[string]int, len(names)),
		taskIndex:   map[checkpoint.TaskID]int{},
		state:       StateRecovering,
		outstanding: map[call]struct{}{},
		committed:   make([]Epoch, len(names)),
		committing:  make([]Epoch, len(names)),
		rec:         newRecovery(len(names)),
	}
	for i, n := range names {
		m.index[n] = i
	}
	for i := range names {
		m.emitCall(ActRecover, i, 0)
	}
	return m, nil
}

// Step feeds one message to the Machine. An error means the message was
// refused and changed nothing (see the Err* variables); the caller logs it
// and goes on.
func (m *Machine) Step(msg Msg) error {
	before := m.now
	if msg.Now.After(m.now) {
		m.now = msg.Now
	}
	if err := m.step(msg); err != nil {
		m.now = before
		return fmt.Errorf("%v: %w", msg, err)
	}
	m.tick()
	return nil
}

func (m *Machine) step(msg Msg) error {
	switch msg.Type {
	case MsgTick:
		return nil
	case MsgStart:
		return m.start(msg.Now, msg.Tasks)
	case MsgTriggerNow:
		return m.triggerNow()
	case MsgStop:
		return m.stop()
	case MsgAck:
		return m.ack(msg.Task, msg.Epoch)
	case MsgDecline:
		return m.decline(msg.Task, msg.Epoch, msg.Err)
	case MsgAbort:
		return m.abort(msg.Err)
	case MsgRecovered:
		return m.recovered(msg.Participant, msg.InDoubt, msg.Err)
	case MsgDecisionRead:
		return m.decisionRead(msg.Participant, msg.Epoch, msg.Err)
	case MsgBegun:
		return m.begun(msg.Participant, msg.Epoch, msg.Err)
	case MsgPrepared:
		return m.prepared(msg.Participant, msg.Epoch, msg.Err)
	case MsgCommitted:
		return m.committedMsg(msg.Participant, msg.Epoch, msg.Err)
	case MsgAborted:
		return m.aborted(msg.Participant, msg.Epoch, msg.Err)
	}
	return ErrBadMsg
}

// HasReady reports whether Ready would return any action.
func (m *Machine) HasReady() bool { return len(m.out.acts) > 0 }

// Ready returns the actions emitted since the last Advance, in order. Act
// on them in that order (see the package documentation), then call
// Advance. Ready without Advance returns the same actions again, plus any
// emitted since.
func (m *Machine) Ready() Ready {
	m.out.handed = len(m.out.acts)
	return Ready{Actions: slices.Clone(m.out.acts)}
}

// Advance acknowledges the last Ready: exactly the actions it returned are
// dropped; actions emitted by messages stepped since stay for the next
// Ready.
func (m *Machine) Advance() {
	m.out.acts = slices.Delete(m.out.acts, 0, m.out.handed)
	m.out.handed = 0
}

// running reports whether epochs go on: they open, checkpoints are
// triggered, prepared, decided and committed.
func (m *Machine) running() bool { return m.state == StateRunning || m.state == StateStopping }

// refuse reports why a checkpoint's message is not taken in this state.
func (m *Machine) refuse() error {
	switch m.state {
	case StateRecovering:
		return ErrNotRecovered
	case StateFailed:
		return fmt.Errorf("%w: %w", ErrFailed, m.err)
	case StateStopped:
		return ErrStopped
	}
	return nil
}

// ack records that task snapshotted checkpoint e; once every task did,
// every participant prepares e.
func (m *Machine) ack(task checkpoint.TaskID, e Epoch) error {
	if err := m.refuse(); err != nil {
		return err
	}
	i, ok := m.taskIndex[task]
	if !ok {
		return ErrUnknownTask
	}
	ep, err := m.triggered(e)
	if err != nil {
		return err
	}
	if ep.phase != PhasePending {
		// Every task acked it, or it was triggered before the task graph
		// ran and needed no ack.
		if i < len(ep.acked) && ep.acked[i] {
			return ErrDuplicateAck
		}
		return ErrStale
	}
	if ep.acked[i] {
		return ErrDuplicateAck
	}
	ep.acked[i] = true
	ep.nAcked++
	last := len(m.tasks)
	if mutant.On("commit-before-last-ack") {
		// The bug: the epoch prepares, and is decided, before the last
		// task acked its barrier: that task's part of the epoch is lost.
		last--
	}
	if ep.nAcked == last {
		m.prepare(ep)
	}
	return nil
}

// decline aborts checkpoint e on task's report and fails the job. Once the
// decision is being made it is too late: the decision log's commit
// decides.
func (m *Machine) decline(task checkpoint.TaskID, e Epoch, reason error) error {
	if err := m.refuse(); err != nil {
		return err
	}
	if _, ok := m.taskIndex[task]; !ok {
		return ErrUnknownTask
	}
	ep, err := m.triggered(e)
	if err != nil {
		return err
	}
	if ep.phase >= PhaseDeciding {
		return fmt.Errorf("%w: its decision is being made", ErrStale)
	}
	if reason == nil {
		reason = errNoCause
	}
	m.fail(&FailError{Epoch: e, Reason: ReasonDeclined, Err: fmt.Errorf("%w by task %q: %w", ErrDeclined, task, reason)})
	return nil
}

// abort gives every undecided epoch up on the caller's request.
func (m *Machine) abort(reason error) error {
	switch m.state {
	case StateFailed:
		return fmt.Errorf("%w: %w", ErrFailed, m.err)
	case StateStopped:
		return ErrStopped
	}
	if reason == nil {
		reason = errNoCause
	}
	fe := &FailError{Reason: ReasonJobFailed, Err: reason}
	for _, ep := range m.inFlight {
		if ep.phase < PhaseDeciding {
			fe.Epoch = ep.id
			break
		}
	}
	m.fail(fe)
	return nil
}

// triggered finds checkpoint e among the epochs in flight, triggered.
func (m *Machine) triggered(e Epoch) (*epoch, error) {
	if e == 0 || e > m.lastTriggered {
		return nil, ErrUnknownCheckpoint
	}
	if ep := m.find(e); ep != nil {
		return ep, nil
	}
	return nil, ErrStale
}

// prepare asks every participant to prepare ep: every task acked it, so
// everything of the epoch was handed to them.
func (m *Machine) prepare(ep *epoch) {
	ep.phase = PhasePreparing
	for i := range m.names {
		m.emitCall(ActPrepare, i, ep.id)
	}
}

// begun records participant's Begin of e; once every participant began
// it the epoch is open (and its checkpoint may be triggered).
func (m *Machine) begun(participant string, e Epoch, cause error) error {
	i, yes, err := m.vote(ActBegin, participant, e, cause)
	if !yes {
		return err
	}
	ep := m.find(e)
	ep.begun[i] = true
	ep.nBegun++
	if ep.nBegun == len(m.names) {
		ep.phase = PhaseOpen
	}
	return nil
}

// prepared records participant's Prepare of e; once every participant
// prepared it, the decision log commits e when e-1 is decided.
func (m *Machine) prepared(participant string, e Epoch, cause error) error {
	i, yes, err := m.vote(ActPrepare, participant, e, cause)
	if !yes {
		return err
	}
	ep := m.find(e)
	ep.prepared[i] = true
	ep.nPrepared++
	if ep.nPrepared == len(m.names) {
		ep.phase = PhasePrepared
		m.tryDecide()
	}
	return nil
}

// vote takes the outcome of participant's Begin or Prepare of e: yes, or,
// with a cause, no, which fails the job with e aborted everywhere. After a
// failure it counts for nothing (the epoch was aborted).
func (m *Machine) vote(kind ActionKind, participant string, e Epoch, cause error) (i int, yes bool, err error) {
	if i, err = m.outcome(kind, participant, e); err != nil || !m.running() {
		return i, false, err
	}
	if cause != nil {
		m.fail(&FailError{Epoch: e, Reason: ReasonDeclined, Call: kind, Participant: participant, Err: cause})
		return i, false, nil
	}
	return i, true, nil
}

// committedMsg records participant's Commit of e. On the decision log it
// is the decision: Completed(e) follows, and the other participants
// commit e; once all did, Done(e).
func (m *Machine) committedMsg(participant string, e Epoch, cause error) error {
	i, err := m.outcome(ActCommit, participant, e)
	if err != nil {
		return err
	}
	if cause != nil {
		m.commitFailed(i, e, cause)
		return nil
	}
	if m.state == StateRecovering {
		m.settled(i)
		return nil
	}
	if i != decisionLog {
		m.committed[i], m.committing[i] = e, 0
		if m.running() {
			m.tryCommit(i)
			m.finish()
		}
		return nil
	}
	m.deciding = 0
	m.lastDecided = e
	m.committed[decisionLog] = e
	m.lastEndedAt, m.ended = m.now, true
	// A decision is a fact even after the job failed: it was in doubt,
	// and the caller may answer a savepoint or a stop with it.
	m.emit(Action{Kind: ActCompleted, Epoch: e})
	if ep := m.find(e); ep != nil {
		ep.phase = PhaseCommitting
	}
	if !m.running() {
		return nil
	}
	for j := 1; j < len(m.names); j++ {
		m.tryCommit(j)
	}
	m.finish() // the decision log alone: done at once
	m.tryDecide()
	return nil
}

// commitFailed: on the decision log the epoch is in doubt (the commit may
// have landed anyway); on another participant it is decided and stays so.
// Either way the job fails, later epochs are aborted, and recovery settles
// e by the decision log.
func (m *Machine) commitFailed(i int, e Epoch, cause error) {
	switch {
	case m.state == StateRecovering:
		m.fail(&FailError{Epoch: e, Reason: ReasonCommitFailed, Call: ActCommit, Participant: m.names[i], Decided: true, Err: cause})
	case !m.running():
		// The job failed already; e stays in doubt (decision log) or
		// decided (others) for recovery to settle.
		if i == decisionLog {
			m.deciding = 0
		} else {
			m.committing[i] = 0
		}
	case i == decisionLog:
		m.fail(&FailError{Epoch: e, Reason: ReasonCommitFailed, Call: ActCommit, Participant: m.names[i], Err: cause})
	default:
		m.committing[i] = 0
		m.fail(&FailError{Epoch: e, Reason: ReasonCommitFailed, Call: ActCommit, Participant: m.names[i], Decided: true, Err: cause})
	}
}

// aborted records participant's Abort of e. Only recovery waits for
// aborts; after a failure they are best effort and change nothing.
func (m *Machine) aborted(participant string, e Epoch, cause error) error {
	i, err := m.outcome(ActAbort, participant, e)
	if err != nil {
		return err
	}
	if m.state != StateRecovering {
		return nil
	}
	if cause != nil {
		// The epoch is still prepared there, and its number will be used
		// again.
		m.fail(&FailError{Epoch: e, Reason: ReasonJobFailed, Call: ActAbort, Participant: participant, Err: cause})
		return nil
	}
	m.settled(i)
	return nil
}

// tryDecide asks the decision log to commit the next epoch to decide when
// it may: every task acked it, every participant prepared it, and no
// decision is in flight (so decisions are made one at a time, in epoch
// order, each after the previous one landed).
func (m *Machine) tryDecide() {
	if !m.running() || m.deciding != 0 {
		return
	}
	ep := m.find(m.lastDecided + 1)
	if mutant.On("decide-out-of-order") {
		// The bug: the first epoch prepared everywhere is decided, though
		// an earlier one is not prepared yet.
		for _, e := range m.inFlight {
			if e.phase == PhasePrepared {
				ep = e
				break
			}
		}
	}
	if ep == nil || ep.phase != PhasePrepared {
		return
	}
	ep.phase = PhaseDeciding
	m.deciding = ep.id
	m.emitCall(ActCommit, decisionLog, ep.id)
}

// tryCommit emits participant i's Commit of the next epoch it has to
// commit, if that epoch is decided and i has no commit in flight: a
// participant commits only decided epochs, in order, one at a time.
func (m *Machine) tryCommit(i int) {
	if !m.running() || m.committing[i] != 0 {
		return
	}
	next := m.committed[i] + 1
	if next > m.lastDecided {
		return
	}
	m.committing[i] = next
	m.emitCall(ActCommit, i, next)
}

// finish reports Done for the oldest epochs every participant committed,
// in order, drops them from the epochs in flight and opens the next ones.
// The final epoch's Done stops the Machine.
func (m *Machine) finish() {
	for len(m.inFlight) > 0 {
		e := m.inFlight[0].id
		if e > m.lastDecided || slices.ContainsFunc(m.committed, func(c Epoch) bool { return c < e }) {
			break
		}
		m.inFlight = m.inFlight[1:]
		m.emit(Action{Kind: ActDone, Epoch: e})
		if m.state == StateStopping && e == m.final {
			m.stopped()
			return
		}
	}
	m.open()
}

// stopped ends the Machine once the final epoch is done: the epochs opened
// after it (MaxInFlight above 1) never get a checkpoint, so they are
// aborted everywhere.
func (m *Machine) stopped() {
	m.state = StateStopped
	for _, ep := range m.inFlight {
		for i := range m.names {
			m.emitCall(ActAbort, i, ep.id)
		}
	}
	clear(m.inFlight)
	m.inFlight = nil
}

// open opens epochs until MaxInFlight are in flight, emitting Begin of
// each at every participant: at the end of recovery, and whenever an epoch
// is done. No epoch opens after the final one; aborted epochs never make
// room, since an abort fails the job.
func (m *Machine) open() {
	for len(m.inFlight) < m.cfg.MaxInFlight {
		if m.state != StateRunning && (m.state != StateStopping || m.lastOpened >= m.final) {
			return
		}
		m.lastOpened++
		e := m.lastOpened
		m.inFlight = append(m.inFlight, &epoch{
			id:       e,
			phase:    PhaseOpening,
			begun:    make([]bool, len(m.names)),
			prepared: make([]bool, len(m.names)),
		})
		for i := range m.names {
			m.emitCall(ActBegin, i, e)
		}
	}
}

// fail records fe, aborts every epoch in flight that is neither decided
// nor being decided (the decision log first, so the epoch can never be
// decided once its abort landed), and emits Fail last. An epoch being
// decided is left in doubt for recovery: aborting it anywhere could
// contradict a decision that lands after all.
func (m *Machine) fail(fe *FailError) {
	if fe.Err == nil {
		fe.Err = errNoCause
	}
	fe.Permanent = fe.Call != 0 && m.cfg.IsFenced(fe.Err)
	fe.LastDecided = m.lastDecided
	fe.InDoubt = m.deciding
	if m.state == StateRecovering {
		fe.Recovering = true
		fe.LastDecided = m.rec.decided // 0 until read
	}
	m.state = StateFailed
	m.err = fe
	m.forced = 0
	keep := m.inFlight[:0]
	for _, ep := range m.inFlight {
		if ep.phase >= PhaseDeciding {
			keep = append(keep, ep)
			continue
		}
		for i := range m.names {
			m.emitCall(ActAbort, i, ep.id)
		}
	}
	clear(m.inFlight[len(keep):])
	m.inFlight = keep
	m.emit(Action{Kind: ActFail, Err: fe})
}

// outcome validates the outcome of an emitted call and retires it. On
// error nothing changed.
func (m *Machine) outcome(kind ActionKind, participant string, e Epoch) (int, error) {
	i, ok := m.index[participant]
	if !ok {
		return 0, ErrUnknownParticipant
	}
	c := call{kind, i, e}
	if _, ok := m.outstanding[c]; !ok {
		return 0, ErrNotOutstanding
	}
	delete(m.outstanding, c)
	return i, nil
}

// emitCall emits an action that calls participant i and waits for its
// outcome.
func (m *Machine) emitCall(kind ActionKind, i int, e Epoch) {
	m.outstanding[call{kind, i, e}] = struct{}{}
	m.emit(Action{Kind: kind, Participant: m.names[i], Epoch: e})
}

func (m *Machine) emit(a Action) { m.out.acts = append(m.out.acts, a) }

func (m *Machine) find(e Epoch) *epoch {
	for _, ep := range m.inFlight {
		if ep.id == e {
			return ep
		}
	}
	return nil
}
