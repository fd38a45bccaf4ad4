package twophase

import (
	"errors"
	"fmt"
	"strings"
)

// Errors returned by Step. A message that returns one changed nothing and
// emitted nothing: the caller logs it and goes on. ErrUnknownTask,
// ErrUnknownCheckpoint, ErrUnknownParticipant, ErrNotOutstanding and
// ErrBadMsg point at a bug in the caller; the others are normal races (a
// late ack for a checkpoint already aborted) or a message in the wrong
// state.
var (
	// ErrBadMsg: a message of no known type, or a MsgStart without tasks
	// or with an empty or duplicate one.
	ErrBadMsg = errors.New("bad message")
	// ErrUnknownTask: the task is not one MsgStart named.
	ErrUnknownTask = errors.New("unknown task")
	// ErrUnknownCheckpoint: the checkpoint was never triggered.
	ErrUnknownCheckpoint = errors.New("checkpoint was never triggered")
	// ErrStale: the checkpoint no longer takes this message: it is
	// complete, aborted, or its decision is being made.
	ErrStale = errors.New("checkpoint no longer accepts this message")
	// ErrDuplicateAck: the task had acked this checkpoint already.
	ErrDuplicateAck = errors.New("duplicate ack")
	// ErrUnknownParticipant: the name is not in Config.
	ErrUnknownParticipant = errors.New("unknown participant")
	// ErrNotOutstanding: an outcome for a call the Machine did not emit,
	// or whose outcome was reported already.
	ErrNotOutstanding = errors.New("no such call outstanding")
	// ErrNotRecovered: a message that needs recovery over (a checkpoint's,
	// or MsgStart) came before ActResume.
	ErrNotRecovered = errors.New("recovery has not finished")
	// ErrStarted: MsgStart came twice.
	ErrStarted = errors.New("the task graph started already")
	// ErrFailed: the Machine failed (ActFail said why); the message was
	// ignored.
	ErrFailed = errors.New("the job failed")
	// ErrStopped: the final checkpoint is done; the message was ignored.
	ErrStopped = errors.New("the job stopped")
)

// Causes carried by FailError.Err, for errors.Is.
var (
	// ErrTimeout: a checkpoint outlived Config.Timeout.
	ErrTimeout = errors.New("timed out")
	// ErrDeclined: a task declined a checkpoint; its reason is wrapped
	// too.
	ErrDeclined = errors.New("declined")
)

// errNoCause stands in for a nil error reported as a failure, so that a
// FailError always has a cause.
var errNoCause = errors.New("no error given")

// FailError is carried by ActFail: the job must stop. Unless Permanent it restarts with a new Machine, whose
// recovery settles every epoch left in doubt here by the decision log: an
// epoch commits everywhere if the decision log committed it, else it is
// aborted everywhere.
//
// Why a restart and not "skip N, go on with N+1" (Flink's
// tolerable-failed-checkpoints)? Epoch N's outputs and state changes live
// in transaction N. If N cannot commit they are gone, but the state
// snapshotted at barrier N+1 already includes epoch N's inputs and its
// source offsets are past them: committing N+1 would lose epoch N's
// outputs for good. The only consistent move is to rewind to the last
// committed checkpoint and replay.
type FailError struct {
	// Epoch is the checkpoint whose failure failed the job (0 for a
	// failure during recovery of no epoch, or the caller's Abort with
	// nothing in flight).
	Epoch Epoch
	// Reason is why, as a metric label.
	Reason AbortReason
	// Call is the participant call that failed (ActBegin, ActPrepare,
	// ActCommit, ...), 0 when no call failed (a task's decline, a
	// timeout, the caller's Abort).
	Call ActionKind
	// Participant is the participant whose call failed ("" if none).
	Participant string
	// Decided: Epoch's decision landed before the failure (a participant's
	// Commit failed after it), so the failure cannot undo it; recovery
	// commits Epoch at Participant.
	Decided bool
	// InDoubt is an epoch whose decision was being made when the job
	// failed (the decision log's commit was outstanding, or failed with
	// an outcome that may still have landed), 0 if none. Only the
	// decision log, read back by recovery, knows whether it committed.
	InDoubt Epoch
	// LastDecided is the newest checkpoint known complete when the job
	// failed: the one to restart from, unless InDoubt turns out decided.
	// 0: none (start from the configured positions).
	LastDecided Epoch
	// Permanent: a participant was fenced by another instance of the job.
	// This instance must exit and must not restart (the other instance
	// recovers and owns the job). errors.Is(err, ErrFenced) holds.
	Permanent bool
	// Recovering: the failure happened during recovery, before any epoch
	// opened; retry recovery.
	Recovering bool
	// Err is the cause: a participant's error, ErrTimeout, ErrDeclined
	// (wrapping the task's reason), or the caller's reason to abort.
	Err error
}

func (e *FailError) Error() string {
	var b strings.Builder
	if e.Permanent {
		fmt.Fprintf(&b, "participant %q is fenced (%v", e.Participant, e.Call)
		if e.Epoch != 0 {
			fmt.Fprintf(&b, " of epoch %d", e.Epoch)
		}
		fmt.Fprintf(&b, "): another instance of the job took over; this one must exit and not restart: %v", e.Err)
		return b.String()
	}
	switch {
	case e.Recovering && e.Call == ActRecover:
		fmt.Fprintf(&b, "recovering participant %q failed: %v; retry recovery", e.Participant, e.Err)
	case e.Recovering && e.Call == ActReadDecision:
		fmt.Fprintf(&b, "reading the last decided checkpoint from %q failed: %v; retry recovery", e.Participant, e.Err)
	case e.Recovering && e.Call == ActAbort:
		fmt.Fprintf(&b, "recovery could not abort in-doubt epoch %d at %q: %v; retry recovery", e.Epoch, e.Participant, e.Err)
	case e.Recovering && e.Call == ActCommit:
		fmt.Fprintf(&b, "recovery could not commit decided epoch %d at %q: %v; retry recovery", e.Epoch, e.Participant, e.Err)
	case e.Recovering:
		fmt.Fprintf(&b, "recovery stopped: %v", e.Err)
	case e.Call == ActBegin:
		fmt.Fprintf(&b, "participant %q failed to begin epoch %d: %v; epoch %d is aborted everywhere", e.Participant, e.Epoch, e.Err, e.Epoch)
	case e.Call == ActPrepare:
		fmt.Fprintf(&b, "participant %q failed to prepare epoch %d: %v; epoch %d is aborted everywhere", e.Participant, e.Epoch, e.Err, e.Epoch)
	case e.Call == ActCommit && e.Decided:
		fmt.Fprintf(&b, "epoch %d is decided, but participant %q failed to commit it: %v; the decision cannot be undone: recovery must commit epoch %d at %q", e.Epoch, e.Participant, e.Err, e.Epoch, e.Participant)
	case e.Call == ActCommit:
		fmt.Fprintf(&b, "the decision log %q failed to commit epoch %d: %v; whether checkpoint %d is complete is in doubt: recovery reads the decision log and commits or aborts it everywhere", e.Participant, e.Epoch, e.Err, e.Epoch)
	case e.Reason == ReasonJobFailed && e.Epoch != 0:
		fmt.Fprintf(&b, "epoch %d aborted: %v", e.Epoch, e.Err)
	case e.Reason == ReasonJobFailed:
		fmt.Fprintf(&b, "the job stops: %v", e.Err)
	default: // a task's decline, a timeout
		fmt.Fprintf(&b, "checkpoint %d %v", e.Epoch, e.Err)
	}
	if e.Recovering {
		return b.String()
	}
	if e.LastDecided == 0 {
		b.WriteString("; the job must restart from its configured start positions (no checkpoint completed)")
	} else {
		fmt.Fprintf(&b, "; the job must restart from checkpoint %d", e.LastDecided)
	}
	if e.InDoubt != 0 {
		fmt.Fprintf(&b, " (or %d, whose decision was in flight: the decision log tells)", e.InDoubt)
	}
	return b.String()
}

// Unwrap returns the cause, and ErrFenced for a permanent failure whose
// cause a custom Config.IsFenced recognised without wrapping ErrFenced.
func (e *FailError) Unwrap() []error {
	if e.Permanent && !errors.Is(e.Err, ErrFenced) {
		return []error{ErrFenced, e.Err}
	}
	return []error{e.Err}
}
