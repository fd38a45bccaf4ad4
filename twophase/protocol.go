package twophase

import (
	"fmt"
	"slices"
)

// Protocol sequences the two-phase commit of epochs across one decision log
// and any number of other participants. It is a pure state machine: inputs
// arrive through its methods, each returns the actions its caller must take,
// in order, and the caller does all I/O and reports every outcome back. It
// is deterministic, starts no goroutine, reads no clock and is not safe for
// concurrent use: one goroutine owns it. See the package documentation for
// the contract.
//
// Each input returns its actions directly, instead of collecting them for a
// raft-style Ready/Advance: an action is handed out the moment it exists, so
// the Protocol never has to withdraw one the caller did not see yet (which
// is why checkpoint.Coordinator tracks "handed out" commits).
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

	lastBegun     Epoch // newest epoch begun (the restored one before that)
	lastRequested Epoch // newest epoch Decide was called for
	lastDecided   Epoch // newest epoch the decision log committed
	deciding      Epoch // the decision log's commit in flight, 0 if none
	// committed[i] is the newest epoch participant i committed (index 0 is
	// the decision log and follows lastDecided); committing[i] is its
	// commit in flight, 0 if none. One commit per participant at a time
	// keeps its commits in epoch order even if one fails.
	committed  []Epoch
	committing []Epoch
	// inFlight holds the epochs begun and neither done nor aborted, in
	// epoch order. Their epochs are contiguous.
	inFlight []*epochState

	out []Action // actions of the input being handled
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
	prepared  []bool // by participant index
	nPrepared int
	requested bool // Decide was called for it
}

// decisionLog is the index of the decision log in names.
const decisionLog = 0

// NewProtocol returns a Protocol in StateRecovering. Call Start to begin
// recovery: no epoch may begin before every participant fenced its
// predecessors and every in-doubt epoch was settled.
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

// Begin starts epoch e: barrier e reached the participants, so everything
// of epoch e has been handed to them. It returns a Prepare for every
// participant. e must be LastBegun()+1, and fewer than MaxInFlight epochs
// may be in flight.
func (m *Protocol) Begin(e Epoch) ([]Action, error) {
	if err := m.running(); err != nil {
		return nil, fmt.Errorf("begin epoch %d: %w", e, err)
	}
	if e != m.lastBegun+1 {
		return nil, fmt.Errorf("begin epoch %d: %w: the next epoch is %d", e, ErrOutOfOrder, m.lastBegun+1)
	}
	if len(m.inFlight) >= m.cfg.MaxInFlight {
		return nil, fmt.Errorf("begin epoch %d: %w: %d of %d", e, ErrTooManyInFlight, len(m.inFlight), m.cfg.MaxInFlight)
	}
	m.lastBegun = e
	m.inFlight = append(m.inFlight, &epochState{
		epoch:    e,
		phase:    PhasePreparing,
		prepared: make([]bool, len(m.names)),
	})
	for i := range m.names {
		m.emitCall(ActPrepare, i, e)
	}
	return m.flush(), nil
}

// Prepared reports that participant prepared epoch e. When every
// participant prepared e and Decide(e) was called, the decision log's
// Commit of e follows (once e-1 is decided).
func (m *Protocol) Prepared(participant string, e Epoch) ([]Action, error) {
	i, err := m.outcome(ActPrepare, participant, e)
	if err != nil {
		return nil, fmt.Errorf("%s prepared epoch %d: %w", participant, e, err)
	}
	if m.state != StateRunning {
		return nil, nil // the job failed; the epoch was aborted
	}
	ep := m.find(e)
	ep.prepared[i] = true
	ep.nPrepared++
	if ep.nPrepared == len(m.names) {
		ep.phase = PhasePrepared
		m.tryDecide()
	}
	return m.flush(), nil
}

// PrepareFailed reports that participant could not prepare epoch e. Epoch e
// was not decided: it and every later epoch are aborted everywhere, and the
// job fails.
func (m *Protocol) PrepareFailed(participant string, e Epoch, cause error) ([]Action, error) {
	i, err := m.outcome(ActPrepare, participant, e)
	if err != nil {
		return nil, fmt.Errorf("%s failed to prepare epoch %d (%v): %w", participant, e, cause, err)
	}
	if m.state != StateRunning {
		return nil, nil
	}
	m.fail(&FailError{Stage: StagePrepare, Epoch: e, Participant: m.names[i], Err: cause})
	return m.flush(), nil
}

// Decide reports that epoch e may commit: the checkpoint coordinator handed
// out commit e (every task acked e, e-1 committed). e must be the epoch
// after the last one passed to Decide, and begun. The decision log commits
// e as soon as every participant prepared e and e-1 is decided; Decide
// before the last Prepared is fine.
func (m *Protocol) Decide(e Epoch) ([]Action, error) {
	if err := m.running(); err != nil {
		return nil, fmt.Errorf("decide epoch %d: %w", e, err)
	}
	if e != m.lastRequested+1 {
		return nil, fmt.Errorf("decide epoch %d: %w: the next epoch to decide is %d", e, ErrOutOfOrder, m.lastRequested+1)
	}
	if e > m.lastBegun {
		return nil, fmt.Errorf("decide epoch %d: %w: it has not begun (last begun %d)", e, ErrOutOfOrder, m.lastBegun)
	}
	m.lastRequested = e
	m.find(e).requested = true
	m.tryDecide()
	return m.flush(), nil
}

// Committed reports that participant committed epoch e. For the decision
// log this is the decision: Decided(e) follows, and the other participants
// commit e. When every participant committed e, Done(e) follows.
func (m *Protocol) Committed(participant string, e Epoch) ([]Action, error) {
	i, err := m.outcome(ActCommit, participant, e)
	if err != nil {
		return nil, fmt.Errorf("%s committed epoch %d: %w", participant, e, err)
	}
	if m.state == StateRecovering {
		m.settled(i)
		return m.flush(), nil
	}
	if i != decisionLog {
		m.committed[i], m.committing[i] = e, 0
		if m.state != StateRunning {
			return nil, nil
		}
		m.finish()
		m.tryCommit(i)
		return m.flush(), nil
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
		return m.flush(), nil
	}
	for j := 1; j < len(m.names); j++ {
		m.tryCommit(j)
	}
	m.finish() // the decision log alone: done at once
	m.tryDecide()
	return m.flush(), nil
}

// CommitFailed reports that participant's Commit of epoch e failed. On the
// decision log the epoch is in doubt (the commit may have landed anyway);
// on another participant the epoch is decided and stays so. Either way the
// job fails, later epochs are aborted, and recovery settles e by the
// decision log.
func (m *Protocol) CommitFailed(participant string, e Epoch, cause error) ([]Action, error) {
	i, err := m.outcome(ActCommit, participant, e)
	if err != nil {
		return nil, fmt.Errorf("%s failed to commit epoch %d (%v): %w", participant, e, cause, err)
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
	return m.flush(), nil
}

// Aborted reports that participant aborted epoch e. Only recovery waits for
// aborts; after a failure they are best effort and this changes nothing.
func (m *Protocol) Aborted(participant string, e Epoch) ([]Action, error) {
	i, err := m.outcome(ActAbort, participant, e)
	if err != nil {
		return nil, fmt.Errorf("%s aborted epoch %d: %w", participant, e, err)
	}
	if m.state == StateRecovering {
		m.settled(i)
	}
	return m.flush(), nil
}

// AbortFailed reports that participant could not abort epoch e. During
// recovery that fails the job (the epoch is still prepared there, and its
// number will be used again); after a failure it changes nothing, as the
// next recovery aborts e.
func (m *Protocol) AbortFailed(participant string, e Epoch, cause error) ([]Action, error) {
	i, err := m.outcome(ActAbort, participant, e)
	if err != nil {
		return nil, fmt.Errorf("%s failed to abort epoch %d (%v): %w", participant, e, cause, err)
	}
	if m.state == StateRecovering {
		m.fail(&FailError{Stage: StageAbort, Epoch: e, Participant: m.names[i], Err: cause})
	}
	return m.flush(), nil
}

// Abort aborts epoch e on the caller's request (its checkpoint timed out or
// was declined, or the job is shutting down): e and every other epoch in
// flight that is not decided are aborted everywhere, and the job fails with
// StageRequested, because a later epoch cannot commit without e. An epoch
// whose decision is made or being made cannot be aborted (ErrDecided).
func (m *Protocol) Abort(e Epoch, reason error) ([]Action, error) {
	if err := m.running(); err != nil {
		return nil, fmt.Errorf("abort epoch %d: %w", e, err)
	}
	ep := m.find(e)
	if ep == nil {
		return nil, fmt.Errorf("abort epoch %d: %w: not in flight", e, ErrOutOfOrder)
	}
	if ep.phase == PhaseDeciding || ep.phase == PhaseCommitting {
		return nil, fmt.Errorf("abort epoch %d: %w", e, ErrDecided)
	}
	m.fail(&FailError{Stage: StageRequested, Epoch: e, Err: reason})
	return m.flush(), nil
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
// committed, in order, and drops them from the epochs in flight.
func (m *Protocol) finish() {
	for len(m.inFlight) > 0 {
		e := m.inFlight[0].epoch
		if e > m.lastDecided || slices.ContainsFunc(m.committed, func(c Epoch) bool { return c < e }) {
			return
		}
		m.inFlight = m.inFlight[1:]
		m.emit(Action{Kind: ActDone, Epoch: e})
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

// running reports why Begin, Decide and Abort are not allowed now.
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

func (m *Protocol) emit(a Action) { m.out = append(m.out, a) }

// flush returns the actions of the input just handled.
func (m *Protocol) flush() []Action {
	out := m.out
	m.out = nil
	return out
}

func (m *Protocol) find(e Epoch) *epochState {
	for _, ep := range m.inFlight {
		if ep.epoch == e {
			return ep
		}
	}
	return nil
}
