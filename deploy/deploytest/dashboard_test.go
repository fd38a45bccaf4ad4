package deploytest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/eoflow/pipeline/metrics/metricstest"
)

type dashboard struct {
	UID        string
	Title      string
	Templating struct {
		List []struct {
			Name       string
			Type       string
			Definition string
			Datasource datasourceRef
		}
	}
	Panels []struct {
		ID         int
		Type       string
		Title      string
		Datasource datasourceRef
		GridPos    struct{ X, Y, W, H int }
		Targets    []struct {
			RefID      string
			Expr       string
			Datasource datasourceRef
		}
	}
}

type datasourceRef struct{ Type, UID string }

// readDashboard decodes the dashboard strictly: a field this test does not
// know is fine, but malformed JSON is not.
func readDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root(t), "deploy", "grafana", "dashboards", "pipeline.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("pipeline.json: %v", err)
	}
	return d
}

// provisionedDatasource is the uid of the datasource Grafana provisions.
func provisionedDatasource(t *testing.T) (uid, url string) {
	t.Helper()
	var ds struct {
		Datasources []struct{ UID, Type, URL string }
	}
	readYAML(t, filepath.Join(root(t), "deploy", "grafana", "provisioning", "datasources", "prometheus.yml"), &ds)
	if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" || ds.Datasources[0].UID == "" {
		t.Fatalf("want one prometheus datasource with a uid, got %+v", ds.Datasources)
	}
	return ds.Datasources[0].UID, ds.Datasources[0].URL
}

// Every panel has a query on the provisioned datasource, and panels do not
// overlap the 24-column grid's edge or share an id.
func TestDashboardPanels(t *testing.T) {
	d := readDashboard(t)
	uid, _ := provisionedDatasource(t)
	if d.UID == "" || d.Title == "" || len(d.Panels) == 0 {
		t.Fatalf("dashboard needs a uid, a title and panels: %+v", d)
	}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		where := fmt.Sprintf("panel %d %q", p.ID, p.Title)
		if p.ID == 0 || ids[p.ID] {
			t.Errorf("%s: id missing or repeated", where)
		}
		ids[p.ID] = true
		if p.Title == "" || p.Type == "" {
			t.Errorf("%s: needs a title and a type", where)
		}
		if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("%s: gridPos %+v outside the 24 columns", where, p.GridPos)
		}
		if p.Datasource.UID != uid {
			t.Errorf("%s: datasource %q, want the provisioned %q", where, p.Datasource.UID, uid)
		}
		if len(p.Targets) == 0 {
			t.Errorf("%s: no query", where)
		}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" || tg.RefID == "" || tg.Datasource.UID != uid {
				t.Errorf("%s: target %q needs a refId, an expr and the provisioned datasource", where, tg.RefID)
			}
		}
	}
	for _, v := range d.Templating.List {
		if v.Datasource.UID != uid {
			t.Errorf("variable %s: datasource %q, want %q", v.Name, v.Datasource.UID, uid)
		}
	}
}

// The panels the operations issue asks for, found by the metrics they
// query rather than by their titles.
func TestDashboardShowsWhatTheIssueAsks(t *testing.T) {
	var all strings.Builder
	for _, p := range readDashboard(t).Panels {
		for _, tg := range p.Targets {
			all.WriteString(tg.Expr + "\n")
		}
	}
	for what, metric := range map[string]string{
		"throughput in":      "pipeline_records_in_total",
		"throughput out":     "pipeline_records_out_total",
		"lag":                "pipeline_consumer_lag_records",
		"checkpoint time":    "pipeline_checkpoint_duration_seconds_bucket",
		"checkpoint size":    "pipeline_checkpoint_size_bytes",
		"checkpoint age":     "pipeline_checkpoint_last_completed_timestamp_seconds",
		"commit latency":     "pipeline_transaction_commit_duration_seconds_bucket",
		"end-to-end latency": "pipeline_end_to_end_latency_seconds_bucket",
		"dead letters":       "pipeline_dead_letter_records_total",
		"restarts":           "pipeline_restarts_total",
		"state size":         "pipeline_state_bytes",
		"watermark lag":      "pipeline_watermark_lag_seconds",
		"open windows":       "pipeline_windows_open",
		"late records":       "pipeline_late_records_total",
		"expired keys":       "pipeline_expired_keys_total",
	} {
		if !strings.Contains(all.String(), metric) {
			t.Errorf("no panel shows %s (%s)", what, metric)
		}
	}
	for _, q := range []string{"histogram_quantile(0.5, ", "histogram_quantile(0.99, "} {
		if !strings.Contains(all.String(), q+"sum by (pipeline, le) (rate(pipeline_end_to_end_latency_seconds_bucket") {
			t.Errorf("end-to-end latency lacks %s...)", q)
		}
	}
}

func TestDashboardUsesExportedMetrics(t *testing.T) {
	have := exported(t)
	d := readDashboard(t)
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			checkNames(t, fmt.Sprintf("panel %q %s", p.Title, tg.RefID), tg.Expr, have)
		}
	}
	for _, v := range d.Templating.List {
		checkNames(t, "variable "+v.Name, v.Definition, have)
	}
}

// grafanaVars are the variables the queries may use, with a value that
// makes them plain PromQL.
var grafanaVars = regexp.MustCompile(`\$(pipeline|__rate_interval)\b|\$\{?[a-zA-Z_]+\}?`)

// Every query parses: promtool checks them as recording rules, with the
// Grafana variables replaced by values.
func TestDashboardQueriesParse(t *testing.T) {
	type rule struct{ Record, Expr string }
	var rules []rule
	for _, p := range readDashboard(t).Panels {
		for _, tg := range p.Targets {
			expr := grafanaVars.ReplaceAllStringFunc(tg.Expr, func(v string) string {
				switch v {
				case "$pipeline":
					return ".*"
				case "$__rate_interval":
					return "1m"
				}
				t.Errorf("panel %q %s: unknown variable %s", p.Title, tg.RefID, v)
				return v
			})
			rules = append(rules, rule{fmt.Sprintf("dashboard:panel_%d_%s", p.ID, tg.RefID), expr})
		}
	}
	b, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "dashboard-queries.yml")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, ok := metricstest.RunPromtool(t, "", "", "check", "rules", file); !ok {
		t.Fatalf("dashboard queries do not parse:\n%s\n%s", out, b)
	}
}
