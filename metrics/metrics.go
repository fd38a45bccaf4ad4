package metrics

import (
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics is the pipeline's metrics, one per process. Its methods are safe
// for concurrent use; the hot ones (Flow.Add, EndToEnd) are a few atomic
// adds.
type Metrics struct {
	job      string
	reg      prometheus.Registerer // the caller's, for Handler's own counter
	gatherer prometheus.Gatherer
	now      func() time.Time // time.Now; tests replace it

	info       *prometheus.GaugeVec
	infoMu     sync.Mutex
	infoLabels [2]string // guarantee, version of the one pipeline_info series

	recordsIn, bytesIn, recordsOut, bytesOut *prometheus.CounterVec
	lag                                      *prometheus.GaugeVec
	endToEnd                                 prometheus.Histogram
	deadLetters                              *prometheus.CounterVec
	deadLettersTruncated                     prometheus.Counter
	timestampsReplaced                       *prometheus.CounterVec

	checkpointDuration, checkpointAlignment, checkpointSize  prometheus.Histogram
	lastCheckpointID, lastCheckpointTime, checkpointInterval prometheus.Gauge
	checkpointsFailed                                        *prometheus.CounterVec

	commitDuration prometheus.Histogram
	aborts, fenced prometheus.Counter
	txnTimeout     prometheus.Gauge
	// txnBegan is when the open transaction began, in Unix nanoseconds; 0
	// when none is open. Read at scrape time by pipeline_transaction_age_seconds.
	txnBegan atomic.Int64

	restarts              *prometheus.CounterVec
	stateKeys, stateBytes *prometheus.GaugeVec
	restoreDuration       prometheus.Gauge
	statePieces           prometheus.Counter
	tooLarge              *prometheus.CounterVec

	savepoints        *prometheus.CounterVec
	savepointDuration prometheus.Gauge

	et  eventTime
	grp group
	sr  schemaRegistry
	tb  tables
	ops operators

	kafka *kafkaClients
}

// checkpointFailReasons and deadLetterCodes are the label values that
// exist at 0 from the start, so an alert on increase() sees the first
// event. They mirror twophase.AbortReason and operator.Codes(), plus
// the sink's too_large (a test keeps them in step), without making this
// package depend on either.
func checkpointFailReasons() []string {
	return []string{"timeout", "declined", "commit_failed", "job_failed"}
}

// restartReasons are the reasons runtime counts restarts under: the
// abort reason of the checkpoint that failed, "transaction_timeout" for a
// transaction the coordinator aborted for its age, "partitions_added" for
// an attempt ended at a checkpoint to read partitions added to a source
// topic, "rebalance" for a group-mode attempt ended by a rebalance,
// "savepoint_pause" for one that restarts after a group savepoint's pause,
// or "error" for any other failure. (Fault-injection tests add
// "injected"; it has no series until then.)
func restartReasons() []string {
	return append(checkpointFailReasons(), "transaction_timeout", "partitions_added", "rebalance", "savepoint_pause", "error")
}

func deadLetterCodes() []string {
	return []string{"decode", "missing_field", "eval", "type", "overflow", "future", "schema", "key_mismatch", "too_large"}
}

// New registers the metrics of the job named job on reg and returns them.
// reg should also be a prometheus.Gatherer (a *prometheus.Registry is):
// Handler serves what it gathers, and falls back to
// prometheus.DefaultGatherer otherwise. A nil reg means a new registry.
//
// New also registers the Go runtime and process collectors, once: if reg
// already has them (prometheus.DefaultRegisterer does), they are kept.
// New panics if reg already holds pipeline metrics for this job, like
// prometheus.MustRegister: that is a wiring mistake.
func New(reg prometheus.Registerer, job string) *Metrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	gatherer, ok := reg.(prometheus.Gatherer)
	if !ok {
		gatherer = prometheus.DefaultGatherer
	}
	for _, c := range []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := reg.Register(c); err != nil && !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
			panic(err)
		}
	}

	m := &Metrics{job: job, reg: reg, gatherer: gatherer, now: time.Now, kafka: &kafkaClients{}}
	f := factory{reg: prometheus.WrapRegistererWith(prometheus.Labels{"pipeline": job}, reg)}

	m.info = f.gaugeVec("info", "Always 1: the job's delivery guarantee and the binary's version.", "guarantee", "version")

	m.recordsIn = f.counterVec("records_in_total", "Records read from each input topic.", "topic")
	m.bytesIn = f.counterVec("bytes_in_total", "Bytes of record keys and values read from each input topic.", "topic")
	m.recordsOut = f.counterVec("records_out_total", "Records written to each output or dead-letter topic, counted when they became visible: at the commit of their transaction, or at the flush outside one.", "topic")
	m.bytesOut = f.counterVec("bytes_out_total", "Bytes of record keys and values written to each output or dead-letter topic, counted like pipeline_records_out_total.", "topic")
	m.lag = f.gaugeVec("consumer_lag_records", "Records of each input partition not yet processed: its last stable offset minus the next offset to process, transaction markers not counted.", "topic", "partition")
	m.endToEnd = f.histogram("end_to_end_latency_seconds", "From an input record's timestamp to the commit that made its result visible.",
		[]float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60})
	m.deadLetters = f.counterVec("dead_letter_records_total", "Records that could not be decoded or evaluated (or whose output was too large for its topic) and went to the dead-letter topic, by failure code.", "code")
	m.deadLettersTruncated = f.counter("dead_letter_truncated_total", "Dead letters cut to fit their topic's max.message.bytes; the original sizes are in their headers.")
	m.timestampsReplaced = f.counterVec("timestamps_replaced_total", "Records written with the processing time as their timestamp because their topic would refuse their own (message.timestamp.after.max.ms or before.max.ms), per topic; the original is in the header pipeline.timestamp.original.", "topic")

	// Checkpoints take a commit round trip at best (about 10 ms) and at
	// most checkpoint.timeout (30 s by default); alignment can be shorter.
	m.checkpointDuration = f.histogram("checkpoint_duration_seconds", "From triggering a checkpoint to the commit of its transaction, for completed checkpoints.",
		[]float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60})
	m.checkpointAlignment = f.histogram("checkpoint_alignment_seconds", "Longest time a task held inputs back waiting for a checkpoint's barrier from all of them, for completed checkpoints.",
		[]float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60})
	m.checkpointSize = f.histogram("checkpoint_size_bytes", "Bytes a completed checkpoint wrote to the job's internal topics: state changes and the checkpoint record.",
		prometheus.ExponentialBuckets(1024, 4, 11)) // 1 KiB .. 1 GiB
	m.lastCheckpointID = f.gauge("checkpoint_last_completed_id", "Id of the newest completed checkpoint (restored or taken).")
	m.lastCheckpointTime = f.gauge("checkpoint_last_completed_timestamp_seconds", "Unix time at which this process last completed a checkpoint; 0 before its first one. Its age is time() minus this.")
	m.checkpointInterval = f.gauge("checkpoint_interval_seconds", "Configured checkpoint.interval, for alerts on checkpoint age.")
	m.checkpointsFailed = f.counterVec("checkpoints_failed_total", "Checkpoints aborted before their commit, by reason.", "reason")
	for _, r := range checkpointFailReasons() {
		m.checkpointsFailed.WithLabelValues(r)
	}
	for _, c := range deadLetterCodes() {
		m.deadLetters.WithLabelValues(c)
	}

	m.commitDuration = f.histogram("transaction_commit_duration_seconds", "Round trip of ending a transaction with commit (EndTxn), after its records were flushed.",
		[]float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10})
	m.aborts = f.counter("transaction_aborts_total", "Transactions this process ended with abort.")
	m.fenced = f.counter("transaction_fenced_total", "Times this process's transactional producer was fenced by another instance of the job.")
	m.txnTimeout = f.gauge("transaction_timeout_seconds", "Configured kafka.transaction_timeout: the broker aborts a transaction open longer than this.")
	f.gaugeFunc("transaction_age_seconds", "Age of the open transaction, 0 when none is open.", m.transactionAge)

	m.restarts = f.counterVec("restarts_total", "Restarts of the job from its last completed checkpoint, by reason.", "reason")
	for _, r := range restartReasons() {
		m.restarts.WithLabelValues(r)
	}
	m.stateKeys = f.gaugeVec("state_keys", "Keys held in keyed state, per operator.", "operator")
	m.stateBytes = f.gaugeVec("state_bytes", "Bytes of keys and values held in keyed state, per operator.", "operator")
	m.restoreDuration = f.gauge("state_restore_duration_seconds", "How long the last restore (reading the checkpoint and rebuilding state) took.")
	m.statePieces = f.counter("state_piece_records_total", "Records written to the state topic as pieces of keyed values larger than one record of it (its max.message.bytes), counted at their commit.")
	m.tooLarge = f.counterVec("internal_records_too_large_total", "Records of the job's state or checkpoint topic that could not be written to it even in pieces: the job stopped, with an error that says what to change.", "topic")

	m.savepoints = f.counterVec("savepoints_total", "Savepoints this process was asked to take, by result (completed, failed).", "result")
	m.savepoints.WithLabelValues("completed")
	m.savepoints.WithLabelValues("failed")
	m.savepointDuration = f.gauge("savepoint_duration_seconds", "How long the last completed savepoint took, from its request to its directory being complete.")

	m.et = newEventTime(m, f)
	m.grp = newGroup(f)
	m.sr = newSchemaRegistry(f)
	m.tb = newTables(f)
	m.ops = newOperators(f)

	m.SetInfo("unknown", "unknown")
	return m
}

// Handler serves the metrics in the Prometheus text format, for /metrics:
// what reg gathers plus the Kafka clients' (KafkaHooks).
// A collector that fails is left out of the scrape (and counted in
// promhttp_metric_handler_errors_total) rather than failing all of it.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(prometheus.Gatherers{m.gatherer, m.kafka}, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
		Registry:      m.reg,
	})
}

// Gatherer is the registry the metrics are in (what Handler serves, the
// Kafka clients' aside): the admin API's JSON views read it.
func (m *Metrics) Gatherer() prometheus.Gatherer { return m.gatherer }

// SetInfo sets pipeline_info's labels: the job's guarantee (at_most_once,
// at_least_once, exactly_once) and the binary's version. Until it is
// called both are "unknown".
func (m *Metrics) SetInfo(guarantee, version string) {
	m.infoMu.Lock()
	defer m.infoMu.Unlock()
	// Set the new series before deleting the old: a scrape in between
	// sees two, never none.
	m.info.WithLabelValues(guarantee, version).Set(1)
	if old := m.infoLabels; old != [2]string{guarantee, version} && old != [2]string{} {
		m.info.DeleteLabelValues(old[0], old[1])
	}
	m.infoLabels = [2]string{guarantee, version}
}

// factory builds metrics under the pipeline_ namespace and registers them.
type factory struct{ reg prometheus.Registerer }

func (f factory) register(c prometheus.Collector) { f.reg.MustRegister(c) }

func (f factory) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Namespace: "pipeline", Name: name, Help: help})
	f.register(c)
	return c
}

func (f factory) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "pipeline", Name: name, Help: help}, labels)
	f.register(c)
	return c
}

func (f factory) gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "pipeline", Name: name, Help: help})
	f.register(g)
	return g
}

func (f factory) gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "pipeline", Name: name, Help: help}, labels)
	f.register(g)
	return g
}

func (f factory) gaugeFunc(name, help string, fn func() float64) {
	f.register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "pipeline", Name: name, Help: help}, fn))
}

func (f factory) histogram(name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "pipeline", Name: name, Help: help, Buckets: buckets})
	f.register(h)
	return h
}
