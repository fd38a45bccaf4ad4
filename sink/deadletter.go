package sink

import (
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Dead-letter headers. A dead-lettered record keeps its original key,
// value and timestamp; these headers say why and where it came from, so it
// can be inspected and replayed.
const (
	HeaderReason    = "pipeline.error.reason" // human-readable cause
	HeaderCode      = "pipeline.error.code"   // stable short code: decode, missing_field, eval, type
	HeaderStep      = "pipeline.error.step"   // config path of the step that failed, e.g. steps[1].filter
	HeaderTopic     = "pipeline.source.topic" // where the record was read
	HeaderPartition = "pipeline.source.partition"
	HeaderOffset    = "pipeline.source.offset"
)

// DeadLetter builds the dead-letter record for src, which failed at step
// for reason (classified by code).
func DeadLetter(topic string, src *kgo.Record, code, step, reason string) *kgo.Record {
	return &kgo.Record{
		Topic:     topic,
		Key:       src.Key,
		Value:     src.Value,
		Timestamp: src.Timestamp,
		Headers: []kgo.RecordHeader{
			{Key: HeaderReason, Value: []byte(reason)},
			{Key: HeaderCode, Value: []byte(code)},
			{Key: HeaderStep, Value: []byte(step)},
			{Key: HeaderTopic, Value: []byte(src.Topic)},
			{Key: HeaderPartition, Value: []byte(strconv.FormatInt(int64(src.Partition), 10))},
			{Key: HeaderOffset, Value: []byte(strconv.FormatInt(src.Offset, 10))},
		},
	}
}

// Header returns the value of the named header of r, or "".
func Header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}
