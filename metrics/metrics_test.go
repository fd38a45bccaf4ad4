package metrics_test

import (
	"fmt"
	"regexp"
	goruntime "runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/metrics"
	"github.com/eoflow/pipeline/metrics/metricstest"
	"github.com/eoflow/pipeline/operator"
	"github.com/eoflow/pipeline/twophase"
)

// The families the dashboard and alerts in deploy/ are written against.
// Renaming one breaks them: change deploy/ in the same commit.
var wantFamilies = []string{
	"pipeline_bytes_in_total",
	"pipeline_bytes_out_total",
	"pipeline_checkpoint_alignment_seconds",
	"pipeline_checkpoint_duration_seconds",
	"pipeline_checkpoint_interval_seconds",
	"pipeline_checkpoint_last_completed_id",
	"pipeline_checkpoint_last_completed_timestamp_seconds",
	"pipeline_checkpoint_size_bytes",
	"pipeline_checkpoints_failed_total",
	"pipeline_consumer_lag_records",
	"pipeline_dead_letter_records_total",
	"pipeline_dead_letter_truncated_total",
	"pipeline_end_to_end_latency_seconds",
	"pipeline_expired_keys_total",
	"pipeline_group_assigned_partitions",
	"pipeline_group_generation",
	"pipeline_group_local_shuffle_partitions",
	"pipeline_group_member_info",
	"pipeline_group_members",
	"pipeline_info",
	"pipeline_internal_records_too_large_total",
	"pipeline_join_records_total",
	"pipeline_late_records_total",
	"pipeline_operator_dead_letters_total",
	"pipeline_operator_late_records_total",
	"pipeline_operator_records_total",
	"pipeline_records_in_total",
	"pipeline_records_out_total",
	"pipeline_restarts_total",
	"pipeline_savepoint_duration_seconds",
	"pipeline_savepoints_total",
	"pipeline_schema_registry_errors_total",
	"pipeline_schema_registry_schemas_cached",
	"pipeline_schema_registry_wait_seconds_total",
	"pipeline_schema_registry_waiting",
	"pipeline_state_bytes",
	"pipeline_state_keys",
	"pipeline_state_piece_records_total",
	"pipeline_state_restore_duration_seconds",
	"pipeline_step_records_total",
	"pipeline_table_bytes",
	"pipeline_table_keys",
	"pipeline_table_lag_records",
	"pipeline_table_restore_seconds",
	"pipeline_table_skipped_records_total",
	"pipeline_table_updates_total",
	"pipeline_task_blocked_seconds_total",
	"pipeline_timestamps_replaced_total",
	"pipeline_transaction_aborts_total",
	"pipeline_transaction_age_seconds",
	"pipeline_transaction_commit_duration_seconds",
	"pipeline_transaction_fenced_total",
	"pipeline_transaction_timeout_seconds",
	"pipeline_watermark_lag_seconds",
	"pipeline_watermark_partition_idle",
	"pipeline_watermark_partition_timestamp_seconds",
	"pipeline_watermark_timestamp_seconds",
	"pipeline_windows_fired_total",
	"pipeline_windows_open",
}

func scrapeExercised(t *testing.T) string {
	t.Helper()
	m := metrics.New(prometheus.NewRegistry(), "parity-sum")
	metricstest.Exercise(t, m)
	return metricstest.Scrape(t, m.Handler())
}

// promtool, the linter Prometheus ships, finds nothing wrong with a scrape
// where every metric has a sample: names, units, suffixes, HELP, types.
func TestScrapePassesPromtool(t *testing.T) {
	text := scrapeExercised(t)
	out, ok := metricstest.RunPromtool(t, "", text, "check", "metrics")
	if !ok || strings.TrimSpace(out) != "" {
		t.Fatalf("promtool check metrics complains:\n%s", out)
	}
	for name, help := range metricstest.Families(text) {
		if strings.TrimSpace(help) == "" {
			t.Errorf("%s has no HELP text", name)
		}
	}
}

func TestFamilies(t *testing.T) {
	fams := metricstest.Families(scrapeExercised(t))
	var got []string
	for name := range fams {
		if strings.HasPrefix(name, "pipeline_") && !strings.HasPrefix(name, "pipeline_kafka_") {
			got = append(got, name)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, wantFamilies) {
		t.Errorf("pipeline families:\n got %q\nwant %q", got, wantFamilies)
	}
	also := []string{"go_goroutines", "pipeline_kafka_buffered_produce_records"}
	if goruntime.GOOS == "linux" { // the process collector reads /proc
		also = append(also, "process_start_time_seconds", "process_resident_memory_bytes")
	}
	for _, name := range also {
		if _, ok := fams[name]; !ok {
			t.Errorf("family %s missing", name)
		}
	}
	for name := range fams {
		if !strings.HasPrefix(name, "pipeline_") && !strings.HasPrefix(name, "go_") &&
			!strings.HasPrefix(name, "process_") && !strings.HasPrefix(name, "promhttp_") {
			t.Errorf("family %s is outside the pipeline_, go_, process_ and promhttp_ namespaces", name)
		}
	}
}

// Every pipeline series names its job, so alerts and dashboards can tell
// jobs apart; only the documented labels appear.
func TestLabels(t *testing.T) {
	allowed := map[string]bool{"pipeline": true, "topic": true, "partition": true, "operator": true,
		"reason": true, "code": true, "guarantee": true, "version": true, "le": true,
		"result": true, "client": true, "node_id": true, // the last two: kprom
		"instance_id": true, // one per process, for its life (group mode)
		"table":       true, // a table's id, from the configuration like operator
		"task":        true, // one per source task and worker: at most one each per core
		"op":          true} // schema registry requests: fetch, register, lookup
	label := regexp.MustCompile(`([a-z_]+)="`)
	for line := range strings.Lines(scrapeExercised(t)) {
		if !strings.HasPrefix(line, "pipeline_") {
			continue
		}
		if !strings.Contains(line, `pipeline="parity-sum"`) {
			t.Errorf("no pipeline label: %s", line)
		}
		for _, m := range label.FindAllStringSubmatch(line, -1) {
			if !allowed[m[1]] {
				t.Errorf("label %s is not one of the low-cardinality set: %s", m[1], line)
			}
		}
	}
}

// increase() cannot see the first failure of a series that appears with
// it, so every reason the checkpoint coordinator reports, every reason a
// restart is counted under, and every code the operators dead-letter with,
// is exported at 0 before anything happens.
func TestLabelValuesExistAtZero(t *testing.T) {
	m := metrics.New(prometheus.NewRegistry(), "j")
	text := metricstest.Scrape(t, m.Handler())
	for r := twophase.AbortReason(1); !strings.HasPrefix(r.String(), "AbortReason("); r++ {
		want := fmt.Sprintf(`pipeline_checkpoints_failed_total{pipeline="j",reason=%q} 0`, r.String())
		if !strings.Contains(text, want+"\n") {
			t.Errorf("missing before any failure: %s", want)
		}
	}
	// A restart's reason is its checkpoint's abort reason, or "error" for
	// any other failure (runtime's restartReason): the dashboard's restarts
	// panel shows the first restart only if its series was there before.
	for r := twophase.AbortReason(1); !strings.HasPrefix(r.String(), "AbortReason("); r++ {
		want := fmt.Sprintf(`pipeline_restarts_total{pipeline="j",reason=%q} 0`, r.String())
		if !strings.Contains(text, want+"\n") {
			t.Errorf("missing before any restart: %s", want)
		}
	}
	if want := `pipeline_restarts_total{pipeline="j",reason="error"} 0`; !strings.Contains(text, want+"\n") {
		t.Errorf("missing before any restart: %s", want)
	}
	for _, c := range operator.Codes() {
		want := fmt.Sprintf(`pipeline_dead_letter_records_total{code=%q,pipeline="j"} 0`, c)
		if !strings.Contains(text, want+"\n") {
			t.Errorf("missing before any dead letter: %s", want)
		}
	}
	for _, want := range []string{
		`pipeline_transaction_fenced_total{pipeline="j"} 0`,
		`pipeline_info{guarantee="unknown",pipeline="j",version="unknown"} 1`,
		`pipeline_checkpoint_last_completed_timestamp_seconds{pipeline="j"} 0`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("missing at start: %s", want)
		}
	}
}

// A registry that already has the Go and process collectors (as
// prometheus.DefaultRegisterer does) keeps them; New does not panic and
// the scrape has each family once.
func TestRuntimeCollectorsRegisteredOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := metrics.New(reg, "j")
	text := metricstest.Scrape(t, m.Handler())
	if n := strings.Count(text, "# TYPE go_goroutines "); n != 1 {
		t.Errorf("go_goroutines described %d times", n)
	}
	if m := metrics.New(nil, "j"); m == nil { // its own registry
		t.Fatal("New(nil) returned nil")
	}
}

func TestSetInfoReplaces(t *testing.T) {
	m := metrics.New(prometheus.NewRegistry(), "j")
	m.SetInfo("at_least_once", "v1")
	m.SetInfo("exactly_once", "v2")
	text := metricstest.Scrape(t, m.Handler())
	if n := strings.Count(text, "\npipeline_info{"); n != 1 {
		t.Errorf("%d pipeline_info series, want 1:\n%s", n, text)
	}
	if !strings.Contains(text, `pipeline_info{guarantee="exactly_once",pipeline="j",version="v2"} 1`) {
		t.Error("pipeline_info does not carry the last SetInfo")
	}
}

func TestForgetPartition(t *testing.T) {
	m := metrics.New(prometheus.NewRegistry(), "j")
	m.SetLag("numbers", 3, 10)
	m.SetLag("numbers", 1, 5)
	m.ForgetPartition("numbers", 3)
	text := metricstest.Scrape(t, m.Handler())
	if strings.Contains(text, `partition="3"`) || !strings.Contains(text, `pipeline_consumer_lag_records{partition="1",pipeline="j",topic="numbers"} 5`) {
		t.Errorf("lag after forgetting partition 3:\n%s", grep(text, "consumer_lag"))
	}
}

// A record stamped in the future by a skewed producer clock counts as 0,
// not as a negative latency that would corrupt _sum.
func TestEndToEndClampsClockSkew(t *testing.T) {
	m := metrics.New(prometheus.NewRegistry(), "j")
	now := time.Now()
	m.EndToEnd(now.Add(time.Minute), now)
	m.EndToEnd(now.Add(-2*time.Second), now)
	text := metricstest.Scrape(t, m.Handler())
	for _, want := range []string{
		`pipeline_end_to_end_latency_seconds_sum{pipeline="j"} 2`,
		`pipeline_end_to_end_latency_seconds_count{pipeline="j"} 2`,
		`pipeline_end_to_end_latency_seconds_bucket{pipeline="j",le="0.005"} 1`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("missing %s in\n%s", want, grep(text, "end_to_end"))
		}
	}
}

// Clients of one role overlap while a restart replaces them: the scrape
// keeps working and shows one set of series; closing clients removes
// theirs.
func TestKafkaHooksRoles(t *testing.T) {
	m := metrics.New(prometheus.NewRegistry(), "j")
	open := func(role string) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), m.KafkaHooks(role))
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	count := func() int {
		return strings.Count(metricstest.Scrape(t, m.Handler()), "\npipeline_kafka_buffered_produce_bytes{")
	}
	old, replacement, other := open("producer"), open("producer"), open("source")
	if n := count(); n != 2 {
		t.Errorf("two producers and a source: %d series, want 2 (one per role)", n)
	}
	replacement.Close()
	if n := count(); n != 2 {
		t.Errorf("after closing the newer producer: %d series, want 2", n)
	}
	old.Close()
	other.Close()
	if n := count(); n != 0 {
		t.Errorf("after closing every client: %d series, want 0", n)
	}
}

func grep(text, sub string) string {
	var b strings.Builder
	for line := range strings.Lines(text) {
		if strings.Contains(line, sub) {
			b.WriteString(line)
		}
	}
	return b.String()
}
