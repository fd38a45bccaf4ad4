package engine

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/sink"
)

// describeLimits reads how large a record batch the brokers accept for
// every topic the job writes, and which timestamps (sink.Limits), for its
// producers and its sink task: an attempt calls it once its topics exist. What it cannot
// read falls back to the brokers' default (with a warning): the job still
// runs, and a record too large for a topic whose setting is unknown fails
// its checkpoint as before.
func (j *Job) describeLimits(ctx context.Context, adm *kadm.Client) sink.Limits {
	topics := j.writtenTopics()
	// A topic just created (by this process or another) is unknown to the
	// brokers' configs for a moment: asked again, it is not a warning.
	deadline := time.Now().Add(10 * time.Second)
	for {
		limits, err := sink.DescribeLimits(ctx, adm, topics)
		if errors.Is(err, kerr.UnknownTopicOrPartition) && time.Now().Before(deadline) && ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		if err != nil {
			j.log.Warn("could not read every record size limit of the job's topics; using the brokers' message.max.bytes (or 1,000,012 bytes) where unknown", "err", err)
		}
		return limits
	}
}

// writtenTopics are the topics the job writes: its sinks', dead-letter
// and late topics, and with checkpoints its checkpoint and state topics.
// A group-mode job without key_by has no state topic (nor repartition
// topic): asking for its limits would wait for a topic that never comes.
func (j *Job) writtenTopics() []string {
	var topics []string
	for _, s := range j.cfg.Sinks {
		topics = append(topics, s.Topic, s.DeadLetterTopic)
	}
	topics = append(topics, j.plan.lateTopics()...)
	if j.cfg.Guarantee.Checkpoints() {
		topics = append(topics, checkpoint.TopicName(j.cfg.Name))
		if j.shuffle == nil || j.plan.keyed {
			topics = append(topics, j.stateTopic())
		}
	}
	return topics
}

// fitRecord returns the record to produce for m, a record or dead letter
// on its way to a producer: m's own if it fits its topic. An output record
// too large for its topic becomes a dead letter (code too_large) to its
// sink's dead-letter topic, and a dead letter too large for its topic is
// cut to fit, with the original size in a header: one large record must
// never fail every attempt at the epoch that holds it.
func (s *sinkTask) fitRecord(m message) *kgo.Record {
	rec := m.rec
	if s.limits.Fits(rec) {
		return rec
	}
	if m.kind == msgRecord {
		limit := s.limits.Batch(rec.Topic)
		if ok, suppressed := s.deadLetterLog.allow(); ok {
			s.log.Warn("dead letter: output record too large for its topic, sent to the dead-letter topic instead",
				"code", sink.CodeTooLarge, "topic", rec.Topic, "bytes", sink.BatchBytes(rec), "max_message_bytes", limit, "suppressed", suppressed)
		}
		rec = sink.TooLarge(s.deadLetterTopic[rec.Topic], rec, limit)
		s.metrics.DeadLettered(sink.CodeTooLarge)
	}
	size := sink.BatchBytes(rec)
	if sink.FitDeadLetter(rec, s.limits.Batch(rec.Topic)) {
		if ok, suppressed := s.deadLetterLog.allow(); ok {
			s.log.Warn("dead letter too large for its topic; sent truncated",
				"topic", rec.Topic, "bytes", size, "max_message_bytes", s.limits.Batch(rec.Topic),
				"source_topic", sink.Header(rec, sink.HeaderTopic), "source_offset", sink.Header(rec, sink.HeaderOffset), "suppressed", suppressed)
		}
		s.metrics.DeadLetterTruncated()
	}
	return rec
}

// stamp returns rec, or, if its topic would refuse its timestamp (too far
// ahead of or behind the broker's clock: sink.Limits.Timestamp), a copy
// with now, the processing time, as timestamp and the original in a
// header. A timestamp must never fail a checkpoint: INVALID_TIMESTAMP
// would come back on every retry of the epoch, and the job would restart
// forever without writing anything. A window's output carries its last
// millisecond, so event times ahead of the clock (a producer's fast
// clock, local time written with a Z) lead here; its bounds stay in the
// value.
func (s *sinkTask) stamp(rec *kgo.Record, now time.Time) *kgo.Record {
	ts, ok := s.limits.Timestamp(rec, now)
	if ok {
		return rec
	}
	if ok, suppressed := s.deadLetterLog.allow(); ok {
		s.log.Warn("record timestamp outside what its topic accepts (message.timestamp.after.max.ms / before.max.ms); written with the processing time instead, the original in header "+sink.HeaderOriginalTimestamp,
			"topic", rec.Topic, "timestamp", rec.Timestamp.UTC().Format(time.RFC3339Nano), "now", ts.UTC().Format(time.RFC3339Nano), "suppressed", suppressed)
	}
	s.metrics.TimestampReplaced(rec.Topic)
	return sink.Restamp(rec, ts)
}

// deadLetterTopics maps each sink's topic to its dead-letter topic.
func deadLetterTopics(sinks []config.Sink) map[string]string {
	m := map[string]string{}
	for _, s := range sinks {
		if _, ok := m[s.Topic]; !ok {
			m[s.Topic] = s.DeadLetterTopic
		}
	}
	return m
}
