package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A pipeline's log and /metrics, as `pipeline run` with ADMIN_LISTEN=127.0.0.1:0
// wrote them (keyed-sum.yaml, 5,000 records of 100 keys; excerpt).
const (
	pipelineLog = `time=2026-12-04T08:11:19.577Z level=INFO msg="admin listening" metrics=http://127.0.0.1:46157/metrics api=http://127.0.0.1:46157/api/v1/job
time=2026-12-04T08:11:19.577Z level=INFO msg=starting guarantee=exactly_once brokers=127.0.0.1:41151 config=bench/jobs/keyed-sum.yaml
`
	pipelineMetrics = `# HELP pipeline_checkpoint_duration_seconds From triggering a checkpoint to the commit of its transaction, for completed checkpoints.
# TYPE pipeline_checkpoint_duration_seconds histogram
pipeline_checkpoint_duration_seconds_bucket{pipeline="curves-test-m",le="0.01"} 4
pipeline_checkpoint_duration_seconds_bucket{pipeline="curves-test-m",le="+Inf"} 6
pipeline_checkpoint_duration_seconds_sum{pipeline="curves-test-m"} 0.056546199
pipeline_checkpoint_duration_seconds_count{pipeline="curves-test-m"} 6
pipeline_checkpoint_size_bytes_bucket{pipeline="curves-test-m",le="1.048576e+06"} 6
pipeline_checkpoint_size_bytes_sum{pipeline="curves-test-m"} 5490
pipeline_checkpoint_size_bytes_count{pipeline="curves-test-m"} 6
pipeline_state_bytes{operator="sums",pipeline="curves-test-m"} 4690
pipeline_state_keys{operator="sums",pipeline="curves-test-m"} 100
pipeline_state_keys{operator="other",pipeline="curves-test-m"} 20
go_goroutines 31
`
)

func TestCheckpointMetrics(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pipeline.log")
	if err := os.WriteFile(path, []byte(pipelineLog), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := metricsURL(path); got != "http://127.0.0.1:46157/metrics" {
		t.Errorf("metricsURL = %q", got)
	}
	if got := metricsURL(filepath.Join(t.TempDir(), "none.log")); got != "" {
		t.Errorf("metricsURL of no log = %q", got)
	}
	m, err := parseProm(strings.NewReader(pipelineMetrics))
	if err != nil {
		t.Fatal(err)
	}
	if m["go_goroutines"] != 31 || m["pipeline_state_keys"] != 120 {
		t.Errorf("parsed go_goroutines %v, pipeline_state_keys %v (summed over operators), want 31 and 120", m["go_goroutines"], m["pipeline_state_keys"])
	}
	var r result
	addCheckpointMetrics(&r, m)
	if r.Checkpoints != 6 || r.CheckpointMeanBytes != 915 || r.StateKeys != 120 || r.StateBytes != 4690 {
		t.Errorf("checkpoints %d, mean bytes %v, state keys %d, state bytes %d; want 6, 915, 120, 4690",
			r.Checkpoints, r.CheckpointMeanBytes, r.StateKeys, r.StateBytes)
	}
	if ms := r.CheckpointMeanMs; ms < 9.42436 || ms > 9.42437 { // 56.546199 ms / 6
		t.Errorf("mean checkpoint ms = %v, want 9.424366", ms)
	}
	if _, err := parseProm(strings.NewReader("pipeline_x{a=\"b\" 1\n")); err == nil {
		t.Error("a line without its closing brace parsed")
	}
}
