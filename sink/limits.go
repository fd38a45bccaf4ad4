package sink

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Limits are how large a record batch the brokers accept for each topic
// the job writes to. The producers are sized from them (Opts), and every
// record is checked against them before it is produced (Fits), so that no
// record can fail a transaction with MESSAGE_TOO_LARGE: that failure comes
// back on every retry of the epoch, and the job would restart forever
// without committing anything.
//
// franz-go's own default batch limit (1,000,012 bytes) is below the
// brokers' default message.max.bytes (1,048,588): without Limits, a record
// the input topic accepted made a dead letter no producer would send.
//
// Limits also know which record timestamps each topic takes
// (Timestamp): a topic with message.timestamp.type CreateTime refuses a
// record whose timestamp is more than message.timestamp.after.max.ms
// ahead of the broker's clock (1 h by default since Kafka 4.0) or more
// than message.timestamp.before.max.ms behind it (unlimited by default)
// with INVALID_TIMESTAMP, which, like MESSAGE_TOO_LARGE, fails the
// epoch on every retry.
//
// The zero Limits knows nothing and allows franz-go's default everywhere.
type Limits struct {
	// broker is the smallest message.max.bytes of the brokers, the
	// default of every topic's max.message.bytes; 0 if unknown.
	broker int32
	// request is the smallest socket.request.max.bytes of the brokers,
	// the largest produce request a broker reads; 0 if unknown.
	request int32
	// topics holds each described topic's max.message.bytes.
	topics map[string]int32
	// least is the smallest limit of any topic: a record that fits it
	// fits everywhere, which spares the hot path a map lookup.
	least int32
	// times holds each described topic's timestamp limits, and
	// safeAfter and safeBefore (in ms, margins taken) the least of any
	// topic and of KafkaDefaultTimestamps: a timestamp within them is
	// taken everywhere, which spares the hot path a map lookup.
	times                 map[string]TimestampLimits
	safeAfter, safeBefore int64
}

// TimestampLimits are the record timestamps a topic takes: with
// LogAppendTime the broker sets every timestamp itself and takes any;
// with CreateTime, one at most BeforeMax behind and AfterMax ahead of its
// clock, in milliseconds.
type TimestampLimits struct {
	LogAppendTime       bool
	BeforeMax, AfterMax int64
}

// KafkaDefaultTimestamps are Kafka 4's defaults, assumed for a topic that
// was not described: CreateTime, message.timestamp.before.max.ms
// unlimited, message.timestamp.after.max.ms one hour.
var KafkaDefaultTimestamps = TimestampLimits{BeforeMax: math.MaxInt64, AfterMax: 3_600_000}

// timestampMargin is kept inside a topic's timestamp limits (at most half
// of each): the broker judges a timestamp against its own clock when the
// batch arrives, later than the job looked and on another machine.
const timestampMargin = time.Minute

const (
	// defaultBatchBytes is franz-go's ProducerBatchMaxBytes default,
	// used when the brokers do not say.
	defaultBatchBytes = 1_000_012
	// defaultWriteBytes is franz-go's BrokerMaxWriteBytes default (and
	// the brokers' socket.request.max.bytes default).
	defaultWriteBytes = 100 << 20
	// minBatchBytes and maxBatchBytes are the bounds franz-go accepts.
	minBatchBytes = 512
	maxBatchBytes = 1 << 30
	// requestOverhead is room for a produce request's own fields
	// around one batch (client id, transactional id, topic name up to
	// 249 bytes, partition): a batch this much below
	// socket.request.max.bytes always fits a request.
	requestOverhead = 1 << 10
	// batchOverhead bounds what a record batch of one record adds to the
	// record's key, value and headers: the batch header (61 bytes), its
	// length prefix, and the record's own length, attribute, delta and
	// size fields (varints). franz-go sizes a batch by the largest of its
	// encodings while it does not yet know the broker's produce version.
	batchOverhead = 128
	// headerOverhead bounds the two length varints of one header.
	headerOverhead = 10
)

// NewLimits builds Limits from known settings: broker is message.max.bytes,
// request socket.request.max.bytes (0: unknown), topics each topic's
// max.message.bytes.
func NewLimits(broker, request int32, topics map[string]int32) Limits {
	l := Limits{broker: broker, request: request, topics: topics}
	l.least = l.Batch("")
	for t := range topics {
		l.least = min(l.least, l.Batch(t))
	}
	return l
}

// WithTimestamps is l with the timestamp limits of the topics in times
// (others keep KafkaDefaultTimestamps).
func (l Limits) WithTimestamps(times map[string]TimestampLimits) Limits {
	l.times = times
	l.safeAfter, l.safeBefore = withMargin(KafkaDefaultTimestamps.AfterMax), withMargin(KafkaDefaultTimestamps.BeforeMax)
	for _, t := range times {
		if !t.LogAppendTime {
			l.safeAfter, l.safeBefore = min(l.safeAfter, withMargin(t.AfterMax)), min(l.safeBefore, withMargin(t.BeforeMax))
		}
	}
	return l
}

// DescribeLimits reads the brokers' message.max.bytes and
// socket.request.max.bytes and the max.message.bytes and timestamp
// settings of topics. Settings it cannot read stay unknown; the error says
// which, and the Limits returned with it are still usable.
func DescribeLimits(ctx context.Context, adm *kadm.Client, topics []string) (Limits, error) {
	var errs []error
	var broker, request int32
	// Without ids the request describes only the cluster-wide dynamic
	// defaults, which hold a value only if someone set one: ask each broker
	// for its effective value.
	md, err := adm.BrokerMetadata(ctx)
	if err == nil {
		var described kadm.ResourceConfigs
		described, err = adm.DescribeBrokerConfigs(ctx, md.Brokers.NodeIDs()...)
		for _, rc := range described {
			if rc.Err != nil {
				errs = append(errs, fmt.Errorf("broker %s: %w", rc.Name, rc.Err))
				continue
			}
			broker = smallerKnown(broker, configBytes(rc, "message.max.bytes", &errs))
			request = smallerKnown(request, configBytes(rc, "socket.request.max.bytes", &errs))
		}
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("reading the brokers' message.max.bytes: %w", err))
	}
	byTopic := map[string]int32{}
	times := map[string]TimestampLimits{}
	described, err := adm.DescribeTopicConfigs(ctx, topics...)
	if err != nil {
		errs = append(errs, fmt.Errorf("reading the topics' max.message.bytes: %w", err))
	}
	for _, rc := range described {
		if rc.Err != nil {
			errs = append(errs, fmt.Errorf("topic %s: %w", rc.Name, rc.Err))
			continue
		}
		if v := configBytes(rc, "max.message.bytes", &errs); v > 0 {
			byTopic[rc.Name] = v
		}
		times[rc.Name] = configTimestamps(rc, &errs)
	}
	return NewLimits(broker, request, byTopic).WithTimestamps(times), errors.Join(errs...)
}

// configTimestamps reads the timestamp limits of a described topic. A
// broker before Kafka 3.6 has message.timestamp.difference.max.ms for both
// directions instead (unlimited by default), so a setting the topic does
// not report is unlimited, not Kafka 4's default.
func configTimestamps(rc kadm.ResourceConfig, errs *[]error) TimestampLimits {
	t := TimestampLimits{BeforeMax: math.MaxInt64, AfterMax: math.MaxInt64}
	millis := func(key string) (int64, bool) {
		for _, c := range rc.Configs {
			if c.Key != key {
				continue
			}
			v, err := strconv.ParseInt(c.MaybeValue(), 10, 64)
			if err != nil || v < 0 {
				*errs = append(*errs, fmt.Errorf("%s %s=%q: not a number of milliseconds", rc.Name, key, c.MaybeValue()))
				return 0, false
			}
			return v, true
		}
		return 0, false
	}
	if v, ok := millis("message.timestamp.difference.max.ms"); ok {
		t.BeforeMax, t.AfterMax = v, v
	}
	if v, ok := millis("message.timestamp.before.max.ms"); ok {
		t.BeforeMax = v
	}
	if v, ok := millis("message.timestamp.after.max.ms"); ok {
		t.AfterMax = v
	}
	for _, c := range rc.Configs {
		if c.Key == "message.timestamp.type" {
			t.LogAppendTime = c.MaybeValue() == "LogAppendTime"
		}
	}
	return t
}

// Timestamp is the timestamp rec can be produced with at now: its own
// (ok) if its topic takes it with a margin (timestampMargin) for the
// broker's clock and the time until the batch arrives, else now, the
// processing time, and false. A zero timestamp is the producer's to set
// (to now) and is kept.
func (l Limits) Timestamp(rec *kgo.Record, now time.Time) (ts time.Time, ok bool) {
	if rec.Timestamp.IsZero() {
		return rec.Timestamp, true
	}
	ms, nowMs := rec.Timestamp.UnixMilli(), now.UnixMilli()
	if l.times != nil && ms <= satAdd(nowMs, l.safeAfter) && ms >= satAdd(nowMs, -l.safeBefore) {
		return rec.Timestamp, true
	}
	t, found := l.times[rec.Topic]
	if !found {
		t = KafkaDefaultTimestamps
	}
	if t.LogAppendTime {
		return rec.Timestamp, true
	}
	if ms > satAdd(nowMs, withMargin(t.AfterMax)) || ms < satAdd(nowMs, -withMargin(t.BeforeMax)) {
		return now, false
	}
	return rec.Timestamp, true
}

// HeaderOriginalTimestamp is on a record produced with another timestamp
// than its own because its topic would have refused that one (Restamp):
// the original, in epoch milliseconds.
const HeaderOriginalTimestamp = "pipeline.timestamp.original"

// Restamp is a copy of rec with timestamp ts and its own timestamp in
// the header HeaderOriginalTimestamp. rec is not modified.
func Restamp(rec *kgo.Record, ts time.Time) *kgo.Record {
	c := &kgo.Record{Topic: rec.Topic, Partition: rec.Partition, Key: rec.Key, Value: rec.Value, Timestamp: ts}
	c.Headers = append(slices.Clip(rec.Headers), kgo.RecordHeader{Key: HeaderOriginalTimestamp, Value: strconv.AppendInt(nil, rec.Timestamp.UnixMilli(), 10)})
	return c
}

// withMargin is a timestamp limit of limit ms less the margin kept inside
// it: timestampMargin, or half the limit if that is less.
func withMargin(limit int64) int64 {
	return limit - min(limit/2, timestampMargin.Milliseconds())
}

// satAdd is a+b, saturating at the ends of int64.
func satAdd(a, b int64) int64 {
	s := a + b
	switch {
	case b > 0 && s < a:
		return math.MaxInt64
	case b < 0 && s > a:
		return math.MinInt64
	}
	return s
}

// configBytes is the positive integer value of config key of rc, or 0.
func configBytes(rc kadm.ResourceConfig, key string, errs *[]error) int32 {
	for _, c := range rc.Configs {
		if c.Key != key {
			continue
		}
		v, err := strconv.ParseInt(c.MaybeValue(), 10, 32)
		if err != nil || v <= 0 {
			*errs = append(*errs, fmt.Errorf("%s %s=%q: not a positive size", rc.Name, key, c.MaybeValue()))
			return 0
		}
		return int32(v)
	}
	return 0
}

// smallerKnown is the smaller of two sizes, where 0 means unknown.
func smallerKnown(a, b int32) int32 {
	if a == 0 || (b != 0 && b < a) {
		return b
	}
	return a
}

// Batch is the largest record batch, in bytes, the producers put together
// for topic ("" for a topic not described): its max.message.bytes, else
// the brokers' message.max.bytes, within what one produce request can
// carry.
func (l Limits) Batch(topic string) int32 {
	b := l.topics[topic]
	if b == 0 {
		b = l.broker
	}
	if b == 0 {
		b = defaultBatchBytes
	}
	return min(max(b, minBatchBytes), l.write()-requestOverhead, maxBatchBytes)
}

// write is the largest produce request the producers send, within the
// bounds franz-go accepts (1 KiB to 1 GiB).
func (l Limits) write() int32 {
	if l.request > 0 {
		return min(max(l.request, minBatchBytes+requestOverhead), maxBatchBytes)
	}
	return defaultWriteBytes
}

// Opts size a producer by l: its batches (ProducerBatchMaxBytes, per
// topic) and its requests (BrokerMaxWriteBytes).
func (l Limits) Opts() []kgo.Opt {
	return []kgo.Opt{kgo.ProducerBatchMaxBytesFn(l.Batch), kgo.BrokerMaxWriteBytes(l.write())}
}

// Fits reports whether rec, alone in a batch, stays within its topic's
// limit, counted as the producer counts it (before compression).
func (l Limits) Fits(rec *kgo.Record) bool {
	size := BatchBytes(rec)
	if size <= int(l.least) {
		return true
	}
	return size <= int(l.Batch(rec.Topic))
}

// Payload is the most bytes of key and value a record without headers
// may hold to fit topic (Fits): what the job's internal records, state
// and checkpoints, are split by when they are larger.
func (l Limits) Payload(topic string) int { return int(l.Batch(topic)) - batchOverhead }

// BatchBytes bounds the size of a record batch holding rec alone.
func BatchBytes(rec *kgo.Record) int {
	n := batchOverhead + len(rec.Key) + len(rec.Value)
	for _, h := range rec.Headers {
		n += headerOverhead + len(h.Key) + len(h.Value)
	}
	return n
}
