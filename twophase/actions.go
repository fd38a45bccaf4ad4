package twophase

import (
	"fmt"
	"strings"
)

// ActionKind says what an Action asks the caller to do. The zero value is
// invalid.
type ActionKind int

const (
	// ActRecover: call Recover on Participant; report MsgRecovered.
	ActRecover ActionKind = 1 + iota
	// ActReadDecision: read the decision log's last decided checkpoint
	// (DecisionLog.LastDecided; Participant names it); report
	// MsgDecisionRead with it.
	ActReadDecision
	// ActResume: recovery is over. Restore the job from checkpoint Epoch
	// (0: from the configured start). The ActBegin of Epoch+1 follows.
	ActResume
	// ActTrigger: inject barrier Epoch at every source, in epoch order:
	// checkpoint Epoch starts, and the tasks ack it (MsgAck).
	ActTrigger
	// ActBegin: call Begin(Epoch) on Participant: the epoch opens there,
	// and the caller hands it the epoch's records once every participant
	// began it. Report MsgBegun.
	ActBegin
	// ActPrepare: call Prepare(Epoch) on Participant; report MsgPrepared.
	ActPrepare
	// ActCommit: call Commit(Epoch) on Participant; report MsgCommitted.
	// On the decision log this commit is the decision.
	ActCommit
	// ActCompleted: the decision log committed Epoch: checkpoint Epoch is
	// complete and durable (answer savepoints and stop waiters, update
	// metrics). Nothing to call.
	ActCompleted
	// ActDone: every participant committed Epoch; it is visible everywhere
	// and no longer in flight. Nothing to call.
	ActDone
	// ActAbort: call Abort(Epoch) on Participant; report MsgAborted.
	ActAbort
	// ActFail: the job must stop; Err says why and what recovery will do.
	// Emitted once, after the aborts it asks for; after it only
	// ActCompleted can follow (a decision that was in flight and landed).
	ActFail
)

var actNames = [...]string{
	ActRecover: "recover", ActReadDecision: "read_decision", ActResume: "resume", ActTrigger: "trigger",
	ActBegin: "begin", ActPrepare: "prepare", ActCommit: "commit", ActCompleted: "completed",
	ActDone: "done", ActAbort: "abort", ActFail: "fail",
}

func (v ActionKind) String() string { return name(actNames[:], int(v), "ActionKind") }

// Action is one thing the Machine asks its caller to do. Kinds that call a
// participant (Recover, ReadDecision, Begin, Prepare, Commit, Abort) name
// it and expect their outcome back as a Msg (see Outcome); the others only
// inform.
type Action struct {
	Kind ActionKind
	// Participant is the participant to call; "" for the others.
	Participant string
	// Epoch is the epoch concerned; 0 for Recover, ReadDecision and Fail.
	Epoch Epoch
	// Err is set for ActFail only.
	Err *FailError
}

// Calls reports whether the action calls a participant (and so expects
// its outcome to be reported).
func (a Action) Calls() bool {
	switch a.Kind {
	case ActRecover, ActReadDecision, ActBegin, ActPrepare, ActCommit, ActAbort:
		return true
	}
	return false
}

// String renders the action for logs and transcripts, e.g. "begin kafka
// 7", "trigger 7", "recover kafka", "fail: ...".
func (a Action) String() string {
	switch a.Kind {
	case ActRecover, ActReadDecision:
		return fmt.Sprintf("%v %s", a.Kind, a.Participant)
	case ActBegin, ActPrepare, ActCommit, ActAbort:
		return fmt.Sprintf("%v %s %d", a.Kind, a.Participant, a.Epoch)
	case ActResume, ActTrigger, ActCompleted, ActDone:
		return fmt.Sprintf("%v %d", a.Kind, a.Epoch)
	case ActFail:
		if a.Err == nil {
			return "fail"
		}
		return "fail: " + a.Err.Error()
	}
	return fmt.Sprintf("%v %q %d", a.Kind, a.Participant, a.Epoch)
}

// Ready is what the Machine asks its caller to do, collected since the
// last Advance: the actions in the order they were emitted. The package
// documentation says how to act on them.
type Ready struct {
	Actions []Action
}

// String renders rd on one line, the actions joined by "; ", e.g.
// "commit kafka 1; completed 1"; "" when empty.
func (rd Ready) String() string {
	s := make([]string, len(rd.Actions))
	for i, a := range rd.Actions {
		s[i] = a.String()
	}
	return strings.Join(s, "; ")
}
