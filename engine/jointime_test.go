package engine

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/operator/keyed"
	"github.com/eoflow/pipeline/source"
	"github.com/eoflow/pipeline/window"
)

// What a partition of a join's repartition topic knows goes into the
// checkpoint topic and comes back whole; its key names the partition.
func TestJoinTimeValueAndKey(t *testing.T) {
	q := newQueueTime()
	q.report([]reportedTime{
		{PartitionTime: checkpoint.PartitionTime{Topic: "orders", Partition: 2, MaxEventTime: 1_000}},
		{PartitionTime: checkpoint.PartitionTime{Topic: "orders", Partition: 0, MaxEventTime: 900}, idle: true},
	})
	tp := &timePlan{byTopic: map[string]*sourceTime{"orders": {outOfOrder: 100}}}
	st := q.advance(1, tp, []partitionKey{{"orders", 0}, {"orders", 2}})
	if st.watermark != 900 { // orders/0 is idle: orders/2's 1000 - 100
		t.Fatalf("watermark %d", st.watermark)
	}
	at, back, err := decodeJoinTimeValue(joinTimeValue(417, st))
	if err != nil || at != 417 || back.watermark != 900 || len(back.parts) != 2 || back.parts[partitionKey{"orders", 0}] != q.parts[partitionKey{"orders", 0}] {
		t.Fatalf("decoded %d %+v %v", at, back, err)
	}
	if _, _, err := decodeJoinTimeValue([]byte{0x80}); err == nil {
		t.Error("a truncated value decodes")
	}
	j := &Job{cfg: &config.Config{Name: "shop"}}
	k := partitionKey{"shop-enrich-repartition", 3}
	if got, ok := j.parseJoinTimeKey([]byte(j.joinTimeKey(k))); !ok || got != k {
		t.Errorf("key %q parses to %+v %v", j.joinTimeKey(k), got, ok)
	}
	for _, other := range []string{"shop/a", heldPrefix("shop") + "3/orders", "shopx#join-time/3/t", "shop#join-time/x/t", "shop#join-time/3/"} {
		if _, ok := j.parseJoinTimeKey([]byte(other)); ok {
			t.Errorf("%q taken for a join time key", other)
		}
	}
}

// A partition of a join's repartition topic holds the job back until
// every stream partition reported, and is idle only when each of them is.
func TestJoinQueueIdle(t *testing.T) {
	q := newQueueTime()
	sources := []partitionKey{{"orders", 0}, {"orders", 1}}
	if q.allIdle(sources) {
		t.Error("idle before any report")
	}
	q.report([]reportedTime{{PartitionTime: checkpoint.PartitionTime{Topic: "orders", Partition: 0, MaxEventTime: 5}, idle: true}})
	if q.allIdle(sources) {
		t.Error("idle while orders/1 has not reported")
	}
	q.report([]reportedTime{{PartitionTime: checkpoint.PartitionTime{Topic: "orders", Partition: 1, MaxEventTime: 7}, idle: true}})
	if !q.allIdle(sources) {
		t.Error("not idle though every stream partition is")
	}
	q.report([]reportedTime{{PartitionTime: checkpoint.PartitionTime{Topic: "orders", Partition: 1, MaxEventTime: 9}}})
	if q.allIdle(sources) {
		t.Error("idle though orders/1 reads again")
	}
}

// A record of a join's repartition topic carries its event time and its
// partition's watermark; one without them is a dead letter's, with why.
func TestCarriedTime(t *testing.T) {
	rec := &kgo.Record{Headers: []kgo.RecordHeader{{Key: config.JoinKeyHeader, Value: []byte("k")},
		{Key: config.JoinTimeHeader, Value: keyed.AppendJoinTime(nil, 1_700_000_000_123, window.NoWatermark)}}}
	at, wm, rerr := carriedTime(rec)
	if rerr != nil || at != 1_700_000_000_123 || wm != window.NoWatermark {
		t.Fatalf("carried %d %d %v", at, wm, rerr)
	}
	for name, hs := range map[string][]kgo.RecordHeader{
		"none":      nil,
		"truncated": {{Key: config.JoinTimeHeader, Value: keyed.AppendJoinTime(nil, 5, 4)[:2]}},
		"version":   {{Key: config.JoinTimeHeader, Value: []byte{9, 2, 2}}},
	} {
		if _, _, rerr := carriedTime(&kgo.Record{Headers: hs}); rerr == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// A reader resumes what its partition of a join's repartition topic knew
// only at the position it was kept at (the committed offset), never from a
// tombstone or an older life's position; a start from a savepoint writes
// tombstones over every such partition it commits an offset of.
func TestJoinTimeRestoreAndImport(t *testing.T) {
	const topic = "shop-enrich-repartition"
	tp := &timePlan{byTopic: map[string]*sourceTime{topic: {reported: true}, "orders": {}}, joins: joinTimes{topic: {"orders": true}}}
	q := newQueueTime()
	q.report([]reportedTime{{PartitionTime: checkpoint.PartitionTime{Topic: "orders", Partition: 0, MaxEventTime: 500}}})
	q.advance(0, tp, []partitionKey{{"orders", 0}})
	kept := joinTimeValue(40, shuffledTime{watermark: q.watermark, times: q.sorted()})
	values := map[partitionKey][]byte{{topic, 0}: kept, {topic, 1}: kept, {topic, 2}: nil}
	offsets := map[source.TopicPartition]int64{{Topic: topic, Partition: 0}: 40, {Topic: topic, Partition: 1}: 41, {Topic: topic, Partition: 2}: 7}
	c := newClocks(tp, &checkpoint.EventTime{Partitions: []checkpoint.PartitionTime{{Topic: topic, Partition: 1, MaxEventTime: 300}}}, time.Now)
	if err := c.restoreJoins(values, offsets); err != nil {
		t.Fatal(err)
	}
	if cl := c.of(topic, 0); cl.reports.watermark != 500 || len(cl.reports.parts) != 1 || cl.Max != 500 {
		t.Errorf("partition 0, kept at its committed offset: %+v", cl.reports)
	}
	if cl := c.of(topic, 1); cl.reports.watermark != 300 || len(cl.reports.parts) != 0 {
		t.Errorf("partition 1, kept at another offset: %+v, want its checkpointed time alone", cl.reports)
	}
	if cl := c.of(topic, 2); cl.reports.watermark != window.NoWatermark || len(cl.reports.parts) != 0 {
		t.Errorf("partition 2, a tombstone: %+v", cl.reports)
	}
	j := &Job{cfg: &config.Config{Name: "shop"}, plan: &plan{time: tp}}
	recs := j.importedJoinTimes(map[source.TopicPartition]int64{{Topic: topic, Partition: 1}: 9, {Topic: "orders", Partition: 0}: 3, {Topic: topic, Partition: 0}: 5})
	if len(recs) != 2 || string(recs[0].Key) != j.joinTimeKey(partitionKey{topic, 0}) || string(recs[1].Key) != j.joinTimeKey(partitionKey{topic, 1}) ||
		recs[0].Value != nil || recs[1].Value != nil || recs[0].Topic != checkpoint.TopicName("shop") {
		t.Errorf("the import's records: %+v", recs)
	}
}
