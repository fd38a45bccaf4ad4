// Command report turns the runner's raw JSON lines into the results
// markdown (machine, versions, settings, the table, ratios to the limit and
// to Kafka Streams, the targets) and a CSV for the chart.
//
//	go run ./bench/cmd/report -raw bench/results/raw.jsonl -md bench/results/2026-12-02.md -csv chart.csv
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/eoflow/pipeline/bench/benchresult"
)

// result is one contender's line in the raw results.
type result = benchresult.Result

func main() {
	raw := flag.String("raw", "", "runner output (JSON lines)")
	md := flag.String("md", "", "markdown file to write")
	csvPath := flag.String("csv", "", "CSV for the chart (optional)")
	chart := flag.String("chart", "", "PNG chart file name to link from the markdown (optional)")
	title := flag.String("title", "Benchmark", "heading of the markdown")
	note := flag.String("note", "", "a paragraph under the heading, e.g. that this is a quick run")
	settings := flag.String("settings", "", "settings line (workload, probe) written under Settings")
	pipelineBin := flag.String("pipeline", "bin/pipeline", "pipeline binary, for its version")
	flag.Parse()
	rs, err := load(*raw)
	if err != nil {
		log.Fatalf("report: %v", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n", *title)
	if *note != "" {
		fmt.Fprintf(&b, "%s\n\n", *note)
	}
	machine(&b, *pipelineBin, rs)
	fmt.Fprintf(&b, "\n## Settings\n\n%s\n", *settings)
	if !onlyJoins(rs) { // bench/join.sh's rounds: their own table
		table(&b, rs)
		targets(&b, rs)
	}
	joins(&b, rs)
	if *chart != "" {
		fmt.Fprintf(&b, "\n![throughput and p99 latency](%s)\n", *chart)
	}
	if err := os.WriteFile(*md, []byte(b.String()), 0o644); err != nil {
		log.Fatal(err)
	}
	if *csvPath != "" {
		var c strings.Builder
		c.WriteString("name,records_per_sec,p99_ms\n")
		for _, r := range rs {
			if r.Error == "" {
				fmt.Fprintf(&c, "%s,%.0f,%.0f\n", r.Name, r.RecordsPerSec, r.LatencyP99ms)
			}
		}
		if err := os.WriteFile(*csvPath, []byte(c.String()), 0o644); err != nil {
			log.Fatal(err)
		}
	}
}

func load(path string) ([]result, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var rs []result
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var r result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		rs = append(rs, r)
	}
	return rs, sc.Err()
}

func machine(b *strings.Builder, pipelineBin string, rs []result) {
	model := "unknown"
	if ci, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(ci), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	mem := "unknown"
	if mi, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(mi), "\n") {
			if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
				var kb int64
				fmt.Sscan(strings.TrimSpace(v), &kb)
				mem = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
			}
		}
	}
	java := "unknown"
	if out, err := exec.Command("java", "-version").CombinedOutput(); err == nil {
		java = strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0]
	}
	pv := "unknown"
	if out, err := exec.Command(pipelineBin, "version").CombinedOutput(); err == nil {
		pv = strings.TrimSpace(string(out))
	}
	host, _ := os.Hostname()
	fmt.Fprintf(b, "## Machine and versions\n\n")
	fmt.Fprintf(b, "| | |\n|---|---|\n")
	fmt.Fprintf(b, "| date | %s |\n", time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(b, "| host | %s |\n", host)
	fmt.Fprintf(b, "| CPUs (nproc) | %d |\n", runtime.NumCPU())
	fmt.Fprintf(b, "| CPU model | %s |\n", model)
	fmt.Fprintf(b, "| memory | %s |\n", mem)
	fmt.Fprintf(b, "| Kafka broker, kafka-tools, Kafka Streams | 4.1.1 (single KRaft node on the same machine) |\n")
	if find(rs, func(r result) bool { return r.Kind == "flink" }) != nil {
		// bench/peers/flink/pom.xml; the connector brings its own Kafka client
		fmt.Fprintf(b, "| Apache Flink (peer) | 2.2.1, local MiniCluster; flink-connector-kafka 5.0.0-2.2 with kafka-clients 4.2.0 |\n")
	}
	fmt.Fprintf(b, "| Java | %s |\n", java)
	fmt.Fprintf(b, "| Go (runner, plain copy) | %s |\n", runtime.Version())
	fmt.Fprintf(b, "| pipeline | %s |\n", pv)
}

func table(b *strings.Builder, rs []result) {
	limit := find(rs, func(r result) bool { return r.Kind == "limit" })
	fmt.Fprintf(b, "\n## Results\n\n")
	fmt.Fprintf(b, "| contender | job | guarantee | interval | records | records/s | vs limit | vs Kafka Streams | p50 ms | p99 ms | CPU s / M records | peak RSS MiB |\n")
	fmt.Fprintf(b, "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rs {
		if r.Error != "" {
			fmt.Fprintf(b, "| %s | %s | %s | %s | | failed: %s | | | | | | |\n", r.Name, r.Job, r.Guarantee, dash(r.Interval), strings.ReplaceAll(r.Error, "|", "/"))
			continue
		}
		vsLimit, vsKS := "—", "—"
		if limit != nil && limit.RecordsPerSec > 0 {
			vsLimit = fmt.Sprintf("%.2f×", r.RecordsPerSec/limit.RecordsPerSec)
		}
		if ks := kstreamsPeer(rs, r); ks != nil && ks.RecordsPerSec > 0 {
			vsKS = fmt.Sprintf("%.2f×", r.RecordsPerSec/ks.RecordsPerSec)
		}
		p50, p99 := "—", "—"
		if r.LatencySamples > 0 {
			p50, p99 = fmt.Sprintf("%.0f", r.LatencyP50ms), fmt.Sprintf("%.0f", r.LatencyP99ms)
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %d | %.0f | %s | %s | %s | %s | %.1f | %.0f |\n",
			r.Name, r.Job, r.Guarantee, dash(r.Interval), r.Records, r.RecordsPerSec, vsLimit, vsKS, p50, p99, r.CPUSecPerMillion, r.PeakRSSMiB)
	}
	fmt.Fprintf(b, "\nWindowed: per key and 1 s tumbling window of event time (the records' ts, spread evenly over the run, in order per partition; a record per partition 10 s later closes the last windows), count and sum, one output per window when it closes, exactly once; records/s is input records over the time from the first output to the last; p50/p99 are from a window's end (wall clock: the probe's ts is the time of writing) to its result being visible to a read_committed reader.\n")
	fmt.Fprintf(b, "\n\"vs Kafka Streams\" compares a keyed (windowed) sum with the Kafka Streams keyed (windowed) sum of the same interval under the matching guarantee (`exactly_once` with `exactly_once_v2`, `at_least_once` with `at_least_once`); `at_most_once` has no Kafka Streams counterpart and is compared with its `at_least_once` 1s run.\n")
}

// kstreamsPeer is the Kafka Streams run r is compared with.
func kstreamsPeer(rs []result, r result) *result {
	if r.Job != "keyed-sum" && r.Job != "windowed" && r.Job != "join-enrich" {
		return nil // Kafka Streams runs the keyed and windowed sums and the join only
	}
	g, iv := r.Guarantee, r.Interval
	switch g {
	case "exactly_once", "exactly_once_v2":
		g = "exactly_once_v2"
	case "at_least_once":
	case "at_most_once":
		g, iv = "at_least_once", "1s"
	default:
		return nil
	}
	if iv == "" || iv == "-" {
		return nil
	}
	return find(rs, func(x result) bool {
		return x.Kind == "kstreams" && x.Job == r.Job && x.Guarantee == g && x.Interval == iv
	})
}

func targets(b *strings.Builder, rs []result) {
	fmt.Fprintf(b, "\n## Targets (issue 7; reported, never asserted)\n\n")
	limit := find(rs, func(r result) bool { return r.Kind == "limit" })
	for _, iv := range []string{"1s", "100ms"} {
		ours := find(rs, func(r result) bool {
			return r.Kind == "pipeline" && r.Job == "keyed-sum" && r.Guarantee == "exactly_once" && r.Interval == iv
		})
		if ours == nil || ours.Error != "" {
			continue
		}
		ks := kstreamsPeer(rs, *ours)
		if ks != nil && ks.Error == "" && ks.RecordsPerSec > 0 {
			x := ours.RecordsPerSec / ks.RecordsPerSec
			fmt.Fprintf(b, "- keyed sum, `exactly_once`, %s: %.2f× Kafka Streams `exactly_once_v2` (target ≥ 2×): %s\n", iv, x, met(x >= 2))
		}
		if limit != nil && limit.Error == "" && limit.RecordsPerSec > 0 {
			x := ours.RecordsPerSec / limit.RecordsPerSec
			fmt.Fprintf(b, "- keyed sum, `exactly_once`, %s: %.2f× the plain copy (target ≥ 0.7×): %s\n", iv, x, met(x >= 0.7))
		}
		d, _ := time.ParseDuration(iv)
		bound := float64(d.Milliseconds() + 100)
		fmt.Fprintf(b, "- keyed sum, `exactly_once`, %s: p99 %.0f ms (target ≤ %.0f ms): %s\n", iv, ours.LatencyP99ms, bound, met(ours.LatencyP99ms <= bound))
	}
	// Issue 13: the windowed sum at least 2x Kafka Streams and ahead of Flink.
	win := find(rs, func(r result) bool { return r.Kind == "pipeline" && r.Job == "windowed" && r.Error == "" })
	if win != nil {
		if ks := kstreamsPeer(rs, *win); ks != nil && ks.Error == "" && ks.RecordsPerSec > 0 {
			x := win.RecordsPerSec / ks.RecordsPerSec
			fmt.Fprintf(b, "- windowed sum, `exactly_once`, 1s: %.2f× Kafka Streams `exactly_once_v2` (target ≥ 2×): %s\n", x, met(x >= 2))
		}
		if fl := find(rs, func(r result) bool { return r.Kind == "flink" && r.Job == "windowed" && r.Error == "" }); fl != nil && fl.RecordsPerSec > 0 {
			x := win.RecordsPerSec / fl.RecordsPerSec
			fmt.Fprintf(b, "- windowed sum, `exactly_once`, 1s: %.2f× Flink (target > 1×): %s; CPU %.1f vs %.1f s per million records, p99 %.0f vs %.0f ms\n",
				x, met(x > 1), win.CPUSecPerMillion, fl.CPUSecPerMillion, win.LatencyP99ms, fl.LatencyP99ms)
		}
	}
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "**not met**"
}

func find(rs []result, f func(result) bool) *result {
	for i := range rs {
		if f(rs[i]) {
			return &rs[i]
		}
	}
	return nil
}

func dash(s string) string {
	if s == "" || s == "-" {
		return "—"
	}
	return s
}
