package twophase

import (
	"strconv"

	"github.com/eoflow/pipeline/checkpoint"
)

// Epoch numbers the units of work that commit atomically: epoch N is
// everything a job produced between barrier N-1 and barrier N, and it
// commits together with checkpoint N, so it is the checkpoint id itself (an
// alias: no conversion sits between the record and the protocol). Epochs
// are 1-based; 0 means "none".
type Epoch = checkpoint.ID

// State is the Machine's life cycle. The zero value is invalid, so an
// uninitialised state is never mistaken for a real one.
//
//	Recovering --every in-doubt epoch settled (Resume)--> Running --Stop--> Stopping --final epoch done--> Stopped
//	     |                                                   |                 |
//	     +------------------- any failure (Fail) ------------+-----------------+--> Failed
type State int

const (
	// StateRecovering: participants are being fenced and their in-doubt
	// epochs settled by the decision log. No epoch may begin.
	StateRecovering State = 1 + iota
	// StateRunning: epochs open, checkpoints are triggered on schedule
	// and on request, prepared, decided and committed.
	StateRunning
	// StateStopping: Stop was called; only the final checkpoint is still
	// to be triggered, and no epoch after it opens.
	StateStopping
	// StateStopped: the final epoch is done everywhere and nothing is in
	// flight. Nothing else happens.
	StateStopped
	// StateFailed: the job must stop and recover with a new Machine (or,
	// when fenced, exit). Nothing is triggered, prepared, decided or
	// committed any more; the outcome of a decision already asked for is
	// still accepted.
	StateFailed
)

var stateNames = [...]string{
	StateRecovering: "recovering", StateRunning: "running", StateStopping: "stopping",
	StateStopped: "stopped", StateFailed: "failed",
}

func (v State) String() string { return name(stateNames[:], int(v), "State") }

// Phase is where one epoch in flight is. The zero value is invalid.
//
//	Opening --every participant began it--> Open --Trigger--> Pending --every task acked--> Preparing
//	  --every participant prepared--> Prepared --the previous epoch decided--> Deciding
//	  --the decision log committed (Completed)--> Committing --every participant committed (Done)--> gone
//
// Before Deciding, a failure aborts the epoch everywhere. From Deciding on
// it is never aborted: Deciding is in doubt until the decision log's commit
// returns, Committing is decided.
type Phase int

const (
	// PhaseOpening: Begin was emitted at every participant; some has not
	// reported Begun yet.
	PhaseOpening Phase = 1 + iota
	// PhaseOpen: every participant began the epoch: the caller hands them
	// its records. Its barrier has not been triggered.
	PhaseOpen
	// PhasePending: barrier N was triggered; some task has not acked it.
	PhasePending
	// PhasePreparing: every task acked, so everything of the epoch was
	// handed to the participants; some has not prepared it yet.
	PhasePreparing
	// PhasePrepared: every participant prepared; the epoch waits for the
	// decision of the one before it.
	PhasePrepared
	// PhaseDeciding: the decision log is committing the epoch. Its outcome
	// is the decision; until it is known the epoch is in doubt.
	PhaseDeciding
	// PhaseCommitting: decided, checkpoint N is complete. The other
	// participants commit it; nothing can undo it.
	PhaseCommitting
)

var phaseNames = [...]string{
	PhaseOpening: "opening", PhaseOpen: "open", PhasePending: "pending", PhasePreparing: "preparing",
	PhasePrepared: "prepared", PhaseDeciding: "deciding", PhaseCommitting: "committing",
}

func (v Phase) String() string { return name(phaseNames[:], int(v), "Phase") }

// AbortReason says why a checkpoint was aborted, in a FailError. The
// strings are stable and are the label values of the checkpoint-failure
// and restart metrics. The zero value is invalid.
type AbortReason int

const (
	// ReasonTimeout: the checkpoint's decision was not asked for within
	// Config.Timeout of its trigger.
	ReasonTimeout AbortReason = 1 + iota
	// ReasonDeclined: a task reported it could not snapshot, or a
	// participant could not begin or prepare the epoch (its "no" vote).
	ReasonDeclined
	// ReasonCommitFailed: a commit failed: the decision log's (the
	// checkpoint is in doubt) or another participant's after the decision
	// (it stays decided).
	ReasonCommitFailed
	// ReasonJobFailed: the job failed or stopped for a cause outside this
	// checkpoint (another checkpoint's abort, the caller's Abort, a
	// failure during recovery), so it can never commit.
	ReasonJobFailed
)

var abortReasonNames = [...]string{
	ReasonTimeout: "timeout", ReasonDeclined: "declined", ReasonCommitFailed: "commit_failed", ReasonJobFailed: "job_failed",
}

func (v AbortReason) String() string { return name(abortReasonNames[:], int(v), "AbortReason") }

// name is names[v], or "Type(v)" for a value without one (the zero value).
func name(names []string, v int, typ string) string {
	if v > 0 && v < len(names) && names[v] != "" {
		return names[v]
	}
	return typ + "(" + strconv.Itoa(v) + ")"
}
