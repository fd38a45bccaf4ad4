package checkpoint

import "strconv"

// ID numbers checkpoints of one job: 1-based and strictly increasing, one
// per epoch. Checkpoint N is the state after epoch N, and under exactly_once
// it commits in Kafka transaction N. The zero ID means "none".
type ID uint64

// TaskID names a task that must acknowledge every checkpoint (a source, a
// keyed operator, a sink). It is stable for the life of a task graph.
type TaskID string

// Phase is where one checkpoint is in its life. The zero value is invalid,
// so an uninitialised phase is never mistaken for a real one.
//
//	Pending --every task acked--> Acked --predecessor committed--> Committing --Committed--> Completed
//	   |                            |                                  |
//	   +-- timeout, decline --------+------------ CommitFailed --------+--> Aborted
type Phase int

const (
	// PhasePending: the barrier was triggered; some tasks have not acked.
	PhasePending Phase = 1 + iota
	// PhaseAcked: every task acked, but an earlier checkpoint has not
	// committed yet, so this one may not be committed.
	PhaseAcked
	// PhaseCommitting: the commit was requested (Ready.Commit); the caller
	// has not reported its outcome.
	PhaseCommitting
	// PhaseCompleted: the caller reported the commit succeeded. This is the
	// only phase in which a checkpoint may be restored from.
	PhaseCompleted
	// PhaseAborted: timed out, declined, failed to commit, or dropped
	// because the job failed.
	PhaseAborted
)

func (p Phase) String() string {
	switch p {
	case PhasePending:
		return "pending"
	case PhaseAcked:
		return "acked"
	case PhaseCommitting:
		return "committing"
	case PhaseCompleted:
		return "completed"
	case PhaseAborted:
		return "aborted"
	}
	return "Phase(" + strconv.Itoa(int(p)) + ")"
}

// State is the coordinator's own life cycle. The zero value is invalid.
//
//	Running --Stop--> Stopping --final checkpoint committed--> Stopped
//	   |                 |
//	   +-----------------+--any abort--> Failed
type State int

const (
	// StateRunning: checkpoints are triggered on schedule and on request.
	StateRunning State = 1 + iota
	// StateStopping: Stop was called; only the final checkpoint is still
	// to be triggered, and none after it.
	StateStopping
	// StateStopped: the final checkpoint committed. Nothing else happens.
	StateStopped
	// StateFailed: a checkpoint was aborted; the job must restart from the
	// last completed checkpoint with a new Coordinator. Only the outcome of
	// a commit already handed out is still accepted.
	StateFailed
)

func (s State) String() string {
	switch s {
	case StateRunning:
		return "running"
	case StateStopping:
		return "stopping"
	case StateStopped:
		return "stopped"
	case StateFailed:
		return "failed"
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// AbortReason says why a checkpoint was aborted. The strings are stable and
// fit a metric label. The zero value is invalid.
type AbortReason int

const (
	// ReasonTimeout: not every task acked within CoordinatorConfig.Timeout.
	ReasonTimeout AbortReason = 1 + iota
	// ReasonDeclined: a task reported it could not snapshot.
	ReasonDeclined
	// ReasonCommitFailed: the caller reported the commit (the Kafka
	// transaction) failed.
	ReasonCommitFailed
	// ReasonJobFailed: another checkpoint was aborted, so the job restarts
	// and this one can never commit.
	ReasonJobFailed
)

func (r AbortReason) String() string {
	switch r {
	case ReasonTimeout:
		return "timeout"
	case ReasonDeclined:
		return "declined"
	case ReasonCommitFailed:
		return "commit_failed"
	case ReasonJobFailed:
		return "job_failed"
	}
	return "AbortReason(" + strconv.Itoa(int(r)) + ")"
}
