package engine

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/eoflow/pipeline/checkpoint"
)

// While transaction N commits, the graph goes on: the sources keep
// reading and the workers keep processing, and the sink holds what they
// send until N has ended (DESIGN §2, step 3). A commit is held open here
// until the job has read far more than every channel of the graph can
// hold; a sink that stalled the graph for its commit would stop reading
// long before.
func TestGraphGoesOnWhileAnEpochCommits(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	cfg := paritySum(t, e.env)
	e.numbers(1, 1000)

	holding := make(chan checkpoint.ID, 1)
	release := make(chan struct{})
	var first, released sync.Once
	letGo := func() { released.Do(func() { close(release) }) }
	t.Cleanup(letGo) // never leave the commit hanging
	hold := func(id checkpoint.ID) {
		first.Do(func() {
			holding <- id
			<-release
		})
	}
	j, logs := newJob(t, cfg, withBeforeCommit(hold))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r := &running{cancel: cancel, done: make(chan error, 1), logs: logs}
	go func() { r.done <- j.Run(ctx) }()

	var held checkpoint.ID
	select {
	case held = <-holding:
	case <-time.After(2 * time.Minute):
		t.Fatalf("no commit began:\n%s", logs.String())
	}
	// What the channels between the tasks hold at most, in records: every
	// queue full of polls, and one poll in each task's hands.
	inChannels := int64((sinkQueue + j.workers*(workerQueue+1) + 2) * pollBatch)
	total := inChannels + 10_000
	if total > maxHeldWhileCommitting {
		t.Fatalf("the test's %d records would not fit what the sink holds (%d)", total, maxHeldWhileCommitting)
	}
	e.numbers(1001, total-1000)
	e.awaitRead(j, total, logs)
	letGo()
	t.Logf("read %d records (the channels hold at most %d) while checkpoint %d committed", total, inChannels, held)

	rep := e.awaitFinal(total, r)
	if !rep.Exact() || int64(rep.Outputs["odd"]+rep.Outputs["even"]) != total {
		t.Fatalf("not exactly one output per input: %v", rep)
	}
	j.Stop()
	if err := awaitDone(t, r.done); err != nil {
		t.Fatalf("Run after stop: %v", err)
	}
}
