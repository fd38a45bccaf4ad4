package engine

import (
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/operator"
	"github.com/eoflow/pipeline/operator/keyed"
	"github.com/eoflow/pipeline/source"
)

// Event time across a join's repartition topic J (group mode, a join of
// a partitioned table by a key the stream is not partitioned by:
// config/joinrepartition.go). The steps before the join run where the
// stream's partitions are read; the join, and whatever follows it, where
// J's partitions are. Each partition q of J mixes records of many stream
// partitions p, each with a watermark Wp of its own, so q's watermark
// cannot be learned from q's records: a record of a partition behind the
// others would find its windows fired. It crosses J as group mode's
// watermarks cross its own repartition topic (groupeventtime.go):
//
//  1. Each record written to J carries its event time and Wp just
//     before it (config.JoinTimeHeader, keyed.AppendJoinTime): it is
//     judged late against Wp wherever its windows are, as single mode
//     judges it, and a join as of event time looks it up as of that
//     time.
//  2. At each barrier, a member whose stream partitions' times changed
//     since it last said them (and at the first barrier of each attempt)
//     writes their times (encodeTimes, header headerEventTimes) to every
//     partition of J, inside the epoch's transaction, after the epoch's
//     records.
//  3. The reader of q keeps, per stream partition, the largest time q
//     reported (queueTime), and q's watermark at each barrier is
//
//     Wq(N) = max(Wq(N-1), min over the non-idle stream partitions p of Wp as q reported it)
//
//     with a stream partition not yet reported holding it back. q is
//     idle when every stream partition it reported is. To the rest of
//     the job, q is a source partition with event time whose largest
//     event time is Wq and whose max_out_of_orderness is 0: Wq goes into
//     the barriers, group mode's repartition topic and the checkpoint
//     records as any source partition's time does.
//  4. What q's reader knows (each stream partition's reported time, and
//     Wq) is kept in the checkpoint topic under joinTimeKey(job, q), with
//     q's position, in the epoch's transaction that commits q's offset,
//     whenever either changed since the attempt last wrote it, as the
//     records a join as of event time holds are (groupheld.go). Whoever
//     reads q next resumes from it when its position is q's committed
//     offset; else (an older life of the job, a start from a savepoint,
//     which writes tombstones there) from q's time in the checkpoint
//     records, until every stream partition's owner reports again (each
//     does at the first barrier of its attempt). Without it, a reader
//     that restarts alone would wait for the report of a stream partition
//     whose time no longer changes: for ever.
//
// Why a window's contents depend on the input alone: the records of p in
// q are in p's order (J's records commit with p's offsets), and a report
// of p follows every record of p before its barrier. So when a record r
// of p is read from q, what q reported of p is at most Wp(r), and Wq <=
// Wp(r); every watermark after J (group mode's repartition topic, a
// join's hold) is at most Wq. A window open for r at p has not fired
// when r reaches it, and one that fired is closed for r too: r carries
// Wp(r), against which it is judged.

// joinTimes is the event time of the job's join repartition topics that
// carry it: the stream topics whose times each reports.
type joinTimes map[string]map[string]bool

// compileJoinTimes marks in tp the repartition topics of cfg's joins
// whose streams have event time.
func compileJoinTimes(cfg *config.Config, tp *timePlan) {
	if tp == nil {
		return
	}
	for _, r := range cfg.JoinRepartitioned() {
		st := tp.byTopic[r.Topic]
		if !r.Timed || st == nil {
			continue
		}
		st.reported = true
		if tp.joins == nil {
			tp.joins = joinTimes{}
		}
		up := map[string]bool{}
		for _, t := range r.Upstream {
			up[t] = true
		}
		tp.joins[r.Topic] = up
	}
}

// upstreamOf is the partitions among parts of the stream topics whose
// times J reports.
func (js joinTimes) upstreamOf(topic string, parts []partitionKey) []partitionKey {
	var out []partitionKey
	for _, p := range parts {
		if js[topic][p.topic] {
			out = append(out, p)
		}
	}
	return out
}

// newJoinClock is the clock of a partition of J, restored at the
// watermark it had (window.NoWatermark: none).
func newJoinClock(restored int64) *queueTime {
	q := newQueueTime()
	q.watermark = restored
	return q
}

// atJoin is where partition q of J stands at a barrier.
func (c *clocks) atJoin(q checkpoint.SourceOffset, cl *clock) eventTime {
	up := c.plan.joins.upstreamOf(q.Topic, c.partitions)
	if c.joinTimeFromRecords {
		up = nil
	}
	st := cl.reports.advance(q.Partition, c.plan, up)
	cl.Max = st.watermark
	return eventTime{
		PartitionTime: checkpoint.PartitionTime{Topic: q.Topic, Partition: q.Partition, MaxEventTime: st.watermark},
		watermark:     st.watermark,
		idle:          cl.reports.allIdle(up),
		reports:       &st,
	}
}

// allIdle reports whether every stream partition the queue heard of, and
// each of sources, is idle: then it holds nothing back.
func (t *queueTime) allIdle(sources []partitionKey) bool {
	if len(t.parts) == 0 {
		return false
	}
	for _, k := range sources {
		if _, ok := t.parts[k]; !ok {
			return false
		}
	}
	for _, r := range t.parts {
		if !r.idle {
			return false
		}
	}
	return true
}

// joinReport takes rec, read from a join's repartition topic, when it is
// a report of the stream partitions' times (step 3 above), and reports
// whether it was one: it is no input.
func (r *router) joinReport(rec *kgo.Record, out [][]message) bool {
	if !slices.ContainsFunc(rec.Headers, func(h kgo.RecordHeader) bool { return h.Key == headerEventTimes }) {
		return false
	}
	if r.clocks == nil {
		return true // the job no longer has event time
	}
	cl := r.clocks.of(rec.Topic, rec.Partition)
	if cl == nil || cl.reports == nil {
		return true
	}
	times, err := decodeTimes(rec.Value)
	if err != nil {
		r.dead(out, rec, &operator.RecordError{Code: operator.CodeDecode, Reason: err.Error()})
		return true
	}
	if !r.clocks.joinTimeFromRecords {
		cl.reports.report(times)
	}
	return true
}

// carriedTime is the event time and watermark rec, read from a join's
// repartition topic, carries (step 1 above).
func carriedTime(rec *kgo.Record) (at, wm int64, rerr *operator.RecordError) {
	for _, h := range rec.Headers {
		if h.Key == config.JoinTimeHeader {
			at, wm, err := keyed.ParseJoinTime(h.Value)
			if err != nil {
				return 0, 0, &operator.RecordError{Code: operator.CodeDecode, Reason: "header " + config.JoinTimeHeader + ": " + err.Error()}
			}
			return at, wm, nil
		}
	}
	return 0, 0, &operator.RecordError{Code: operator.CodeDecode, Reason: "no header " + config.JoinTimeHeader + ": the record was written to the join's repartition topic by a job without event time"}
}

// joinReports are the records of barrier b's times that go to the join
// repartition topics (step 2 above): the stream partitions' own, to each
// partition of each topic, when they changed since told[topic] (this
// attempt's: its first barrier tells them).
func joinReports(tp *timePlan, b *barrier, partitions map[string]int32, told map[string]string) []*kgo.Record {
	own := reportedTimes(tp, b.times)
	var out []*kgo.Record
	for _, topic := range slices.Sorted(maps.Keys(tp.joins)) {
		var up []reportedTime
		for _, t := range own {
			if tp.joins[topic][t.Topic] {
				up = append(up, t)
			}
		}
		if len(up) == 0 {
			continue
		}
		slices.SortFunc(up, compareReported)
		v := encodeTimes(up)
		if string(v) == told[topic] {
			continue
		}
		told[topic] = string(v)
		for q := range partitions[topic] {
			// No key: the member's producer places it by Partition
			// (sink.MemberPartitioner's mixed topics).
			out = append(out, &kgo.Record{Topic: topic, Partition: q, Value: v,
				Headers: []kgo.RecordHeader{{Key: headerEventTimes}}})
		}
	}
	return out
}

// compareReported orders reported times by topic, then partition.
func compareReported(a, b reportedTime) int {
	return checkpoint.CompareOffsets(
		checkpoint.SourceOffset{Topic: a.Topic, Partition: a.Partition},
		checkpoint.SourceOffset{Topic: b.Topic, Partition: b.Partition})
}

// joinPartitions is the partition count of each join repartition topic
// that carries event time, among the partitions gt listed (nil: none).
func joinPartitions(tp *timePlan, gt *groupTime) map[string]int32 {
	if tp == nil || len(tp.joins) == 0 || gt == nil {
		return nil
	}
	out := map[string]int32{}
	for _, p := range gt.partitions {
		if tp.joins[p.topic] != nil {
			out[p.topic] = max(out[p.topic], p.partition+1)
		}
	}
	return out
}

// joinTimePrefix starts the key, in the checkpoint topic, of what each
// partition of a join's repartition topic knows (step 4 above); '#' is in
// no job name or instance id, as heldPrefix says.
func joinTimePrefix(job string) string { return job + "#join-time/" }

// joinTimeKey is the checkpoint-topic key of what partition q of a join's
// repartition topic knows.
func (j *Job) joinTimeKey(q partitionKey) string {
	return joinTimePrefix(j.cfg.Name) + strconv.Itoa(int(q.partition)) + "/" + q.topic
}

// parseJoinTimeKey returns the partition of a joinTimeKey of this job (ok
// false: another key).
func (j *Job) parseJoinTimeKey(key []byte) (partitionKey, bool) {
	rest, ok := strings.CutPrefix(string(key), joinTimePrefix(j.cfg.Name))
	if !ok {
		return partitionKey{}, false
	}
	return parsePartitionKey(rest)
}

// joinTimeValue is what joinTimeKey holds: q's position (the offset
// committed with it), then encodeQueueTime's.
func joinTimeValue(at int64, t shuffledTime) []byte {
	return append(binary.AppendVarint(nil, at), encodeQueueTime(t)...)
}

func decodeJoinTimeValue(b []byte) (at int64, t *queueTime, err error) {
	at, n := binary.Varint(b)
	if n <= 0 {
		return 0, nil, errBadTimes
	}
	t, err = decodeQueueTime(b[n:])
	return at, t, err
}

// joinTimeRecords are the records of barrier b that keep what the join
// repartition partitions the member reads know (step 4 above), each when
// it changed since told, under key.
func joinTimeRecords(topic string, b *barrier, key func(partitionKey) string, told map[partitionKey]string) []*kgo.Record {
	var out []*kgo.Record
	for _, t := range b.times {
		if t.reports == nil || t.carried {
			continue
		}
		k := partitionKey{t.Topic, t.Partition}
		i := slices.IndexFunc(b.offsets, func(o checkpoint.SourceOffset) bool { return o.Topic == k.topic && o.Partition == k.partition })
		if i < 0 {
			continue
		}
		v := joinTimeValue(b.offsets[i].Offset, *t.reports)
		if string(v) == told[k] {
			continue
		}
		told[k] = string(v)
		out = append(out, &kgo.Record{Topic: topic, Key: []byte(key(k)), Value: v})
	}
	return out
}

// restoreJoins starts the clocks of the join repartition partitions read
// at offsets from what the checkpoint topic keeps of them (values, by
// partition; step 4 above): a value at another position than the
// committed offset is of an older life of the job, and left.
func (c *clocks) restoreJoins(values map[partitionKey][]byte, offsets map[source.TopicPartition]int64) error {
	for k, v := range values {
		if v == nil {
			continue // a tombstone
		}
		at, q, err := decodeJoinTimeValue(v)
		if err != nil {
			return fmt.Errorf("checkpoint topic, what partition %d of %s knows of event time: %w", k.partition, k.topic, err)
		}
		if off, ok := offsets[source.TopicPartition{Topic: k.topic, Partition: k.partition}]; !ok || off != at {
			continue
		}
		cl := c.of(k.topic, k.partition)
		if cl == nil || cl.reports == nil {
			continue // no longer a join's repartition topic with event time
		}
		q.watermark = max(q.watermark, cl.reports.watermark)
		cl.reports = q
		cl.Max = q.watermark
	}
	return nil
}

// importedJoinTimes are the tombstones a start from a savepoint writes
// over what the checkpoint topic keeps of the join repartition
// partitions it commits offsets of (step 4 above): what they knew is of
// the job before the savepoint.
func (j *Job) importedJoinTimes(offsets map[source.TopicPartition]int64) []*kgo.Record {
	tp := j.plan.time
	if tp == nil || len(tp.joins) == 0 {
		return nil
	}
	topic := checkpoint.TopicName(j.cfg.Name)
	tps := slices.Collect(maps.Keys(offsets))
	sortPartitions(tps)
	var out []*kgo.Record
	for _, o := range tps {
		if tp.joins[o.Topic] != nil {
			out = append(out, &kgo.Record{Topic: topic, Key: []byte(j.joinTimeKey(partitionKey{o.Topic, o.Partition}))})
		}
	}
	return out
}
