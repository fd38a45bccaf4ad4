package twophasev1

import (
	"fmt"
	"slices"
)

// Protocol sequences the two-phase commit of epochs across one decision log
// and any number of other participants: it opens each epoch (Begin),
// prepares it, decides it, commits it or aborts it at every participant,
// and recovers every participant after a crash. It is a pure state machine:
// inputs arrive through its methods, actions accumulate until the caller
// takes them with Ready, and the caller does all I/O and reports every
// outcome back. It is deterministic, starts no goroutine, reads no clock
// and is not safe for concurrent use: one goroutine owns it. See the
// package documentation for the contract.
//
// Actions come out through Ready and Advance, as in etcd raft and
// checkpoint.Coordinator, rather than as each input's return value: the
// runtime drives both state machines with one idiom; it may feed several
// inputs and act on their actions as one batch; and an outcome that
// arrives between Ready and Advance (a participant call running on another
// goroutine) is kept for the next Ready, never lost. The Protocol never
// withdraws an action once emitted, so nothing handed out is ever taken
// back.
type Protocol struct {
	cfg   Config
	names []string // names[0] is the decision log, then Config.Participants
	index map[string]int

	state State
	err   *FailError

	// outstanding holds every participant call emitted whose outcome was not
	// reported yet. An outcome for anything else is rejected, so a confused
	// caller cannot forge progress (a commit nobody asked for).
	outstanding map[call]struct{}

	rec *recovery // until ActResume

	lastOpened    Epoch // newest epoch opened (ActBegin); the restored one before that
	lastBarrier   Epoch // newest epoch whose barrier arrived (Barrier)
	lastRequested Epoch // newest epoch Decide was called for
	lastDecided   Epoch // newest epoch the decision log committed
	deciding      Epoch // the decision log's commit in flight, 0 if none
	// committed[i] is the newest epoch participant i committed (index 0 is
	// the decision log and follows lastDecided); committing[i] is its
	// commit in flight, 0 if none. One commit per participant at a time
	// keeps its commits in epoch order even if one fails.
	committed  []Epoch
	committing []Epoch
	// inFlight holds the epochs opened and neither done nor aborted, in
	// epoch order: the window of at most MaxInFlight epochs. Their epochs
	// are contiguous.
	inFlight []*epochState

	out outbox
}

// outbox accumulates actions between Advances and remembers how many the
// last Ready handed out, so that actions emitted by inputs fed between
// Ready and Advance stay for the next Ready.
type outbox struct {
	acts   []Action
	handed int
}

// call identifies an emitted participant call.
type call struct {
	kind ActionKind
	p    int
	e    Epoch
}

// epochState is one epoch in flight.
type epochState struct {
	epoch     Epoch
	phase     Phase
	begun     []bool // by participant index: Begun reported
	prepared  []bool // by participant index
	nPrepared int
	requested bool // Decide was called for it
}

// decisionLog is the index of the decision log in names.
const decisionLog = 0

// NewProtocol returns a Protocol in StateRecovering. Call Start to begin
// recovery: no epoch opens before every participant fenced its predecessors
// and every in-doubt epoch was settled.
func NewProtocol(cfg Config) (*Protocol, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	cfg.Participants = slices.Clone(cfg.Participants)
	names := append([]string{cfg.DecisionLog}, cfg.Participants...)
	m := &Protocol{
		cfg:         cfg,
		names:       names,
		index:       make(map[string]int, len(names)),
		state:       StateRecovering,
		outstanding: map[call]struct{}{},
		committed:   make([]Epoch, len(names)),
		committing:  make([]Epoch, len(names)),
		rec:         newRecovery(len(names)),
	}
	for i, n := range names {
		m.index[n] = i
	}
	return m, nil
}

// HasReady reports whether Ready would return any action.
func (m *Protocol) HasReady() bool { return len(m.out.acts) > 0 }

// Ready returns the actions emitted since the last Advance, in order. Act
// on them in that order (see the package documentation), then call
// Advance. Ready without Advance returns the same actions again, plus any
// emitted since.
func (m *Protocol) Ready() Ready {
	m.out.handed = len(m.out.acts)
	return Ready{Actions: slices.Clone(m.out.acts)}
}

// Advance acknowledges the last Ready: exactly the actions it returned are
// dropped; actions emitted by inputs fed since then stay for the next
// Ready.
func (m *Protocol) Advance() {
	m.out.acts = slices.Delete(m.out.acts, 0, m.out.handed)
	m.out.handed = 0
}

// Begun reports that participant opened epoch e. Once the barrier of e
// arrived (Barrier), the participant's Prepare of e follows.
func (m *Protocol) Begun(participant string, e Epoch) error {
	i, err := m.outcome(ActBegin, participant, e)
	if err != nil {
		return fmt.Errorf("%s began epoch %d: %w", participant, e, err)
	}
	if m.state != StateRunning {
		return nil // the job failed; the epoch was aborted
	}
	ep := m.find(e)
	ep.begun[i] = true
	if ep.phase != PhaseOpen {
		m.emitCall(ActPrepare, i, e)
	}
	return nil
}

// BeginFailed reports that participant could not open epoch e. Epoch e was
// not decided: it and every other undecided epoch are aborted everywhere,
// and the job fails (StageBegin).
func (m *Protocol) BeginFailed(participant string, e Epoch, cause error) error {
	i, err := m.outcome(ActBegin, participant, e)
	if err != nil {
		return fmt.Errorf("%s failed to begin epoch %d (%v): %w", participant, e, cause, err)
	}
	if m.state != StateRunning {
		return nil
	}
	m.fail(&FailError{Stage: StageBegin, Epoch: e, Participant: m.names[i], Err: cause})
	return nil
}

// Barrier reports that barrier e reached the participants: everything of
// epoch e has been handed to them, so every participant prepares e (each
// once it reported Begun(e)). e must be the oldest open epoch whose barrier
// has not arrived: LastBarrier()+1, already opened by an ActBegin
// (ErrTooManyInFlight if MaxInFlight epochs are in flight before it).
func (m *Protocol) Barrier(e Epoch) error {
	if err := m.running(); err != nil {
		return fmt.Errorf("barrier %d: %w", e, err)
	}
	if e != m.lastBarrier+1 {
		return fmt.Errorf("barrier %d: %w: the next barrier is %d", e, ErrOutOfOrder, m.lastBarrier+1)
	}
	ep := m.find(e)
	if ep == nil {
		return fmt.Errorf("barrier %d: %w: epoch %d is not open, %d of %d in flight", e, ErrTooManyInFlight, e, len(m.inFlight), m.cfg.MaxInFlight)
	}
	m.lastBarrier = e
	ep.phase = PhasePreparing
	for i := range m.names {
		if ep.begun[i] {
			m.emitCall(ActPrepare, i, e)
		}
	}
	return nil
}

// Prepared reports that participant prepared epoch e. When every
// participant prepared e and Decide(e) was called, the decision log's
// Commit of e follows (once e-1 is decided).
func (m *Protocol) Prepared(participant string, e Epoch) error {
	i, err := m.outcome(ActPrepare, participant, e)
	if err != nil {
		return fmt.Errorf("%s prepared epoch %d: %w", participant, e, err)
	}
	if m.state != StateRunning {
		return nil // the job failed; the epoch was aborted
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

// PrepareFailed reports that participant could not prepare epoch e. Epoch e
// was not decided: it and every later epoch are aborted everywhere, and the
// job fails.
func (m *Protocol) PrepareFailed(participant string, e Epoch, cause error) error {
	i, err := m.outcome(ActPrepare, participant, e)
	if err != nil {
		return fmt.Errorf("%s failed to prepare epoch %d (%v): %w", participant, e, cause, err)
	}
	if m.state != StateRunning {
		return nil
	}
	m.fail(&FailError{Stage: StagePrepare, Epoch: e, Participant: m.names[i], Err: cause})
	return nil
}

// Decide reports that epoch e may commit: the checkpoint coordinator handed
// out commit e (every task acked e, e-1 committed). e must be the epoch
// after the last one passed to Decide, and its barrier must have arrived. The decision log commits
// e as soon as every participant prepared e and e-1 is decided; Decide
// before the last Prepared is fine.
func (m *Protocol) Decide(e Epoch) error {
	if err := m.running(); err != nil {
		return fmt.Errorf("decide epoch %d: %w", e, err)
	}
	if e != m.lastRequested+1 {
		return fmt.Errorf("decide epoch %d: %w: the next epoch to decide is %d", e, ErrOutOfOrder, m.lastRequested+1)
	}
	if e > m.lastBarrier {
		return fmt.Errorf("decide epoch %d: %w: its barrier has not arrived (last barrier %d)", e, ErrOutOfOrder, m.lastBarrier)
	}
	m.lastRequested = e
	m.find(e).requested = true
	m.tryDecide()
	return nil
}

// Committed reports that participant committed epoch e. For the decision
// log this is the decision: Decided(e) follows, and the other participants
// commit e. When every participant committed e, Done(e) follows.
func (m *Protocol) Committed(participant string, e Epoch) error {
	i, err := m.outcome(ActCommit, participant, e)
	if err != nil {
		return fmt.Errorf("%s committed epoch %d: %w", participant, e, err)
	}
	if m.state == StateRecovering {
		m.settled(i)
		return nil
	}
	if i != decisionLog {
		m.committed[i], m.committing[i] = e, 0
		if m.state != StateRunning {
			return nil
		}
		m.tryCommit(i)
		m.finish()
		return nil
	}
	m.deciding = 0
	m.lastDecided = e
	m.committed[decisionLog] = e
	// A decision is a fact even after the job failed: it was in doubt, and
	// the caller may tell the checkpoint coordinator it completed.
	m.emit(Action{Kind: ActDecided, Epoch: e})
	if ep := m.find(e); ep != nil {
		ep.phase = PhaseCommitting
	}
	if m.state != StateRunning {
		return nil
	}
	for j := 1; j < len(m.names); j++ {
		m.tryCommit(j)
	}
	m.finish() // the decision log alone: done at once
	m.tryDecide()
	return nil
}

// CommitFailed reports that participant's Commit of epoch e failed. On the
// decision log the epoch is in doubt (the commit may have landed anyway);
// on another participant the epoch is decided and stays so. Either way the
// job fails, later epochs are aborted, and recovery settles e by the
// decision log.
func (m *Protocol) CommitFailed(participant string, e Epoch, cause error) error {
	i, err := m.outcome(ActCommit, participant, e)
	if err != nil {
		return fmt.Errorf("%s failed to commit epoch %d (%v): %w", participant, e, cause, err)
	}
	switch {
	case m.state == StateRecovering:
		m.fail(&FailError{Stage: StageCommit, Epoch: e, Participant: m.names[i], Decided: true, Err: cause})
	case m.state != StateRunning:
		// The job failed already; e stays in doubt (decision log) or
		// decided (others) for recovery to settle.
		if i == decisionLog {
			m.deciding = 0
		} else {
			m.committing[i] = 0
		}
	case i == decisionLog:
		m.fail(&FailError{Stage: StageDecide, Epoch: e, Participant: m.names[i], Err: cause})
	default:
		m.committing[i] = 0
		m.fail(&FailError{Stage: StageCommit, Epoch: e, Participant: m.names[i], Decided: true, Err: cause})
	}
	return nil
}

// Aborted reports that participant aborted epoch e. Only recovery waits for
// aborts; after a failure they are best effort and this changes nothing.
func (m *Protocol) Aborted(participant string, e Epoch) error {
	i, err := m.outcome(ActAbort, participant, e)
	if err != nil {
		return fmt.Errorf("%s aborted epoch %d: %w", participant, e, err)
	}
	if m.state == StateRecovering {
		m.settled(i)
	}
	return nil
}

// AbortFailed reports that participant could not abort epoch e. During
// recovery that fails the job (the epoch is still prepared there, and its
// number will be used again); after a failure it changes nothing, as the
// next recovery aborts e.
func (m *Protocol) AbortFailed(participant string, e Epoch, cause error) error {
	i, err := m.outcome(ActAbort, participant, e)
	if err != nil {
		return fmt.Errorf("%s failed to abort epoch %d (%v): %w", participant, e, cause, err)
	}
	if m.state == StateRecovering {
		m.fail(&FailError{Stage: StageAbort, Epoch: e, Participant: m.names[i], Err: cause})
	}
	return nil
}

// Abort aborts epoch e on the caller's request (its checkpoint timed out or
// was declined, the job is shutting down, or the attempt that fed the open
// epoch ended): e may be open (no barrier yet) or in flight. e and every
// other epoch in
// flight that is not decided are aborted everywhere, and the job fails with
// StageRequested, because a later epoch cannot commit without e. An epoch
// whose decision is made or being made cannot be aborted (ErrDecided).
func (m *Protocol) Abort(e Epoch, reason error) error {
	if err := m.running(); err != nil {
		return fmt.Errorf("abort epoch %d: %w", e, err)
	}
	ep := m.find(e)
	if ep == nil {
		return fmt.Errorf("abort epoch %d: %w: not in flight", e, ErrOutOfOrder)
	}
	if ep.phase == PhaseDeciding || ep.phase == PhaseCommitting {
		return fmt.Errorf("abort epoch %d: %w", e, ErrDecided)
	}
	m.fail(&FailError{Stage: StageRequested, Epoch: e, Err: reason})
	return nil
}

// tryDecide emits the decision log's Commit of the next epoch to decide
// when it may: Decide was called for it, every participant prepared it,
// and no decision is in flight (so decisions are made one at a time, in
// epoch order, each after the previous one landed).
func (m *Protocol) tryDecide() {
	if m.state != StateRunning || m.deciding != 0 {
		return
	}
	ep := m.find(m.lastDecided + 1)
	if ep == nil || !ep.requested || ep.phase != PhasePrepared {
		return
	}
	ep.phase = PhaseDeciding
	m.deciding = ep.epoch
	m.emitCall(ActCommit, decisionLog, ep.epoch)
}

// tryCommit emits participant i's Commit of the next epoch it has to
// commit, if that epoch is decided and i has no commit in flight. So a
// participant commits only decided epochs, in order, one at a time.
func (m *Protocol) tryCommit(i int) {
	if m.state != StateRunning || m.committing[i] != 0 {
		return
	}
	next := m.committed[i] + 1
	if next > m.lastDecided {
		return
	}
	m.committing[i] = next
	m.emitCall(ActCommit, i, next)
}

// finish reports Done for the oldest epochs that every participant
// committed, in order, drops them from the epochs in flight and opens the
// next ones.
func (m *Protocol) finish() {
	for len(m.inFlight) > 0 {
		e := m.inFlight[0].epoch
		if e > m.lastDecided || slices.ContainsFunc(m.committed, func(c Epoch) bool { return c < e }) {
			break
		}
		m.inFlight = m.inFlight[1:]
		m.emit(Action{Kind: ActDone, Epoch: e})
	}
	m.open()
}

// open opens epochs until MaxInFlight are in flight, emitting Begin of
// each at every participant. It runs when recovery ends and when an epoch
// is done; aborted epochs never make room, since an abort fails the job.
func (m *Protocol) open() {
	if m.state != StateRunning {
		return
	}
	for len(m.inFlight) < m.cfg.MaxInFlight {
		m.lastOpened++
		e := m.lastOpened
		m.inFlight = append(m.inFlight, &epochState{
			epoch:    e,
			phase:    PhaseOpen,
			begun:    make([]bool, len(m.names)),
			prepared: make([]bool, len(m.names)),
		})
		for i := range m.names {
			m.emitCall(ActBegin, i, e)
		}
	}
}

// fail records fe, aborts every epoch in flight that is neither decided
// nor being decided (the decision log's abort first, so the epoch can never
// be decided once it landed), and emits Fail last. An epoch being decided
// is left in doubt for recovery: aborting it anywhere could contradict a
// decision that lands after all.
func (m *Protocol) fail(fe *FailError) {
	if fe.Err == nil {
		fe.Err = errNoCause
	}
	fe.Permanent = fe.Stage != StageRequested && m.cfg.IsFenced(fe.Err)
	fe.LastDecided = m.lastDecided
	fe.InDoubt = m.deciding
	if m.state == StateRecovering {
		fe.Recovering = true
		fe.LastDecided = m.rec.decided // 0 until read
	}
	m.state = StateFailed
	m.err = fe
	keep := m.inFlight[:0]
	for _, ep := range m.inFlight {
		if ep.phase == PhaseDeciding || ep.phase == PhaseCommitting {
			keep = append(keep, ep)
			continue
		}
		for i := range m.names {
			m.emitCall(ActAbort, i, ep.epoch)
		}
	}
	clear(m.inFlight[len(keep):])
	m.inFlight = keep
	m.emit(Action{Kind: ActFail, Err: fe})
}

// running reports why Barrier, Decide and Abort are not allowed now.
func (m *Protocol) running() error {
	switch m.state {
	case StateRecovering:
		return ErrNotRecovered
	case StateFailed:
		return fmt.Errorf("%w: %w", ErrFailed, m.err)
	}
	return nil
}

// outcome validates the outcome of an emitted call and retires it. On error
// nothing changed.
func (m *Protocol) outcome(kind ActionKind, participant string, e Epoch) (int, error) {
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
func (m *Protocol) emitCall(kind ActionKind, i int, e Epoch) {
	m.outstanding[call{kind, i, e}] = struct{}{}
	m.emit(Action{Kind: kind, Participant: m.names[i], Epoch: e})
}

func (m *Protocol) emit(a Action) { m.out.acts = append(m.out.acts, a) }

func (m *Protocol) find(e Epoch) *epochState {
	for _, ep := range m.inFlight {
		if ep.epoch == e {
			return ep
		}
	}
	return nil
}
