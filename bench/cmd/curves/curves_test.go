package main

import (
	"bytes"
	"encoding/csv"
	"math"
	"strings"
	"testing"

	"github.com/eoflow/pipeline/bench/benchresult"
)

func TestRecordsFor(t *testing.T) {
	for _, c := range []struct {
		curve string
		p, n  int
		want  int
	}{
		{"keys", 10_000, 5_000_000, 5_000_000},
		{"keys", 10_000_000, 5_000_000, 20_000_000}, // at least 2 × keys
		{"partitions", 256, 5_000_000, 5_000_000},
		{"size", 100, 5_000_000, 5_000_000},
		{"size", 1_000, 5_000_000, 2_000_000}, // 2 GB of 1 KB records
		{"size", 10_000, 5_000_000, 200_000},
		{"size", 10_000, 100_000, 100_000},
	} {
		if got := recordsFor(c.curve, c.p, c.n, 2_000_000_000); got != c.want {
			t.Errorf("recordsFor(%s, %d, %d) = %d, want %d", c.curve, c.p, c.n, got, c.want)
		}
	}
}

func TestLabel(t *testing.T) {
	for _, c := range []struct {
		curve string
		p     int
		want  string
	}{
		{"keys", 10_000, "10k"}, {"keys", 1_000_000, "1M"}, {"keys", 10_000_000, "10M"}, {"keys", 2_500, "2500"},
		{"partitions", 64, "64"},
		{"size", 100, "100 B"}, {"size", 1_000, "1 KB"}, {"size", 10_000, "10 KB"},
	} {
		if got := label(c.curve, c.p); got != c.want {
			t.Errorf("label(%s, %d) = %q, want %q", c.curve, c.p, got, c.want)
		}
	}
}

// Two points of the keys curve, as the runner and the workload report them.
func keysPoints() []point {
	res := func(name, kind string, rps, rss float64) benchresult.Result {
		return benchresult.Result{Name: name, Kind: kind, Records: 1_000_000, RecordsPerSec: rps, MBPerSec: rps * 104 / 1e6,
			LatencyP99ms: 1100, CPUSecPerMillion: 3.2, PeakRSSMiB: rss}
	}
	p1 := point{Curve: "keys", Point: 10_000, Keys: 10_000, Partitions: 8, Size: 100, Shape: "flat",
		Records: 1_000_000, DistinctKeys: 10_000, Bytes: 104_000_000, Load: "1.20 0.9 0.8 1/200 3"}
	pl := res("pipeline-keyed-sum-exactly_once-1s", "pipeline", 400_000, 300)
	pl.Checkpoints, pl.CheckpointMeanBytes, pl.CheckpointMeanMs, pl.StateKeys, pl.StateBytes = 4, 1.5*(1<<20), 120, 10_000, 480_000
	p1.Results = []benchresult.Result{res("plain-copy", "limit", 1_000_000, 90), pl,
		res("kstreams-keyed-sum-exactly_once_v2-1s", "kstreams", 100_000, 500)}
	p2 := point{Curve: "keys", Point: 1_000_000, Keys: 1_000_000, Partitions: 8, Size: 100, Shape: "flat",
		Records: 2_000_000, DistinctKeys: 864_665, Bytes: 210_000_000}
	pl2 := res("pipeline-keyed-sum-exactly_once-1s", "pipeline", 200_000, 300+500)
	pl2.Checkpoints, pl2.CheckpointMeanBytes, pl2.CheckpointMeanMs, pl2.StateKeys, pl2.StateBytes = 9, 40e6, 800, 864_665, 864_665*52
	ks := res("kstreams-keyed-sum-exactly_once_v2-1s", "kstreams", 0, 0)
	ks.Error = "drain 2000000 records: stalled\nat 5 | of 9"
	p2.Results = []benchresult.Result{res("plain-copy", "limit", 800_000, 95), pl2, ks}
	p2.Restore = &restore{Kills: []kill{
		{Keys: 1_000_000, Rep: 1, KillToFirstOutputMs: 2300, StartToRestoredMs: 1150, RestoreTookMs: 1100},
		{Keys: 1_000_000, Rep: 2, KillToFirstOutputMs: 2250, StartToRestoredMs: 1200, RestoreTookMs: 1140},
		{Keys: 1_000_000, Rep: 3, KillToFirstOutputMs: 2400, StartToRestoredMs: 1100, RestoreTookMs: 1090},
	}, ReadMs: 336}
	return []point{p1, p2}
}

func TestRowsRatioAndBytesPerKey(t *testing.T) {
	rs := rows(keysPoints())
	if len(rs) != 6 {
		t.Fatalf("%d rows, want 6", len(rs))
	}
	want := []struct {
		name  string
		ratio float64
		bpk   float64 // -1: none
	}{
		{"plain-copy", 1, -1},
		{"pipeline-keyed-sum-exactly_once-1s", 0.4, -1},
		{"kstreams-keyed-sum-exactly_once_v2-1s", 0.1, -1},
		{"plain-copy", 1, 5 * (1 << 20) / 854_665.0}, // 6.13 bytes per key
		// 500 MiB more for 854,665 more keys: 613.4 bytes per key.
		{"pipeline-keyed-sum-exactly_once-1s", 0.25, 500 * (1 << 20) / 854_665.0},
		{"kstreams-keyed-sum-exactly_once_v2-1s", 0, -1}, // failed
	}
	for i, w := range want {
		r := rs[i]
		if r.R.Name != w.name || math.Abs(r.Ratio-w.ratio) > 1e-9 {
			t.Errorf("row %d: %s ratio %v, want %s %v", i, r.R.Name, r.Ratio, w.name, w.ratio)
		}
		if w.bpk < 0 && r.HaveBytesPerK || w.bpk >= 0 && (!r.HaveBytesPerK || math.Abs(r.BytesPerKey-w.bpk) > 1e-6) {
			t.Errorf("row %d (%s): bytes per key %v (%v), want %v", i, w.name, r.BytesPerKey, r.HaveBytesPerK, w.bpk)
		}
	}
	if math.Abs(rs[4].BytesPerKey-613.44) > 0.01 {
		t.Errorf("pipeline bytes per key %.2f, want 613.44", rs[4].BytesPerKey)
	}
}

func TestMarkdown(t *testing.T) {
	var b bytes.Buffer
	writeReport(&b, curves["keys"], keysPoints(), "2 CPUs (test)", "x.png")
	md := b.String()
	for _, want := range []string{
		"| keys | records | contender | records/s | MB/s | × plain copy | p99 ms | CPU s / M records | peak RSS MiB | keys held | RSS bytes / key | state bytes / key | checkpoints | checkpoint size (mean) | checkpoint ms (mean) |",
		"| 10k | 1,000,000 | `plain-copy` | 1,000,000 | 104.0 | 1.00× | 1100 | 3.2 | 90 | 10,000 | — | — | — | — | — |",
		"| 10k | 1,000,000 | `pipeline-keyed-sum-exactly_once-1s` | 400,000 | 41.6 | 0.40× | 1100 | 3.2 | 300 | 10,000 | — | 48 | 4 | 1.5 MiB | 120 |",
		"| 1M | 1,000,000 | `pipeline-keyed-sum-exactly_once-1s` | 200,000 | 20.8 | 0.25× | 1100 | 3.2 | 800 | 864,665 | 613 | 52 | 9 | 38.1 MiB | 800 |",
		"| 1M | 1,000,000 | `kstreams-keyed-sum-exactly_once_v2-1s` | failed [1] | — |",
		"[1] kstreams-keyed-sum-exactly_once_v2-1s at 1M: drain 2000000 records: stalled at 5 / of 9",
		"| 1,000,000 | 3 | 2300 [2250–2400] | 1150 [1100–1200] | 1100 [1090–1140] | 336 |",
		"| 1M | 2,000,000 | 864,665 | 8 | flat | 105 | — |",
		"| 10k | 1,000,000 | 10,000 | 8 | flat | 104 | 1.20 |",
		"![distinct keys](x.png)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks\n%s\n---\n%s", want, md)
		}
	}
	// The partitions curve has no key columns and no restore table.
	b.Reset()
	ps := keysPoints()
	for i := range ps {
		ps[i].Curve = "partitions"
	}
	markdown(&b, curves["partitions"], ps)
	if s := b.String(); strings.Contains(s, "keys held") || strings.Contains(s, "SIGKILL") || !strings.HasPrefix(s, "| partitions | records |") {
		t.Errorf("partitions table:\n%s", s)
	}
}

func TestCSV(t *testing.T) {
	var b bytes.Buffer
	if err := writeCSV(&b, keysPoints()); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 7 {
		t.Fatalf("%d lines, want a header and 6", len(recs))
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	pl := recs[5] // pipeline at 1M
	if pl[col["label"]] != "1M" || pl[col["records_per_sec"]] != "200000" || pl[col["ratio"]] != "0.25" ||
		pl[col["restore_ms"]] != "2300" || !strings.HasPrefix(pl[col["bytes_per_key"]], "613.4") {
		t.Errorf("pipeline at 1M: %q", pl)
	}
	if ks := recs[6]; ks[col["records_per_sec"]] != "0" || ks[col["restore_ms"]] != "" {
		t.Errorf("failed row: %q", ks)
	}
	if pc := recs[4]; pc[col["restore_ms"]] != "" {
		t.Errorf("the plain copy has no restore: %q", pc)
	}
}

func TestParseRecovery(t *testing.T) {
	// bench/cmd/recovery's lines (2026-12-02-recovery.jsonl).
	in := `{"keys":100000,"rep":1,"kill_to_first_output_ms":1273.1,"kill_to_start_ms":21.5,"start_to_restored_ms":234,"restore_took_ms":216,"state_keys":100000,"restored_to_first_commit_ms":1020,"restored_to_first_output_ms":1023,"loadavg":"1.0"}
{"keys":100000,"rep":2,"kill_to_first_output_ms":1203,"kill_to_start_ms":10,"start_to_restored_ms":157,"restore_took_ms":139,"state_keys":100000,"restored_to_first_commit_ms":1018,"restored_to_first_output_ms":1020,"loadavg":"1.1"}
{"keys":100000,"records":150762,"bytes":7012345,"ms":60.5}
`
	kills, ms, bytes, err := parseRecovery([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(kills) != 2 || kills[0].KillToFirstOutputMs != 1273.1 || kills[1].RestoreTookMs != 139 || kills[0].StateKeys != 100000 || ms != 60.5 || bytes != 7012345 {
		t.Errorf("kills %+v, read %v ms %d bytes", kills, ms, bytes)
	}
}

func TestDefaultContenders(t *testing.T) {
	if got := strings.Join(defaultContenders("/nonexistent/ks.jar", "/nonexistent/flink.jar", false), ","); got != "plain-copy,pipeline-keyed-sum-exactly_once-1s" {
		t.Errorf("without jars: %s", got)
	}
	if got := strings.Join(defaultContenders("/nonexistent/ks.jar", "/nonexistent/flink.jar", true), ","); got != "plain-copy,pipeline-keyed-sum-exactly_once-1s,kstreams-keyed-sum-exactly_once_v2-1s,flink-keyed-sum-exactly_once-1s" {
		t.Errorf("with peers: %s", got)
	}
	if got := strings.Join(defaultContenders("curves_test.go", "/nonexistent/flink.jar", false), ","); got != "plain-copy,pipeline-keyed-sum-exactly_once-1s,kstreams-keyed-sum-exactly_once_v2-1s" {
		t.Errorf("with a Kafka Streams jar: %s", got)
	}
}

func TestThousandsAndSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -20000: "-20,000"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %s", n, got)
		}
	}
	for b, want := range map[float64]string{512: "512 B", 2048: "2.0 KiB", 3.5 * (1 << 20): "3.5 MiB"} {
		if got := size(b); got != want {
			t.Errorf("size(%v) = %s", b, got)
		}
	}
}
