package twophasev1

import "strconv"

// State is the Protocol's life cycle. The zero value is invalid, so an
// uninitialised state is never mistaken for a real one.
//
//	Recovering --every in-doubt epoch settled (Resume, Begin D+1)--> Running
//	     |                                                   |
//	     +------------------ any failure (Fail) -------------+--> Failed
type State int

const (
	// StateRecovering: participants are being fenced and their in-doubt
	// epochs settled by the decision log. No epoch may begin.
	StateRecovering State = 1 + iota
	// StateRunning: epochs are opened (Begin), prepare, are decided and
	// commit.
	StateRunning
	// StateFailed: the job must stop and recover with a new Protocol (or,
	// when fenced, exit). Nothing is prepared, decided or committed any more.
	StateFailed
)

func (s State) String() string {
	switch s {
	case StateRecovering:
		return "recovering"
	case StateRunning:
		return "running"
	case StateFailed:
		return "failed"
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// Phase is where one epoch in flight is. The zero value is invalid.
//
//	Open --Barrier(e)--> Preparing --all prepared--> Prepared
//	  --Decide(e), e-1 decided--> Deciding
//	  --decision log committed (Decided)--> Committing --all committed (Done)--> gone
//
// Before Deciding, a failure aborts the epoch everywhere. From Deciding on it
// is never aborted: Deciding is in doubt until the decision log's commit
// returns, Committing is decided.
type Phase int

const (
	// PhaseOpen: Begin was emitted for the epoch at every participant, and
	// its barrier has not reached them yet: the runtime hands them its
	// records.
	PhaseOpen Phase = 1 + iota
	// PhasePreparing: the barrier arrived (Barrier); some participant has
	// not prepared the epoch yet (a participant prepares only once it
	// reported Begun).
	PhasePreparing
	// PhasePrepared: every participant prepared; the epoch waits for
	// Decide, or for the previous epoch's decision.
	PhasePrepared
	// PhaseDeciding: the decision log is committing the epoch. Its outcome
	// is the decision; until it is known the epoch is in doubt.
	PhaseDeciding
	// PhaseCommitting: decided. The other participants commit it; nothing
	// can undo it.
	PhaseCommitting
)

func (p Phase) String() string {
	switch p {
	case PhaseOpen:
		return "open"
	case PhasePreparing:
		return "preparing"
	case PhasePrepared:
		return "prepared"
	case PhaseDeciding:
		return "deciding"
	case PhaseCommitting:
		return "committing"
	}
	return "Phase(" + strconv.Itoa(int(p)) + ")"
}

// Stage says which step failed, in a FailError. The strings are stable and
// fit a metric label. The zero value is invalid.
type Stage int

const (
	// StageRecover: a participant's Recover failed.
	StageRecover Stage = 1 + iota
	// StageReadDecision: DecisionLog.LastDecided failed.
	StageReadDecision
	// StagePrepare: a participant's Prepare failed; the epoch was not
	// decided and is aborted everywhere.
	StagePrepare
	// StageDecide: the decision log's Commit failed. Whether the epoch is
	// decided is unknown until recovery reads the decision log.
	StageDecide
	// StageCommit: a participant's Commit failed after the decision. The
	// decision stands; recovery commits the epoch there.
	StageCommit
	// StageAbort: recovery could not abort an in-doubt epoch.
	StageAbort
	// StageRequested: the caller aborted an epoch (Protocol.Abort).
	StageRequested
	// StageBegin: a participant's Begin failed; the epoch was not decided
	// and is aborted everywhere.
	StageBegin
)

func (s Stage) String() string {
	switch s {
	case StageRecover:
		return "recover"
	case StageReadDecision:
		return "read_decision"
	case StagePrepare:
		return "prepare"
	case StageDecide:
		return "decide"
	case StageCommit:
		return "commit"
	case StageAbort:
		return "abort"
	case StageRequested:
		return "requested"
	case StageBegin:
		return "begin"
	}
	return "Stage(" + strconv.Itoa(int(s)) + ")"
}
