package engine

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// checkRestart is CheckRestart of a job built from cfg-like settings,
// which validate --against-checkpoint runs without running the job.
func checkRestart(t *testing.T, j *Job) (RestartCheck, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return j.CheckRestart(ctx)
}

// CheckRestart in group mode checks every member's newest checkpoint
// against the file, and refuses the other mode's checkpoints, in the
// words a start uses.
func TestCheckRestartInGroupMode(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	groupEnv(e)
	a, logs := newJob(t, paritySumGroup(t, e.env), WithInstanceID("a"))
	done := runBackground(a)
	e.numbers(1, 1000)
	e.awaitCommittedOutputs(1000, logs)
	a.Stop()
	if err := awaitDone(t, done); err != nil {
		t.Fatal(err)
	}

	same, err := New(paritySumGroup(t, e.env), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	check, err := checkRestart(t, same)
	if err != nil || len(check.Checkpoints) != 1 || check.Checkpoints[0].Member != "a" || check.Checkpoints[0].ID == 0 {
		t.Fatalf("CheckRestart of the unchanged group job: %+v, %v", check, err)
	}

	changed, err := New(paritySumEdited(t, e.env, "sum: sum(n)", "sum: sum(n * 2)"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	_, err = checkRestart(t, changed)
	if !errors.Is(err, ErrIncompatible) || !strings.Contains(err.Error(), "member a: ") ||
		!strings.Contains(err.Error(), `value "sum" was sum(n), the config has sum(n * 2)`) {
		t.Fatalf("CheckRestart of the changed group job: %v", err)
	}

	// The same job in single mode: its checkpoints are a group's.
	delete(e.env, "SCALE_MODE")
	single, err := New(paritySum(t, e.env), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := checkRestart(t, single); !errors.Is(err, ErrIncompatible) || !strings.Contains(err.Error(), "ran in group mode") {
		t.Fatalf("CheckRestart in single mode of a group job: %v", err)
	}
}

// A job that never ran has nothing to check against.
func TestCheckRestartOfANewJob(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	j, err := New(paritySum(t, e.env), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if check, err := checkRestart(t, j); err != nil || len(check.Checkpoints) != 0 {
		t.Fatalf("CheckRestart of a new job: %+v, %v", check, err)
	}
}
