package deploytest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/eoflow/pipeline/metrics"
	"github.com/eoflow/pipeline/metrics/metricstest"
)

func promtool(t *testing.T, args ...string) {
	t.Helper()
	out, ok := metricstest.RunPromtool(t, filepath.Join(root(t), "deploy", "prometheus"), "", args...)
	if !ok {
		t.Fatalf("promtool %s failed:\n%s", strings.Join(args, " "), out)
	}
}

func TestPrometheusConfig(t *testing.T) { promtool(t, "check", "config", "prometheus.yml") }
func TestAlertRules(t *testing.T)       { promtool(t, "check", "rules", "alerts.yml") }
func TestAlertRuleUnitTests(t *testing.T) {
	promtool(t, "test", "rules", "alerts_test.yml")
}

type ruleFile struct {
	Groups []struct {
		Name  string
		Rules []struct {
			Alert, Record, Expr string
			Annotations         map[string]string
		}
	}
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func alertRules(t *testing.T) ruleFile {
	t.Helper()
	var rf ruleFile
	readYAML(t, filepath.Join(root(t), "deploy", "prometheus", "alerts.yml"), &rf)
	return rf
}

// The alerts the operations issue asks for exist, each explains itself,
// and each is unit-tested both firing and quiet.
func TestEveryAlertFiresAndStaysQuietInTests(t *testing.T) {
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string
				ExpAlerts []any `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		}
	}
	readYAML(t, filepath.Join(root(t), "deploy", "prometheus", "alerts_test.yml"), &tests)
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	var alerts []string
	for _, g := range alertRules(t).Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts = append(alerts, r.Alert)
			if !fires[r.Alert] || !quiet[r.Alert] {
				t.Errorf("%s: alerts_test.yml must make it fire (%v) and stay quiet (%v)", r.Alert, fires[r.Alert], quiet[r.Alert])
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: needs summary and description annotations", r.Alert)
			}
		}
	}
	for _, want := range []string{"PipelineCheckpointsFailing", "PipelineCheckpointTooOld", "PipelineConsumerLagGrowing",
		"PipelineProducerFenced", "PipelineTransactionNearTimeout", "PipelineNoDataFlowing"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("alert %s missing from alerts.yml", want)
		}
	}
}

// exported is every series name a query may select: what a scrape of a
// pipeline shows once each of its metrics has a sample (histograms with
// their _bucket, _sum and _count), plus "up", which Prometheus makes for
// every target.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	m := metrics.New(nil, "parity-sum")
	metricstest.Exercise(t, m)
	names := metricstest.Series(metricstest.Scrape(t, m.Handler()))
	names["up"] = true
	return names
}

func TestAlertsUseExportedMetrics(t *testing.T) {
	have := exported(t)
	for _, g := range alertRules(t).Groups {
		for _, r := range g.Rules {
			checkNames(t, "alerts.yml "+r.Alert+r.Record, r.Expr, have)
		}
	}
}

// checkNames fails unless expr names at least one metric, and only
// exported ones.
func checkNames(t *testing.T, where, expr string, have map[string]bool) {
	t.Helper()
	names := metricNames(expr)
	if len(names) == 0 {
		t.Errorf("%s: no metric name found in %q", where, expr)
	}
	for _, n := range names {
		if !have[n] {
			t.Errorf("%s: %s is not a metric the pipeline exports (expr %q)", where, n, expr)
		}
	}
}
