package checkpoint

import (
	"errors"
	"fmt"
	"strings"
)

// Errors returned by the coordinator's inputs. An input that returns one of
// them changed nothing; the caller logs it and goes on. Only ErrUnknownTask
// and ErrUnknownCheckpoint point at a bug in the caller; the others are
// normal races (a late ack for a checkpoint that was already aborted).
var (
	// ErrUnknownTask: the task is not in CoordinatorConfig.Tasks.
	ErrUnknownTask = errors.New("unknown task")
	// ErrUnknownCheckpoint: the id was never triggered by this coordinator.
	ErrUnknownCheckpoint = errors.New("checkpoint was never triggered")
	// ErrStale: the checkpoint is no longer waiting for this input: it was
	// aborted, already completed, or its commit was already requested.
	ErrStale = errors.New("checkpoint no longer accepts this input")
	// ErrDuplicateAck: the task had already acked this checkpoint.
	ErrDuplicateAck = errors.New("duplicate ack")
	// ErrNotCommitting: Committed or CommitFailed for a checkpoint whose
	// commit Ready did not hand out, or whose outcome was already reported.
	ErrNotCommitting = errors.New("no commit outstanding for this checkpoint")
	// ErrFailed: the coordinator failed (see Err); the input was ignored.
	ErrFailed = errors.New("checkpoint coordinator failed")
	// ErrStopped: the final checkpoint committed; the input was ignored.
	ErrStopped = errors.New("checkpoint coordinator stopped")
)

// Causes carried by Abort.Err and FailError.Err, for errors.Is.
var (
	// ErrTimeout: a checkpoint outlived CoordinatorConfig.Timeout.
	ErrTimeout = errors.New("timed out")
	// ErrDeclined: a task declined a checkpoint; its reason is wrapped too.
	ErrDeclined = errors.New("declined")
	// ErrCommitFailed: the caller's commit failed; its error is wrapped too.
	ErrCommitFailed = errors.New("commit failed")
)

// Abort reports one aborted checkpoint in Ready.Aborted.
type Abort struct {
	ID     ID
	Reason AbortReason
	// Err explains the abort, for logs. For ReasonJobFailed it is the
	// job's *FailError.
	Err error
}

// FailError is Ready.Fail and Coordinator.Err: a checkpoint was aborted, so
// the job must restart from the last completed checkpoint.
//
// Why a restart and not "skip N, go on with N+1" (Flink's
// tolerable-failed-checkpoints)? Under exactly_once, epoch N's outputs and
// state changes live in transaction N. If N cannot commit, those records are
// gone, but the state snapshotted at barrier N+1 already includes epoch N's
// inputs and its source offsets are past them: committing N+1 would lose
// epoch N's outputs for good. The only consistent move is to rewind to the
// last committed checkpoint and replay. (at_least_once commits state and
// the checkpoint record in a transaction on the internal topics for the
// same reason.)
type FailError struct {
	// Checkpoint is the checkpoint whose abort failed the job.
	Checkpoint ID
	Reason     AbortReason
	// RestartFrom is the last checkpoint known to be complete when the job
	// failed; 0 means none completed (start from the configured positions).
	RestartFrom ID
	// InDoubt is a checkpoint whose commit had been requested but whose
	// outcome was not reported yet (0: none). It may still commit, so the
	// truth is whatever recovery reads from the checkpoint topic with
	// read_committed: RestartFrom or InDoubt.
	InDoubt ID
	// Err is the cause: wraps ErrTimeout, ErrDeclined (and the task's
	// reason) or ErrCommitFailed (and the commit's error).
	Err error
}

func (e *FailError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "checkpoint %d %v; ", e.Checkpoint, e.Err)
	if e.RestartFrom == 0 {
		b.WriteString("the job must restart from its configured start positions (no checkpoint completed)")
	} else {
		fmt.Fprintf(&b, "the job must restart from checkpoint %d", e.RestartFrom)
	}
	if e.InDoubt != 0 {
		fmt.Fprintf(&b, " (or %d, whose commit was in flight)", e.InDoubt)
	}
	return b.String()
}

func (e *FailError) Unwrap() error { return e.Err }
