package twophase

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eoflow/pipeline/checkpoint"
)

// The transcripts in testdata/*.txt drive a Machine with messages, one per
// line, and compare what each block of them emitted (its Ready) with the
// text below the block's "----", in the style of etcd raft's interaction
// tests. A block is one or more input lines, "----", the expected output,
// and a blank line; "#" starts a comment. A refused message prints
// "error: ..." and must have changed nothing.
//
//	new k [db...] [interval=10s timeout=30s minpause=0s max=1]   NewMachine at t0
//	start a b ...                  MsgStart{Tasks}, at the current time
//	tick 10s                       the clock moves on; MsgTick
//	trigger / stop                 MsgTriggerNow / MsgStop; prints "promised N"
//	ack TASK E / decline TASK E [reason...]
//	abort [reason...]              MsgAbort
//	recovered P [E,E...]           MsgRecovered
//	read E                         MsgDecisionRead of the decision log
//	begun P E / prepared P E / committed P E / aborted P E
//	recover_failed P, read_failed, begin_failed P E, prepare_failed P E,
//	commit_failed P E, abort_failed P E    the same with an error; a last
//	                               word "fenced" makes it ErrFenced
//	status                         state, open epoch, and the epochs in flight
//	explain                        the FailError's message
//
// Outcomes carry the current time. Actions print as Action.String, but
// Fail prints its fields: "fail(reason epoch call participant decided
// in_doubt=E last=E permanent recovering)". Run with -rewrite to write the
// outputs the code produces into the files (then read the diff).

var rewrite = flag.Bool("rewrite", false, "rewrite the transcripts in testdata with what the code emits")

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

var errBoom = errors.New("boom")

func TestTranscripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			runTranscript(t, file)
		})
	}
}

type block struct {
	line   int // of the first input
	inputs []string
	want   []string
}

func parseTranscript(t *testing.T, file string) []block {
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var blocks []block
	var cur *block
	inOutput := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case inOutput && line == "":
			inOutput, cur = false, nil
		case inOutput:
			cur.want = append(cur.want, line)
		case line == "" || strings.HasPrefix(line, "#"):
		case line == "----":
			if cur == nil {
				t.Fatalf("%s:%d: ---- without input", file, n)
			}
			inOutput = true
		default:
			if cur == nil {
				blocks = append(blocks, block{line: n})
				cur = &blocks[len(blocks)-1]
			}
			cur.inputs = append(cur.inputs, line)
		}
	}
	if cur != nil && !inOutput {
		t.Fatalf("%s: the last block has no ----", file)
	}
	return blocks
}

func runTranscript(t *testing.T, file string) {
	blocks := parseTranscript(t, file)
	h := &transcript{t: t}
	var got [][]string
	for _, b := range blocks {
		// Each input prints what it says itself, then the actions it
		// emitted; the block's Ready must be all of them, in order.
		var out []string
		var emitted []Action
		for _, in := range b.inputs {
			before := 0
			if h.m != nil && !strings.HasPrefix(in, "new ") {
				before = len(h.m.out.acts)
			}
			out = append(out, h.apply(fmt.Sprintf("%s:%d", file, b.line), in)...)
			for _, a := range h.m.out.acts[before:] {
				out = append(out, brief(a))
				emitted = append(emitted, a)
			}
		}
		if rd := h.m.Ready(); !slices.EqualFunc(rd.Actions, emitted, func(a, b Action) bool { return a.String() == b.String() }) {
			t.Errorf("%s:%d: Ready %s, but the inputs emitted %s", file, b.line, rd, Ready{Actions: emitted})
		}
		h.m.Advance()
		got = append(got, out)
		if !*rewrite && !slices.Equal(out, b.want) {
			t.Errorf("%s:%d: %s\n got:\n  %s\nwant:\n  %s", file, b.line, strings.Join(b.inputs, " / "),
				strings.Join(out, "\n  "), strings.Join(b.want, "\n  "))
		}
	}
	if *rewrite {
		writeTranscript(t, file, got)
	}
}

// writeTranscript replaces each block's output in file with got.
func writeTranscript(t *testing.T, file string, got [][]string) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	k, inOutput := 0, false
	for _, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		switch {
		case inOutput && line == "":
			inOutput = false
			b.WriteString("\n")
		case inOutput:
		case line == "----":
			b.WriteString("----\n")
			for _, o := range got[k] {
				b.WriteString(o + "\n")
			}
			k++
			inOutput = true
		default:
			b.WriteString(line + "\n")
		}
	}
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// transcript is the state of one transcript: the Machine and its clock.
type transcript struct {
	t   *testing.T
	m   *Machine
	now time.Time
}

// apply feeds one input line and returns what it prints besides the Ready.
func (h *transcript) apply(where, line string) []string {
	t := h.t
	f := strings.Fields(line)
	epoch := func(i int) Epoch {
		if i >= len(f) {
			t.Fatalf("%s: %q: epoch missing", where, line)
		}
		n, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			t.Fatalf("%s: %q: bad epoch", where, line)
		}
		return Epoch(n)
	}
	cause := func() error {
		if f[len(f)-1] == "fenced" {
			return fmt.Errorf("injected: %w", ErrFenced)
		}
		return errBoom
	}
	reason := func(from int) error {
		if len(f) > from {
			return errors.New(strings.Join(f[from:], " "))
		}
		return nil
	}
	if f[0] == "new" {
		h.now = t0
		cfg := Config{DecisionLog: f[1]}
		for _, arg := range f[2:] {
			k, v, ok := strings.Cut(arg, "=")
			if !ok {
				cfg.Participants = append(cfg.Participants, arg)
				continue
			}
			switch k {
			case "max":
				cfg.MaxInFlight, _ = strconv.Atoi(v)
			case "interval", "timeout", "minpause":
				d, err := time.ParseDuration(v)
				if err != nil {
					t.Fatalf("%s: %v", where, err)
				}
				*map[string]*time.Duration{"interval": &cfg.Interval, "timeout": &cfg.Timeout, "minpause": &cfg.MinPause}[k] = d
			default:
				t.Fatalf("%s: unknown option %q", where, k)
			}
		}
		m, err := NewMachine(cfg)
		if err != nil {
			return []string{"error: " + err.Error()}
		}
		h.m = m
		return nil
	}
	m := h.m
	if m == nil {
		t.Fatalf("%s: %q before new", where, line)
	}
	switch f[0] {
	case "status":
		return []string{status(m)}
	case "explain":
		return []string{"explain: " + fmt.Sprint(m.failure())}
	}
	var msg Msg
	outcome := func(kind ActionKind, withEpoch bool, err error) Msg {
		a := Action{Kind: kind, Participant: f[1]}
		if withEpoch {
			a.Epoch = epoch(2)
		}
		o := Outcome(a, err)
		o.Now = h.now
		return o
	}
	switch f[0] {
	case "start":
		var tasks []checkpoint.TaskID
		for _, s := range f[1:] {
			tasks = append(tasks, checkpoint.TaskID(s))
		}
		msg = Msg{Type: MsgStart, Now: h.now, Tasks: tasks}
	case "tick":
		d, err := time.ParseDuration(f[1])
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		h.now = h.now.Add(d)
		msg = Msg{Type: MsgTick, Now: h.now}
	case "trigger":
		msg = Msg{Type: MsgTriggerNow, Now: h.now}
	case "stop":
		msg = Msg{Type: MsgStop, Now: h.now}
	case "ack":
		msg = Msg{Type: MsgAck, Task: checkpoint.TaskID(f[1]), Epoch: epoch(2)}
	case "decline":
		msg = Msg{Type: MsgDecline, Task: checkpoint.TaskID(f[1]), Epoch: epoch(2), Err: reason(3)}
	case "abort":
		msg = Msg{Type: MsgAbort, Now: h.now, Err: reason(1)}
	case "recovered":
		msg = outcome(ActRecover, false, nil)
		if len(f) > 2 {
			for s := range strings.SplitSeq(f[2], ",") {
				n, _ := strconv.ParseUint(s, 10, 64)
				msg.InDoubt = append(msg.InDoubt, Epoch(n))
			}
		}
	case "recover_failed":
		msg = outcome(ActRecover, false, cause())
	case "read":
		msg = Msg{Type: MsgDecisionRead, Now: h.now, Participant: m.names[decisionLog], Epoch: epoch(1)}
	case "read_failed":
		msg = Msg{Type: MsgDecisionRead, Now: h.now, Participant: m.names[decisionLog], Err: cause()}
	case "begun", "begin_failed":
		msg = outcome(ActBegin, true, failure(f, cause))
	case "prepared", "prepare_failed":
		msg = outcome(ActPrepare, true, failure(f, cause))
	case "committed", "commit_failed":
		msg = outcome(ActCommit, true, failure(f, cause))
	case "aborted", "abort_failed":
		msg = outcome(ActAbort, true, failure(f, cause))
	default:
		t.Fatalf("%s: unknown input %q", where, line)
	}
	before := dump(m)
	if err := m.Step(msg); err != nil {
		if after := dump(m); after != before {
			t.Errorf("%s: refused %q changed the state:\nbefore %s\nafter  %s", where, line, before, after)
		}
		return []string{"error: " + err.Error()}
	}
	if f[0] == "trigger" || f[0] == "stop" {
		return []string{fmt.Sprintf("promised %d", m.Promised())}
	}
	return nil
}

// failure is the error of an outcome line: nil for "begun", "prepared"...,
// cause() for their "_failed" forms.
func failure(f []string, cause func() error) error {
	if strings.HasSuffix(f[0], "_failed") {
		return cause()
	}
	return nil
}

// brief prints an action, and a Fail by its fields.
func brief(a Action) string {
	if a.Kind != ActFail {
		return a.String()
	}
	e := a.Err
	var b strings.Builder
	fmt.Fprintf(&b, "fail(%v", e.Reason)
	if e.Epoch != 0 {
		fmt.Fprintf(&b, " %d", e.Epoch)
	}
	if e.Call != 0 {
		fmt.Fprintf(&b, " %v %s", e.Call, e.Participant)
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
	return b.String()
}

// status renders what the Machine tracks, for transcripts: the state, the
// open epoch, and each epoch in flight with its phase and what it waits
// for.
func status(m *Machine) string {
	var b strings.Builder
	fmt.Fprintf(&b, "status: %v open=%d completed=%d", m.State(), m.Open(), m.LastCompleted())
	for _, ep := range m.inFlight {
		fmt.Fprintf(&b, "; %d %v", ep.id, ep.phase)
		var waiting []string
		for i, n := range m.names {
			switch {
			case ep.phase == PhaseOpening && !ep.begun[i],
				ep.phase == PhasePreparing && !ep.prepared[i],
				ep.phase == PhaseDeciding && i == decisionLog,
				ep.phase == PhaseCommitting && m.committed[i] < ep.id:
				waiting = append(waiting, n)
			}
		}
		if ep.phase == PhasePending {
			for _, task := range m.tasks {
				if !ep.acked[m.taskIndex[task]] {
					waiting = append(waiting, string(task))
				}
			}
		}
		if len(waiting) > 0 {
			fmt.Fprintf(&b, " waiting for %s", strings.Join(waiting, ","))
		}
	}
	return b.String()
}

// dump renders the whole state of m, to check that a refused message
// changed nothing.
func dump(m *Machine) string {
	var b strings.Builder
	fmt.Fprintf(&b, "state=%v err=%v now=%v started=%v tasks=%v opened=%d triggered=%d decided=%d deciding=%d committed=%v committing=%v at=%v ended=%v/%v forced=%d promised=%d final=%d out=%v",
		m.state, m.err, m.now, m.started, m.tasks, m.lastOpened, m.lastTriggered, m.lastDecided, m.deciding, m.committed, m.committing,
		m.lastTriggeredAt, m.ended, m.lastEndedAt, m.forced, m.promised, m.final, m.out)
	for _, ep := range m.inFlight {
		fmt.Fprintf(&b, " epoch{%+v}", *ep)
	}
	calls := make([]string, 0, len(m.outstanding))
	for c := range m.outstanding {
		calls = append(calls, fmt.Sprintf("%v/%d/%d", c.kind, c.p, c.e))
	}
	slices.Sort(calls)
	b.WriteString(" outstanding=" + strings.Join(calls, ","))
	if r := m.rec; r != nil {
		fmt.Fprintf(&b, " rec{%v %v %v %d %v}", r.recovered, r.inDoubt, r.read, r.decided, r.settle)
	}
	return b.String()
}
