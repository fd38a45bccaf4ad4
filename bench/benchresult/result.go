// Package benchresult is the record the benchmark runner writes, one JSON
// line per contender, and the report reads: one definition for both ends
// of that file format.
package benchresult

// Result is one contender's measurements.
type Result struct {
	Name             string  `json:"name"`
	Kind             string  `json:"kind"`
	Job              string  `json:"job"`
	Guarantee        string  `json:"guarantee"`
	Interval         string  `json:"interval"`
	Records          int64   `json:"records"`
	Seconds          float64 `json:"seconds"`
	RecordsPerSec    float64 `json:"records_per_sec"`
	LatencyP50ms     float64 `json:"latency_p50_ms"`
	LatencyP99ms     float64 `json:"latency_p99_ms"`
	LatencySamples   int     `json:"latency_samples"`
	CPUSeconds       float64 `json:"cpu_seconds"`
	CPUSecPerMillion float64 `json:"cpu_sec_per_million"`
	PeakRSSMiB       float64 `json:"peak_rss_mib"`
	// InputBytes are the keys and values of the records drained (Kafka's
	// framing not counted); MBPerSec is InputBytes / Seconds / 10^6.
	InputBytes int64   `json:"input_bytes,omitempty"`
	MBPerSec   float64 `json:"mb_per_sec,omitempty"`
	// Pipeline contenders only, from their Prometheus /metrics when the
	// last drained output became visible: the checkpoints completed by
	// then, their mean size (pipeline_checkpoint_size_bytes: state changes
	// and the checkpoint record) and mean duration (trigger to commit,
	// pipeline_checkpoint_duration_seconds), and the keyed state held
	// (pipeline_state_keys and pipeline_state_bytes, all operators).
	Checkpoints         int64   `json:"checkpoints,omitempty"`
	CheckpointMeanBytes float64 `json:"checkpoint_mean_bytes,omitempty"`
	CheckpointMeanMs    float64 `json:"checkpoint_mean_ms,omitempty"`
	StateKeys           int64   `json:"state_keys,omitempty"`
	StateBytes          int64   `json:"state_bytes,omitempty"`
	// Steady: measured at steady state (runner -steady-window), not over
	// a drain: Records and Seconds are the window's, and there is no
	// latency. BrokerCPUSecPerMillion is the local brokers' CPU over the
	// same window, per million records.
	Steady                 bool    `json:"steady,omitempty"`
	BrokerCPUSecPerMillion float64 `json:"broker_cpu_sec_per_million,omitempty"`
	// Join contenders (runner -join-orders), the restore of a table of
	// TableKeys keys (runner -restore-table): RestoreSeconds from the
	// process's start to its table read to the end (the pipeline's "table
	// read to its end" log line; Kafka Streams' first RUNNING), and the
	// engine's own account of the read (the pipeline's took, Kafka
	// Streams' restore listener: first partition's start to last one's
	// end); RestoreCPUSeconds the process's CPU by then; TableRSSMiB its
	// VmRSS then and BaseRSSMiB the same with an empty table, so
	// TableBytesPerKey is (TableRSSMiB - BaseRSSMiB) / TableKeys in bytes.
	// FirstLoadSeconds is a first start's (RestoreSeconds is that of the
	// start after it): from the start to the table read to its end (Kafka
	// Streams: to its group's committed offsets at the table topic's end,
	// since a first start reads a source KTable's topic as an input);
	// RestoreRecords the records Kafka Streams' restore listener saw.
	FirstLoadSeconds float64 `json:"first_load_seconds,omitempty"`
	RestoreRecords   int64   `json:"restore_records,omitempty"`
	// TableDiskBytesPerKey is the same for Kafka Streams' state directory
	// (its RocksDB files), which the pipeline does not have.
	// JoinTiers counts the drained outputs per tier.
	TableKeys            int64            `json:"table_keys,omitempty"`
	RestoreSeconds       float64          `json:"restore_seconds,omitempty"`
	RestoreEngineSeconds float64          `json:"restore_engine_seconds,omitempty"`
	RestoreCPUSeconds    float64          `json:"restore_cpu_seconds,omitempty"`
	TableRSSMiB          float64          `json:"table_rss_mib,omitempty"`
	BaseRSSMiB           float64          `json:"base_rss_mib,omitempty"`
	TableBytesPerKey     float64          `json:"table_bytes_per_key,omitempty"`
	TableDiskBytesPerKey float64          `json:"table_disk_bytes_per_key,omitempty"`
	JoinTiers            map[string]int64 `json:"join_tiers,omitempty"`
	Error                string           `json:"error,omitempty"`
}
