package twophase

import (
	"errors"
	"slices"

	"github.com/eoflow/pipeline/internal/mutant"
)

// recovery is the Machine's state until ActResume.
type recovery struct {
	recovered []bool    // by participant: Recover returned
	inDoubt   [][]Epoch // by participant: what Recover reported, sorted
	read      bool      // the decision log's LastDecided returned
	decided   Epoch     // what it returned
	// settle[i] lists participant i's settling calls not yet emitted:
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

// recovered records that participant fenced its predecessors and holds
// the inDoubt epochs prepared, neither committed nor aborted. Each is
// settled by the decision log: committed if e <= its last decided epoch,
// else aborted. Once the decision log itself recovered (so that no
// decision can land any more), its last decision is read.
func (m *Machine) recovered(participant string, inDoubt []Epoch, cause error) error {
	i, err := m.outcome(ActRecover, participant, 0)
	if err != nil {
		return err
	}
	if m.state != StateRecovering {
		return nil
	}
	if cause == nil && slices.Contains(inDoubt, 0) {
		cause = errors.New("participant reported epoch 0 in doubt; epochs start at 1")
	}
	if cause != nil {
		m.fail(&FailError{Reason: ReasonJobFailed, Call: ActRecover, Participant: participant, Err: cause})
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

// decisionRead records the decision log's last decided epoch: every epoch
// up to last is decided, none after it.
func (m *Machine) decisionRead(participant string, last Epoch, cause error) error {
	if _, err := m.outcome(ActReadDecision, participant, 0); err != nil {
		return err
	}
	if m.state != StateRecovering {
		return nil
	}
	if cause != nil {
		m.fail(&FailError{Reason: ReasonJobFailed, Call: ActReadDecision, Participant: participant, Err: cause})
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

// plan lists how participant i's in-doubt epochs are settled, once both
// its report and the decision are known, and emits the first call.
func (m *Machine) plan(i int) {
	r := m.rec
	var commits, aborts []Action
	decided := r.decided
	if mutant.On("recovery-aborts-decided-epoch") {
		// The bug: the epoch the decision log decided last is aborted
		// where it was in doubt, though its checkpoint is complete.
		decided--
	}
	for _, e := range r.inDoubt[i] {
		if e <= decided {
			commits = append(commits, Action{Kind: ActCommit, Participant: m.names[i], Epoch: e})
		} else {
			aborts = append(aborts, Action{Kind: ActAbort, Participant: m.names[i], Epoch: e})
		}
	}
	r.settle[i] = append(commits, aborts...)
	m.settleNext(i)
}

// settled records that participant i's settling call succeeded and emits
// its next one, or resumes when everything is settled.
func (m *Machine) settled(i int) {
	m.settleNext(i)
	m.tryResume()
}

func (m *Machine) settleNext(i int) {
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
func (m *Machine) tryResume() {
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
	m.lastOpened, m.lastTriggered, m.lastDecided = d, d, d
	for i := range m.committed {
		m.committed[i] = d
	}
	m.emit(Action{Kind: ActResume, Epoch: d})
	m.open()
}
