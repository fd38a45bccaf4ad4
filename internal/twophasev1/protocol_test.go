package twophasev1

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// The table tests drive a Protocol with a script of inputs, one per line,
// and compare the actions of each (its Ready) with a transcript, in the style of raft's
// interaction tests:
//
//	start                      Start()
//	recovered P [E,E...]       Recovered(P, [E...])
//	recover_failed P [fenced]  RecoverFailed(P, err)
//	read E                     DecisionRead(E)
//	read_failed                DecisionReadFailed(err)
//	barrier E / decide E       Barrier(E) / Decide(E)
//	abort E                    Abort(E, reason)
//	begun P E / begin_failed P E [fenced]
//	prepared P E               Prepared(P, E)
//	prepare_failed P E [fenced]
//	committed P E / commit_failed P E [fenced]
//	aborted P E / abort_failed P E [fenced]
//
// An action prints as in Action.String, except Fail, which prints its
// fields: "fail(stage P E decided in_doubt=E last=E permanent recovering)".

var errBoom = errors.New("boom")

// apply feeds one input line to m and returns the actions it emitted: the
// Ready, which it then advances.
func apply(m *Protocol, line string) ([]Action, error) {
	err := input(m, line)
	rd := m.Ready()
	m.Advance()
	return rd.Actions, err
}

func input(m *Protocol, line string) error {
	f := strings.Fields(line)
	epoch := func(i int) Epoch {
		n, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			panic(fmt.Sprintf("bad epoch in %q", line))
		}
		return Epoch(n)
	}
	cause := func() error {
		if f[len(f)-1] == "fenced" {
			return fmt.Errorf("injected: %w", ErrFenced)
		}
		return errBoom
	}
	switch f[0] {
	case "start":
		return m.Start()
	case "recovered":
		var in []Epoch
		if len(f) > 2 {
			for s := range strings.SplitSeq(f[2], ",") {
				n, _ := strconv.ParseUint(s, 10, 64)
				in = append(in, Epoch(n))
			}
		}
		return m.Recovered(f[1], in)
	case "recover_failed":
		return m.RecoverFailed(f[1], cause())
	case "read":
		return m.DecisionRead(epoch(1))
	case "read_failed":
		return m.DecisionReadFailed(cause())
	case "barrier":
		return m.Barrier(epoch(1))
	case "begun":
		return m.Begun(f[1], epoch(2))
	case "begin_failed":
		return m.BeginFailed(f[1], epoch(2), cause())
	case "decide":
		return m.Decide(epoch(1))
	case "abort":
		return m.Abort(epoch(1), errBoom)
	case "prepared":
		return m.Prepared(f[1], epoch(2))
	case "prepare_failed":
		return m.PrepareFailed(f[1], epoch(2), cause())
	case "committed":
		return m.Committed(f[1], epoch(2))
	case "commit_failed":
		return m.CommitFailed(f[1], epoch(2), cause())
	case "aborted":
		return m.Aborted(f[1], epoch(2))
	case "abort_failed":
		return m.AbortFailed(f[1], epoch(2), cause())
	}
	panic(fmt.Sprintf("unknown input %q", line))
}

func brief(acts []Action) string {
	s := make([]string, len(acts))
	for i, a := range acts {
		if a.Kind != ActFail {
			s[i] = a.String()
			continue
		}
		e := a.Err
		var b strings.Builder
		fmt.Fprintf(&b, "fail(%v", e.Stage)
		if e.Participant != "" {
			b.WriteString(" " + e.Participant)
		}
		if e.Epoch != 0 {
			fmt.Fprintf(&b, " %d", e.Epoch)
		}
		if e.Decided {
			b.WriteString(" decided")
		}
		if e.InDoubt != 0 {
			fmt.Fprintf(&b, " in_doubt=%d", e.InDoubt)
		}
		fmt.Fprintf(&b, " last=%d", e.LastDecided)
		if e.Permanent {
			b.WriteString(" permanent")
		}
		if e.Recovering {
			b.WriteString(" recovering")
		}
		b.WriteString(")")
		s[i] = b.String()
	}
	return strings.Join(s, "; ")
}

// step is one input and what it must produce: the actions, or an error
// matching err (then nothing may change).
type step struct {
	in   string
	want string
	err  error
}

// resumed is the script that recovers k (the decision log) and db with
// nothing in doubt and nothing decided, MaxInFlight 1: epoch 1 opens.
var resumed = []step{
	{in: "start", want: "recover k; recover db"},
	{in: "recovered k", want: "read_decision k"},
	{in: "recovered db", want: ""},
	{in: "read 0", want: "resume 0; begin k 1; begin db 1"},
}

// resumed2 is resumed with MaxInFlight 2: epochs 1 and 2 open.
var resumed2 = []step{
	{in: "start", want: "recover k; recover db"},
	{in: "recovered k", want: "read_decision k"},
	{in: "recovered db", want: ""},
	{in: "read 0", want: "resume 0; begin k 1; begin db 1; begin k 2; begin db 2"},
}

// begun reports that k and db began each epoch.
func begun(epochs ...Epoch) []step {
	var out []step
	for _, e := range epochs {
		out = append(out, step{in: fmt.Sprintf("begun k %d", e), want: "*"}, step{in: fmt.Sprintf("begun db %d", e), want: "*"})
	}
	return out
}

// do is a step whose actions do not matter to the case.
func do(in string) step { return step{in: in, want: "*"} }

func script(steps ...[]step) []step {
	var out []step
	for _, s := range steps {
		out = append(out, s...)
	}
	return out
}

func TestProtocolTransitions(t *testing.T) {
	two := Config{DecisionLog: "k", Participants: []string{"db"}}
	pipelined := Config{DecisionLog: "k", Participants: []string{"db"}, MaxInFlight: 2}
	for _, tc := range []struct {
		name  string
		cfg   Config
		steps []step
	}{
		{"recovery with nothing in doubt opens the next epoch", two, resumed},
		{"recovery with two in flight opens two epochs", pipelined, resumed2},
		{"recovery settles in-doubt epochs by the decision log", Config{DecisionLog: "k", Participants: []string{"db", "s3"}}, []step{
			{in: "start", want: "recover k; recover db; recover s3"},
			{in: "recovered db 6,4,5,4", want: ""},
			{in: "recovered k 6", want: "read_decision k"},
			// commits in order, one at a time, then aborts
			{in: "read 5", want: "abort k 6; commit db 4"},
			{in: "recovered s3 5", want: "commit s3 5"},
			{in: "committed db 4", want: "commit db 5"},
			{in: "committed s3 5", want: ""},
			{in: "aborted k 6", want: ""},
			{in: "committed db 5", want: "abort db 6"},
			{in: "aborted db 6", want: "resume 5; begin k 6; begin db 6; begin s3 6"},
			{in: "barrier 7", err: ErrOutOfOrder},
			{in: "barrier 6", want: ""}, // nobody reported Begun yet
			{in: "begun db 6", want: "prepare db 6"},
			{in: "begun k 6", want: "prepare k 6"},
		}},
		{"the decision is read only after the decision log fenced", two, []step{
			{in: "start", want: "recover k; recover db"},
			{in: "recovered db 1", want: ""},
			{in: "read 1", err: ErrNotOutstanding},
			{in: "recovered k", want: "read_decision k"},
			{in: "read 1", want: "commit db 1"},
			{in: "committed db 1", want: "resume 1; begin k 2; begin db 2"},
		}},
		{"recover failure fails recovery", two, []step{
			{in: "start", want: "recover k; recover db"},
			{in: "recover_failed db", want: "fail(recover db last=0 recovering)"},
			{in: "recovered k", want: ""},
			{in: "barrier 1", err: ErrFailed},
		}},
		{"fenced during recovery is permanent", two, []step{
			{in: "start", want: "recover k; recover db"},
			{in: "recover_failed k fenced", want: "fail(recover k last=0 permanent recovering)"},
		}},
		{"read failure fails recovery", two, []step{
			{in: "start", want: "recover k; recover db"},
			{in: "recovered k", want: "read_decision k"},
			{in: "read_failed", want: "fail(read_decision k last=0 recovering)"},
		}},
		{"settling commit failure", two, []step{
			{in: "start", want: "recover k; recover db"},
			{in: "recovered k", want: "read_decision k"},
			{in: "read 3", want: ""},
			{in: "recovered db 3,4", want: "commit db 3"},
			{in: "commit_failed db 3", want: "fail(commit db 3 decided last=3 recovering)"},
		}},
		{"settling abort failure", two, []step{
			{in: "start", want: "recover k; recover db"},
			{in: "recovered k", want: "read_decision k"},
			{in: "recovered db 4", want: ""},
			{in: "read 3", want: "abort db 4"},
			{in: "abort_failed db 4", want: "fail(abort db 4 last=3 recovering)"},
		}},
		{"epoch 0 in doubt is refused", two, []step{
			{in: "start", want: "recover k; recover db"},
			{in: "recovered db 0", want: "fail(recover db last=0 recovering)"},
		}},
		{"inputs before recovery", two, []step{
			{in: "barrier 1", err: ErrNotRecovered},
			{in: "decide 1", err: ErrNotRecovered},
			{in: "abort 1", err: ErrNotRecovered},
			{in: "begun k 1", err: ErrNotOutstanding},
			{in: "recovered k", err: ErrNotOutstanding},
			{in: "start", want: "recover k; recover db"},
			{in: "start", err: ErrStarted},
			{in: "recovered nobody", err: ErrUnknownParticipant},
			{in: "recovered k", want: "read_decision k"},
			{in: "recovered k", err: ErrNotOutstanding},
		}},
		{"one epoch, all well", two, script(resumed, []step{
			{in: "begun k 1", want: ""},
			{in: "barrier 2", err: ErrOutOfOrder},
			{in: "barrier 1", want: "prepare k 1"}, // db waits for its Begun
			{in: "barrier 1", err: ErrOutOfOrder},
			{in: "barrier 2", err: ErrTooManyInFlight},
			{in: "begun db 1", want: "prepare db 1"},
			{in: "begun db 1", err: ErrNotOutstanding},
			{in: "prepared db 1", want: ""},
			{in: "prepared db 1", err: ErrNotOutstanding},
			{in: "commit_failed k 1", err: ErrNotOutstanding},
			{in: "decide 1", want: ""}, // k has not prepared yet
			{in: "prepared k 1", want: "commit k 1"},
			{in: "committed db 1", err: ErrNotOutstanding},
			{in: "committed k 1", want: "decided 1; commit db 1"},
			{in: "committed db 1", want: "done 1; begin k 2; begin db 2"},
			{in: "barrier 2", want: ""},
		})},
		{"the decision log alone", Config{DecisionLog: "k"}, []step{
			{in: "start", want: "recover k"},
			{in: "recovered k", want: "read_decision k"},
			{in: "read 9", want: "resume 9; begin k 10"},
			{in: "barrier 10", want: ""},
			{in: "begun k 10", want: "prepare k 10"},
			{in: "prepared k 10", want: ""},
			{in: "decide 10", want: "commit k 10"},
			{in: "committed k 10", want: "decided 10; done 10; begin k 11"},
		}},
		{"decide in order, only epochs whose barrier arrived", two, script(resumed, []step{
			{in: "decide 1", err: ErrOutOfOrder},
			{in: "barrier 1", want: ""},
			{in: "decide 2", err: ErrOutOfOrder},
			{in: "decide 1", want: ""},
			{in: "decide 1", err: ErrOutOfOrder},
		})},
		{"prepare failure aborts everywhere before the decision", two, script(resumed, begun(1), []step{
			{in: "barrier 1", want: "prepare k 1; prepare db 1"},
			{in: "prepared k 1", want: ""},
			{in: "prepare_failed db 1", want: "abort k 1; abort db 1; fail(prepare db 1 last=0)"},
			{in: "aborted k 1", want: ""},
			{in: "abort_failed db 1", want: ""}, // best effort: recovery aborts it
			{in: "barrier 2", err: ErrFailed},
			{in: "decide 1", err: ErrFailed},
		})},
		{"fenced prepare is permanent and nothing commits after it", two, script(resumed, begun(1), []step{
			{in: "barrier 1", want: "prepare k 1; prepare db 1"},
			{in: "decide 1", want: ""},
			{in: "prepare_failed k 1 fenced", want: "abort k 1; abort db 1; fail(prepare k 1 last=0 permanent)"},
			{in: "prepared db 1", want: ""},
		})},
		{"begin failure aborts everywhere", two, script(resumed, []step{
			{in: "begun k 1", want: ""},
			{in: "barrier 1", want: "prepare k 1"},
			{in: "begin_failed db 1", want: "abort k 1; abort db 1; fail(begin db 1 last=0)"},
			{in: "prepared k 1", want: ""},
			{in: "barrier 2", err: ErrFailed},
		})},
		{"fenced begin is permanent", two, script(resumed, []step{
			{in: "begin_failed k 1 fenced", want: "abort k 1; abort db 1; fail(begin k 1 last=0 permanent)"},
			{in: "begun db 1", want: ""},
		})},
		{"begin failure after a done epoch", two, script(resumed, begun(1), []step{
			do("barrier 1"), do("prepared k 1"), do("prepared db 1"),
			{in: "decide 1", want: "commit k 1"},
			{in: "committed k 1", want: "decided 1; commit db 1"},
			{in: "committed db 1", want: "done 1; begin k 2; begin db 2"},
			{in: "begun k 2", want: ""},
			{in: "begin_failed db 2", want: "abort k 2; abort db 2; fail(begin db 2 last=1)"},
		})},
		{"abort of the open epoch", two, script(resumed, []step{
			{in: "begun k 1", want: ""},
			{in: "abort 2", err: ErrOutOfOrder},
			{in: "abort 1", want: "abort k 1; abort db 1; fail(requested 1 last=0)"},
			{in: "begun db 1", want: ""},
			{in: "abort 1", err: ErrFailed},
		})},
		{"decision log commit failure leaves the epoch in doubt", pipelined, script(resumed2, begun(1, 2), []step{
			{in: "barrier 1", want: "prepare k 1; prepare db 1"},
			{in: "barrier 2", want: "prepare k 2; prepare db 2"},
			do("prepared k 1"), do("prepared db 1"),
			{in: "decide 1", want: "commit k 1"},
			{in: "abort 1", err: ErrDecided},
			// 1 is not aborted anywhere: its decision may have landed.
			{in: "commit_failed k 1", want: "abort k 2; abort db 2; fail(decide k 1 in_doubt=1 last=0)"},
		})},
		{"an in-doubt decision that lands after the failure is reported", pipelined, script(resumed2, begun(1, 2), []step{
			do("barrier 1"), do("barrier 2"),
			do("prepared k 1"), do("prepared db 1"),
			{in: "decide 1", want: "commit k 1"},
			{in: "prepare_failed db 2", want: "abort k 2; abort db 2; fail(prepare db 2 in_doubt=1 last=0)"},
			{in: "committed k 1", want: "decided 1"}, // but no commit at db: recovery does it
		})},
		{"commit failure after the decision cannot undo it", pipelined, script(resumed2, begun(1, 2), []step{
			do("barrier 1"), do("barrier 2"),
			do("prepared k 1"), do("prepared db 1"), do("prepared k 2"),
			{in: "decide 1", want: "commit k 1"},
			{in: "committed k 1", want: "decided 1; commit db 1"},
			{in: "abort 1", err: ErrDecided},
			{in: "commit_failed db 1 fenced", want: "abort k 2; abort db 2; fail(commit db 1 decided last=1 permanent)"},
		})},
		{"pipelined epochs commit in order, one commit per participant", pipelined, script(resumed2, begun(1, 2), []step{
			{in: "barrier 1", want: "prepare k 1; prepare db 1"},
			{in: "barrier 2", want: "prepare k 2; prepare db 2"},
			{in: "barrier 3", err: ErrTooManyInFlight},
			do("prepared k 2"), do("prepared db 2"),
			{in: "decide 1", want: ""},
			{in: "decide 2", want: ""}, // 2 is prepared, but 1 is not decided
			do("prepared k 1"),
			{in: "prepared db 1", want: "commit k 1"},
			{in: "committed k 1", want: "decided 1; commit db 1; commit k 2"},
			{in: "committed k 2", want: "decided 2"}, // db is still committing 1
			{in: "committed db 1", want: "commit db 2; done 1; begin k 3; begin db 3"},
			{in: "barrier 3", want: ""},
			{in: "begun k 3", want: "prepare k 3"},
			{in: "committed db 2", want: "done 2; begin k 4; begin db 4"},
		})},
		{"requested abort aborts every undecided epoch, open ones too", pipelined, script(resumed2, []step{
			do("begun k 1"), do("begun db 1"), do("barrier 1"),
			{in: "abort 3", err: ErrOutOfOrder},
			{in: "abort 2", want: "abort k 1; abort db 1; abort k 2; abort db 2; fail(requested 2 last=0)"},
			{in: "prepared k 1", want: ""},
			{in: "begun k 2", want: ""},
			{in: "abort 1", err: ErrFailed},
		})},
		{"requested abort leaves a decided epoch alone", pipelined, script(resumed2, begun(1, 2), []step{
			do("barrier 1"), do("barrier 2"),
			do("prepared k 1"), do("prepared db 1"),
			{in: "decide 1", want: "commit k 1"},
			{in: "committed k 1", want: "decided 1; commit db 1"},
			{in: "abort 2", want: "abort k 2; abort db 2; fail(requested 2 last=1)"},
			{in: "committed db 1", want: ""},
		})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewProtocol(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range tc.steps {
				before := dump(m)
				acts, err := apply(m, s.in)
				if s.err != nil {
					if !errors.Is(err, s.err) {
						t.Fatalf("step %d %q: err = %v, want %v", i, s.in, err, s.err)
					}
					if len(acts) > 0 {
						t.Fatalf("step %d %q: failed input emitted %s", i, s.in, brief(acts))
					}
					if after := dump(m); after != before {
						t.Fatalf("step %d %q: failed input changed the state:\nbefore %s\nafter  %s", i, s.in, before, after)
					}
					continue
				}
				if err != nil {
					t.Fatalf("step %d %q: %v", i, s.in, err)
				}
				if got := brief(acts); s.want != "*" && got != s.want {
					t.Fatalf("step %d %q:\n got  %s\n want %s", i, s.in, got, s.want)
				}
			}
		})
	}
}

// dump renders the whole state of m, to check that a refused input changed
// nothing.
func dump(m *Protocol) string {
	var b strings.Builder
	fmt.Fprintf(&b, "state=%v err=%v opened=%d barrier=%d requested=%d decided=%d deciding=%d committed=%v committing=%v out=%v",
		m.state, m.err, m.lastOpened, m.lastBarrier, m.lastRequested, m.lastDecided, m.deciding, m.committed, m.committing, m.out)
	for _, ep := range m.inFlight {
		fmt.Fprintf(&b, " epoch{%+v}", *ep)
	}
	calls := make([]string, 0, len(m.outstanding))
	for c := range m.outstanding {
		calls = append(calls, fmt.Sprintf("%v/%d/%d", c.kind, c.p, c.e))
	}
	b.WriteString(" outstanding=" + strings.Join(sortStrings(calls), ","))
	if r := m.rec; r != nil {
		fmt.Fprintf(&b, " rec{%v %v %v %v %d %v}", r.started, r.recovered, r.inDoubt, r.read, r.decided, r.settle)
	}
	return b.String()
}

func sortStrings(s []string) []string {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s
}

func TestConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want []string // substrings of the error, all of them; nil: valid
	}{
		{Config{DecisionLog: "k"}, nil},
		{Config{DecisionLog: "k", Participants: []string{"a", "b"}, MaxInFlight: 3}, nil},
		{Config{}, []string{"decision log: required"}},
		{Config{DecisionLog: "k", Participants: []string{"a", "", "a", "k"}, MaxInFlight: -1},
			[]string{"max in flight -1", "participants[1]: empty name", "participants[2]: duplicate name \"a\"", "participants[3]: \"k\" is the decision log"}},
	} {
		m, err := NewProtocol(tc.cfg)
		if tc.want == nil {
			if err != nil {
				t.Errorf("%+v: %v", tc.cfg, err)
			} else if m.MaxInFlight() < 1 || m.State() != StateRecovering {
				t.Errorf("%+v: max in flight %d, state %v", tc.cfg, m.MaxInFlight(), m.State())
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
		{FailError{Stage: StagePrepare, Epoch: 7, Participant: "db", LastDecided: 6, Err: errBoom},
			[]string{`"db" failed to prepare epoch 7: boom`, "aborted everywhere", "restarts from checkpoint 6"}},
		{FailError{Stage: StageDecide, Epoch: 7, Participant: "k", InDoubt: 7, LastDecided: 6, Err: errBoom},
			[]string{"in doubt", "recovery reads the decision log", "checkpoint 6 or 7"}},
		{FailError{Stage: StageCommit, Epoch: 7, Participant: "db", Decided: true, LastDecided: 7, Err: errBoom},
			[]string{"epoch 7 is decided", "cannot be undone", `recovery must commit epoch 7 at "db"`}},
		{FailError{Stage: StageCommit, Epoch: 7, Participant: "db", Decided: true, LastDecided: 7, Permanent: true, Err: errBoom},
			[]string{`"db" is fenced`, "must exit and not restart"}},
		{FailError{Stage: StageRecover, Participant: "db", Recovering: true, Err: errBoom},
			[]string{"recovering participant", "retry recovery"}},
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

func TestCustomFenceClassifier(t *testing.T) {
	errProducerFenced := errors.New("PRODUCER_FENCED")
	m, err := NewProtocol(Config{DecisionLog: "k", IsFenced: func(err error) bool { return errors.Is(err, errProducerFenced) }})
	if err != nil {
		t.Fatal(err)
	}
	m.Start()
	m.Ready()
	m.Advance()
	m.RecoverFailed("k", errProducerFenced)
	acts := m.Ready().Actions
	if len(acts) != 1 || acts[0].Kind != ActFail || !acts[0].Err.Permanent {
		t.Fatalf("got %s, want a permanent fail", brief(acts))
	}
	if !errors.Is(m.Err(), ErrFenced) || !errors.Is(m.Err(), errProducerFenced) {
		t.Fatalf("%v: want both ErrFenced and the cause", m.Err())
	}
}

func TestEnumStrings(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{StateRecovering.String(), "recovering"}, {StateFailed.String(), "failed"}, {State(0).String(), "State(0)"},
		{PhaseOpen.String(), "open"}, {PhasePreparing.String(), "preparing"}, {PhaseCommitting.String(), "committing"}, {Phase(0).String(), "Phase(0)"},
		{StageDecide.String(), "decide"}, {StageRequested.String(), "requested"}, {StageBegin.String(), "begin"}, {Stage(0).String(), "Stage(0)"},
		{ActReadDecision.String(), "read_decision"}, {ActFail.String(), "fail"}, {ActBegin.String(), "begin"}, {ActionKind(0).String(), "ActionKind(0)"},
		{Action{Kind: ActCommit, Participant: "db", Epoch: 3}.String(), "commit db 3"},
		{Action{Kind: ActResume, Epoch: 2}.String(), "resume 2"},
		{Action{Kind: ActBegin, Participant: "k", Epoch: 3}.String(), "begin k 3"},
		{Ready{}.String(), ""},
		{Ready{Actions: []Action{{Kind: ActCommit, Participant: "k", Epoch: 1}, {Kind: ActDecided, Epoch: 1}}}.String(), "commit k 1; decided 1"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestInFlightStatus(t *testing.T) {
	m, _ := NewProtocol(Config{DecisionLog: "k", Participants: []string{"db"}, MaxInFlight: 2})
	for _, in := range []string{"start", "recovered k", "recovered db", "read 0", "begun k 1", "begun db 1", "begun db 2"} {
		if _, err := apply(m, in); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
	}
	if got, want := fmt.Sprint(m.InFlight()), "[{1 open []} {2 open [k]}]"; got != want {
		t.Fatalf("InFlight = %s, want %s", got, want)
	}
	for _, in := range []string{"barrier 1", "barrier 2", "prepared k 1", "prepared db 1", "decide 1", "prepared db 2"} {
		if _, err := apply(m, in); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
	}
	got := fmt.Sprint(m.InFlight())
	want := "[{1 deciding [k]} {2 preparing [k]}]"
	if got != want {
		t.Fatalf("InFlight = %s, want %s", got, want)
	}
	apply(m, "committed k 1")
	if got, want := fmt.Sprint(m.InFlight()), "[{1 committing [db]} {2 preparing [k]}]"; got != want {
		t.Fatalf("InFlight = %s, want %s", got, want)
	}
	if m.LastDecided() != 1 || m.LastBarrier() != 2 || m.LastOpened() != 2 {
		t.Fatalf("LastDecided %d LastBarrier %d LastOpened %d", m.LastDecided(), m.LastBarrier(), m.LastOpened())
	}
}

// Actions emitted between Ready and Advance are kept for the next Ready;
// Ready without Advance repeats itself.
func TestReadyAdvance(t *testing.T) {
	m, _ := NewProtocol(Config{DecisionLog: "k", Participants: []string{"db"}})
	if m.HasReady() || !m.Ready().Empty() {
		t.Fatal("ready before any input")
	}
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	if !m.HasReady() {
		t.Fatal("no ready after Start")
	}
	rd := m.Ready()
	if got := rd.String(); got != "recover k; recover db" {
		t.Fatalf("ready %q", got)
	}
	if got := m.Ready().String(); got != "recover k; recover db" {
		t.Fatalf("ready again %q", got)
	}
	// The outcome arrives before the caller advanced.
	if err := m.Recovered("k", nil); err != nil {
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
	if err := m.Recovered("db", nil); err != nil {
		t.Fatal(err)
	}
	if err := m.DecisionRead(0); err != nil {
		t.Fatal(err)
	}
	if got := m.Ready().String(); got != "resume 0; begin k 1; begin db 1" {
		t.Fatalf("batched ready %q", got)
	}
}
