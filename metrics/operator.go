package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// operators is what each node of the job graph handled, and how long the
// tasks that run them waited for room downstream: the numbers of the web
// UI's job graph (Flink's numRecordsIn and backPressuredTimeMsPerSecond).
// Sources and sinks are counted per topic already (pipeline_records_in_total,
// pipeline_records_out_total).
type operators struct {
	records     *prometheus.CounterVec
	steps       *prometheus.CounterVec
	deadLetters *prometheus.CounterVec
	late        *prometheus.CounterVec
	blocked     *prometheus.CounterVec
	idle        *prometheus.GaugeVec
}

func newOperators(f factory) operators {
	return operators{
		records:     f.counterVec("operator_records_total", "Records each keyed operator (aggregate, window) or output (a source or stateless step a sink reads) was handed, per operator id; counted as handled, so an epoch replayed after a restart counts again.", "operator"),
		steps:       f.counterVec("step_records_total", "Records each stateless step (filter, map, key_by, join) handled, per step id, by what came of them: passed on, dropped (a filter's false, an inner join that found no value) or failed (a dead letter); their sum is the records that reached the step. Counted where the steps first run: in group mode, by the process that read the record from its source.", "operator", "result"),
		deadLetters: f.counterVec("operator_dead_letters_total", "Dead letters per operator id where the record failed: a source (decode, schema), a step (its expressions), or a sink (sink-<index>:<topic>, too_large). The codes are in pipeline_dead_letter_records_total.", "operator"),
		late:        f.counterVec("operator_late_records_total", "Late records per window operator, written to its late topic or dropped (pipeline_late_records_total has them by result).", "operator"),
		blocked:     f.counterVec("task_blocked_seconds_total", "Time each task waited for room in the channel to the next task: backpressure. source-N run the sources and stateless steps, worker-N the keyed operators and outputs; the rate is the share of the time blocked.", "task"),
		idle:        f.gaugeVec("watermark_partition_idle", "1 when an input partition with event time had no record for its source's idle_timeout at the last checkpoint barrier, so it does not hold the watermark back; else 0.", "topic", "partition"),
	}
}

// OperatorRecords is the counter of the records operator id was handed.
// Get it once per operator and keep it: Add is then one atomic add.
func (m *Metrics) OperatorRecords(id string) prometheus.Counter {
	return m.ops.records.WithLabelValues(id)
}

// StepRecords is the counter of the records stateless step id handled
// with result passed, dropped or failed. Get it once per step and result
// and keep it.
func (m *Metrics) StepRecords(id, result string) prometheus.Counter {
	return m.ops.steps.WithLabelValues(id, result)
}

// OperatorDeadLetter counts one dead letter at operator id.
func (m *Metrics) OperatorDeadLetter(id string) {
	m.ops.deadLetters.WithLabelValues(id).Inc()
}

// TaskBlocked is the counter of the seconds task waited for room
// downstream. Get it once per task and keep it.
func (m *Metrics) TaskBlocked(task string) Blocked {
	return Blocked{m.ops.blocked.WithLabelValues(task)}
}

// Blocked counts the time one task waited for room downstream.
type Blocked struct{ c prometheus.Counter }

// Add counts d.
func (b Blocked) Add(d time.Duration) {
	if b.c != nil && d > 0 {
		b.c.Add(d.Seconds())
	}
}

// SetPartitionIdle says whether an input partition counted as idle at the
// last barrier.
func (m *Metrics) SetPartitionIdle(topic string, partition int32, idle bool) {
	v := 0.0
	if idle {
		v = 1
	}
	m.ops.idle.WithLabelValues(topic, strconv.FormatInt(int64(partition), 10)).Set(v)
}
