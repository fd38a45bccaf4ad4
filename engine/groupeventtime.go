package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/source"
	"github.com/eoflow/pipeline/window"
)

// Event time in group mode. The source side of a source partition p
// keeps p's clock as single mode does (eventtime.go) and judges each
// record's lateness there, against p's own watermark Wp, before the
// record crosses the repartition topic with its event time and Wp
// (shufflecodec.go). A record late for every window goes to the late
// topic from the source side, once.
//
// The keyed side learns the watermarks through the repartition topic:
//
//  1. At each barrier, a member whose source partitions' times changed
//     since it last said them (and at the first barrier of each attempt)
//     writes an event-time record (headerEventTimes) to every
//     repartition partition q, inside the epoch's transaction, after the
//     epoch's records: the largest event time and idleness of each
//     source partition it reads.
//  2. The owner of q keeps, per source partition, the largest time any
//     such record of q reported (maxima only grow: a partition that moved
//     to another member cannot go back), and at each barrier computes
//     q's watermark
//
//     Wq(N) = max(Wq(N-1), min over the job's non-idle source partitions p of Wp as q reported it)
//
//     where a source partition q has no report of yet holds Wq back, as
//     in single mode. The process's windows fire at the least Wq of the
//     partitions it owns.
//  3. What q's owner knows (each partition's time and Wq) is state: it
//     goes into q's group-state partition under groupTimeKey in the
//     epoch's transaction, so whoever owns q next resumes from exactly
//     what q's committed offset covers.
//
// Why a window's contents depend on the input alone: the records of p in
// q are in p's order (one owner at a time, each restarting from the
// committed offsets after its predecessor's last transaction), and an
// event-time record of p in q follows every record of p before its
// barrier. So when a record r of p arrives from q, what q reported of p
// is at most Wp(r), and Wq <= Wp(r): a window open for r at the source
// side (end + L > Wp(r)) has not fired at r's owner. A window that fired
// (end + L <= Wq) is closed for every later record of q.
//
// The source side's clocks are checkpointed in each member's checkpoint
// record, which also carries forward every partition time the member
// knew when its attempt began (restored from every member's newest
// record, the largest time per partition). So the newest record of some
// member always holds the time of each partition at the group's committed
// offset, whoever committed it last.
//
// A job that does not repartition (scale.key_by_is_record_key,
// copartition.go) has no repartition topic to carry the times, and needs
// none: the keys of source partition p are in p alone, and p's owner runs
// their windows. Its source side judges lateness against Wp as above,
// and its keyed side fires, as single mode does over every partition, at
//
//	W(N) = max(W(N-1), min over the non-idle source partitions the process reads of Wp(N))
//
// (jobWatermark: the carried partitions, read by others, do not count),
// each Wp lowered to the least event time a join as of event time holds
// in the task that reads p (groupheld.go, step 4).
// So W <= Wp for every partition whose keys the process holds: a window
// open for a record of p at the source has not fired, and one that fired
// (end + L <= W <= Wp) is closed for every later record of p, late at the
// source. Each attempt starts W over (window.NoWatermark): what fired
// before is gone from the state, and a watermark of the partitions owned
// then could pass the clock of a partition that moved here. A partition's
// clock moves with it as above, through the members' checkpoint records;
// nothing is written to the group-state topic. The windows and late
// records are single mode's, whatever the processes, crashes and
// rebalances; when a window fires depends on which partitions its process
// owns with it (the least of their watermarks).

// headerEventTimes marks a repartition record that carries source
// partitions' event times (encodeTimes), not an input.
const headerEventTimes = "pipeline.event.times"

// groupTimeKey is the key, in each group-state partition q, of what q's
// owner knows of event time (encodeQueueTime). It is no changelog key:
// their first byte is the state format's version.
const groupTimeKey = "#event-time"

// isGroupTime reports whether a group-state record is q's event time,
// not an operator's state.
func isGroupTime(key []byte) bool { return string(key) == groupTimeKey }

// reportedTime is a source partition's time as a repartition partition
// reported it.
type reportedTime struct {
	checkpoint.PartitionTime
	idle bool
}

// queueTime is what the owner of one repartition partition knows of event
// time: each source partition's reported time, and the partition's
// watermark at the last barrier.
type queueTime struct {
	watermark int64
	parts     map[partitionKey]reportedTime
}

func newQueueTime() *queueTime {
	return &queueTime{watermark: window.NoWatermark, parts: map[partitionKey]reportedTime{}}
}

func (t *queueTime) clone() *queueTime {
	return &queueTime{watermark: t.watermark, parts: maps.Clone(t.parts)}
}

// report adds what an event-time record said: maxima only grow.
func (t *queueTime) report(times []reportedTime) {
	for _, r := range times {
		k := partitionKey{r.Topic, r.Partition}
		if old, ok := t.parts[k]; ok && old.MaxEventTime > r.MaxEventTime {
			r.MaxEventTime = old.MaxEventTime
		}
		t.parts[k] = r
	}
}

// advance computes the watermark at a barrier over the job's source
// partitions (sources, and any reported since), and returns what the
// barrier carries of this partition.
func (t *queueTime) advance(q int32, tp *timePlan, sources []partitionKey) shuffledTime {
	var wms []int64
	seen := map[partitionKey]bool{}
	for _, k := range sources {
		seen[k] = true
		r, ok := t.parts[k]
		switch {
		case !ok:
			wms = append(wms, window.NoWatermark) // not heard of yet: holds it back
		case !r.idle:
			wms = append(wms, partitionWatermark(tp, r.PartitionTime))
		}
	}
	for k, r := range t.parts {
		if !seen[k] && !r.idle {
			wms = append(wms, partitionWatermark(tp, r.PartitionTime))
		}
	}
	t.watermark = window.JobWatermark(t.watermark, wms)
	return shuffledTime{q: q, watermark: t.watermark, times: t.sorted()}
}

func (t *queueTime) sorted() []reportedTime {
	out := slices.Collect(maps.Values(t.parts))
	slices.SortFunc(out, compareReported)
	return out
}

// partitionWatermark is p's watermark: its largest event time minus its
// source's max_out_of_orderness.
func partitionWatermark(tp *timePlan, p checkpoint.PartitionTime) int64 {
	var cl window.PartitionClock
	cl.Max = p.MaxEventTime
	ooo := int64(0)
	if st := tp.byTopic[p.Topic]; st != nil {
		ooo = st.outOfOrder
	}
	return cl.Watermark(ooo)
}

// shuffledTime is a repartition partition's event time at a barrier: its
// watermark and what it knows (the group-state record of groupTimeKey).
type shuffledTime struct {
	q         int32
	watermark int64
	times     []reportedTime
}

// shuffledClocks are the keyed side's event time in one source task: a
// queueTime per repartition partition it reads.
type shuffledClocks struct {
	plan *timePlan
	// sources are the job's source partitions with event time, as
	// listed when the attempt began.
	sources []partitionKey
	by      map[int32]*queueTime
}

// observe takes an event-time record of repartition partition q.
func (c *shuffledClocks) observe(q int32, value []byte) error {
	times, err := decodeTimes(value)
	if err != nil {
		return err
	}
	c.of(q).report(times)
	return nil
}

func (c *shuffledClocks) of(q int32) *queueTime {
	t := c.by[q]
	if t == nil {
		t = newQueueTime()
		c.by[q] = t
	}
	return t
}

// at is where the repartition partitions among positions stand, for a
// barrier.
func (c *shuffledClocks) at(topic string, positions []checkpoint.SourceOffset) []shuffledTime {
	var out []shuffledTime
	for _, p := range positions {
		if p.Topic == topic {
			out = append(out, c.of(p.Partition).advance(p.Partition, c.plan, c.sources))
		}
	}
	return out
}

// groupWatermark is the least watermark of the repartition partitions a
// process owns (times; none: prev): the windows of all of them fire at
// it.
func groupWatermark(prev int64, times []shuffledTime) int64 {
	if len(times) == 0 {
		return prev
	}
	least := times[0].watermark
	for _, t := range times[1:] {
		least = min(least, t.watermark)
	}
	return max(prev, least)
}

// unionShuffled adds add's repartition partitions to have, once each.
func unionShuffled(have, add []shuffledTime) []shuffledTime {
	for _, t := range add {
		if !slices.ContainsFunc(have, func(h shuffledTime) bool { return h.q == t.q }) {
			have = append(have, t)
		}
	}
	return have
}

// Encodings: a version byte, then
//
//	times:      uvarint n, n × (string topic, uvarint partition, varint largest event time, byte idle)
//	queue time: varint watermark, then times
const timesVersion = 1

var errBadTimes = errors.New("bad event-time record")

func appendTimes(dst []byte, times []reportedTime) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(times)))
	for _, t := range times {
		dst = binary.AppendUvarint(dst, uint64(len(t.Topic)))
		dst = append(dst, t.Topic...)
		dst = binary.AppendUvarint(dst, uint64(t.Partition))
		dst = binary.AppendVarint(dst, t.MaxEventTime)
		idle := byte(0)
		if t.idle {
			idle = 1
		}
		dst = append(dst, idle)
	}
	return dst
}

func encodeTimes(times []reportedTime) []byte {
	return appendTimes([]byte{timesVersion}, times)
}

func encodeQueueTime(t shuffledTime) []byte {
	dst := binary.AppendVarint([]byte{timesVersion}, t.watermark)
	return appendTimes(dst, t.times)
}

type timesReader struct {
	b   []byte
	err error
}

func (r *timesReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errBadTimes
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *timesReader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errBadTimes
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *timesReader) times() []reportedTime {
	n := r.uvarint()
	if r.err != nil || n > uint64(len(r.b)) {
		r.err = errBadTimes
		return nil
	}
	out := make([]reportedTime, 0, n)
	for range n {
		l := r.uvarint()
		if r.err != nil || l > uint64(len(r.b)) {
			r.err = errBadTimes
			return nil
		}
		topic := string(r.b[:l])
		r.b = r.b[l:]
		p := r.uvarint()
		at := r.varint()
		if r.err != nil || len(r.b) == 0 || p > 1<<31-1 || r.b[0] > 1 {
			r.err = errBadTimes
			return nil
		}
		out = append(out, reportedTime{PartitionTime: checkpoint.PartitionTime{Topic: topic, Partition: int32(p), MaxEventTime: at}, idle: r.b[0] == 1})
		r.b = r.b[1:]
	}
	return out
}

func newTimesReader(b []byte) (*timesReader, error) {
	if len(b) == 0 || b[0] != timesVersion {
		return nil, fmt.Errorf("%w: unknown version", errBadTimes)
	}
	return &timesReader{b: b[1:]}, nil
}

func decodeTimes(b []byte) ([]reportedTime, error) {
	r, err := newTimesReader(b)
	if err != nil {
		return nil, err
	}
	out := r.times()
	if r.err == nil && len(r.b) > 0 {
		r.err = errBadTimes
	}
	return out, r.err
}

func decodeQueueTime(b []byte) (*queueTime, error) {
	r, err := newTimesReader(b)
	if err != nil {
		return nil, err
	}
	t := newQueueTime()
	t.watermark = r.varint()
	times := r.times()
	if r.err == nil && len(r.b) > 0 {
		r.err = errBadTimes
	}
	if r.err != nil {
		return nil, r.err
	}
	t.report(times)
	return t, nil
}

// mergedSourceTimes is the largest event time of every source partition
// over the members' newest checkpoint records (nil: none has any).
func mergedSourceTimes(members map[string]*checkpoint.Record) *checkpoint.EventTime {
	by := map[partitionKey]int64{}
	for _, rec := range members {
		if rec.EventTime == nil {
			continue
		}
		for _, p := range rec.EventTime.Partitions {
			k := partitionKey{p.Topic, p.Partition}
			if old, ok := by[k]; !ok || p.MaxEventTime > old {
				by[k] = p.MaxEventTime
			}
		}
	}
	if len(by) == 0 {
		return nil
	}
	var times []eventTime
	for k, m := range by {
		times = append(times, eventTime{PartitionTime: checkpoint.PartitionTime{Topic: k.topic, Partition: k.partition, MaxEventTime: m}})
	}
	return recordEventTime(window.NoWatermark, times)
}

// groupTime is what a group member's attempt restored of event time.
type groupTime struct {
	// sources is each source partition's largest event time over the
	// members' newest checkpoint records (nil: none yet).
	sources *checkpoint.EventTime
	// partitions are the job's source partitions with event time.
	partitions []partitionKey
	// queues are what the owned repartition partitions knew, from their
	// state partitions.
	queues map[int32]*queueTime
	// held are the values of the held-records keys of the checkpoint
	// topic, by source partition (groupheld.go); joins those of the
	// joinTimeKeys, by partition of a join's repartition topic
	// (jointime.go).
	held, joins map[partitionKey][]byte
}

// restoreQueue takes the groupTimeKey record of a state partition.
func (gt *groupTime) restoreQueue(r *kgo.Record) error {
	if gt == nil {
		return nil // written with event time, read without: nothing to resume
	}
	if r.Value == nil {
		delete(gt.queues, r.Partition)
		return nil
	}
	t, err := decodeQueueTime(r.Value)
	if err != nil {
		return fmt.Errorf("state partition %d: %s: %w", r.Partition, groupTimeKey, err)
	}
	gt.queues[r.Partition] = t
	return nil
}

// watermark is where the windows of the owned repartition partitions
// stand: the least of their watermarks (window.NoWatermark if one has
// none).
func (gt *groupTime) watermark(repartition string, offsets map[source.TopicPartition]int64) int64 {
	w, any := int64(math.MaxInt64), false
	for tp := range offsets {
		if tp.Topic != repartition {
			continue
		}
		any = true
		q := gt.queues[tp.Partition]
		if q == nil {
			return window.NoWatermark
		}
		w = min(w, q.watermark)
	}
	if !any {
		return window.NoWatermark
	}
	return w
}

// clocks are a source task's shuffledClocks, from what was restored.
func (gt *groupTime) clocks(tp *timePlan) *shuffledClocks {
	c := &shuffledClocks{plan: tp, sources: gt.partitions, by: map[int32]*queueTime{}}
	for q, t := range gt.queues {
		c.by[q] = t.clone()
	}
	return c
}
