package engine

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/sink"
	"github.com/eoflow/pipeline/source"
	"github.com/eoflow/pipeline/twophase"
)

func testStatus(t *testing.T, yaml string) *status {
	t.Helper()
	st := newStatus(parseConfig(t, []byte(yaml), nil), 2)
	at := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	st.now = func() time.Time { at = at.Add(time.Second); return at }
	return st
}

const statusJob = `
name: st
kafka: {brokers: ["127.0.0.1:9092"]}
sources: [{id: numbers, topics: [numbers]}]
steps:
  - {id: parity, key_by: 'n % 2'}
  - {id: sums, aggregate: {values: {sum: sum(n)}}}
sinks: [{topic: out}]
`

// Restarts are remembered with their reason and error, the newest
// restartHistory of them.
func TestStatusKeepsRecentRestarts(t *testing.T) {
	st := testStatus(t, statusJob)
	if s := st.snapshot(); s.Mode != "single" || s.StartedAt.IsZero() || s.RecentRestarts == nil || s.Partitions == nil {
		t.Fatalf("fresh status: mode %q, started %v, restarts %v, partitions %v", s.Mode, s.StartedAt, s.RecentRestarts, s.Partitions)
	}
	st.set(StateRestarting, &twophase.FailError{Reason: twophase.ReasonTimeout, Err: errors.New("slow")})
	st.set(StateRestarting, fmt.Errorf("ended: %w", errRebalanced))
	st.set(StateRestarting, errImported)
	for i := range restartHistory {
		st.set(StateRestarting, fmt.Errorf("failure %d", i))
	}
	s := st.snapshot()
	if s.Restarts != restartHistory+3 || len(s.RecentRestarts) != restartHistory {
		t.Fatalf("%d restarts, %d remembered", s.Restarts, len(s.RecentRestarts))
	}
	if r := s.RecentRestarts[restartHistory-1]; r.Error != fmt.Sprintf("failure %d", restartHistory-1) || r.Reason != "error" {
		t.Errorf("newest restart %+v", r)
	}
	st = testStatus(t, statusJob)
	st.set(StateRestarting, &twophase.FailError{Reason: twophase.ReasonTimeout, Err: errors.New("slow")})
	st.set(StateRestarting, fmt.Errorf("ended: %w", errRebalanced))
	st.set(StateRestarting, errImported)
	var reasons []string
	for _, r := range st.snapshot().RecentRestarts {
		reasons = append(reasons, r.Reason)
	}
	if fmt.Sprint(reasons) != "[timeout rebalance planned]" {
		t.Errorf("reasons %v", reasons)
	}
}

// Aborted checkpoints are kept, newest first, bounded like the completed
// ones.
func TestStatusKeepsCheckpointFailures(t *testing.T) {
	j := &Job{status: testStatus(t, statusJob)}
	for id := 1; id <= historySize+5; id++ {
		j.status.checkpointFailed(checkpoint.ID(id), "timeout", fmt.Errorf("checkpoint %d timed out", id))
	}
	fs := j.CheckpointFailures()
	if len(fs) != historySize || fs[0].ID != historySize+5 || fs[len(fs)-1].ID != 6 {
		t.Fatalf("%d failures, newest %d, oldest %d", len(fs), fs[0].ID, fs[len(fs)-1].ID)
	}
	if fs[0].Reason != "timeout" || fs[0].Error != fmt.Sprintf("checkpoint %d timed out", historySize+5) || !fs[0].At.After(fs[1].At) {
		t.Errorf("newest failure %+v, next at %v", fs[0], fs[1].At)
	}
}

// A group member's status names the key groups of the repartition
// partitions it owns, and keeps its recent assignments.
func TestStatusGroupKeyGroupsAndRebalances(t *testing.T) {
	st := testStatus(t, statusJob+`
checkpoint: {key_groups: 16}
scale: {mode: group, partitions: 4}
`)
	assign := func(gen int32, tps ...source.TopicPartition) {
		st.assigned(&assignment{member: sink.GroupMember{InstanceID: "a", MemberID: "m-a", Generation: gen}, tps: tps}, []string{"a", "b"})
	}
	assign(1, source.TopicPartition{Topic: "numbers", Partition: 0}, source.TopicPartition{Topic: "st-repartition", Partition: 1}, source.TopicPartition{Topic: "st-repartition", Partition: 3})
	assign(2, source.TopicPartition{Topic: "st-repartition", Partition: 0})
	g := st.snapshot().Group
	if g == nil || g.Generation != 2 || len(g.Rebalances) != 2 {
		t.Fatalf("group %+v", g)
	}
	if fmt.Sprint(g.KeyGroups) != "[{0 0 4}]" {
		t.Errorf("generation 2 key groups %v", g.KeyGroups)
	}
	if r := g.Rebalances[0]; r.Generation != 1 || r.Partitions != 3 || fmt.Sprint(r.Members) != "[a b]" {
		t.Errorf("first rebalance %+v", r)
	}
	assign(1, source.TopicPartition{Topic: "st-repartition", Partition: 1}, source.TopicPartition{Topic: "st-repartition", Partition: 3})
	if g := st.snapshot().Group; fmt.Sprint(g.KeyGroups) != "[{1 4 8} {3 12 16}]" {
		t.Errorf("key groups %v", g.KeyGroups)
	}
	for range assignmentHistory {
		assign(3)
	}
	if n := len(st.snapshot().Group.Rebalances); n != assignmentHistory {
		t.Errorf("%d rebalances remembered", n)
	}
}
