package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/checkpoint/savepoint"
	"github.com/eoflow/pipeline/operator"
	"github.com/eoflow/pipeline/source"
	"github.com/eoflow/pipeline/window"
)

// Joins as of event time in group mode (docs/scale-out.md#joins-as-of-event-time).
// The join is a stateless step: it runs where a record is read, on the
// source side, before the repartition topic; so the records it holds
// (asof.go) belong to their SOURCE partition, not to a key group, and
// must move with the source partition when the group moves it:
//
//  1. At each barrier, a member writes, for every source partition p of
//     a source whose records are held, one record to the checkpoint
//     topic under heldKey(job, p): p's position at the barrier and the
//     records of p still held (heldValue), whenever either changed since
//     the attempt last wrote it (and at its first barrier). It goes into
//     the epoch's transaction, the one that commits p's offset to the
//     group, so the committed offset of p and the committed held records
//     of p are always of one barrier: the offset is past the held
//     records (read already) and before what is not read yet.
//  2. An attempt that restores p (whoever owned it before: this member,
//     another, or one that crashed) fetches p's committed offset, then
//     reads the checkpoint topic (read_committed, every transaction on it
//     decided: restoreTime's read, which a join as of event time always
//     has) and takes the records heldKey(job, p) holds, if the position
//     there is p's committed offset. One there at another position
//     belongs to an older life of the job (the group's offsets were
//     reset): it is dropped, and the log says so. A job whose join was
//     removed releases them at its first barrier, as single mode does.
//  3. Members' own checkpoint records carry no held records in group mode
//     (checkpoint.Record.Held stays empty): a member's record does not
//     follow a partition that moved away from it.
//  4. The keyed side learns the source partitions' watermarks from the
//     event-time records of groupeventtime.go, which say largest event
//     times, not watermarks: reportedTimes lowers each partition's time
//     so that the watermark the keyed side computes from it is at most
//     the least event time the member's task holds (sourceHold.atBarrier
//     lowered the barrier's watermarks so). Lowering never moves a
//     repartition partition's watermark back (its maxima only grow); it
//     keeps it from passing a held record. The checkpoint record keeps
//     the partitions' true largest times: they restore the clocks.
//     A job that does not repartition (scale.key_by_is_record_key) has
//     no such reports: the process that holds p's records runs their
//     keys' windows, and fires them, as single mode does, at the least
//     of the barriers' watermarks of the partitions it reads
//     (groupeventtime.go), which sourceHold.atBarrier lowered to the
//     least event time each task holds. So the process's watermark never
//     passes a record it holds; a record restored with its partition is
//     held again before the new attempt's first barrier.
//  5. The table's event time T is each process's own (asOfTable): the
//     least, over the table partitions the process reads (all of a
//     broadcast table; those of its stream partitions for a partitioned
//     one), of the largest timestamp read. A record of p is released
//     once T has passed it, and looked up in the process's table, which
//     has read each partition the lookup can reach past T: the result is
//     the one the topics say, whichever process releases it and however
//     far the others have read. The versions' horizon (history) is each
//     process's too, behind its own partitions' watermark, and starts
//     over with every attempt (its table is read again): a record within
//     history of its own partition's watermark is never late, as in
//     single mode.
//  6. A group savepoint (groupsavepoint.go) holds, per source partition,
//     the records heldKey holds at the group's committed offset of it
//     (savepoint format v2, as in single mode). While a savepoint's pause
//     is in force, or a stop with a savepoint drains, the source tasks
//     release nothing (sourceTask.release): the held records stay as
//     they are, as the positions do. The export reads them before the
//     state and again last, after the offsets' recheck: a release
//     commits its results and the partition's held records in one
//     transaction, often without moving the partition's offset, so
//     unchanged held records say that no release came in between. A
//     stop with a savepoint of the sole owner takes them from its final
//     barrier, as single mode does.
//  7. A start from a savepoint (importMember) writes, in the import's
//     transaction, each source partition's heldKey at the offset it
//     commits to the group: the savepoint's records of the partition, or
//     a tombstone when it holds none (an older value at the same offset
//     must not come back). The members then restore them by step 2, as
//     if the group had committed the savepoint's checkpoint.
//
// The key is a compacted record per source partition, not per member,
// because only the partition's current owner writes it, and only a
// member of the current generation can commit a transaction that also
// commits offsets (KIP-447): a zombie's write aborts with its offsets.

// heldPrefix starts the key of every partition's held records in the
// checkpoint topic; '#' is neither in a job's name nor in an instance id,
// so no member's record ("<job>/<instance>") is taken for one.
func heldPrefix(job string) string { return job + "#held/" }

// heldKey is the checkpoint-topic key of the held records of source
// partition tp. With the planted bug plantedHeldStayBehind, the key is
// the member's (instance) as well: the records stay with the member
// instead of moving with the partition.
func (j *Job) heldKey(tp partitionKey) string {
	k := heldPrefix(j.cfg.Name)
	if j.plantedBug == plantedHeldStayBehind {
		k += j.instance + "/"
	}
	return k + strconv.Itoa(int(tp.partition)) + "/" + tp.topic
}

// parseHeldKey returns the source partition of a held-records key, for
// this job (ok false: another key).
func (j *Job) parseHeldKey(key []byte) (partitionKey, bool) {
	rest, ok := strings.CutPrefix(string(key), heldPrefix(j.cfg.Name))
	if !ok {
		return partitionKey{}, false
	}
	if j.plantedBug == plantedHeldStayBehind {
		if rest, ok = strings.CutPrefix(rest, j.instance+"/"); !ok {
			return partitionKey{}, false
		}
	}
	return parsePartitionKey(rest)
}

// parsePartitionKey reads "<partition>/<topic>", the end of a key of the
// checkpoint topic kept per partition (heldKey, joinTimeKey).
func parsePartitionKey(s string) (partitionKey, bool) {
	p, topic, ok := strings.Cut(s, "/")
	n, err := strconv.ParseInt(p, 10, 32)
	if !ok || err != nil || n < 0 || topic == "" {
		return partitionKey{}, false
	}
	return partitionKey{topic, int32(n)}, true
}

// heldVersion is the first byte of a heldValue.
const heldVersion = 1

var errHeldValue = errors.New("held records of a source partition: truncated or corrupt")

// heldValue is what heldKey holds: a version byte, the partition's
// position (varint), then its held records (operator.AppendHold).
func heldValue(offset int64, h *operator.Hold) []byte {
	dst := binary.AppendVarint([]byte{heldVersion}, offset)
	return operator.AppendHold(dst, h)
}

func decodeHeldValue(b []byte) (int64, *operator.Hold, error) {
	if len(b) == 0 || b[0] != heldVersion {
		return 0, nil, fmt.Errorf("%w (version byte)", errHeldValue)
	}
	off, n := binary.Varint(b[1:])
	if n <= 0 {
		return 0, nil, errHeldValue
	}
	h, err := operator.DecodeHold(b[1+n:])
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %w", errHeldValue, err)
	}
	return off, h, nil
}

// heldRecords is what a member's barrier writes of the held records
// (step 1 above): for each position of a held source in b.offsets whose
// value changed since the attempt last wrote it (told, updated), one
// record to the checkpoint topic (topic).
func (r *memberRecords) heldRecords(topic string, b *barrier) []*kgo.Record {
	if r.held == nil {
		return nil
	}
	by := map[partitionKey]*operator.Hold{}
	for _, hr := range b.held {
		k := partitionKey{hr.Topic, hr.Partition}
		if by[k] == nil {
			by[k] = &operator.Hold{}
		}
		by[k].Add(hr)
	}
	var out []*kgo.Record
	for _, o := range b.offsets {
		k := partitionKey{o.Topic, o.Partition}
		if !r.held.topics[o.Topic] {
			continue
		}
		h := by[k]
		if h == nil {
			h = &operator.Hold{}
		}
		v := heldValue(o.Offset, h)
		if string(v) == r.held.told[k] {
			continue
		}
		r.held.told[k] = string(v)
		out = append(out, &kgo.Record{Topic: topic, Key: []byte(r.held.key(k)), Value: v})
	}
	return out
}

// memberHeld is what memberRecords needs to write the held records: the
// topics of the sources whose records are held, the key of a partition's
// record, and what the attempt last wrote of each.
type memberHeld struct {
	topics map[string]bool
	key    func(partitionKey) string
	told   map[partitionKey]string
}

// newMemberHeld is nil when the attempt holds nothing (no join as of
// event time, and no held records restored).
func (j *Job) newMemberHeld(js *asOfJoins) *memberHeld {
	if js == nil {
		return nil
	}
	h := &memberHeld{topics: map[string]bool{}, key: j.heldKey, told: map[partitionKey]string{}}
	for i, src := range j.cfg.Sources {
		// No table: the join was removed, and the records restored are
		// released at the first barrier; their partitions' records say
		// so then.
		if len(js.tables) == 0 || i < len(js.sources) && js.sources[i] {
			for _, t := range src.Topics {
				h.topics[t] = true
			}
		}
	}
	return h
}

// restoreGroupHeld takes the held records of the assigned source
// partitions (step 2 above) from what restoreTime read of the checkpoint
// topic, after the offsets (a.offsets), into a.groupHeld: the checkpoint
// record restoreHeld gives them back from. (A join as of event time
// needs event time, so restoreTime reads the topic.)
func (m *groupMode) restoreGroupHeld(a *attempt) error {
	a.groupHeld = &checkpoint.Record{}
	if a.latest != nil {
		a.groupHeld.ID = a.latest.ID
	}
	if a.groupTime == nil {
		return nil
	}
	all, err := a.j.heldAt(a.groupTime.held, m.asg.partitions(), a.offsets)
	if err != nil {
		return err
	}
	if all.Len() > 0 {
		a.groupHeld.Held = operator.AppendHold(nil, all)
	}
	return nil
}

// heldAt is the held records of the source partitions tps at their
// offsets (offsets), from the values of the held-records keys (values,
// by partition): a value at another position of its partition belongs to
// an older life of the job (the group's offsets were reset) and is
// dropped, and the log says so.
func (j *Job) heldAt(values map[partitionKey][]byte, tps []source.TopicPartition, offsets map[source.TopicPartition]int64) (*operator.Hold, error) {
	all := &operator.Hold{}
	for _, tp := range tps {
		k := partitionKey{tp.Topic, tp.Partition}
		v := values[k]
		if v == nil {
			continue // none, or a tombstone
		}
		off, h, err := decodeHeldValue(v)
		if err != nil {
			return nil, fmt.Errorf("checkpoint topic, %s: %w", j.heldKey(k), err)
		}
		if at, ok := offsets[tp]; !ok || at != off {
			if h.Len() > 0 {
				j.log.Warn("records held for a join as of event time at another position of their partition than the group's committed offset (an older life of the job): they are dropped",
					"topic", k.topic, "partition", k.partition, "held_at", off, "committed", at, "records", h.Len())
			}
			continue
		}
		for _, hr := range h.Records() {
			all.Add(hr)
		}
	}
	return all, nil
}

// readGroupHeld reads the values of the held-records keys of the
// checkpoint topic, by source partition, once every transaction that
// wrote there before is decided and marked: a group savepoint's export
// (step 6 above).
func (j *Job) readGroupHeld(ctx context.Context, c cluster) (map[partitionKey][]byte, error) {
	if err := j.awaitCheckpointTopic(ctx, c); err != nil {
		return nil, err
	}
	values := map[partitionKey][]byte{}
	err := c.Read(ctx, checkpoint.TopicName(j.cfg.Name), func(r *kgo.Record) error {
		if k, ok := j.parseHeldKey(r.Key); ok {
			values[k] = r.Value
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the held records in the checkpoint topic: %w", err)
	}
	return values, nil
}

// importedHeld is what the import of a savepoint (importMember) writes of
// the held records (step 7 above): for every source partition the import
// commits an offset for, its held-records key with that offset and the
// savepoint's records of it, or a tombstone when it has none (a value
// of an older life at the same offset must not come back).
func (j *Job) importedHeld(offsets map[source.TopicPartition]int64, held []savepoint.HeldRecord) []*kgo.Record {
	by := map[partitionKey]*operator.Hold{}
	for _, r := range held {
		k := partitionKey{r.Topic, r.Partition}
		if by[k] == nil {
			by[k] = &operator.Hold{}
		}
		by[k].Add(operator.HeldRecord{At: r.At, Key: r.Key, Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Record: r.Record})
	}
	topic := checkpoint.TopicName(j.cfg.Name)
	var out []*kgo.Record
	tps := slices.Collect(maps.Keys(offsets))
	sortPartitions(tps)
	for _, tp := range tps {
		if j.shuffle != nil && tp.Topic == j.shuffle.repartition {
			continue
		}
		k := partitionKey{tp.Topic, tp.Partition}
		rec := &kgo.Record{Topic: topic, Key: []byte(j.heldKey(k))}
		if h := by[k]; h != nil {
			rec.Value = heldValue(offsets[tp], h)
		}
		out = append(out, rec)
	}
	return out
}

// reportedTimes is what a member tells the repartition topic of its own
// source partitions' times (groupeventtime.go, step 1): each partition's
// largest event time, lowered where a join as of event time holds
// records back (sourceHold.atBarrier lowered the partition's watermark to
// the least event time its task holds), so that the watermark the keyed
// side computes from it never passes a held record, as in single mode.
func reportedTimes(tp *timePlan, times []eventTime) []reportedTime {
	var own []reportedTime
	for _, t := range times {
		if t.carried {
			continue
		}
		rt := reportedTime{PartitionTime: t.PartitionTime, idle: t.idle}
		if tp != nil && t.watermark != window.NoWatermark && t.watermark < partitionWatermark(tp, t.PartitionTime) {
			ooo := int64(0)
			if st := tp.byTopic[t.Topic]; st != nil {
				ooo = st.outOfOrder
			}
			rt.MaxEventTime = window.SatAdd(t.watermark, ooo)
		}
		own = append(own, rt)
	}
	return own
}

// holdsGroupRecords reports whether the checkpoint topic may hold records
// of the job's source partitions held for joins as of event time: the
// job has event time (a join as of event time needs it, and a restore
// reads them whenever it has: restoreTime), whether or not it still joins
// as of event time (a removed join's records wait for their release).
func (j *Job) holdsGroupRecords() bool {
	return j.plan.time != nil && len(j.plan.time.byTopic) > 0
}

// awaitCheckpointTopic waits until every transaction that wrote to the
// job's checkpoint topic before now is decided and marked: a read to the
// last stable offset then sees every record committed so far (one open
// transaction hides every record after its first, committed or not).
func (j *Job) awaitCheckpointTopic(ctx context.Context, c cluster) error {
	topic := checkpoint.TopicName(j.cfg.Name)
	tps, err := c.Partitions(ctx, []string{topic})
	if err != nil {
		return err
	}
	ids := make([]int32, len(tps))
	for i, tp := range tps {
		ids[i] = tp.Partition
	}
	return c.AwaitSettled(ctx, topic, ids, j.cfg.Kafka.TransactionTimeout)
}
