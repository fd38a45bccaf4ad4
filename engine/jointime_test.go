package engine

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/operator/keyed"
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
