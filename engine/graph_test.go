package engine

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/twophase"
)

// An attempt's first checkpoint is due firstCheckpointAfter after it
// starts, the later ones one interval apart; an interval shorter than that
// is kept as it is.
func TestFirstCheckpointComesEarly(t *testing.T) {
	start := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for _, interval := range []time.Duration{time.Second, 50 * time.Millisecond} {
		first := min(interval, firstCheckpointAfter)
		now := start
		var triggered []checkpoint.ID
		l := runningLoop(t, twophase.Config{Interval: interval}, func() time.Time { return now }, scheduleStart(start, interval), "t")
		l.trigger = func(id checkpoint.ID, _ bool) { triggered = append(triggered, id) }
		tick := func(at time.Duration) []checkpoint.ID {
			triggered, now = nil, start.Add(at)
			l.onTick()
			settleCalls(t, l)
			return triggered
		}
		if got := tick(first - time.Millisecond); len(got) != 0 {
			t.Fatalf("interval %v: triggered %v before %v", interval, got, first)
		}
		if got := tick(first); len(got) != 1 {
			t.Fatalf("interval %v: nothing triggered at %v", interval, first)
		}
		l.onReport(taskReport{task: "t", id: 1})
		settleCalls(t, l)
		if l.m.LastCompleted() != 1 {
			t.Fatalf("interval %v: checkpoint 1 acked but not completed", interval)
		}
		if got := tick(first + interval - time.Millisecond); len(got) != 0 {
			t.Fatalf("interval %v: the second checkpoint came early: %v", interval, got)
		}
		if got := tick(first + interval); len(got) != 1 {
			t.Fatalf("interval %v: no second checkpoint one interval after the first", interval)
		}
	}
}

// What a stop announces depends on what runs: a final checkpoint, or,
// between two attempts, nothing to finish.
func TestStopPlanSaysWhatHappens(t *testing.T) {
	env := map[string]string{"KAFKA_BROKERS": "127.0.0.1:1", "ADMIN_LISTEN": "off"}
	j, _ := newJob(t, paritySum(t, env))
	if got := j.StopPlan(); got != "stopping after a final checkpoint" {
		t.Errorf("running: %q", got)
	}
	j.status.set(StateRestarting, errors.New("a broker went away"))
	if got := j.StopPlan(); !strings.Contains(got, "no final checkpoint") {
		t.Errorf("restarting: %q, want it to say there is no final checkpoint", got)
	}
	env["GUARANTEE"] = "at_most_once"
	j, _ = newJob(t, paritySum(t, env))
	if got := j.StopPlan(); !strings.Contains(got, "at_most_once keeps no checkpoints") {
		t.Errorf("at_most_once: %q", got)
	}
}

// A restart waits between half its backoff and all of it, and the draws
// replay from the seed.
func TestEqualJitter(t *testing.T) {
	a, b := equalJitter(rand.New(rand.NewPCG(1, 2))), equalJitter(rand.New(rand.NewPCG(1, 2)))
	seen := map[time.Duration]bool{}
	for i := range 1000 {
		backoff := time.Duration(1+i%7) * 100 * time.Millisecond
		wait := a(backoff)
		if wait < backoff/2 || wait >= backoff {
			t.Fatalf("backoff %v: waits %v, want [%v, %v)", backoff, wait, backoff/2, backoff)
		}
		if again := b(backoff); again != wait {
			t.Fatalf("the same seed drew %v, then %v", wait, again)
		}
		seen[wait] = true
	}
	if len(seen) < 100 {
		t.Fatalf("only %d distinct waits in 1000: not spread", len(seen))
	}
}
