package checkpoint

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// harness drives a Coordinator the way the runtime does: one input, then
// Ready and Advance.
type harness struct {
	t   *testing.T
	c   *Coordinator
	now time.Time
}

// input is one step's input; it returns the input's error.
type input func(h *harness) error

func tick(d time.Duration) input {
	return func(h *harness) error {
		h.now = h.now.Add(d)
		h.c.Tick(h.now)
		return nil
	}
}

func ack(task TaskID, id ID) input {
	return func(h *harness) error { return h.c.Ack(task, id) }
}

func decline(task TaskID, id ID, reason string) input {
	return func(h *harness) error { return h.c.Decline(task, id, errors.New(reason)) }
}

func committed(id ID) input {
	return func(h *harness) error { return h.c.Committed(id, h.now) }
}

func commitFailed(id ID, msg string) input {
	return func(h *harness) error { return h.c.CommitFailed(id, errors.New(msg)) }
}

// triggerNow and stop also assert the id they promise.
func triggerNow(want ID) input {
	return func(h *harness) error {
		h.t.Helper()
		got, err := h.c.TriggerNow(h.now)
		if err == nil && got != want {
			h.t.Fatalf("TriggerNow = %d, want %d", got, want)
		}
		return err
	}
}

func stop(want ID) input {
	return func(h *harness) error {
		h.t.Helper()
		got, err := h.c.Stop(h.now)
		if err == nil && got != want {
			h.t.Fatalf("Stop = %d, want %d", got, want)
		}
		return err
	}
}

// seq feeds several inputs without a Ready in between, returning the first
// error.
func seq(ins ...input) input {
	return func(h *harness) error {
		var first error
		for _, in := range ins {
			if err := in(h); err != nil && first == nil {
				first = err
			}
		}
		return first
	}
}

type step struct {
	in  input
	out string // Ready().String() after the input
	err error  // errors.Is target; nil: the input must succeed
}

func TestCoordinatorTransitions(t *testing.T) {
	ab := CoordinatorConfig{Interval: 10 * time.Second, Timeout: 30 * time.Second, Tasks: []TaskID{"a", "b"}}
	with := func(f func(*CoordinatorConfig)) CoordinatorConfig {
		c := ab
		f(&c)
		return c
	}
	tests := []struct {
		name  string
		cfg   CoordinatorConfig
		steps []step
		check func(t *testing.T, c *Coordinator)
	}{
		{
			name: "first checkpoint is due one interval after start",
			cfg:  ab,
			steps: []step{
				{in: tick(9 * time.Second), out: ""},
				{in: tick(time.Second), out: "trigger=[1]"},
				{in: tick(time.Second), out: ""},
			},
		},
		{
			name: "every task's ack hands out the commit; Committed completes",
			cfg:  ab,
			steps: []step{
				{in: tick(10 * time.Second), out: "trigger=[1]"},
				{in: ack("b", 1), out: ""},
				{in: ack("a", 1), out: "commit=1"},
				{in: tick(time.Second), out: ""},
				{in: committed(1), out: "completed=[1]"},
			},
			check: func(t *testing.T, c *Coordinator) {
				if c.LastCompleted() != 1 || !c.LastCompletedAt().Equal(t0.Add(11*time.Second)) || c.CompletedCount() != 1 || len(c.InFlight()) != 0 {
					t.Errorf("last completed %d at %v, count %d, in flight %v", c.LastCompleted(), c.LastCompletedAt(), c.CompletedCount(), c.InFlight())
				}
			},
		},
		{
			name: "interval runs from the previous trigger, not its completion",
			cfg:  ab,
			steps: []step{
				{in: tick(10 * time.Second), out: "trigger=[1]"},
				{in: tick(3 * time.Second), out: ""},
				{in: seq(ack("a", 1), ack("b", 1)), out: "commit=1"},
				{in: committed(1), out: "completed=[1]"},
				{in: tick(6 * time.Second), out: ""},
				{in: tick(time.Second), out: "trigger=[2]"},
			},
		},
		{
			name: "a checkpoint due while max concurrent are in flight starts when one ends",
			cfg:  ab,
			steps: []step{
				{in: tick(10 * time.Second), out: "trigger=[1]"},
				{in: tick(15 * time.Second), out: ""},
				{in: seq(ack("a", 1), ack("b", 1)), out: "commit=1"},
				{in: committed(1), out: "trigger=[2] completed=[1]"},
			},
		},
		{
			name: "min pause runs from the previous completion",
			cfg:  with(func(c *CoordinatorConfig) { c.MinPause = 5 * time.Second }),
			steps: []step{
				{in: tick(10 * time.Second), out: "trigger=[1]"},
				{in: tick(9 * time.Second), out: ""},
				{in: seq(ack("a", 1), ack("b", 1)), out: "commit=1"},
				{in: committed(1), out: "completed=[1]"},
				{in: tick(time.Second), out: ""},     // interval elapsed, pause not
				{in: tick(3 * time.Second), out: ""}, // 4s after completion
				{in: tick(time.Second), out: "trigger=[2]"},
			},
		},
		{
			name: "checkpoint N+1 acked before N commits only after N committed",
			cfg:  with(func(c *CoordinatorConfig) { c.MaxConcurrent = 2 }),
			steps: []step{
				{in: tick(10 * time.Second), out: "trigger=[1]"},
				{in: tick(10 * time.Second), out: "trigger=[2]"},
				{in: tick(10 * time.Second), out: ""}, // two in flight
				{in: seq(ack("a", 2), ack("b", 2)), out: ""},
				{in: ack("a", 1), out: ""},
				{in: ack("b", 1), out: "commit=1"},
				{in: committed(1), out: "trigger=[3] commit=2 completed=[1]"},
				{in: committed(2), out: "completed=[2]"},
			},
			check: func(t *testing.T, c *Coordinator) {
				in := c.InFlight()
				if len(in) != 1 || in[0].ID != 3 || in[0].Phase != PhasePending || !slices.Equal(in[0].Waiting, []TaskID{"a", "b"}) {
					t.Errorf("in flight = %+v, want checkpoint 3 pending on a and b", in)
				}
			},
		},
		{
			name: "TriggerNow ignores the interval",
			cfg:  ab,
			steps: []step{
				{in: tick(time.Second), out: ""},
				{in: triggerNow(1), out: "trigger=[1]"},
			},
		},
		{
			name: "TriggerNow ignores min pause",
			cfg:  with(func(c *CoordinatorConfig) { c.MinPause = time.Hour }),
			steps: []step{
				{in: tick(10 * time.Second), out: "trigger=[1]"},
				{in: seq(ack("a", 1), ack("b", 1)), out: "commit=1"},
				{in: committed(1), out: "completed=[1]"},
				{in: tick(10 * time.Second), out: ""},
				{in: triggerNow(2), out: "trigger=[2]"},
			},
		},
		{
			name: "TriggerNow without a free slot is queued, shared, and served first",
			cfg:  ab,
			steps: []step{
				{in: tick(10 * time.Second), out: "trigger=[1]"},
				{in: triggerNow(2), out: ""},
				{in: triggerNow(2), out: ""},
				{in: seq(ack("a", 1), ack("b", 1)), out: "commit=1"},
				{in: committed(1), out: "trigger=[2] completed=[1]"},
				{in: triggerNow(3), out: ""},
			},
		},
		{
			name: "acks that change nothing are reported, not fatal",
			cfg:  ab,
			steps: []step{
				{in: tick(10 * time.Second), out: "trigger=[1]"},
				{in: ack("a", 1), out: ""},
				{in: ack("a", 1), err: ErrDuplicateAck},
				{in: ack("z", 1), err: ErrUnknownTask},
				{in: ack("a", 2), err: ErrUnknownCheckpoint},
				{in: ack("a", 0), err: ErrUnknownCheckpoint},
				{in: ack("b", 1), out: "commit=1"},
				{in: ack("b", 1), err: ErrDuplicateAck},
				{in: committed(1), out: "completed=[1]"},
				{in: ack("a", 1), err: ErrStale},
				{in: decline("a", 1, "late"), err: ErrStale},
				{in: decline("z", 1, "who"), err: ErrUnknownTask},
				{in: committed(1), err: ErrNotCommitting},
			},
			check: func(t *testing.T, c *Coordinator) {
				if c.State() != StateRunning || c.AbortedCount() != 0 {
					t.Errorf("state %v, aborted %d: ignored inputs changed something", c.State(), c.AbortedCount())
				}
			},
		},
		{
			name: "outcome reported for a checkpoint whose commit was not requested",
			cfg:  ab,
			steps: []step{
				{in: tick(10 * time.Second), out: "trigger=[1]"},
				{in: committed(1), err: ErrNotCommitting},
				{in: commitFailed(1, "boom"), err: ErrNotCommitting},
				{in: committed(7), err: ErrNotCommitting},
			},
		},
		{
			name: "a restored coordinator continues numbering after the restored id",
			cfg:  with(func(c *CoordinatorConfig) { c.LastCompleted = 41 }),
			steps: []step{
				{in: ack("a", 41), err: ErrStale},
				{in: tick(10 * time.Second), out: "trigger=[42]"},
				{in: seq(ack("a", 42), ack("b", 42)), out: "commit=42"},
				{in: committed(42), out: "completed=[42]"},
			},
		},
		{
			name: "a decline aborts the checkpoint and fails the job",
			cfg:  ab,
			steps: []step{
				{in: tick(10 * time.Second), out: "trigger=[1]"},
				{in: decline("b", 1, "disk full"), out: `aborted=[1:declined] fail="checkpoint 1 declined by task \"b\": disk full; the job must restart from its configured start positions (no checkpoint completed)"`},
				{in: tick(time.Hour), out: ""},
				{in: ack("a", 1), err: ErrFailed},
				{in: decline("a", 1, "again"), err: ErrFailed},
				{in: triggerNow(0), err: ErrFailed},
				{in: stop(0), err: ErrFailed},
			},
			check: func(t *testing.T, c *Coordinator) {
				var fe *FailError
				if c.State() != StateFailed || !errors.As(c.Err(), &fe) || fe.Reason != ReasonDeclined || !errors.Is(fe, ErrDeclined) || fe.RestartFrom != 0 {
					t.Errorf("state %v, err %#v", c.State(), c.Err())
				}
			},
		},
		{
			name: "a decline aborts every checkpoint in flight, earlier and later",
			cfg:  with(func(c *CoordinatorConfig) { c.MaxConcurrent = 3 }),
			steps: []step{
				{in: tick(10 * time.Second), out: "trigger=[1]"},
				{in: seq(ack("a", 1), ack("b", 1)), out: "commit=1"},
				{in: committed(1), out: "completed=[1]"},
				{in: tick(10 * time.Second), out: "trigger=[2]"},
				{in: tick(10 * time.Second), out: "trigger=[3]"},
				{in: tick(10 * time.Second), out: "trigger=[4]"},
				{in: decline("a", 3, "snapshot too large"), out: `aborted=[2:job_failed 3:declined 4:job_failed] fail="checkpoint 3 declined by task \"a\": snapshot too large; the job must restart from checkpoint 1"`},
			},
			check: func(t *testing.T, c *Coordinator) {
				if c.AbortedCount() != 3 || len(c.InFlight()) != 0 || c.LastCompleted() != 1 {
					t.Errorf("aborted %d, in flight %v, last completed %d", c.AbortedCount(), c.InFlight(), c.LastCompleted())
				}
			},
		},
		{
			name: "decline without a reason still says something",
			cfg:  ab,
			steps: []step{
				{in: tick(10 * time.Second), out: "trigger=[1]"},
				{in: func(h *harness) error { return h.c.Decline("a", 1, nil) }, out: `aborted=[1:declined] fail="checkpoint 1 declined by task \"a\": no reason given; the job must restart from its configured start positions (no checkpoint completed)"`},
			},
		},
		{
			name: "a checkpoint not fully acked within the timeout fails the job",
			cfg:  ab,
			steps: []step{
				{in: tick(10 * time.Second), out: "trigger=[1]"},
				{in: ack("a", 1), out: ""},
				{in: tick(29 * time.Second), out: ""},
				{in: tick(time.Second), out: `aborted=[1:timeout] fail="checkpoint 1 timed out after 30s waiting for tasks [\"b\"]; the job must restart from its configured start positions (no checkpoint completed)"`},
			},
			check: func(t *testing.T, c *Coordinator) {
				if !errors.Is(c.Err(), ErrTimeout) {
					t.Errorf("Err() = %v, want ErrTimeout", c.Err())
				}
			},
		},
		{
			name: "an acked checkpoint waiting for its turn still times out",
			cfg:  with(func(c *CoordinatorConfig) { c.MaxConcurrent = 2 }),
			steps: []step{
				{in: tick(10 * time.Second), out: "trigger=[1]"},
				{in: tick(10 * time.Second), out: "trigger=[2]"},
				{in: seq(ack("a", 2), ack("b", 2)), out: ""},
				{in: tick(20 * time.Second), out: `aborted=[1:timeout 2:job_failed] fail="checkpoint 1 timed out after 30s waiting for tasks [\"a\" \"b\"]; the job must restart from its configured start positions (no checkpoint completed)"`},
			},
		},
		{
			name: "the timeout stops once the commit is handed out",
			cfg:  ab,
			steps: []step{
				{in: tick(10 * time.Second), out: "trigger=[1]"},
				{in: seq(ack("a", 1), ack("b", 1)), out: "commit=1"},
				{in: tick(time.Hour), out: ""},
				{in: committed(1), out: "trigger=[2] completed=[1]"},
			},
		},
		{
			name: "a failed commit fails the job and names the restart point",
			cfg:  ab,
			steps: []step{
				{in: tick(10 * time.Second), out: "trigger=[1]"},
				{in: seq(ack("a", 1), ack("b", 1)), out: "commit=1"},
				{in: committed(1), out: "completed=[1]"},
				{in: tick(10 * time.Second), out: "trigger=[2]"},
				{in: seq(ack("a", 2), ack("b", 2)), out: "commit=2"},
				{in: commitFailed(2, "producer fenced"), out: `aborted=[2:commit_failed] fail="checkpoint 2 commit failed: producer fenced; the job must restart from checkpoint 1"`},
				{in: committed(2), err: ErrNotCommitting},
			},
			check: func(t *testing.T, c *Coordinator) {
				if !errors.Is(c.Err(), ErrCommitFailed) || c.LastCompleted() != 1 {
					t.Errorf("Err() = %v, last completed %d", c.Err(), c.LastCompleted())
				}
			},
		},
		{
			name: "a failure leaves a handed-out commit in doubt and takes its success",
			cfg:  with(func(c *CoordinatorConfig) { c.MaxConcurrent = 2 }),
			steps: []step{
				{in: tick(10 * time.Second), out: "trigger=[1]"},
				{in: tick(10 * time.Second), out: "trigger=[2]"},
				{in: seq(ack("a", 1), ack("b", 1)), out: "commit=1"},
				{in: decline("a", 2, "oom"), out: `aborted=[2:declined] fail="checkpoint 2 declined by task \"a\": oom; the job must restart from its configured start positions (no checkpoint completed) (or 1, whose commit was in flight)"`},
				{in: committed(1), out: "completed=[1]"},
				{in: tick(time.Hour), out: ""},
			},
			check: func(t *testing.T, c *Coordinator) {
				var fe *FailError
				if !errors.As(c.Err(), &fe) || fe.InDoubt != 1 || c.LastCompleted() != 1 || c.State() != StateFailed {
					t.Errorf("err %v, last completed %d, state %v", c.Err(), c.LastCompleted(), c.State())
				}
			},
		},
		{
			name: "a failure leaves a handed-out commit in doubt and takes its failure",
			cfg:  with(func(c *CoordinatorConfig) { c.MaxConcurrent = 2 }),
			steps: []step{
				{in: tick(10 * time.Second), out: "trigger=[1]"},
				{in: tick(10 * time.Second), out: "trigger=[2]"},
				{in: seq(ack("a", 1), ack("b", 1)), out: "commit=1"},
				{in: tick(30 * time.Second), out: `aborted=[2:timeout] fail="checkpoint 2 timed out after 30s waiting for tasks [\"a\" \"b\"]; the job must restart from its configured start positions (no checkpoint completed) (or 1, whose commit was in flight)"`},
				{in: commitFailed(1, "broker gone"), out: "aborted=[1:commit_failed]"},
			},
		},
		{
			name: "a commit the caller never saw is withdrawn on failure",
			cfg:  with(func(c *CoordinatorConfig) { c.MaxConcurrent = 2 }),
			steps: []step{
				{in: tick(10 * time.Second), out: "trigger=[1]"},
				{in: tick(10 * time.Second), out: "trigger=[2]"},
				{in: seq(ack("a", 1), ack("b", 1), decline("b", 2, "bad")), out: `aborted=[1:job_failed 2:declined] fail="checkpoint 2 declined by task \"b\": bad; the job must restart from its configured start positions (no checkpoint completed)"`},
				{in: committed(1), err: ErrNotCommitting},
			},
		},
		{
			name: "a decline after the commit was handed out is too late",
			cfg:  ab,
			steps: []step{
				{in: tick(10 * time.Second), out: "trigger=[1]"},
				{in: seq(ack("a", 1), ack("b", 1)), out: "commit=1"},
				{in: decline("a", 1, "changed my mind"), err: ErrStale},
				{in: committed(1), out: "completed=[1]"},
			},
		},
		{
			name: "Stop triggers a final checkpoint and nothing after it",
			cfg:  ab,
			steps: []step{
				{in: tick(time.Second), out: ""},
				{in: stop(1), out: "trigger=[1]"},
				{in: stop(1), out: ""},
				{in: triggerNow(1), out: ""},
				{in: tick(20 * time.Second), out: ""},
				{in: seq(ack("a", 1), ack("b", 1)), out: "commit=1"},
				{in: committed(1), out: "completed=[1]"},
				{in: tick(time.Hour), out: ""},
				{in: stop(1), out: ""},
				{in: triggerNow(0), err: ErrStopped},
			},
			check: func(t *testing.T, c *Coordinator) {
				if c.State() != StateStopped || c.LastTriggered() != 1 {
					t.Errorf("state %v, last triggered %d", c.State(), c.LastTriggered())
				}
			},
		},
		{
			name: "Stop with a checkpoint in flight queues the final one behind it",
			cfg:  ab,
			steps: []step{
				{in: tick(10 * time.Second), out: "trigger=[1]"},
				{in: stop(2), out: ""},
				{in: tick(10 * time.Second), out: ""},
				{in: seq(ack("a", 1), ack("b", 1)), out: "commit=1"},
				{in: committed(1), out: "trigger=[2] completed=[1]"},
				{in: seq(ack("a", 2), ack("b", 2)), out: "commit=2"},
				{in: committed(2), out: "completed=[2]"},
			},
			check: func(t *testing.T, c *Coordinator) {
				if c.State() != StateStopped {
					t.Errorf("state %v, want stopped", c.State())
				}
			},
		},
		{
			name: "the final checkpoint timing out fails the job",
			cfg:  ab,
			steps: []step{
				{in: stop(1), out: "trigger=[1]"},
				{in: tick(30 * time.Second), out: `aborted=[1:timeout] fail="checkpoint 1 timed out after 30s waiting for tasks [\"a\" \"b\"]; the job must restart from its configured start positions (no checkpoint completed)"`},
			},
		},
		{
			name: "time never runs backward",
			cfg:  ab,
			steps: []step{
				{in: tick(10 * time.Second), out: "trigger=[1]"},
				{in: tick(25 * time.Second), out: ""},
				{in: tick(-time.Hour), out: ""},
				{in: tick(time.Hour + 4*time.Second), out: ""}, // 29s after trigger, as seen
				{in: tick(time.Second), out: `aborted=[1:timeout] fail="checkpoint 1 timed out after 30s waiting for tasks [\"a\" \"b\"]; the job must restart from its configured start positions (no checkpoint completed)"`},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := NewCoordinator(tt.cfg, t0)
			if err != nil {
				t.Fatal(err)
			}
			h := &harness{t: t, c: c, now: t0}
			for i, s := range tt.steps {
				err := s.in(h)
				switch {
				case s.err == nil && err != nil:
					t.Fatalf("step %d: unexpected error: %v", i, err)
				case s.err != nil && !errors.Is(err, s.err):
					t.Fatalf("step %d: error = %v, want %v", i, err, s.err)
				}
				rd := c.Ready()
				if got := rd.String(); got != s.out {
					t.Fatalf("step %d: Ready\n got: %s\nwant: %s", i, got, s.out)
				}
				if rd.Empty() == c.HasReady() {
					t.Fatalf("step %d: HasReady = %v for %q", i, c.HasReady(), rd)
				}
				c.Advance()
				if c.HasReady() {
					t.Fatalf("step %d: HasReady after Advance: %s", i, c.Ready())
				}
			}
			if tt.check != nil {
				tt.check(t, c)
			}
		})
	}
}

// Outputs produced between Ready and Advance survive the Advance; what
// Ready returned does not come back.
func TestAdvanceKeepsLaterOutputs(t *testing.T) {
	c, err := NewCoordinator(CoordinatorConfig{Interval: time.Second, MaxConcurrent: 2, Tasks: []TaskID{"a"}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	c.Tick(t0.Add(time.Second))
	rd := c.Ready()
	if got := rd.String(); got != "trigger=[1]" {
		t.Fatalf("first Ready = %q", got)
	}
	if err := c.Ack("a", 1); err != nil { // between Ready and Advance
		t.Fatal(err)
	}
	c.Tick(t0.Add(2 * time.Second))
	if got := c.Ready().String(); got != "trigger=[1 2] commit=1" {
		t.Fatalf("Ready without Advance = %q, want everything so far", got)
	}
	rd.Trigger[0] = 99 // the caller's copy is its own
	c.Advance()
	if got := c.Ready().String(); got != "" {
		t.Fatalf("after Advance = %q, want nothing left", got)
	}

	// Now commit 1 is handed out; its outcome arrives before Advance and
	// the next commit with it.
	if err := c.Ack("a", 2); err != nil {
		t.Fatal(err)
	}
	if err := c.Committed(1, t0.Add(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	rd = c.Ready()
	if got := rd.String(); got != "trigger=[3] commit=2 completed=[1]" {
		t.Fatalf("Ready = %q", got)
	}
	if err := c.Committed(2, t0.Add(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	c.Advance()
	if got := c.Ready().String(); got != "completed=[2]" {
		t.Fatalf("after Advance = %q, want the completion fed in between", got)
	}
}

func TestCoordinatorConfig(t *testing.T) {
	c, err := NewCoordinator(CoordinatorConfig{Tasks: []TaskID{"a"}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if c.cfg.Interval != DefaultInterval || c.cfg.Timeout != DefaultTimeout || c.cfg.MaxConcurrent != DefaultMaxConcurrent {
		t.Errorf("defaults not applied: %+v", c.cfg)
	}
	_, err = NewCoordinator(CoordinatorConfig{
		Interval: -1, Timeout: -1, MinPause: -1, MaxConcurrent: -1,
		Tasks: []TaskID{"a", "", "a"},
	}, t0)
	for _, want := range []string{
		"interval -1ns: must be positive",
		"timeout -1ns: must be positive",
		"min pause -1ns: must not be negative",
		"max concurrent -1: must be at least 1",
		"tasks[1]: empty task id",
		`tasks[2]: duplicate task id "a"`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v: want it to contain %q", err, want)
		}
	}
	if _, err := NewCoordinator(CoordinatorConfig{}, t0); err == nil || !strings.Contains(err.Error(), "at least one task") {
		t.Errorf("no tasks: error %v", err)
	}
}

// The caller's slice is copied: changing it later changes nothing.
func TestCoordinatorCopiesTasks(t *testing.T) {
	tasks := []TaskID{"b", "a"}
	c, err := NewCoordinator(CoordinatorConfig{Tasks: tasks}, t0)
	if err != nil {
		t.Fatal(err)
	}
	tasks[0] = "z"
	if got := c.Tasks(); !slices.Equal(got, []TaskID{"a", "b"}) {
		t.Errorf("Tasks() = %v", got)
	}
	if err := c.Ack("z", 1); !errors.Is(err, ErrUnknownTask) {
		t.Errorf("ack from z: %v", err)
	}
}

func TestEnumStrings(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{Phase(0).String(), "Phase(0)"},
		{PhasePending.String(), "pending"},
		{PhaseAborted.String(), "aborted"},
		{State(0).String(), "State(0)"},
		{StateFailed.String(), "failed"},
		{AbortReason(0).String(), "AbortReason(0)"},
		{ReasonCommitFailed.String(), "commit_failed"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
