package engine

import (
	"context"
	"fmt"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/source"
)

// Tables in group mode (tables[].mode: broadcast). Every member reads
// every partition of every table, to its end before its first record is
// joined, on each of its attempts (every generation; a table kept from
// the generation before is read on from where it stood, tablekept.go),
// as a single-mode process does: a join needs no repartitioning, and a
// rebalance moves no table state, since there is none to move.
//
// What must not be done by every member is writing the dead letters of
// the table records that cannot be applied: each must be committed once
// by the group. So each table partition has one member on duty at a
// time, the member the group assigned the matching partition of the
// anchor topic (the job's first source topic): table partition p goes
// with anchor partition p mod n. The duty moves with that partition, and
// so does its position:
//
//  1. The member on duty writes the dead letters of the partition's
//     records into the epoch whose checkpoint covers them (tableSet.cut),
//     and commits the partition's position to the group in the same
//     transaction, beside its source offsets, as the member of its
//     generation (KIP-447: a member the group moved on from cannot).
//  2. A member that takes the duty over fetches the group's stable
//     committed positions (tableFloors) and writes dead letters only for
//     the records from there: what is before was committed with the
//     previous owner's epochs, what is after was not.
//
// The group's committed positions also say where the whole group's
// tables stand, for a group savepoint (groupTablePositions).
//
// A partitioned table (tables[].mode: partitioned) is read by each member
// only in the partitions it is on duty for: its topic has the stream
// topic's partition count (checked here; config checks that the job has
// that one stream topic, and that each join looks the record key up), so
// table partition p is read where stream partition p is, and holds the
// keys of the records read there.

// anchorTopic is the topic whose partitions carry the tables' duties:
// the repartition topic of a join by a key the stream is not partitioned
// by, whose partition p holds the join keys of table partition p
// (config/joinrepartition.go: one per job), else the first stream topic.
func (j *Job) anchorTopic() string {
	if rs := j.cfg.JoinRepartitioned(); len(rs) > 0 && j.plantedBug != plantedJoinTableFollowsStream {
		return rs[0].Topic
	}
	return j.groupTopics()[0]
}

// assignTableDuty sets, for an attempt of a member with tables, which
// table partitions it writes the dead letters of (a.tableDuty) and where
// the group's committed positions stand (a.tableFloors).
func (m *groupMode) assignTableDuty(ctx context.Context, a *attempt) error {
	j := a.j
	if len(j.cfg.Tables) == 0 {
		return nil
	}
	anchor := j.anchorTopic()
	all, err := a.cluster.Partitions(ctx, []string{anchor})
	if err != nil {
		return fmt.Errorf("listing the partitions of %s: %w", anchor, err)
	}
	n := int32(len(all))
	owned := map[int32]bool{}
	for _, tp := range m.asg.partitions() {
		if tp.Topic == anchor {
			owned[tp.Partition] = true
		}
	}
	a.tableDuty = func(p int32) bool { return n > 0 && owned[p%n] }
	var tps []source.TopicPartition
	for _, t := range j.cfg.Tables {
		got, err := a.cluster.Partitions(ctx, []string{t.Topic})
		if err != nil {
			return fmt.Errorf("listing the partitions of table %s (topic %s): %w", t.ID, t.Topic, err)
		}
		if t.Mode == config.TablePartitioned && len(got) != int(n) {
			return fmt.Errorf("%w: table %s is partitioned, but its topic %s has %d partitions and the stream topic %s has %d: they must be co-partitioned (the same count, records keyed alike), so that table partition p holds the keys of stream partition p. Use mode: broadcast, or repartition one of the topics",
				ErrUnfit, t.ID, t.Topic, len(got), anchor, n)
		}
		for _, tp := range got {
			if a.tableDuty(tp.Partition) {
				tps = append(tps, tp)
			}
		}
	}
	a.tableFloors = map[string]map[int32]int64{}
	for _, t := range j.cfg.Tables {
		a.tableFloors[t.Topic] = map[int32]int64{}
	}
	if len(tps) == 0 {
		return nil
	}
	committed, err := a.cluster.FetchStableOffsets(ctx, j.cfg.Name, tps, j.cfg.Kafka.TransactionTimeout)
	if err != nil {
		return err
	}
	for tp, off := range committed {
		if f := a.tableFloors[tp.Topic]; f != nil {
			f[tp.Partition] = off
		}
	}
	return nil
}

// groupTablePositions are where the group's tables stand by its
// committed positions, for a group savepoint: a table with a partition
// no member committed a position of yet is left out (a job started from
// the savepoint reads it to its end without a position).
func (j *Job) groupTablePositions(ctx context.Context, c cluster) ([]checkpoint.TableOffsets, error) {
	var out []checkpoint.TableOffsets
	for _, t := range j.cfg.Tables {
		tps, err := c.Partitions(ctx, []string{t.Topic})
		if err != nil {
			return nil, fmt.Errorf("listing the partitions of table %s (topic %s): %w", t.ID, t.Topic, err)
		}
		committed, err := c.FetchStableOffsets(ctx, j.cfg.Name, tps, j.cfg.Kafka.TransactionTimeout)
		if err != nil {
			return nil, err
		}
		to := checkpoint.TableOffsets{ID: t.ID, Topic: t.Topic}
		for _, tp := range tps {
			off, ok := committed[tp]
			if !ok {
				j.log.Info("the savepoint holds no position of a table: a partition of its topic has none committed yet", "table", t.ID, "partition", tp.Partition)
				to.Offsets = nil
				break
			}
			to.Offsets = append(to.Offsets, checkpoint.PartitionOffset{Partition: tp.Partition, Offset: off})
		}
		if len(to.Offsets) > 0 {
			out = append(out, to)
		}
	}
	return out, nil
}

// tableCommits are plan's table positions as offsets to commit to the
// group (a group import of a savepoint).
func tableCommits(tables []checkpoint.TableOffsets) []checkpoint.SourceOffset {
	var out []checkpoint.SourceOffset
	for _, t := range tables {
		for _, o := range t.Offsets {
			out = append(out, checkpoint.SourceOffset{Topic: t.Topic, Partition: o.Partition, Offset: o.Offset})
		}
	}
	return out
}
