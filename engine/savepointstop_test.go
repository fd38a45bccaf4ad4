package engine

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// SavepointAndStop (POST /api/v1/savepoints with "stop": true) stops a
// single-mode job with its final checkpoint as the savepoint and returns
// it once Run has returned nil; asked again, the job is stopping already.
func TestSavepointAndStop(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	job, logs := newJob(t, paritySum(t, e.env))
	done := runBackground(job)
	e.numbers(1, 3000)
	e.awaitRead(job, 3000, logs)
	dir := filepath.Join(t.TempDir(), "sp")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sum, err := job.SavepointAndStop(ctx, dir)
	if err != nil {
		t.Fatalf("SavepointAndStop: %v\n%s", err, logs.String())
	}
	if err := awaitDone(t, done); err != nil {
		t.Fatalf("Run after SavepointAndStop: %v", err)
	}
	sp := openSavepoint(t, dir)
	if sum.Dir != dir || sum.ID != sp.ID() || uint64(sum.CheckpointID) != job.Status().Checkpoint.LastCompleted {
		t.Fatalf("SavepointAndStop returned %+v; the savepoint is %s at checkpoint %d", sum, sp.ID(), sp.Manifest().CheckpointID)
	}
	if _, err := job.SavepointAndStop(ctx, filepath.Join(t.TempDir(), "again")); !errors.Is(err, ErrStopping) {
		t.Fatalf("SavepointAndStop of a stopped job: %v, want ErrStopping", err)
	}
}

// In group mode, on the job's only process, SavepointAndStop is the stop
// with a savepoint of run --stop-with-savepoint: the sources stop, the
// repartition topic drains, and the savepoint's state counts exactly the
// inputs its offsets cover.
func TestGroupModeSavepointAndStop(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	groupEnv(e)
	a, logs := newJob(t, paritySumGroup(t, e.env), WithInstanceID("a"))
	done := runBackground(a)
	feedWait := e.feedInBackground(10000, 10000)
	defer feedWait()
	e.awaitCommittedOutputs(1000, logs)
	dir := filepath.Join(t.TempDir(), "sp")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sum, err := a.SavepointAndStop(ctx, dir)
	if err != nil {
		t.Fatalf("SavepointAndStop in group mode: %v\n%s", err, logs.String())
	}
	if err := awaitDone(t, done); err != nil {
		t.Fatalf("Run after SavepointAndStop: %v", err)
	}
	sp := openSavepoint(t, dir)
	if sum.ID != sp.ID() {
		t.Fatalf("SavepointAndStop returned %s; the savepoint is %s", sum.ID, sp.ID())
	}
	if read, counted := savepointCounts(t, a, sp); read == 0 || counted != read {
		t.Fatalf("the savepoint's offsets cover %d inputs, its state counts %d\n%s", read, counted, logs.String())
	}
}
