package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// tables is the metrics of tables and join steps. A job without tables
// has none of their series.
type tables struct {
	keys, bytes, lag, restore *prometheus.GaugeVec
	updates, skipped          *prometheus.CounterVec
	joined                    *prometheus.CounterVec
	held                      *prometheus.GaugeVec
}

func newTables(f factory) tables {
	return tables{
		keys:    f.gaugeVec("table_keys", "Keys each table holds (the latest value of each record key of its topic; tombstones delete).", "table"),
		bytes:   f.gaugeVec("table_bytes", "Bytes of the keys and values each table holds, as read from its topic.", "table"),
		lag:     f.gaugeVec("table_lag_records", "Records of each table's topic not yet applied: its partitions' last stable offsets minus the table's positions, transaction markers not counted.", "table"),
		restore: f.gaugeVec("table_restore_seconds", "How long the last read of each table's topic to its end took, at the start or restore that preceded the first record joined.", "table"),
		updates: f.counterVec("table_updates_total", "Records of each table's topic applied (values and tombstones), the reads to the end at starts and restores included.", "table"),
		skipped: f.counterVec("table_skipped_records_total", "Records of each table's topic that could not be applied, by reason: no_key, key (key_format json: not a string, number or bool) or decode (the value is not JSON); the key keeps its value.", "table", "reason"),
		joined:  f.counterVec("join_records_total", "Records each join step (operator: its id) looked up, by result: matched (the table held the key) or missed (it did not: dropped under how: inner, joined with nil under left).", "operator", "result"),
		held:    f.gaugeVec("join_held_records", "Stream records each source task (task: its id) holds for joins as of event time, until the tables' event time passes theirs; state of every checkpoint.", "task"),
	}
}

// TableCounters are the counters of one table, for its reader.
type TableCounters struct {
	// Updates counts records applied; Skipped those that could not be,
	// by reason (operator.SkipReason).
	Updates prometheus.Counter
	Skipped func(reason string) prometheus.Counter
}

// Table returns the counters of table id, with every skip reason at 0
// (reasons lists them, operator.SkipReasons).
func (m *Metrics) Table(id string, reasons []string) TableCounters {
	for _, r := range reasons {
		m.tb.skipped.WithLabelValues(id, r)
	}
	return TableCounters{
		Updates: m.tb.updates.WithLabelValues(id),
		Skipped: func(reason string) prometheus.Counter { return m.tb.skipped.WithLabelValues(id, reason) },
	}
}

// SetTable sets a table's size and lag.
func (m *Metrics) SetTable(id string, keys, bytes, lag int64) {
	m.tb.keys.WithLabelValues(id).Set(float64(keys))
	m.tb.bytes.WithLabelValues(id).Set(float64(bytes))
	m.tb.lag.WithLabelValues(id).Set(float64(lag))
}

// TableRestored records how long reading a table to its end took.
func (m *Metrics) TableRestored(id string, took time.Duration) {
	m.tb.restore.WithLabelValues(id).Set(took.Seconds())
}

// JoinCounter counts a join step's lookups: matched or missed.
type JoinCounter struct{ matched, missed prometheus.Counter }

// Joined counts one record (operator.JoinCounter).
func (c JoinCounter) Joined(matched bool) {
	if matched {
		c.matched.Inc()
	} else {
		c.missed.Inc()
	}
}

// Join returns the counter of join step step, both results at 0.
func (m *Metrics) Join(step string) JoinCounter {
	return JoinCounter{matched: m.tb.joined.WithLabelValues(step, "matched"), missed: m.tb.joined.WithLabelValues(step, "missed")}
}

// SetJoinHeld sets how many records source task task holds for joins as
// of event time.
func (m *Metrics) SetJoinHeld(task string, n int) {
	m.tb.held.WithLabelValues(task).Set(float64(n))
}
