package twophase

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/eoflow/pipeline/checkpoint"
)

// The checkpoint schedule: when a checkpoint is triggered, and when one
// times out.

// start begins the periodic schedule at now, for the given tasks.
func (m *Machine) start(now time.Time, tasks []checkpoint.TaskID) error {
	if err := m.refuse(); err != nil {
		return err
	}
	if m.started {
		return ErrStarted
	}
	if len(tasks) == 0 {
		return fmt.Errorf("%w: no tasks to ack checkpoints", ErrBadMsg)
	}
	index := make(map[checkpoint.TaskID]int, len(tasks))
	for i, t := range tasks {
		if _, dup := index[t]; dup || t == "" {
			return fmt.Errorf("%w: task %q empty or named twice", ErrBadMsg, t)
		}
		index[t] = i
	}
	m.started = true
	m.taskIndex = index
	m.tasks = slices.Sorted(slices.Values(tasks))
	m.lastTriggeredAt = now
	return nil
}

// triggerNow promises the next checkpoint to a request that skips Interval
// and MinPause but not MaxInFlight: with no epoch open for it the request
// waits and is served by the very next trigger. Requests made while one
// waits share its checkpoint; while stopping, the final checkpoint serves
// them.
func (m *Machine) triggerNow() error {
	if m.state == StateStopping {
		m.promised = m.final
		return nil
	}
	if err := m.refuse(); err != nil {
		return err
	}
	m.promise()
	return nil
}

// stop promises a final checkpoint, triggered like TriggerNow's, after
// which nothing is triggered and no epoch opens. Idempotent.
func (m *Machine) stop() error {
	if m.state == StateStopping || m.state == StateStopped {
		m.promised = m.final
		return nil
	}
	if err := m.refuse(); err != nil {
		return err
	}
	m.final = m.promise()
	m.state = StateStopping
	return nil
}

// promise returns the checkpoint the next trigger serves, and says so in
// Promised.
func (m *Machine) promise() Epoch {
	if m.forced == 0 {
		m.forced = m.lastTriggered + 1
	}
	m.promised = m.forced
	return m.forced
}

// tick applies the time: timeouts first (a timeout fails the job, so it
// wins over a trigger), then at most one trigger. Every message ends with
// it, so a checkpoint due while none could start starts at the message
// that makes room for it.
func (m *Machine) tick() {
	if !m.running() {
		return
	}
	for _, ep := range m.inFlight {
		// Once the decision is asked for, only its outcome counts: timing
		// it out would call "aborted" what may yet commit.
		if ep.phase < PhasePending || ep.phase >= PhaseDeciding {
			continue
		}
		if !m.now.Before(ep.triggeredAt.Add(m.cfg.Timeout)) {
			m.fail(&FailError{Epoch: ep.id, Reason: ReasonTimeout, Err: m.timeoutCause(ep)})
			return
		}
	}
	ep := m.find(m.lastTriggered + 1)
	if ep == nil || ep.phase != PhaseOpen {
		return // not open everywhere yet, or MaxInFlight in flight
	}
	switch {
	case m.forced != 0:
	case m.state == StateStopping:
		return // the final checkpoint was triggered; nothing after it
	case !m.started:
		return // no schedule before the task graph runs
	case m.now.Before(m.lastTriggeredAt.Add(m.cfg.Interval)):
		return
	case m.ended && m.now.Before(m.lastEndedAt.Add(m.cfg.MinPause)):
		return
	}
	m.forced = 0
	m.lastTriggered = ep.id
	m.lastTriggeredAt = m.now
	ep.phase = PhasePending
	ep.triggeredAt = m.now
	ep.acked = make([]bool, len(m.tasks))
	m.emit(Action{Kind: ActTrigger, Epoch: ep.id})
	if len(m.tasks) == 0 {
		m.prepare(ep) // before the task graph runs, nobody acks
	}
}

// timeoutCause says what ep waited for when it timed out.
func (m *Machine) timeoutCause(ep *epoch) error {
	var waiting []string
	switch ep.phase {
	case PhasePending:
		for _, t := range m.tasks {
			if !ep.acked[m.taskIndex[t]] {
				waiting = append(waiting, string(t))
			}
		}
		return fmt.Errorf("%w after %v waiting for tasks %q", ErrTimeout, m.cfg.Timeout, waiting)
	case PhasePreparing:
		for i, n := range m.names {
			if !ep.prepared[i] {
				waiting = append(waiting, n)
			}
		}
		return fmt.Errorf("%w after %v, acked but waiting for participants %q to prepare", ErrTimeout, m.cfg.Timeout, waiting)
	}
	if ep.id > m.lastDecided+1 {
		return fmt.Errorf("%w after %v, prepared but waiting for checkpoint %d's decision", ErrTimeout, m.cfg.Timeout, ep.id-1)
	}
	return errors.Join(ErrTimeout, fmt.Errorf("checkpoint %d in phase %v", ep.id, ep.phase))
}
