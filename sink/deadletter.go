package sink

import (
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Dead-letter headers. A dead-lettered record keeps its original key,
// value and timestamp; these headers say why and where it came from, so it
// can be inspected and replayed.
const (
	HeaderReason    = "pipeline.error.reason" // human-readable cause
	HeaderCode      = "pipeline.error.code"   // stable short code: decode, missing_field, eval, type, overflow, future, schema, too_large
	HeaderStep      = "pipeline.error.step"   // config path of the step that failed, e.g. steps[1].filter
	HeaderTopic     = "pipeline.source.topic" // where the record was read
	HeaderPartition = "pipeline.source.partition"
	HeaderOffset    = "pipeline.source.offset"
	// HeaderTruncated is on a dead letter whose value was cut to fit its
	// topic: the original value's size in bytes.
	HeaderTruncated = "pipeline.error.truncated"
	// HeaderTruncatedKey is on a dead letter whose key was cut too: the
	// original key's size in bytes.
	HeaderTruncatedKey = "pipeline.error.truncated.key"
	// HeaderOutputTopic is on the dead letter of an output record too
	// large for its topic: the topic it was for.
	HeaderOutputTopic = "pipeline.output.topic"
	// HeaderSchemaID is on a dead letter of code schema that is about a
	// schema id: the id (decimal), unknown to the registry or one the
	// bytes do not match.
	HeaderSchemaID = "pipeline.error.schema_id"
)

// CodeTooLarge is the dead-letter code of an output record larger than its
// topic accepts (max.message.bytes).
const CodeTooLarge = "too_large"

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

// TooLarge builds the dead letter of out, an output record that does not
// fit a batch of limit bytes for its topic: out's key, value and
// timestamp, to topic, with the reason in headers. It may itself need
// FitDeadLetter.
func TooLarge(topic string, out *kgo.Record, limit int32) *kgo.Record {
	return &kgo.Record{
		Topic:     topic,
		Key:       out.Key,
		Value:     out.Value,
		Timestamp: out.Timestamp,
		Headers: []kgo.RecordHeader{
			{Key: HeaderReason, Value: []byte(fmt.Sprintf("the output record for topic %s takes %d bytes; the topic accepts record batches of at most %d (max.message.bytes)",
				out.Topic, BatchBytes(out), limit))},
			{Key: HeaderCode, Value: []byte(CodeTooLarge)},
			{Key: HeaderStep, Value: []byte("sinks")},
			{Key: HeaderOutputTopic, Value: []byte(out.Topic)},
		},
	}
}

// FitDeadLetter cuts dl so that a batch of it alone takes at most limit
// bytes: its value first, then, if the key alone is too large, its key. A
// cut is recorded in headers (HeaderTruncated, HeaderTruncatedKey, with
// the original sizes). It reports whether it cut anything. dl's key and
// value are resliced, never written to.
func FitDeadLetter(dl *kgo.Record, limit int32) bool {
	if BatchBytes(dl) <= int(limit) {
		return false
	}
	keyLen, valueLen := len(dl.Key), len(dl.Value)
	dl.Headers = append(dl.Headers, kgo.RecordHeader{Key: HeaderTruncated, Value: []byte(strconv.Itoa(valueLen))})
	// The key header's size is counted whether or not it is added.
	room := int(limit) - (BatchBytes(&kgo.Record{Headers: dl.Headers}) + headerOverhead + len(HeaderTruncatedKey) + len(strconv.Itoa(keyLen)))
	room = max(room, 0)
	if keyLen > room {
		dl.Headers = append(dl.Headers, kgo.RecordHeader{Key: HeaderTruncatedKey, Value: []byte(strconv.Itoa(keyLen))})
		dl.Key = dl.Key[:room]
	}
	dl.Value = dl.Value[:min(valueLen, room-len(dl.Key))]
	return true
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
