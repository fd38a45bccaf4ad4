package engine

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/sink"
	"github.com/eoflow/pipeline/source"
	"github.com/eoflow/pipeline/state"
)

// Group mode (scale.mode: group) runs one job on many processes, each
// started with the same configuration and an instance id of its own. The
// job's consumer group decides who owns what:
//
//   - a source partition: its owner reads it, runs the stateless steps
//     and, for a keyed job, writes what the keyed operator reads of each
//     result (shufflecodec.go: the group key, the aggregate's values
//     evaluated or an interval join's record, event time, the source
//     position and the input for dead letters) to the partition of
//     <job>-repartition that owns the record's key group (a fixed,
//     contiguous range of key groups per partition, as workers have);
//   - a repartition partition q: its owner reads it and runs the keyed
//     operator, no step again; its state is partition q of
//     <job>-group-state.
//
// Each process runs the single-mode task graph over what it owns, with a
// transactional id of its own (<job>-<instance>): one transaction per
// epoch holds its outputs, repartition records, state changes and dead
// letters, its checkpoint record (keyed <job>/<instance>), and the barrier
// offsets of every partition it reads, committed to the group on behalf
// of its member and generation (KIP-447). A process the group has moved
// on from cannot commit: the group coordinator refuses its offsets, and
// it aborts. A record whose key group is owned by the process that read
// it skips the topic when the attempt could tell, at its start, that
// nothing of its repartition partition is left to read (the local
// shuffle, localshuffle.go): source offset and state then commit in one
// transaction, as in single mode.
//
// Before it joins, a process refuses a job of the other mode or a
// configuration that does not fit any member's checkpoint
// (checkGroupStart), claims the job for group mode (mode.go) and creates
// its topics (beforeJoining); every attempt checks again, since state
// partitions move between processes (checkMembers).
//
// Rebalances: the group uses an eager protocol, so every rebalance
// revokes every partition; the revocation ends the attempt after a final
// checkpoint commits its open epoch (coordinatorLoop.onYield; aborted if
// it cannot, never a transaction open across a restore) and the next
// assignment starts a new one, which fetches the group's stable offsets
// (a pending transactional commit is waited for), keeps the state of the
// partitions it still owns when its generation follows (keptstate.go),
// and restores the others up to their last stable offset. When a member
// leaves the group without ending its transaction (killed), the others
// fence its transactional id when they are assigned its partitions,
// before they fetch the offsets, every process fences its own before it
// joins (a killed predecessor with its instance id comes back without a
// rebalance), and a process's first assignment fences the instances of
// the job's checkpoint records that are out of the group with a
// transaction open (they left while nobody was there to see them go): an
// open transaction would hold read_committed readers, and the stable
// offset fetch when it holds an epoch's offsets (killed while
// committing), until the transaction timeout.

// shuffle is how a group-mode job spreads keyed work: the repartition and
// state topics, their partition count R, and the key groups G.
type shuffle struct {
	repartition, state string
	partitions, groups int
	// byKey: the input is already partitioned by the group key
	// (scale.key_by_is_record_key): no repartition topic; the owner of
	// source partition p runs the keyed operator on it, and its state is
	// partition p of the state topic (copartition.go).
	byKey bool
}

func newShuffle(cfg *config.Config) *shuffle {
	if cfg.Scale.Mode != config.ScaleGroup {
		return nil
	}
	return &shuffle{
		repartition: RepartitionTopic(cfg.Name), state: GroupStateTopic(cfg.Name),
		partitions: cfg.Scale.Partitions, groups: cfg.Checkpoint.KeyGroups,
		byKey: cfg.Scale.KeyByIsRecordKey,
	}
}

// RepartitionTopic is the internal topic a group-mode keyed job shuffles
// its records through.
func RepartitionTopic(job string) string { return job + "-repartition" }

// GroupStateTopic is the compacted state topic of a group-mode job: one
// partition per repartition partition.
func GroupStateTopic(job string) string { return job + "-group-state" }

// partitionOf is the repartition (and state) partition that owns key
// group kg.
func (s *shuffle) partitionOf(kg state.KeyGroup) int32 {
	return int32(state.WorkerOf(kg, s.partitions, s.groups))
}

// place sends a changelog record to the state partition of its key
// group: the partition whose owner restores it.
func (s *shuffle) place(rec *kgo.Record) {
	rec.Topic = s.state
	if k, err := state.DecodeChangelogKey(rec.Key); err == nil {
		rec.Partition = s.statePartition(k.Group, k.Key)
	}
}

// statePartition is the state partition of key, of key group kg.
func (s *shuffle) statePartition(kg state.KeyGroup, key []byte) int32 {
	if s.byKey {
		return kafkaPartition(key, s.partitions)
	}
	return s.partitionOf(kg)
}

// repartitions reports whether the job's keyed records cross the
// repartition topic: a keyed group-mode job whose input is not already
// partitioned by the group key.
func (s *shuffle) repartitions(keyed bool) bool { return s != nil && keyed && !s.byKey }

// assignment is one generation's share of a process: the partitions the
// group gave it (sorted) and who it is in that generation. Each attempt
// on it fetches their committed offsets anew (restoreMember).
type assignment struct {
	member sink.GroupMember
	tps    []source.TopicPartition
	// members are the instance ids in the group when it was assigned.
	members []string
	// admins are the admin API addresses the members advertised, by
	// instance id (adminpeers.go); a member that advertised none is
	// missing.
	admins map[string]string
	// firstFetch are the offsets the first attempt on it fetched
	// (plantedOffsetsAtAssignment only).
	firstFetch map[source.TopicPartition]int64
}

func (a *assignment) partitions() []source.TopicPartition { return a.tps }

func sortPartitions(tps []source.TopicPartition) {
	sort.Slice(tps, func(a, b int) bool {
		if tps[a].Topic != tps[b].Topic {
			return tps[a].Topic < tps[b].Topic
		}
		return tps[a].Partition < tps[b].Partition
	})
}
