package checkpoint

import (
	"slices"
	"time"
)

// InFlight describes a checkpoint that is neither completed nor aborted,
// for an admin endpoint or a log line.
type InFlight struct {
	ID          ID
	Phase       Phase
	TriggeredAt time.Time
	// Waiting lists the tasks that have not acked yet, sorted.
	Waiting []TaskID
}

// State returns the coordinator's life-cycle state.
func (c *Coordinator) State() State { return c.state }

// Err returns the *FailError once the job failed, else nil.
func (c *Coordinator) Err() error {
	if c.err == nil {
		return nil
	}
	return c.err
}

// LastTriggered returns the id of the newest triggered checkpoint (the
// restored id before the first trigger).
func (c *Coordinator) LastTriggered() ID { return c.lastTriggered }

// LastCompleted returns the newest completed (committed) checkpoint, or the
// one restored from, or 0.
func (c *Coordinator) LastCompleted() ID { return c.lastCompleted }

// LastCompletedAt returns when LastCompleted committed, as reported to
// Committed (or CoordinatorConfig.LastCompletedAt before that).
func (c *Coordinator) LastCompletedAt() time.Time { return c.lastCompletedAt }

// InFlight returns the checkpoints in flight, in id order.
func (c *Coordinator) InFlight() []InFlight {
	out := make([]InFlight, len(c.inFlight))
	for i, p := range c.inFlight {
		out[i] = InFlight{ID: p.id, Phase: p.phase, TriggeredAt: p.triggeredAt, Waiting: c.waiting(p)}
	}
	return out
}

// CompletedCount returns how many checkpoints this coordinator completed.
func (c *Coordinator) CompletedCount() int { return c.completed }

// AbortedCount returns how many checkpoints this coordinator aborted.
func (c *Coordinator) AbortedCount() int { return c.aborted }

// Tasks returns the tasks that must ack every checkpoint, sorted.
func (c *Coordinator) Tasks() []TaskID { return slices.Clone(c.tasks) }
