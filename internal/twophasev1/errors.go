package twophasev1

import (
	"errors"
	"fmt"
	"strings"
)

// Errors returned by the Protocol's inputs. An input that returns one of
// them changed nothing and emitted nothing. ErrOutOfOrder,
// ErrTooManyInFlight, ErrUnknownParticipant and ErrNotOutstanding point at a
// bug in the caller; ErrFailed and ErrNotRecovered at a call made in the
// wrong state.
var (
	// ErrUnknownParticipant: the name is not in Config.
	ErrUnknownParticipant = errors.New("unknown participant")
	// ErrNotOutstanding: an outcome for an action the Protocol did not
	// emit, or whose outcome was already reported.
	ErrNotOutstanding = errors.New("no such action outstanding")
	// ErrOutOfOrder: Barrier or Decide for an epoch that is not the next
	// one, or Abort of an epoch not in flight.
	ErrOutOfOrder = errors.New("epoch out of order")
	// ErrTooManyInFlight: Barrier for an epoch that is not open yet,
	// because Config.MaxInFlight epochs are in flight.
	ErrTooManyInFlight = errors.New("too many epochs in flight")
	// ErrDecided: Abort of an epoch whose decision was made or is being
	// made; only recovery can settle it now.
	ErrDecided = errors.New("epoch decided or being decided")
	// ErrNotRecovered: Barrier, Decide or Abort before recovery finished
	// (before ActResume).
	ErrNotRecovered = errors.New("recovery has not finished")
	// ErrStarted: Start called twice.
	ErrStarted = errors.New("recovery already started")
	// ErrFailed: the Protocol failed (see Err); the input was ignored.
	ErrFailed = errors.New("two-phase commit failed")
)

// errNoCause stands in for a nil error reported as a failure, so a
// FailError always has a cause.
var errNoCause = errors.New("no error given")

// FailError is carried by ActFail and returned by Protocol.Err: the job must
// stop. Unless Permanent, it restarts by recovering with a new Protocol,
// which settles every epoch left in doubt here by the decision log: an
// epoch commits everywhere if the decision log committed it (e <=
// LastDecided as read back), else it is aborted everywhere.
type FailError struct {
	// Stage is the step that failed.
	Stage Stage
	// Epoch is the epoch whose step failed (0 for StageRecover and
	// StageReadDecision).
	Epoch Epoch
	// Participant is the participant whose call failed ("" for
	// StageRequested).
	Participant string
	// Decided: Epoch's decision committed before the failure (StageCommit),
	// so the failure cannot undo it. Recovery commits Epoch at Participant.
	Decided bool
	// InDoubt is an epoch whose decision was being made when the job failed
	// (the decision log's commit was outstanding, or it failed with an
	// outcome that may still have landed), 0 if none. Only the decision log,
	// read back by recovery, knows whether it committed.
	InDoubt Epoch
	// LastDecided is the newest epoch known decided when the job failed:
	// the checkpoint to restart from, unless InDoubt turns out decided.
	LastDecided Epoch
	// Permanent: a participant was fenced by another instance of the job.
	// This instance must exit and must not restart (the other instance
	// recovers and owns the job). errors.Is(err, ErrFenced) holds.
	Permanent bool
	// Recovering: the failure happened during recovery, before any epoch
	// was opened; retry recovery.
	Recovering bool
	// Err is the participant's error, or the caller's reason for
	// StageRequested.
	Err error
}

func (e *FailError) Error() string {
	var b strings.Builder
	b.WriteString("two-phase commit: ")
	if e.Permanent {
		fmt.Fprintf(&b, "participant %q is fenced (%s", e.Participant, e.Stage)
		if e.Epoch != 0 {
			fmt.Fprintf(&b, " of epoch %d", e.Epoch)
		}
		fmt.Fprintf(&b, "): another instance of the job took over; this one must exit and not restart: %v", e.Err)
		return b.String()
	}
	switch e.Stage {
	case StageRecover:
		fmt.Fprintf(&b, "recovering participant %q failed: %v; retry recovery", e.Participant, e.Err)
	case StageReadDecision:
		fmt.Fprintf(&b, "reading the last decided epoch from %q failed: %v; retry recovery", e.Participant, e.Err)
	case StageBegin:
		fmt.Fprintf(&b, "participant %q failed to begin epoch %d: %v; epoch %d is aborted everywhere", e.Participant, e.Epoch, e.Err, e.Epoch)
	case StagePrepare:
		fmt.Fprintf(&b, "participant %q failed to prepare epoch %d: %v; epoch %d is aborted everywhere", e.Participant, e.Epoch, e.Err, e.Epoch)
	case StageDecide:
		fmt.Fprintf(&b, "the decision log %q failed to commit epoch %d: %v; whether epoch %d is decided is in doubt: recovery reads the decision log and commits or aborts it everywhere", e.Participant, e.Epoch, e.Err, e.Epoch)
	case StageCommit:
		fmt.Fprintf(&b, "epoch %d is decided, but participant %q failed to commit it: %v; the decision cannot be undone: recovery must commit epoch %d at %q", e.Epoch, e.Participant, e.Err, e.Epoch, e.Participant)
	case StageAbort:
		fmt.Fprintf(&b, "recovery could not abort in-doubt epoch %d at %q: %v; retry recovery", e.Epoch, e.Participant, e.Err)
	case StageRequested:
		fmt.Fprintf(&b, "epoch %d aborted on request: %v", e.Epoch, e.Err)
	default:
		fmt.Fprintf(&b, "%v failed at %q, epoch %d: %v", e.Stage, e.Participant, e.Epoch, e.Err)
	}
	if e.Recovering {
		return b.String()
	}
	if e.InDoubt != 0 && e.Stage != StageDecide {
		fmt.Fprintf(&b, "; epoch %d was being decided and is in doubt", e.InDoubt)
	}
	if e.InDoubt != 0 {
		fmt.Fprintf(&b, "; the job restarts from checkpoint %d or %d, whichever the decision log holds", e.LastDecided, e.InDoubt)
	} else {
		fmt.Fprintf(&b, "; the job restarts from checkpoint %d", e.LastDecided)
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
