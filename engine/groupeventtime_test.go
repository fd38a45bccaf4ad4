package engine

import (
	"reflect"
	"testing"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/window"
)

func rt(topic string, p int32, at int64, idle bool) reportedTime {
	return reportedTime{PartitionTime: checkpoint.PartitionTime{Topic: topic, Partition: p, MaxEventTime: at}, idle: idle}
}

// What the owner of a repartition partition makes of the event-time
// records it reads: each source partition's largest time ever reported
// (a partition that moved may be reported behind by a member that knew
// it before), a partition never reported holds the watermark back, an
// idle one does not, and the watermark never goes back.
func TestQueueTimeAdvance(t *testing.T) {
	tp := &timePlan{byTopic: map[string]*sourceTime{"in": {outOfOrder: 10}}}
	sources := []partitionKey{{"in", 0}, {"in", 1}}
	q := newQueueTime()
	for _, step := range []struct {
		name   string
		report []reportedTime
		want   int64
	}{
		{"nothing reported: none", nil, window.NoWatermark},
		{"partition 1 never reported holds it back", []reportedTime{rt("in", 0, 100, false)}, window.NoWatermark},
		{"both reported: the least", []reportedTime{rt("in", 1, 50, false)}, 40},
		{"an older report of a moved partition changes nothing", []reportedTime{rt("in", 1, 30, false)}, 40},
		{"partition 1 idle: partition 0 alone", []reportedTime{rt("in", 1, 30, true)}, 90},
		{"partition 1 back, behind: the watermark stays", []reportedTime{rt("in", 1, 60, false)}, 90},
		{"partition 1 ahead: the least again", []reportedTime{rt("in", 1, 500, false)}, 90},
		{"partition 0 ahead too", []reportedTime{rt("in", 0, 300, false)}, 290},
		{"a partition added later, reported behind: the watermark stays", []reportedTime{rt("in", 2, 200, false)}, 290},
		{"it moves ahead: partition 0 is the least", []reportedTime{rt("in", 2, 400, false)}, 290},
		{"the others move on: partition 2 is the least", []reportedTime{rt("in", 0, 1000, false), rt("in", 1, 1000, false)}, 390},
	} {
		q.report(step.report)
		got := q.advance(3, tp, sources)
		if got.watermark != step.want || got.q != 3 {
			t.Fatalf("%s: watermark %d of partition %d, want %d", step.name, got.watermark, got.q, step.want)
		}
	}
	// The state record round-trips, and resumes exactly there.
	st := q.advance(3, tp, sources)
	back, err := decodeQueueTime(encodeQueueTime(st))
	if err != nil {
		t.Fatal(err)
	}
	if back.watermark != q.watermark || !reflect.DeepEqual(back.parts, q.parts) {
		t.Fatalf("decoded %+v, want %+v", back, q)
	}
}

// The encodings refuse what they did not write.
func TestTimesEncodingRefusesGarbage(t *testing.T) {
	good := encodeTimes([]reportedTime{rt("in", 0, -5, false), rt("in", 7, 1<<40, true)})
	got, err := decodeTimes(good)
	if err != nil || !reflect.DeepEqual(got, []reportedTime{rt("in", 0, -5, false), rt("in", 7, 1<<40, true)}) {
		t.Fatalf("round trip: %v %v", got, err)
	}
	for name, b := range map[string][]byte{
		"empty":           nil,
		"other version":   append([]byte{9}, good[1:]...),
		"truncated":       good[:len(good)-1],
		"trailing bytes":  append(append([]byte{}, good...), 0),
		"count too large": {timesVersion, 200},
		"idle not a bool": append(append([]byte{}, good[:len(good)-1]...), 2),
	} {
		if _, err := decodeTimes(b); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	if _, err := decodeQueueTime([]byte{timesVersion}); err == nil {
		t.Error("a queue time without its watermark decoded")
	}
}
