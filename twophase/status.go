package twophase

// State returns the Machine's life-cycle state.
func (m *Machine) State() State { return m.state }

// Open returns the newest epoch that every participant began and that is
// not done yet: the epoch whose records the participants take now. 0
// when there is none (during recovery, while the next epoch opens, after
// a failure or the stop).
func (m *Machine) Open() Epoch {
	if !m.running() {
		return 0
	}
	for i := len(m.inFlight) - 1; i >= 0; i-- {
		if ep := m.inFlight[i]; ep.phase >= PhaseOpen {
			return ep.id
		}
	}
	return 0
}

// Promised returns the checkpoint that serves the latest MsgTriggerNow or
// MsgStop (0: none asked yet): answer the request when it completes.
func (m *Machine) Promised() Epoch { return m.promised }

// LastCompleted returns the newest checkpoint the decision log committed:
// read back by recovery, then each decision (0: none).
func (m *Machine) LastCompleted() Epoch {
	if m.rec != nil {
		return m.rec.decided
	}
	return m.lastDecided
}
