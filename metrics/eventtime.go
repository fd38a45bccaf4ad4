package metrics

import (
	"math"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// eventTime is the event-time metrics: watermarks, windows, late records
// and expired keys. They exist for every job (at 0 or absent without
// event time), so dashboards need no special case.
type eventTime struct {
	partitionWatermark *prometheus.GaugeVec
	watermark          prometheus.Gauge
	// watermarkMs is the job watermark in epoch milliseconds (MinInt64:
	// none yet), read at scrape time for the lag.
	watermarkMs  *atomic.Int64
	openWindows  *prometheus.GaugeVec
	lateRecords  *prometheus.CounterVec
	expiredKeys  *prometheus.CounterVec
	firedWindows *prometheus.CounterVec
}

func newEventTime(m *Metrics, f factory) eventTime {
	e := eventTime{
		watermarkMs:        new(atomic.Int64),
		partitionWatermark: f.gaugeVec("watermark_partition_timestamp_seconds", "Watermark of each input partition with event time: its largest event time minus max_out_of_orderness, as of the last checkpoint barrier. Absent before the partition's first record.", "topic", "partition"),
		watermark:          f.gauge("watermark_timestamp_seconds", "The job's event-time watermark (the least partition watermark, never decreasing), as of the last checkpoint barrier; windows ending at or before it minus allowed_lateness have fired. 0 before every partition reported."),
		openWindows:        f.gaugeVec("windows_open", "Windows holding state (not yet fired), per window operator.", "operator"),
		lateRecords:        f.counterVec("late_records_total", "Records all of whose windows had closed (window end + allowed_lateness at or below their partition's watermark), by what happened to them (result): side_output (written to the late topic) or drop. A record with one window still open counts there and is not late.", "result"),
		expiredKeys:        f.counterVec("expired_keys_total", "Keys whose state was deleted because they were not updated for aggregate.ttl, per operator.", "operator"),
		firedWindows:       f.counterVec("windows_fired_total", "Windows fired (emitted and deleted) at a checkpoint barrier, per window operator.", "operator"),
	}
	e.watermarkMs.Store(math.MinInt64)
	f.gaugeFunc("watermark_lag_seconds", "Wall-clock time minus the job's watermark: how far event time trails; 0 before the watermark exists.", func() float64 {
		wm := e.watermarkMs.Load()
		if wm == math.MinInt64 {
			return 0
		}
		return m.now().Sub(time.UnixMilli(wm)).Seconds()
	})
	e.lateRecords.WithLabelValues("side_output")
	e.lateRecords.WithLabelValues("drop")
	return e
}

// SetPartitionWatermark sets the watermark of one input partition, in
// epoch milliseconds.
func (m *Metrics) SetPartitionWatermark(topic string, partition int32, ms int64) {
	m.et.partitionWatermark.WithLabelValues(topic, strconv.FormatInt(int64(partition), 10)).Set(float64(ms) / 1000)
}

// SetWatermark sets the job's watermark, in epoch milliseconds
// (math.MinInt64: none yet).
func (m *Metrics) SetWatermark(ms int64) {
	m.et.watermarkMs.Store(ms)
	if ms == math.MinInt64 {
		m.et.watermark.Set(0)
		return
	}
	m.et.watermark.Set(float64(ms) / 1000)
}

// SetOpenWindows sets how many windows of operator hold state.
func (m *Metrics) SetOpenWindows(operator string, n int64) {
	m.et.openWindows.WithLabelValues(operator).Set(float64(n))
}

// WindowsFired counts n windows of operator fired.
func (m *Metrics) WindowsFired(operator string, n int) {
	m.et.firedWindows.WithLabelValues(operator).Add(float64(n))
}

// LateRecord counts one late record of window operator; result is
// side_output or drop.
func (m *Metrics) LateRecord(operator, result string) {
	m.et.lateRecords.WithLabelValues(result).Inc()
	m.ops.late.WithLabelValues(operator).Inc()
}

// KeysExpired counts n keys of operator deleted by their TTL.
func (m *Metrics) KeysExpired(operator string, n int) {
	m.et.expiredKeys.WithLabelValues(operator).Add(float64(n))
}
