package engine

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
	"github.com/eoflow/pipeline/source"
)

func TestPlanStart(t *testing.T) {
	tp := func(topic string, p int32) source.TopicPartition {
		return source.TopicPartition{Topic: topic, Partition: p}
	}
	tps := []source.TopicPartition{tp("a", 0), tp("a", 1), tp("a", 2), tp("b", 0)}
	checkpointed := []checkpoint.SourceOffset{{Topic: "a", Partition: 0, Offset: 7}, {Topic: "a", Partition: 1, Offset: 9}}
	plan := planStart(tps, checkpointed)
	if want := map[source.TopicPartition]int64{tp("a", 0): 7, tp("a", 1): 9}; fmt.Sprint(plan.resume) != fmt.Sprint(want) {
		t.Errorf("resume = %v, want %v", plan.resume, want)
	}
	if !slices.Equal(plan.added, []source.TopicPartition{tp("a", 2)}) {
		t.Errorf("added = %v, want a/2: a partition of a topic the checkpoint read", plan.added)
	}
	if !slices.Equal(plan.fresh, []source.TopicPartition{tp("b", 0)}) {
		t.Errorf("fresh = %v, want b/0: a topic the checkpoint never read", plan.fresh)
	}
	// A new job: every partition starts where the source says.
	if plan := planStart(tps, nil); len(plan.fresh) != 4 || len(plan.added)+len(plan.resume) != 0 {
		t.Errorf("without a checkpoint: %+v, want all fresh", plan)
	}
}

// Partitions added to an input topic are read, from their earliest
// offset: those added while the job runs (it ends the attempt at a
// checkpoint and restores with them), and those added while it was
// stopped. With start: latest, nothing written to them is lost, and they
// appear in the job's status and its consumer group.
func TestAddedPartitionsAreRead(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	in := e.env["INPUT_TOPIC"] + "-grows"
	e.env["INPUT_TOPIC"] = in
	kafkatest.CreateTopic(t, e.brokers, in, 2, nil)
	cfg := paritySumEdited(t, e.env, "start: earliest", "start: latest")
	grow := func(total int) {
		t.Helper()
		adm := kadm.NewClient(kafkatest.Client(t, e.brokers))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		resp, err := adm.UpdatePartitions(ctx, total, in)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Fatalf("growing %s to %d partitions: %v", in, total, err)
		}
	}

	j, logs := newJob(t, cfg)
	j.discoverEvery = 100 * time.Millisecond
	done := runBackground(j)
	r := &running{done: done, logs: logs}
	e.awaitRead(j, 0, logs) // ready: start: latest resolved before any input
	e.numbers(1, 1000)
	grow(4)
	e.numbers(1001, 3000)
	if rep := e.awaitFinal(4000, r); !rep.Exact() {
		t.Fatalf("partitions added while running: %v", rep)
	}
	j.Stop()
	if err := awaitDone(t, done); err != nil {
		t.Fatalf("Run: %v", err)
	}

	grow(6)
	e.numbers(4001, 2000)
	j, logs = newJob(t, cfg)
	done = runBackground(j)
	r = &running{done: done, logs: logs}
	if rep := e.awaitFinal(6000, r); !rep.Exact() {
		t.Fatalf("partitions added while stopped: %v", rep)
	}
	if n := len(j.Status().Partitions); n != 6 {
		t.Errorf("the job's status lists %d partitions, want 6", n)
	}
	e.awaitGroupAtEnd()
	j.Stop()
	if err := awaitDone(t, done); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// In group mode the group deals out partitions added to an input topic:
// its leader sees them at its next metadata refresh, every
// partition discovery interval (the client's default was five minutes,
// against the ten seconds docs/scale-out.md promises). With start: latest the
// added partitions are read from their earliest offset, as single mode
// reads them, so nothing written to them before is lost.
func TestGroupModeReadsAddedPartitions(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	groupEnv(e)
	in := e.env["INPUT_TOPIC"] + "-grows"
	e.env["INPUT_TOPIC"] = in
	kafkatest.CreateTopic(t, e.brokers, in, 2, nil)
	cfg := paritySumEdited(t, e.env, "start: earliest", "start: latest")
	j, logs := newJob(t, cfg, WithInstanceID("a"))
	j.discoverEvery = time.Second
	done := runBackground(j)
	r := &running{done: done, logs: logs}
	// start: latest is resolved, and committed, before any input.
	e.awaitGroupCommitted(in, 2)
	e.numbers(1, 1000)
	adm := kadm.NewClient(kafkatest.Client(t, e.brokers))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if resp, err := adm.UpdatePartitions(ctx, 4, in); err != nil || resp.Error() != nil {
		t.Fatalf("growing %s: %v %v", in, err, resp.Error())
	}
	e.numbers(1001, 3000)
	deadline := time.Now().Add(time.Minute)
	for {
		if g := j.Status().Group; g != nil && slices.Contains(g.Assigned, in+"/3") && slices.Contains(g.Assigned, in+"/2") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the added partitions were not assigned a minute later (every %v): %+v", j.discoverEvery, j.Status().Group)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if rep := e.awaitFinal(4000, r); !rep.Exact() {
		t.Fatalf("partitions added while running: %v", rep)
	}
	j.Stop()
	if err := awaitDone(t, done); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// awaitGroupCommitted waits until the job's consumer group has committed
// an offset for each of the first n partitions of topic.
func (e *testEnv) awaitGroupCommitted(topic string, n int32) {
	e.t.Helper()
	adm := kadm.NewClient(kafkatest.Client(e.t, e.brokers))
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		committed, err := adm.FetchOffsets(ctx, e.env["JOB_NAME"])
		cancel()
		all := err == nil
		for p := int32(0); p < n && all; p++ {
			o, ok := committed.Lookup(topic, p)
			all = ok && o.Err == nil && o.At >= 0
		}
		if all {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("the group committed no offsets of %s for a minute: %v", topic, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
