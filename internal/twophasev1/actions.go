package twophasev1

import (
	"fmt"
	"strconv"
	"strings"
)

// ActionKind says what an Action asks the runtime to do. The zero value is
// invalid.
type ActionKind int

const (
	// ActRecover: call Recover on Participant; report Recovered or
	// RecoverFailed.
	ActRecover ActionKind = 1 + iota
	// ActReadDecision: call LastDecided on the decision log (Participant
	// names it); report DecisionRead or DecisionReadFailed.
	ActReadDecision
	// ActBegin: call Begin(Epoch) on Participant: epoch Epoch opens, and
	// the runtime hands the participant its records from now on. Report
	// Begun or BeginFailed. Emitted for every participant when the epoch
	// enters the window of Config.MaxInFlight epochs: at the end of
	// recovery (after ActResume) and after each ActDone.
	ActBegin
	// ActPrepare: call Prepare(Epoch) on Participant; report Prepared or
	// PrepareFailed.
	ActPrepare
	// ActCommit: call Commit(Epoch) on Participant; report Committed or
	// CommitFailed. On the decision log this commit is the decision.
	ActCommit
	// ActAbort: call Abort(Epoch) on Participant; report Aborted or
	// AbortFailed.
	ActAbort
	// ActDecided: the decision log committed Epoch: checkpoint Epoch is
	// complete and durable (tell checkpoint.Coordinator.Committed). Nothing
	// to call.
	ActDecided
	// ActDone: every participant committed Epoch; it is visible everywhere
	// and no longer in flight. Nothing to call.
	ActDone
	// ActResume: recovery settled every in-doubt epoch. Restore the job from
	// checkpoint Epoch (0: from the configured start); the ActBegin of
	// Epoch+1 follows in the same Ready.
	ActResume
	// ActFail: the job must stop; Err says why and what recovery will do.
	// Emitted once, after the aborts it asks for; after it only ActDecided
	// can follow.
	ActFail
)

func (k ActionKind) String() string {
	switch k {
	case ActRecover:
		return "recover"
	case ActReadDecision:
		return "read_decision"
	case ActBegin:
		return "begin"
	case ActPrepare:
		return "prepare"
	case ActCommit:
		return "commit"
	case ActAbort:
		return "abort"
	case ActDecided:
		return "decided"
	case ActDone:
		return "done"
	case ActResume:
		return "resume"
	case ActFail:
		return "fail"
	}
	return "ActionKind(" + strconv.Itoa(int(k)) + ")"
}

// Action is one thing the Protocol asks its caller to do. Kinds that call a
// participant (Recover, ReadDecision, Begin, Prepare, Commit, Abort) name it in
// Participant and expect their outcome to be reported back through the
// matching Protocol input; the others only inform.
//
// A struct with a Kind rather than one type per action: actions are
// comparable with ==, print as one-line transcripts, and a switch on Kind
// is as clear as a type switch.
type Action struct {
	Kind ActionKind
	// Participant is the participant to call; "" for Decided, Done, Resume
	// and Fail.
	Participant string
	// Epoch is the epoch concerned; 0 for Recover, ReadDecision and Fail.
	Epoch Epoch
	// Err is set for ActFail only.
	Err *FailError
}

// Calls reports whether the action calls a participant (and so expects its
// outcome to be reported).
func (a Action) Calls() bool {
	switch a.Kind {
	case ActRecover, ActReadDecision, ActBegin, ActPrepare, ActCommit, ActAbort:
		return true
	}
	return false
}

// String renders the action for logs and test transcripts, e.g.
// "begin db 7", "prepare db 7", "decided 7", "recover kafka", "fail: ...".
func (a Action) String() string {
	switch a.Kind {
	case ActRecover, ActReadDecision:
		return fmt.Sprintf("%v %s", a.Kind, a.Participant)
	case ActBegin, ActPrepare, ActCommit, ActAbort:
		return fmt.Sprintf("%v %s %d", a.Kind, a.Participant, a.Epoch)
	case ActDecided, ActDone, ActResume:
		return fmt.Sprintf("%v %d", a.Kind, a.Epoch)
	case ActFail:
		if a.Err == nil {
			return "fail"
		}
		return "fail: " + a.Err.Error()
	}
	return fmt.Sprintf("%v %q %d", a.Kind, a.Participant, a.Epoch)
}

// Ready is what the Protocol asks its caller to do, collected since the last
// Advance: the actions in the order they were emitted. The package
// documentation says how to act on them.
type Ready struct {
	Actions []Action
}

// Empty reports whether rd asks for nothing.
func (rd Ready) Empty() bool { return len(rd.Actions) == 0 }

// String renders rd on one line for logs and test transcripts, the actions
// joined by "; ", e.g. "commit k 1; decided 1"; "" when empty.
func (rd Ready) String() string {
	s := make([]string, len(rd.Actions))
	for i, a := range rd.Actions {
		s[i] = a.String()
	}
	return strings.Join(s, "; ")
}
