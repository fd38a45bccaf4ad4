package engine

import (
	"context"
	"maps"
	"slices"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/state"
)

// Rebalances, second version: a member keeps its state across
// consecutive generations. The first version rebuilt every attempt from
// the group-state topic, so a member joining or leaving paused every
// process for a restore of everything it owned, though the sticky
// balancer (stickiness.go) moves only the joiner's or leaver's share.
//
// When the group revokes an assignment, the attempt commits its open
// epoch as a final checkpoint (coordinatorLoop.onYield) and its sources
// read nothing after the final barrier, so its operators hold exactly
// what that checkpoint committed. The attempt leaves them to the next
// (keptState), which uses them only if nobody else can have changed the
// state since:
//
//   - its generation is the very next one: the partitions this member
//     owned in generation N and owns again in N+1 had no other owner in
//     between (a zombie of an older generation cannot commit: its offsets
//     carry its generation, and the state records share their
//     transaction);
//   - the checkpoint its recovery read (the decision log) is the one
//     committed at the revocation.
//
// Then the operators let go of the state partitions that moved away
// (keyed.Stateful.Retain: no tombstones, the topic holds them for their
// new owner), and only the partitions that moved here are restored into
// them, after their markers settle. The event time of each repartition
// partition kept is what the final checkpoint wrote of it; a job that
// does not repartition keeps none: its windows start over at no
// watermark, as every attempt's do (groupeventtime.go), since the
// watermark they fired at covered partitions that may have moved away,
// and a partition that moved here may be behind it. Anything else
// (another generation, a failed final checkpoint, a crash) restores
// everything, as before. The tables are kept along (tablekept.go): read
// on to their ends, not from their starts.

// keptState is what a revoked attempt leaves the next one.
type keptState struct {
	// generation is the one the final checkpoint committed in, and
	// checkpoint its id.
	generation int32
	checkpoint checkpoint.ID
	// owned are the state partitions the operators hold.
	owned []int32
	ops   []workerOps
	// queues is the event time of each owned repartition partition
	// (groupeventtime.go) as of the final checkpoint; nil without event
	// time.
	queues map[int32]*queueTime
	// tables are the attempt's tables, by id, whose task ended
	// (tablekept.go).
	tables map[string]*tableTask
}

// keep is what attempt a, revoked after its final checkpoint committed
// (errYielded), leaves the next attempt.
func (m *groupMode) keep(a *attempt) *keptState {
	if m.owned == nil || a.loop == nil {
		return nil
	}
	k := &keptState{
		generation: m.asg.member.Generation, checkpoint: a.loop.state.final,
		owned: m.owned, ops: a.ops, tables: keptTables(a.tables),
	}
	if gt := a.groupTime; gt != nil {
		k.queues = maps.Clone(gt.queues)
		// What the attempt wrote of a partition since supersedes what it
		// restored: its every epoch committed, the final one last.
		for q, v := range m.own.queues {
			t, err := decodeQueueTime([]byte(v))
			if err != nil {
				return nil
			}
			k.queues[q] = t
		}
	}
	return k
}

// takeKept returns the state the previous attempt left, if this attempt
// may continue from it (see above), and forgets it either way.
func (m *groupMode) takeKept(a *attempt) *keptState {
	j := a.j
	k := j.kept
	j.kept = nil
	if k == nil {
		return nil
	}
	gen := m.asg.member.Generation
	switch {
	case gen != k.generation+1 && j.plantedBug != plantedKeptAcrossGenerations:
		j.log.Info("restoring every state partition: this generation does not follow the one the state was kept from",
			"generation", gen, "kept_from", k.generation)
		return nil
	case a.latest == nil || a.latest.ID != k.checkpoint:
		var got checkpoint.ID
		if a.latest != nil {
			got = a.latest.ID
		}
		j.log.Warn("restoring every state partition: the last checkpoint is not the one committed at the revocation",
			"checkpoint", got, "kept_at", k.checkpoint)
		return nil
	}
	for _, st := range statefulOf(k.ops) {
		if st.Store().DirtyLen() > 0 {
			// Its sources read on after the final barrier: the operators
			// hold what no checkpoint does.
			j.log.Warn("restoring every state partition: the kept state changed after its final checkpoint", "operator", st.ID())
			return nil
		}
	}
	return k
}

// regain continues from kept state k on the state partitions owned now:
// the operators let go of those that moved away, and read, from the
// state topic, those that moved here (read reads those). It returns the
// operators and how many keys they hold.
func (j *Job) regain(ctx context.Context, k *keptState, owned []int32, read stateReader) ([]workerOps, int, error) {
	keep := func(kg state.KeyGroup, key []byte) bool {
		return slices.Contains(owned, j.shuffle.statePartition(kg, key))
	}
	if j.plantedBug == plantedKeptMovedAway {
		keep = func(state.KeyGroup, []byte) bool { return true }
	}
	dropped := 0
	for _, st := range statefulOf(k.ops) {
		n, err := st.Retain(keep)
		if err != nil {
			return nil, 0, err
		}
		dropped += n
	}
	kept, total := heldKeys(k.ops), 0
	restorers, err := j.restorersOf(k.ops, (*state.Restorer).RegisterRetained)
	if err != nil {
		return nil, 0, err
	}
	if restorers[0] == nil {
		total = kept // no keyed operator: no state
	} else if total, err = j.fillOperators(ctx, k.ops, restorers, read); err != nil {
		return nil, 0, err
	}
	j.log.Info("kept the state of the partitions this process still owns", "kept_partitions", intersect(k.owned, owned),
		"dropped_keys", dropped, "kept_keys", kept, "restored_keys", total-kept)
	return k.ops, total, nil
}

// intersect is the elements of a also in b.
func intersect(a, b []int32) []int32 {
	var out []int32
	for _, x := range a {
		if slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}
