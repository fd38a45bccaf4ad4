package main

import (
	"cmp"
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/eoflow/pipeline/bench/benchresult"
)

// curve is one of the three scaling curves of issue 15: what varies from
// point to point, and its default points.
type curve struct {
	Name   string
	Title  string
	Column string // the table's first column
	Points []int
}

var curves = map[string]curve{
	"keys":       {"keys", "distinct keys", "keys", []int{10_000, 100_000, 1_000_000, 10_000_000}},
	"partitions": {"partitions", "partitions", "partitions", []int{8, 64, 256}},
	"size":       {"size", "record size", "record bytes", []int{100, 1_000, 10_000}},
}

// point is one point of a curve: the input the workload wrote, what the
// runner measured on it per contender, and (keys curve) the restores
// after SIGKILL. One JSON line each in <out>.jsonl.
type point struct {
	Curve      string `json:"curve"`
	Point      int    `json:"point"`
	Keys       int    `json:"keys"`
	Partitions int    `json:"partitions"`
	Size       int    `json:"size"`
	Shape      string `json:"shape"`
	// Records, DistinctKeys and Bytes (keys and values) of the input as
	// the workload wrote it (its -stats).
	Records      int                  `json:"records"`
	DistinctKeys int                  `json:"distinct_keys"`
	Bytes        int64                `json:"bytes"`
	Results      []benchresult.Result `json:"results"`
	Restore      *restore             `json:"restore,omitempty"`
	Started      string               `json:"started"`
	Commit       string               `json:"commit,omitempty"`
	Load         string               `json:"loadavg,omitempty"`
}

// restore is what bench/cmd/recovery measured for one state size: one
// entry per SIGKILL, and the plain read of the state topic.
type restore struct {
	Kills     []kill  `json:"kills"`
	ReadMs    float64 `json:"state_read_ms"`
	ReadBytes int64   `json:"state_read_bytes"`
	Error     string  `json:"error,omitempty"`
}

// kill is the part of bench/cmd/recovery's line per kill the table uses.
type kill struct {
	Keys                int     `json:"keys"`
	Rep                 int     `json:"rep"`
	KillToFirstOutputMs float64 `json:"kill_to_first_output_ms"`
	StartToRestoredMs   float64 `json:"start_to_restored_ms"`
	RestoreTookMs       float64 `json:"restore_took_ms"`
	StateKeys           int64   `json:"state_keys"`
}

// recordsFor is the number of records of a point: n, except that the
// keys curve writes at least twice as many records as keys (so that about
// 86% of the keys occur, uniformly drawn), and the size curve at most
// maxBytes of records (10 KB records at n = 5M would be 50 GB).
func recordsFor(c string, p, n int, maxBytes int64) int {
	switch c {
	case "keys":
		return max(n, 2*p)
	case "size":
		return int(min(int64(n), max(1, maxBytes/int64(p))))
	}
	return n
}

// label is how a point is written: 10k, 1M; 8; 100 B, 10 KB.
func label(c string, p int) string {
	switch c {
	case "keys":
		switch {
		case p >= 1_000_000 && p%1_000_000 == 0:
			return strconv.Itoa(p/1_000_000) + "M"
		case p >= 1_000 && p%1_000 == 0:
			return strconv.Itoa(p/1_000) + "k"
		}
	case "size":
		if p >= 1_000 && p%1_000 == 0 {
			return strconv.Itoa(p/1_000) + " KB"
		}
		return strconv.Itoa(p) + " B"
	}
	return strconv.Itoa(p)
}

// row is one line of the table: one contender at one point, with what is
// derived from the other rows.
type row struct {
	P *point
	R benchresult.Result
	// Ratio is records/s over the plain copy's at the same point (0: no
	// plain copy there).
	Ratio float64
	// BytesPerKey (keys curve): peak RSS above the same contender's at the
	// curve's smallest point, over the keys added since; ok is false at
	// that point itself or without one.
	BytesPerKey   float64
	HaveBytesPerK bool
}

// restored is the job bench/cmd/recovery kills and restores: the keyed
// sum, exactly_once, 1 s checkpoints.
const restored = "pipeline-keyed-sum-exactly_once-1s"

func failed(r benchresult.Result) bool { return r.Error != "" || r.RecordsPerSec <= 0 }

// rows derives the table from the points, in their order, contenders in
// the order the runner ran them.
func rows(ps []point) []row {
	// The base of bytes per key: per contender, the successful point with
	// the fewest distinct keys.
	base := map[string]*point{}
	baseRSS := map[string]float64{}
	for i := range ps {
		p := &ps[i]
		if p.Curve != "keys" {
			continue
		}
		for _, r := range p.Results {
			if failed(r) {
				continue
			}
			if b, ok := base[r.Name]; !ok || p.DistinctKeys < b.DistinctKeys {
				base[r.Name], baseRSS[r.Name] = p, r.PeakRSSMiB
			}
		}
	}
	var out []row
	for i := range ps {
		p := &ps[i]
		var limit float64
		for _, r := range p.Results {
			if r.Kind == "limit" && !failed(r) {
				limit = r.RecordsPerSec
			}
		}
		for _, r := range p.Results {
			w := row{P: p, R: r}
			if limit > 0 && !failed(r) {
				w.Ratio = r.RecordsPerSec / limit
			}
			if b, ok := base[r.Name]; ok && !failed(r) && p.DistinctKeys > b.DistinctKeys {
				w.BytesPerKey = (r.PeakRSSMiB - baseRSS[r.Name]) * (1 << 20) / float64(p.DistinctKeys-b.DistinctKeys)
				w.HaveBytesPerK = true
			}
			out = append(out, w)
		}
	}
	return out
}

// markdown writes the curve's tables: one row per point and contender,
// and for the keys curve the restores after SIGKILL.
func markdown(w io.Writer, c curve, ps []point) {
	keys := c.Name == "keys"
	hdr := []string{c.Column, "records", "contender", "records/s", "MB/s", "× plain copy", "p99 ms", "CPU s / M records", "peak RSS MiB"}
	if keys {
		hdr = append(hdr, "keys held", "RSS bytes / key", "state bytes / key")
	}
	hdr = append(hdr, "checkpoints", "checkpoint size (mean)", "checkpoint ms (mean)")
	fmt.Fprintf(w, "| %s |\n", strings.Join(hdr, " | "))
	align := make([]string, len(hdr))
	for i := range align {
		align[i] = "---:"
	}
	align[2] = "---"
	fmt.Fprintf(w, "|%s|\n", strings.Join(align, "|"))
	var errs []string
	for _, x := range rows(ps) {
		r := x.R
		cells := []string{label(x.P.Curve, x.P.Point), thousands(r.Records), "`" + r.Name + "`"}
		if failed(r) {
			errs = append(errs, fmt.Sprintf("%s at %s: %s", r.Name, label(x.P.Curve, x.P.Point), oneLine(cmp.Or(r.Error, "no throughput"))))
			cells = append(cells, fmt.Sprintf("failed [%d]", len(errs)))
			for len(cells) < len(hdr) {
				cells = append(cells, "—")
			}
			fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
			continue
		}
		cells = append(cells, thousands(int64(r.RecordsPerSec+0.5)), fmt.Sprintf("%.1f", r.MBPerSec), ratio(x.Ratio),
			dash(r.LatencyP99ms, "%.0f"), fmt.Sprintf("%.1f", r.CPUSecPerMillion), fmt.Sprintf("%.0f", r.PeakRSSMiB))
		if keys {
			perKey := "—"
			if x.HaveBytesPerK {
				perKey = fmt.Sprintf("%.0f", x.BytesPerKey)
			}
			state := "—"
			if r.StateKeys > 0 {
				state = fmt.Sprintf("%.0f", float64(r.StateBytes)/float64(r.StateKeys))
			}
			cells = append(cells, thousands(int64(x.P.DistinctKeys)), perKey, state)
		}
		if r.Kind == "pipeline" && r.Checkpoints > 0 {
			cells = append(cells, strconv.FormatInt(r.Checkpoints, 10), size(r.CheckpointMeanBytes), fmt.Sprintf("%.0f", r.CheckpointMeanMs))
		} else {
			cells = append(cells, "—", "—", "—")
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
	for i, e := range errs {
		fmt.Fprintf(w, "\n[%d] %s\n", i+1, e)
	}
	if !keys {
		return
	}
	var rs []*point
	for i := range ps {
		if ps[i].Restore != nil {
			rs = append(rs, &ps[i])
		}
	}
	if len(rs) == 0 {
		return
	}
	fmt.Fprintf(w, "\n### Restore after SIGKILL (`%s`, `bench/cmd/recovery`)\n\n", restored)
	fmt.Fprintf(w, "| keys of state | kills | SIGKILL → first new committed output, ms | start → restored, ms | restore `took`, ms | plain read of the state topic, ms |\n")
	fmt.Fprintf(w, "|---:|---:|---:|---:|---:|---:|\n")
	for _, p := range rs {
		rr := p.Restore
		if rr.Error != "" {
			fmt.Fprintf(w, "| %s | failed: %s | | | | |\n", thousands(int64(p.Point)), oneLine(rr.Error))
			continue
		}
		col := func(f func(kill) float64) string {
			v := make([]float64, len(rr.Kills))
			for i, k := range rr.Kills {
				v[i] = f(k)
			}
			return medRange(v)
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %.0f |\n", thousands(int64(p.Point)), len(rr.Kills),
			col(func(k kill) float64 { return k.KillToFirstOutputMs }),
			col(func(k kill) float64 { return k.StartToRestoredMs }),
			col(func(k kill) float64 { return k.RestoreTookMs }),
			rr.ReadMs)
	}
	fmt.Fprintf(w, "\nMedian [min–max] over the kills. Each size on fresh topics: as many records as keys, one per key, then input at the recovery rate while killing (see bench/README.md#recovery).\n")
}

// writeCSV writes the chart's data: one line per point and contender.
func writeCSV(w io.Writer, ps []point) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"curve", "point", "label", "contender", "records_per_sec", "mb_per_sec", "ratio", "p99_ms", "cpu_sec_per_million", "peak_rss_mib", "bytes_per_key", "checkpoint_mean_bytes", "checkpoint_mean_ms", "restore_ms"})
	for _, x := range rows(ps) {
		r := x.R
		f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
		bpk, rest := "", ""
		if x.HaveBytesPerK {
			bpk = f(x.BytesPerKey)
		}
		if x.P.Restore != nil && r.Name == restored && len(x.P.Restore.Kills) > 0 {
			v := make([]float64, len(x.P.Restore.Kills))
			for i, k := range x.P.Restore.Kills {
				v[i] = k.KillToFirstOutputMs
			}
			rest = f(median(v))
		}
		if failed(r) {
			r = benchresult.Result{Name: r.Name}
		}
		_ = cw.Write([]string{x.P.Curve, strconv.Itoa(x.P.Point), label(x.P.Curve, x.P.Point), r.Name,
			f(r.RecordsPerSec), f(r.MBPerSec), f(x.Ratio), f(r.LatencyP99ms), f(r.CPUSecPerMillion), f(r.PeakRSSMiB),
			bpk, f(r.CheckpointMeanBytes), f(r.CheckpointMeanMs), rest})
	}
	cw.Flush()
	return cw.Error()
}

func ratio(v float64) string {
	if v == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", v)
}

func dash(v float64, format string) string {
	if v == 0 {
		return "—"
	}
	return fmt.Sprintf(format, v)
}

// thousands writes n with commas: 1,234,567.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// size writes bytes in B, KiB or MiB.
func size(b float64) string {
	switch {
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", b/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", b/(1<<10))
	}
	return fmt.Sprintf("%.0f B", b)
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

// medRange is "median [min–max]", as bench/cmd/recovery writes it.
func medRange(v []float64) string {
	if len(v) == 0 {
		return "—"
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return fmt.Sprintf("%.0f [%.0f–%.0f]", median(s), s[0], s[len(s)-1])
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	s = strings.ReplaceAll(s, "|", "/")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// writeReport writes the whole markdown file of a curve: what ran, on
// what input, the table, and what the columns mean.
// chart is the chart's file name next to it ("": none).
func writeReport(w io.Writer, c curve, ps []point, machine, chart string) {
	fmt.Fprintf(w, "# Scaling curve: %s (issue 15)\n\n", c.Title)
	var commits []string
	for _, p := range ps {
		if p.Commit != "" && !slices.Contains(commits, p.Commit) {
			commits = append(commits, p.Commit)
		}
	}
	fmt.Fprintf(w, "`bench/curves.sh %s` (`bench/cmd/curves`), one run per contender and point, contenders one after another on one machine with one Kafka broker: %s.", c.Name, machine)
	if len(ps) > 0 {
		fmt.Fprintf(w, " Points started %s to %s", ps[0].Started, ps[len(ps)-1].Started)
		if len(commits) > 0 {
			fmt.Fprintf(w, ", build %s", strings.Join(commits, ", "))
		}
		fmt.Fprintf(w, ".")
	}
	fmt.Fprintf(w, " Method and columns: [bench/README.md#scaling-curves](../README.md#scaling-curves).\n\n")

	fmt.Fprintf(w, "## Inputs\n\n")
	fmt.Fprintf(w, "| %s | records | distinct keys | partitions | shape | bytes / record (mean) | 1-min load at start |\n|---:|---:|---:|---:|---|---:|---:|\n", c.Column)
	for _, p := range ps {
		per := 0.0
		if p.Records > 0 {
			per = float64(p.Bytes) / float64(p.Records)
		}
		load := strings.Fields(p.Load)
		l := "—"
		if len(load) > 0 {
			l = load[0]
		}
		fmt.Fprintf(w, "| %s | %s | %s | %d | %s | %.0f | %s |\n", label(p.Curve, p.Point), thousands(int64(p.Records)),
			thousands(int64(p.DistinctKeys)), p.Partitions, p.Shape, per, l)
	}
	fmt.Fprintf(w, "\n## Results\n\n")
	markdown(w, c, ps)
	fmt.Fprintf(w, "\n%s", columnNotes(c))
	if chart != "" {
		fmt.Fprintf(w, "\n![%s](%s)\n", c.Title, chart)
	}
}

// columnNotes is the short legend under a curve's table.
func columnNotes(c curve) string {
	s := "records: drained by the contender (the input plus the latency probes of the contenders before it). " +
		"records/s and MB/s: over the drain, first output written to last output visible to a read_committed reader; MB/s counts the keys and values of the records drained (10^6 bytes). " +
		"× plain copy: records/s over the plain copy's at the same point (MB/s gives about the same ratio; later contenders also drain the probe records of the earlier ones). " +
		"p99 ms: end-to-end latency of the probe records (same shape as the input) after the drain. " +
		"CPU s / M records and peak RSS: the contender's process (utime+stime, VmHWM) when its last drained output became visible, start-up included. " +
		"checkpoints, checkpoint size and ms: the pipeline's /metrics at the same moment (count, mean of pipeline_checkpoint_size_bytes: state changes and the checkpoint record, mean of pipeline_checkpoint_duration_seconds: trigger to commit)."
	if c.Name == "keys" {
		s += " keys held: distinct keys in the input (about 86% of the keys when records = 2 × keys). " +
			"RSS bytes / key: the contender's peak RSS above its own at the smallest point, over the keys held above that point's (so it includes whatever else grows with keys: buffers, GC headroom). " +
			"state bytes / key: the pipeline's own count of key and value bytes in state (pipeline_state_bytes / pipeline_state_keys)."
	}
	if c.Name == "partitions" {
		s += " The input and every output topic have the point's number of partitions."
	}
	if c.Name == "size" {
		s += " The records are of the wide shape (bench/shape): key, amount and ts among many unused fields (strings, numbers, booleans, nulls, nested objects, arrays)."
	}
	return s + "\n"
}
