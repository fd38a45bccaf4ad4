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
	Error            string  `json:"error,omitempty"`
}
