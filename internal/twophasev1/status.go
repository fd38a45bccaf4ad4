package twophasev1

import "slices"

// EpochStatus describes an epoch in flight, for an admin endpoint or a log
// line.
type EpochStatus struct {
	Epoch Epoch
	Phase Phase
	// Waiting lists the participants the epoch waits for: those that have
	// not reported Begun (PhaseOpen), those that have not prepared it
	// (PhasePreparing), the decision log (PhaseDeciding), those that have
	// not committed it (PhaseCommitting).
	Waiting []string
}

// State returns the Protocol's life-cycle state.
func (m *Protocol) State() State { return m.state }

// Err returns the *FailError once the Protocol failed, else nil.
func (m *Protocol) Err() error {
	if m.err == nil {
		return nil
	}
	return m.err
}

// LastOpened returns the newest epoch opened (ActBegin emitted); before
// recovery ends, 0.
func (m *Protocol) LastOpened() Epoch { return m.lastOpened }

// LastBarrier returns the newest epoch whose barrier arrived (Barrier);
// after recovery, the restored one until the first Barrier.
func (m *Protocol) LastBarrier() Epoch { return m.lastBarrier }

// LastDecided returns the newest epoch known decided: read from the
// decision log at recovery, then each decision log commit. 0 before
// recovery read it.
func (m *Protocol) LastDecided() Epoch {
	if m.rec != nil && m.rec.read {
		return m.rec.decided
	}
	return m.lastDecided
}

// Participants returns the participants' names, the decision log first.
func (m *Protocol) Participants() []string { return slices.Clone(m.names) }

// MaxInFlight returns the configured limit on epochs in flight.
func (m *Protocol) MaxInFlight() int { return m.cfg.MaxInFlight }

// InFlight returns the epochs in flight (open ones included), in epoch
// order. After a failure
// only the epochs left decided or in doubt remain.
func (m *Protocol) InFlight() []EpochStatus {
	out := make([]EpochStatus, len(m.inFlight))
	for k, ep := range m.inFlight {
		st := EpochStatus{Epoch: ep.epoch, Phase: ep.phase}
		for i, n := range m.names {
			switch ep.phase {
			case PhaseOpen:
				if !ep.begun[i] {
					st.Waiting = append(st.Waiting, n)
				}
			case PhasePreparing:
				if !ep.prepared[i] {
					st.Waiting = append(st.Waiting, n)
				}
			case PhaseDeciding:
				if i == decisionLog {
					st.Waiting = append(st.Waiting, n)
				}
			case PhaseCommitting:
				if m.committed[i] < ep.epoch {
					st.Waiting = append(st.Waiting, n)
				}
			}
		}
		out[k] = st
	}
	return out
}
