package twophase

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// failure is the *FailError once m failed, else nil: what ActFail carried.
func (m *Machine) failure() error {
	if m.err == nil {
		return nil
	}
	return m.err
}

func TestConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want []string // substrings of the error, all of them; nil: valid
	}{
		{Config{DecisionLog: "k"}, nil},
		{Config{DecisionLog: "k", Participants: []string{"a", "b"}, MaxInFlight: 3, Interval: time.Minute}, nil},
		{Config{}, []string{"decision log: required"}},
		{Config{DecisionLog: "k", Participants: []string{"a", "", "a", "k"}, MaxInFlight: -1, Interval: -1, Timeout: -1, MinPause: -1},
			[]string{"max in flight -1", "interval -1ns: must be positive", "timeout -1ns: must be positive", "min pause -1ns: must not be negative",
				"participants[1]: empty name", `participants[2]: duplicate name "a"`, `participants[3]: "k" is the decision log`}},
	} {
		m, err := NewMachine(tc.cfg)
		if tc.want == nil {
			if err != nil {
				t.Errorf("%+v: %v", tc.cfg, err)
			} else if m.cfg.MaxInFlight < 1 || m.cfg.Interval <= 0 || m.cfg.Timeout != DefaultTimeout || m.State() != StateRecovering {
				t.Errorf("%+v: defaults not applied: %+v, state %v", tc.cfg, m.cfg, m.State())
			}
			continue
		}
		if err == nil {
			t.Errorf("%+v: no error", tc.cfg)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: error %q lacks %q", tc.cfg, err, w)
			}
		}
	}
}

func TestFailErrorExplains(t *testing.T) {
	for _, tc := range []struct {
		fe   FailError
		want []string
	}{
		{FailError{Epoch: 7, Reason: ReasonDeclined, Call: ActPrepare, Participant: "db", LastDecided: 6, Err: errBoom},
			[]string{`"db" failed to prepare epoch 7: boom`, "aborted everywhere", "restart from checkpoint 6"}},
		{FailError{Epoch: 7, Reason: ReasonCommitFailed, Call: ActCommit, Participant: "k", InDoubt: 7, LastDecided: 6, Err: errBoom},
			[]string{"in doubt", "recovery reads the decision log", "checkpoint 6 (or 7"}},
		{FailError{Epoch: 7, Reason: ReasonCommitFailed, Call: ActCommit, Participant: "db", Decided: true, LastDecided: 7, Err: errBoom},
			[]string{"epoch 7 is decided", "cannot be undone", `recovery must commit epoch 7 at "db"`}},
		{FailError{Epoch: 7, Reason: ReasonCommitFailed, Call: ActCommit, Participant: "db", Decided: true, LastDecided: 7, Permanent: true, Err: errBoom},
			[]string{`"db" is fenced`, "must exit and not restart"}},
		{FailError{Reason: ReasonJobFailed, Call: ActRecover, Participant: "db", Recovering: true, Err: errBoom},
			[]string{"recovering participant", "retry recovery"}},
		{FailError{Epoch: 3, Reason: ReasonTimeout, Err: errBoom},
			[]string{"checkpoint 3 boom", "configured start positions (no checkpoint completed)"}},
	} {
		msg := tc.fe.Error()
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%q lacks %q", msg, w)
			}
		}
		if !errors.Is(&tc.fe, errBoom) {
			t.Errorf("%q does not wrap its cause", msg)
		}
		if got := errors.Is(&tc.fe, ErrFenced); got != tc.fe.Permanent {
			t.Errorf("%q: errors.Is(ErrFenced) = %v, permanent %v", msg, got, tc.fe.Permanent)
		}
	}
}

// A custom classifier makes a participant's own error a fence, and the
// FailError then wraps both ErrFenced and the cause. A task's decline is
// never a fence, whatever it wraps.
func TestCustomFenceClassifier(t *testing.T) {
	errProducerFenced := errors.New("PRODUCER_FENCED")
	m, err := NewMachine(Config{DecisionLog: "k", IsFenced: func(err error) bool { return errors.Is(err, errProducerFenced) }})
	if err != nil {
		t.Fatal(err)
	}
	m.Advance()
	if err := m.Step(Outcome(Action{Kind: ActRecover, Participant: "k"}, errProducerFenced)); err != nil {
		t.Fatal(err)
	}
	acts := m.Ready().Actions
	if len(acts) != 2 || acts[1].Kind != ActFail || !acts[1].Err.Permanent {
		t.Fatalf("got %s, want a permanent fail", Ready{Actions: acts})
	}
	if !errors.Is(m.failure(), ErrFenced) || !errors.Is(m.failure(), errProducerFenced) {
		t.Fatalf("%v: want both ErrFenced and the cause", m.failure())
	}
}

// Actions emitted between Ready and Advance are kept for the next Ready;
// Ready without Advance repeats itself.
func TestReadyAdvance(t *testing.T) {
	m, _ := NewMachine(Config{DecisionLog: "k", Participants: []string{"db"}})
	rd := m.Ready()
	if got := rd.String(); got != "recover k; recover db" {
		t.Fatalf("first ready %q", got)
	}
	if got := m.Ready().String(); got != "recover k; recover db" {
		t.Fatalf("ready again %q", got)
	}
	// The outcome arrives before the caller advanced.
	if err := m.Step(Outcome(rd.Actions[0], nil)); err != nil {
		t.Fatal(err)
	}
	m.Advance()
	if got := m.Ready().String(); got != "read_decision k" {
		t.Fatalf("after advance: %q, want the action emitted meanwhile", got)
	}
	m.Advance()
	if m.HasReady() {
		t.Fatalf("ready after advancing everything: %s", m.Ready())
	}
	m.Advance() // nothing handed out: drops nothing
	if err := m.Step(Outcome(rd.Actions[1], nil)); err != nil {
		t.Fatal(err)
	}
	if err := m.Step(Msg{Type: MsgDecisionRead, Participant: "k", Epoch: 4}); err != nil {
		t.Fatal(err)
	}
	if got := m.Ready().String(); got != "resume 4; begin k 5; begin db 5" {
		t.Fatalf("batched ready %q", got)
	}
	if m.LastCompleted() != 4 || m.Open() != 0 {
		t.Fatalf("last completed %d, open %d", m.LastCompleted(), m.Open())
	}
}

func TestStrings(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{StateRecovering.String(), "recovering"}, {StateStopped.String(), "stopped"}, {State(0).String(), "State(0)"},
		{PhaseOpening.String(), "opening"}, {PhaseDeciding.String(), "deciding"}, {Phase(0).String(), "Phase(0)"},
		{ReasonTimeout.String(), "timeout"}, {ReasonDeclined.String(), "declined"}, {ReasonCommitFailed.String(), "commit_failed"},
		{ReasonJobFailed.String(), "job_failed"}, {AbortReason(0).String(), "AbortReason(0)"},
		{ActReadDecision.String(), "read_decision"}, {ActCompleted.String(), "completed"}, {ActionKind(0).String(), "ActionKind(0)"},
		{MsgTriggerNow.String(), "trigger_now"}, {MsgType(0).String(), "MsgType(0)"},
		{Action{Kind: ActCommit, Participant: "db", Epoch: 3}.String(), "commit db 3"},
		{Action{Kind: ActTrigger, Epoch: 2}.String(), "trigger 2"},
		{Ready{}.String(), ""},
		{Msg{Type: MsgAck, Task: "sink", Epoch: 3}.String(), "ack sink 3"},
		{Msg{Type: MsgRecovered, Participant: "db", InDoubt: []Epoch{4}}.String(), "recovered db in doubt [4]"},
		{Outcome(Action{Kind: ActPrepare, Participant: "db", Epoch: 2}, errBoom).String(), "prepared db 2: boom"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
