package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Flow counts the records and bytes of one topic in one direction. Get it
// once per topic (Input, Output) and keep it: Add is then two atomic adds,
// with no label lookup per record.
type Flow struct {
	records, bytes prometheus.Counter
}

// Add counts records records of bytes bytes (keys plus values).
func (f Flow) Add(records, bytes int) {
	f.records.Add(float64(records))
	f.bytes.Add(float64(bytes))
}

// Input is the flow of records read from topic. Call it for every input
// topic when the job starts, so the series exist at 0 and "no data
// flowing" can be told from "never started".
func (m *Metrics) Input(topic string) Flow {
	return Flow{m.recordsIn.WithLabelValues(topic), m.bytesIn.WithLabelValues(topic)}
}

// Output is the flow of records written to topic, a sink's or the
// dead-letter topic. Add a record when it becomes visible: under
// exactly_once when its transaction commits, otherwise when it is flushed.
// Call it for every output topic when the job starts, like Input.
func (m *Metrics) Output(topic string) Flow {
	return Flow{m.recordsOut.WithLabelValues(topic), m.bytesOut.WithLabelValues(topic)}
}

// SetLag sets the consumer lag of one input partition: its high watermark
// (last stable offset when reading read_committed) minus the next offset
// the job will process, past the transaction markers that end the
// partition (source.Reader.Lags).
func (m *Metrics) SetLag(topic string, partition int32, records int64) {
	m.lag.WithLabelValues(topic, strconv.FormatInt(int64(partition), 10)).Set(float64(records))
}

// ForgetPartition drops the lag of a partition this process no longer
// reads, so a stale value does not linger in sums and alerts.
func (m *Metrics) ForgetPartition(topic string, partition int32) {
	m.lag.DeleteLabelValues(topic, strconv.FormatInt(int64(partition), 10))
}

// EndToEnd observes one result's end-to-end latency: from the timestamp of
// the input record it came from to visible, the time the commit that made
// it readable returned. Call it for each output (or a sample of them) after
// the commit; a record timestamp in the future (producer clock skew) counts
// as 0.
func (m *Metrics) EndToEnd(recordTime, visible time.Time) {
	m.endToEnd.Observe(max(visible.Sub(recordTime), 0).Seconds())
}

// DeadLetterTruncated counts one dead letter cut to fit its topic's
// max.message.bytes (the original sizes are in its headers).
func (m *Metrics) DeadLetterTruncated() { m.deadLettersTruncated.Inc() }

// TimestampReplaced counts one record written to topic with the
// processing time as its timestamp instead of its own.
func (m *Metrics) TimestampReplaced(topic string) { m.timestampsReplaced.WithLabelValues(topic).Inc() }

// DeadLettered counts one record sent to the dead-letter topic. code is the
// stable failure class of operator.Code (decode, missing_field, eval, type,
// overflow, future, and the sink's too_large), never the message.
func (m *Metrics) DeadLettered(code string) {
	m.deadLetters.WithLabelValues(code).Inc()
}
