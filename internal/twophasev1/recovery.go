package twophasev1

import (
	"errors"
	"fmt"
	"slices"
)

// recovery is the Protocol's state until ActResume.
type recovery struct {
	started   bool
	recovered []bool    // by participant: Recover returned
	inDoubt   [][]Epoch // by participant: what Recover reported, sorted
	read      bool      // the decision log's LastDecided returned
	decided   Epoch     // what it returned
	// settle[i] lists participant i's settling actions not yet emitted:
	// commits in epoch order, then aborts. They go out one at a time, so
	// a commit that fails is never followed by a later one.
	settle [][]Action
}

func newRecovery(n int) *recovery {
	return &recovery{
		recovered: make([]bool, n),
		inDoubt:   make([][]Epoch, n),
		settle:    make([][]Action, n),
	}
}

// Start begins recovery: it emits a Recover for every participant, the
// decision log first. Once the decision log recovered (fenced its
// predecessor, so no decision can land any more), ReadDecision follows;
// then every in-doubt epoch is settled, ActResume ends recovery, and the
// Begin of the next epoch follows at every participant.
func (m *Protocol) Start() error {
	if m.state != StateRecovering || m.rec.started {
		return fmt.Errorf("start recovery: %w", ErrStarted)
	}
	m.rec.started = true
	for i := range m.names {
		m.emitCall(ActRecover, i, 0)
	}
	return nil
}

// Recovered reports that participant fenced its predecessors and holds the
// inDoubt epochs prepared, neither committed nor aborted. Each is settled by
// the decision log: committed if e <= LastDecided, else aborted.
func (m *Protocol) Recovered(participant string, inDoubt []Epoch) error {
	i, err := m.outcome(ActRecover, participant, 0)
	if err != nil {
		return fmt.Errorf("%s recovered: %w", participant, err)
	}
	if m.state != StateRecovering {
		return nil
	}
	if slices.Contains(inDoubt, 0) {
		m.fail(&FailError{Stage: StageRecover, Participant: participant,
			Err: errors.New("participant reported epoch 0 in doubt; epochs start at 1")})
		return nil
	}
	r := m.rec
	r.recovered[i] = true
	r.inDoubt[i] = slices.Compact(slices.Sorted(slices.Values(inDoubt)))
	if i == decisionLog {
		m.emitCall(ActReadDecision, decisionLog, 0)
	}
	if r.read {
		m.plan(i)
	}
	m.tryResume()
	return nil
}

// RecoverFailed reports that participant's Recover failed: recovery fails,
// permanently if the participant was fenced by a newer instance.
func (m *Protocol) RecoverFailed(participant string, cause error) error {
	i, err := m.outcome(ActRecover, participant, 0)
	if err != nil {
		return fmt.Errorf("%s failed to recover (%v): %w", participant, cause, err)
	}
	if m.state != StateRecovering {
		return nil
	}
	m.fail(&FailError{Stage: StageRecover, Participant: m.names[i], Err: cause})
	return nil
}

// DecisionRead reports the decision log's LastDecided: every epoch up to
// last is decided, none after it.
func (m *Protocol) DecisionRead(last Epoch) error {
	if _, err := m.outcome(ActReadDecision, m.names[decisionLog], 0); err != nil {
		return fmt.Errorf("decision read (%d): %w", last, err)
	}
	if m.state != StateRecovering {
		return nil
	}
	r := m.rec
	r.read, r.decided = true, last
	for i := range m.names {
		if r.recovered[i] {
			m.plan(i)
		}
	}
	m.tryResume()
	return nil
}

// DecisionReadFailed reports that LastDecided failed: recovery fails.
func (m *Protocol) DecisionReadFailed(cause error) error {
	if _, err := m.outcome(ActReadDecision, m.names[decisionLog], 0); err != nil {
		return fmt.Errorf("decision read failed (%v): %w", cause, err)
	}
	if m.state != StateRecovering {
		return nil
	}
	m.fail(&FailError{Stage: StageReadDecision, Participant: m.names[decisionLog], Err: cause})
	return nil
}

// plan lists how participant i's in-doubt epochs are settled, once both its
// report and the decision are known, and emits the first step.
func (m *Protocol) plan(i int) {
	r := m.rec
	var commits, aborts []Action
	for _, e := range r.inDoubt[i] {
		if e <= r.decided {
			commits = append(commits, Action{Kind: ActCommit, Participant: m.names[i], Epoch: e})
		} else {
			aborts = append(aborts, Action{Kind: ActAbort, Participant: m.names[i], Epoch: e})
		}
	}
	r.settle[i] = append(commits, aborts...)
	m.settleNext(i)
}

// settled records that participant i's settling action succeeded and
// emits its next one, or resumes when everything is settled.
func (m *Protocol) settled(i int) {
	m.settleNext(i)
	m.tryResume()
}

func (m *Protocol) settleNext(i int) {
	r := m.rec
	if len(r.settle[i]) == 0 {
		return
	}
	a := r.settle[i][0]
	r.settle[i] = r.settle[i][1:]
	m.emitCall(a.Kind, i, a.Epoch)
}

// tryResume ends recovery once every participant recovered, the decision
// is known and every in-doubt epoch is settled: numbering continues after
// the last decided epoch, which every participant has now committed, and
// the next epochs open.
func (m *Protocol) tryResume() {
	r := m.rec
	if m.state != StateRecovering || !r.read || len(m.outstanding) > 0 || slices.Contains(r.recovered, false) {
		return
	}
	for _, s := range r.settle {
		if len(s) > 0 {
			return
		}
	}
	d := r.decided
	m.rec = nil
	m.state = StateRunning
	m.lastOpened, m.lastBarrier, m.lastRequested, m.lastDecided = d, d, d, d
	for i := range m.committed {
		m.committed[i] = d
	}
	m.emit(Action{Kind: ActResume, Epoch: d})
	m.open()
}
