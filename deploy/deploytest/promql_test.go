package deploytest

import (
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// root is the repository's root directory.
func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// A PromQL expression reduced to the identifiers that can only be metric
// names: strings, label matchers, range and subquery brackets, offsets and
// the label lists of grouping modifiers are cut out first, and what is left
// is either a metric name, a keyword, or a function or aggregation (those
// are followed by "(").
var (
	promqlStrings  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'` + "|`[^`]*`")
	promqlMatchers = regexp.MustCompile(`\{[^}]*\}`)
	promqlRanges   = regexp.MustCompile(`\[[^\]]*\]`)
	promqlGrouping = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promqlOffset   = regexp.MustCompile(`\boffset\s+-?[0-9a-zA-Z_$]+`)
	promqlIdent    = regexp.MustCompile(`\b[a-zA-Z_:][a-zA-Z0-9_:]*\b\s*\(?`)
	promqlKeywords = []string{"and", "or", "unless", "bool", "inf", "nan", "Inf", "NaN"}

	// Grafana's label_values(selector, label) variable query.
	labelValues = regexp.MustCompile(`^\s*label_values\((.*),\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*$`)
)

// metricNames returns the metric names expr selects, sorted.
func metricNames(expr string) []string {
	if m := labelValues.FindStringSubmatch(expr); m != nil {
		expr = m[1]
	}
	s := promqlStrings.ReplaceAllString(expr, `""`)
	s = promqlMatchers.ReplaceAllString(s, " ")
	s = promqlRanges.ReplaceAllString(s, " ")
	s = promqlGrouping.ReplaceAllString(s, " ")
	s = promqlOffset.ReplaceAllString(s, " ")
	var names []string
	for _, id := range promqlIdent.FindAllString(s, -1) {
		if strings.HasSuffix(id, "(") || slices.Contains(promqlKeywords, strings.TrimSpace(id)) {
			continue
		}
		names = append(names, strings.TrimSpace(id))
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// The extractor itself: if it missed names, the coverage tests would pass
// on nothing.
func TestMetricNames(t *testing.T) {
	for _, tt := range []struct {
		expr string
		want []string
	}{
		{`up{job="pipeline"} == 0`, []string{"up"}},
		{`histogram_quantile(0.99, sum by (pipeline, le) (rate(x_bucket{pipeline=~"$pipeline"}[$__rate_interval])))`, []string{"x_bucket"}},
		{`sum by (a, b) (increase(c_total{reason="by (x) {y}"}[5m])) > 0`, []string{"c_total"}},
		{"time() - (ts > 0) > clamp_min(3 * interval, 30)\nor\n(ts == 0) + on (instance, job) group_left () (time() - start > 300)", []string{"interval", "start", "ts"}},
		{`max_over_time(fenced[10m]) > 0 unless fenced offset 10m`, []string{"fenced"}},
		{`1e9 * a > bool 0.75 * b and c or d`, []string{"a", "b", "c", "d"}},
		{`sum without (le) (rate(h_sum[1m:10s])) / ignoring(x) rate(h_count[1m])`, []string{"h_count", "h_sum"}},
		{`label_values(pipeline_info, pipeline)`, []string{"pipeline_info"}},
		{`label_values(pipeline_info{guarantee="exactly_once"}, version)`, []string{"pipeline_info"}},
	} {
		if got := metricNames(tt.expr); !slices.Equal(got, tt.want) {
			t.Errorf("metricNames(%q) = %q, want %q", tt.expr, got, tt.want)
		}
	}
}
