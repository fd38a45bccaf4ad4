package twophase

import (
	"fmt"
	"time"

	"github.com/eoflow/pipeline/checkpoint"
)

// MsgType says what a Msg reports. The zero value is invalid.
type MsgType int

const (
	// MsgStart: the task graph runs. Tasks must ack every checkpoint from
	// now on, and the periodic schedule starts at Now: the first
	// checkpoint is due Interval after it. Once, after recovery.
	MsgStart MsgType = 1 + iota
	// MsgTick: time passed (Now). Send it periodically, e.g. every
	// Interval/10: it times checkpoints out and triggers the periodic ones.
	MsgTick
	// MsgTriggerNow: a checkpoint is wanted now, for a savepoint,
	// whatever Interval and MinPause say; Promised tells which. Before
	// MsgStart no task acks it: the caller wrote its checkpoint record
	// into the open epoch itself (importing a savepoint).
	MsgTriggerNow
	// MsgStop: take a final checkpoint, triggered like TriggerNow (Promised
	// tells which), and nothing after it. The Machine is Stopped once it
	// is done everywhere.
	MsgStop
	// MsgAck: Task snapshotted checkpoint Epoch (barrier Epoch passed it).
	MsgAck
	// MsgDecline: Task could not snapshot checkpoint Epoch (Err says
	// why): the checkpoint is aborted and the job fails.
	MsgDecline
	// MsgAbort: the caller gives up (the task graph stopped, Err says
	// why): every epoch not decided is aborted everywhere and the job
	// fails.
	MsgAbort
	// MsgRecovered: the outcome of ActRecover: Participant fenced its
	// predecessors and holds InDoubt prepared; or Err.
	MsgRecovered
	// MsgDecisionRead: the outcome of ActReadDecision: Epoch is the
	// newest epoch the decision log committed (0: none); or Err.
	MsgDecisionRead
	// MsgBegun: the outcome of ActBegin of Epoch at Participant.
	MsgBegun
	// MsgPrepared: the outcome of ActPrepare of Epoch at Participant.
	MsgPrepared
	// MsgCommitted: the outcome of ActCommit of Epoch at Participant.
	MsgCommitted
	// MsgAborted: the outcome of ActAbort of Epoch at Participant.
	MsgAborted
)

var msgNames = [...]string{
	MsgStart: "start", MsgTick: "tick", MsgTriggerNow: "trigger_now", MsgStop: "stop",
	MsgAck: "ack", MsgDecline: "decline", MsgAbort: "abort",
	MsgRecovered: "recovered", MsgDecisionRead: "decision_read", MsgBegun: "begun",
	MsgPrepared: "prepared", MsgCommitted: "committed", MsgAborted: "aborted",
}

func (v MsgType) String() string { return name(msgNames[:], int(v), "MsgType") }

// Msg is one input to Machine.Step: something that happened. Like etcd
// raft's pb.Message it is plain data, so a run can be logged, replayed and
// written down as a transcript.
type Msg struct {
	Type MsgType
	// Now is when it happened. The Machine's clock moves to it (never
	// backward) and every duration is measured on it. Required for Start,
	// Tick, TriggerNow and Stop; optional elsewhere (acks and declines
	// need none).
	Now time.Time
	// Task acks or declines (MsgAck, MsgDecline).
	Task checkpoint.TaskID
	// Tasks must ack every checkpoint (MsgStart).
	Tasks []checkpoint.TaskID
	// Participant whose call this is the outcome of.
	Participant string
	// Epoch concerned; for MsgDecisionRead the last decided epoch.
	Epoch Epoch
	// InDoubt are the epochs a participant holds prepared (MsgRecovered).
	InDoubt []Epoch
	// Err is a decline's reason, an abort's cause, or the failure of a
	// participant's call (nil: it succeeded).
	Err error
}

// Outcome is the message reporting that the call action a returned err
// (nil: it succeeded). Add what the call returned: InDoubt for
// ActRecover, Epoch (the last decided epoch) for ActReadDecision; and Now.
func Outcome(a Action, err error) Msg {
	var t MsgType
	if int(a.Kind) < len(outcomeOf) {
		t = outcomeOf[a.Kind]
	}
	return Msg{Type: t, Participant: a.Participant, Epoch: a.Epoch, Err: err}
}

// outcomeOf is the message type that reports each call's outcome.
var outcomeOf = [...]MsgType{
	ActRecover: MsgRecovered, ActReadDecision: MsgDecisionRead, ActBegin: MsgBegun,
	ActPrepare: MsgPrepared, ActCommit: MsgCommitted, ActAbort: MsgAborted,
}

// String renders m on one line for logs and transcripts, e.g. "ack sink
// 3", "committed kafka 3", "prepared db 2: boom".
func (m Msg) String() string {
	s := m.Type.String()
	switch m.Type {
	case MsgStart:
		s += fmt.Sprintf(" %v", m.Tasks)
	case MsgAck, MsgDecline:
		s += fmt.Sprintf(" %s %d", m.Task, m.Epoch)
	case MsgRecovered:
		s += " " + m.Participant
		if len(m.InDoubt) > 0 {
			s += fmt.Sprintf(" in doubt %v", m.InDoubt)
		}
	case MsgDecisionRead:
		s += fmt.Sprintf(" %d", m.Epoch)
	case MsgBegun, MsgPrepared, MsgCommitted, MsgAborted:
		s += fmt.Sprintf(" %s %d", m.Participant, m.Epoch)
	}
	if m.Err != nil {
		s += ": " + m.Err.Error()
	}
	return s
}
