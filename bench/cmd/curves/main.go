// Command curves draws one scaling curve of issue 15: the same contenders
// at several points of one dimension, each point on an input topic of its
// own.
//
//   - keys: distinct keys 10k, 100k, 1M, 10M (max(n, 2×keys) records, flat
//     100-byte records, 8 partitions), plus the pipeline's restore after
//     SIGKILL with that many keys of state (bench/cmd/recovery);
//   - partitions: 8, 64, 256 partitions of the input and of each output
//     (n records, 100k keys);
//   - size: records of 100 B, 1 KB, 10 KB of the wide shape (bench/shape:
//     many fields, the job uses three; min(n, 2 GB / size) records).
//
// For each point it fills the input (bench-workload), runs the contenders
// one after another (bench-runner), for the keys curve runs bench-recovery,
// deletes the input, and appends the point to <out>.jsonl; then it writes
// <out>.md (the table), <out>.csv and <out>.png (bench/chart.py --curve).
// -render rewrites those three from <out>.jsonl alone.
//
//	go run ./bench/cmd/curves -curve keys -points 10000,100000 -n 200000
//
// bench/curves.sh builds everything and runs it; see bench/README.md.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/bench/benchresult"
)

type options struct {
	curve, points, contenders, brokers, out, run, bin string
	kstreamsJar, flinkJar, kafkaLibs, jvmHeap, chart  string
	n, keys, partitions, probe, probeRate             int
	recoveryReps, recoveryRate                        int
	maxBytes                                          int64
	peers, render, keep, appendOut                    bool
}

func main() {
	var o options
	flag.StringVar(&o.curve, "curve", "", "keys, partitions or size")
	flag.StringVar(&o.points, "points", "", "comma-separated points (default: the curve's: keys 10000,100000,1000000,10000000; partitions 8,64,256; size 100,1000,10000)")
	flag.StringVar(&o.contenders, "contenders", "", "comma-separated runner contenders (default: plain-copy,pipeline-keyed-sum-exactly_once-1s, and kstreams-keyed-sum-exactly_once_v2-1s and flink-keyed-sum-exactly_once-1s when their jar exists or -peers)")
	flag.BoolVar(&o.peers, "peers", false, "include the Kafka Streams and Flink contenders in the default list even without their jars")
	flag.StringVar(&o.brokers, "brokers", os.Getenv("KAFKA_BOOTSTRAP"), "seed brokers")
	flag.IntVar(&o.n, "n", 5_000_000, "records per point (keys curve: at least 2×keys; size curve: at most -max-bytes of records)")
	flag.IntVar(&o.keys, "keys", 100_000, "distinct keys of the partitions and size curves")
	flag.IntVar(&o.partitions, "partitions", 8, "partitions of the keys and size curves")
	flag.Int64Var(&o.maxBytes, "max-bytes", 2_000_000_000, "size curve: at most this many bytes of records per point")
	flag.IntVar(&o.probe, "probe", 10000, "latency probe records per contender")
	flag.IntVar(&o.probeRate, "probe-rate", 2000, "latency probe records per second")
	flag.IntVar(&o.recoveryReps, "recovery-reps", 3, "keys curve: SIGKILLs per point for the restore time (0: none)")
	flag.IntVar(&o.recoveryRate, "recovery-rate", 2000, "keys curve: input records/s while killing")
	flag.StringVar(&o.out, "out", "", "output path without extension (default bench/results/<date>-curve-<curve>)")
	flag.BoolVar(&o.appendOut, "append", false, "append the points to an existing <out>.jsonl (and draw them all) instead of starting it anew")
	flag.BoolVar(&o.render, "render", false, "only rewrite <out>.md, .csv and .png from <out>.jsonl")
	flag.StringVar(&o.run, "run", "curves-"+time.Now().UTC().Format("20060102T150405"), "run id: prefix of every topic (inputs <run>-<curve>-<point>-in, contenders bench-<run>-..., restores recovery-<run>-...)")
	flag.StringVar(&o.bin, "bin", "bin", "directory of bench-workload, bench-runner, bench-recovery (and the runner's pipeline and bench-plaincopy)")
	flag.StringVar(&o.kstreamsJar, "kstreams-jar", "bench/peers/kstreams/target/kstreams-bench.jar", "Kafka Streams peer jar")
	flag.StringVar(&o.flinkJar, "flink-jar", "bench/peers/flink/target/flink-bench.jar", "Apache Flink peer jar")
	flag.StringVar(&o.kafkaLibs, "kafka-libs", os.ExpandEnv("$HOME/.cache/eoflow-pipeline/kafka-4.1.1/libs"), "Kafka jars (for the runner)")
	flag.StringVar(&o.jvmHeap, "jvm-heap", "1g", "-Xmx of the Java contenders")
	flag.StringVar(&o.chart, "chart", "bench/chart.py", "chart script (python3, matplotlib); empty: no chart")
	flag.BoolVar(&o.keep, "keep", false, "keep the input topics")
	flag.Parse()
	log.SetFlags(log.LstdFlags)
	c, ok := curves[o.curve]
	if !ok {
		log.Fatalf("curves: -curve must be keys, partitions or size, not %q", o.curve)
	}
	if o.out == "" {
		o.out = fmt.Sprintf("bench/results/%s-curve-%s", time.Now().UTC().Format("2006-01-02"), c.Name)
	}
	if o.render {
		ps, err := load(o.out + ".jsonl")
		if err != nil {
			log.Fatal(err)
		}
		if err := render(o, c, ps); err != nil {
			log.Fatal(err)
		}
		return
	}
	points, err := parsePoints(o.points, c.Points)
	if err != nil {
		log.Fatalf("curves: -points: %v", err)
	}
	contenders := strings.Split(o.contenders, ",")
	if o.contenders == "" {
		contenders = defaultContenders(o.kstreamsJar, o.flinkJar, o.peers)
	}
	if o.brokers == "" {
		log.Fatal("curves: -brokers or KAFKA_BOOTSTRAP required")
	}
	if err := os.MkdirAll(filepath.Dir(o.out), 0o755); err != nil {
		log.Fatal(err)
	}
	var ps []point
	if o.appendOut {
		if ps, err = load(o.out + ".jsonl"); err != nil && !errors.Is(err, os.ErrNotExist) {
			log.Fatal(err)
		}
	} else if err := os.WriteFile(o.out+".jsonl", nil, 0o644); err != nil {
		log.Fatal(err)
	}
	tmp, err := os.MkdirTemp("", "bench-curves-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(o.brokers, ",")...))
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	commit := gitCommit()
	log.Printf("curves: %s at %v with %s", c.Name, points, strings.Join(contenders, ","))
	for _, p := range points {
		pt, err := measurePoint(o, c, p, contenders, tmp, adm)
		if err != nil {
			log.Fatalf("curves: %s %s: %v", c.Name, label(c.Name, p), err)
		}
		pt.Commit = commit
		ps = append(ps, pt)
		b, _ := json.Marshal(pt)
		f, err := os.OpenFile(o.out+".jsonl", os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			log.Fatal(err)
		}
		_, err = f.Write(append(b, '\n'))
		f.Close()
		if err != nil {
			log.Fatal(err)
		}
		// After every point: an interrupted run keeps what it measured.
		if err := render(o, c, ps); err != nil {
			log.Fatal(err)
		}
	}
	log.Printf("curves: wrote %s.md, .jsonl, .csv", o.out)
}

// measurePoint fills one point's input, runs the contenders on it and,
// for the keys curve, the restores.
func measurePoint(o options, c curve, p int, contenders []string, tmp string, adm *kadm.Client) (point, error) {
	load, _ := os.ReadFile("/proc/loadavg")
	pt := point{Curve: c.Name, Point: p, Keys: o.keys, Partitions: o.partitions, Size: 100, Shape: "flat",
		Started: time.Now().UTC().Format(time.RFC3339), Load: strings.TrimSpace(string(load))}
	switch c.Name {
	case "keys":
		pt.Keys = p
	case "partitions":
		pt.Partitions = p
	case "size":
		pt.Size, pt.Shape = p, "wide"
	}
	n := recordsFor(c.Name, p, o.n, o.maxBytes)
	tag := fmt.Sprintf("%s-%s-%d", o.run, c.Name, p)
	input := tag + "-in"
	stats := filepath.Join(tmp, tag+"-stats.json")
	log.Printf("curves: %s %s: %d records, %d keys, %d partitions, %s records of %d bytes into %s", c.Name, label(c.Name, p), n, pt.Keys, pt.Partitions, pt.Shape, pt.Size, input)
	if !o.keep {
		defer func() {
			if _, err := adm.DeleteTopics(context.Background(), input); err != nil {
				log.Printf("curves: deleting %s: %v", input, err)
			}
		}()
	}
	if err := run(filepath.Join(o.bin, "bench-workload"), "-brokers", o.brokers, "-topic", input, "-n", strconv.Itoa(n),
		"-keys", strconv.Itoa(pt.Keys), "-partitions", strconv.Itoa(pt.Partitions), "-size", strconv.Itoa(pt.Size),
		"-shape", pt.Shape, "-stats", stats); err != nil {
		return pt, fmt.Errorf("workload: %w", err)
	}
	var st struct {
		Records      int   `json:"records"`
		DistinctKeys int   `json:"distinct_keys"`
		Bytes        int64 `json:"bytes"`
	}
	if b, err := os.ReadFile(stats); err != nil {
		return pt, err
	} else if err := json.Unmarshal(b, &st); err != nil {
		return pt, fmt.Errorf("workload stats: %w", err)
	}
	pt.Records, pt.DistinctKeys, pt.Bytes = st.Records, st.DistinctKeys, st.Bytes

	raw := filepath.Join(tmp, tag+"-runner.jsonl")
	if err := run(filepath.Join(o.bin, "bench-runner"), "-brokers", o.brokers, "-input", input, "-run", tag, "-out", raw,
		"-contenders", strings.Join(contenders, ","), "-probe", strconv.Itoa(o.probe), "-probe-rate", strconv.Itoa(o.probeRate),
		"-keys", strconv.Itoa(pt.Keys), "-partitions", strconv.Itoa(pt.Partitions), "-shape", pt.Shape, "-size", strconv.Itoa(pt.Size),
		"-pipeline", filepath.Join(o.bin, "pipeline"), "-plaincopy", filepath.Join(o.bin, "bench-plaincopy"),
		"-kstreams-jar", o.kstreamsJar, "-flink-jar", o.flinkJar, "-kafka-libs", o.kafkaLibs, "-jvm-heap", o.jvmHeap); err != nil {
		return pt, fmt.Errorf("runner: %w", err)
	}
	rs, err := loadResults(raw)
	if err != nil {
		return pt, err
	}
	pt.Results = rs

	if c.Name == "keys" && o.recoveryReps > 0 && slices.Contains(contenders, restored) {
		pt.Restore = measureRestore(o, p, tmp, tag)
	}
	return pt, nil
}

// measureRestore runs bench-recovery for one state size; its failure is
// the point's restore error, not the run's.
func measureRestore(o options, keys int, tmp, tag string) *restore {
	out := filepath.Join(tmp, tag+"-recovery.jsonl")
	rr := &restore{}
	err := run(filepath.Join(o.bin, "bench-recovery"), "-brokers", o.brokers, "-pipeline", filepath.Join(o.bin, "pipeline"),
		"-keys", strconv.Itoa(keys), "-reps", strconv.Itoa(o.recoveryReps), "-rate", strconv.Itoa(o.recoveryRate),
		"-run", o.run, "-out", out)
	if err != nil {
		rr.Error = err.Error()
		log.Printf("curves: recovery at %d keys: %v", keys, err)
	}
	b, rerr := os.ReadFile(out)
	if rerr != nil {
		if rr.Error == "" {
			rr.Error = rerr.Error()
		}
		return rr
	}
	kills, readMs, readBytes, perr := parseRecovery(b)
	if perr != nil && rr.Error == "" {
		rr.Error = perr.Error()
	}
	rr.Kills, rr.ReadMs, rr.ReadBytes = kills, readMs, readBytes
	return rr
}

// parseRecovery reads bench/cmd/recovery's JSON lines: one per kill (with
// "rep"), one per plain read of the state topic (with "ms").
func parseRecovery(b []byte) (kills []kill, readMs float64, readBytes int64, err error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(line, &m); err != nil {
			return nil, 0, 0, fmt.Errorf("recovery output: %w", err)
		}
		if _, ok := m["rep"]; ok {
			var k kill
			if err := json.Unmarshal(line, &k); err != nil {
				return nil, 0, 0, err
			}
			kills = append(kills, k)
			continue
		}
		var sr struct {
			Bytes int64   `json:"bytes"`
			Ms    float64 `json:"ms"`
		}
		if err := json.Unmarshal(line, &sr); err != nil {
			return nil, 0, 0, err
		}
		readMs, readBytes = sr.Ms, sr.Bytes
	}
	return kills, readMs, readBytes, sc.Err()
}

func run(name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	return cmd.Run()
}

func loadResults(path string) ([]benchresult.Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rs []benchresult.Result
	d := json.NewDecoder(bytes.NewReader(b))
	for {
		var r benchresult.Result
		if err := d.Decode(&r); err == io.EOF {
			return rs, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		rs = append(rs, r)
	}
}

func load(path string) ([]point, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var ps []point
	d := json.NewDecoder(bytes.NewReader(b))
	for {
		var p point
		if err := d.Decode(&p); err == io.EOF {
			return ps, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		ps = append(ps, p)
	}
}

func parsePoints(s string, def []int) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return def, nil
	}
	var ps []int
	for _, f := range strings.Split(s, ",") {
		p, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || p <= 0 {
			return nil, fmt.Errorf("bad point %q", f)
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// defaultContenders: the plain copy and our keyed sum, and the peers' keyed
// sums (exactly once, 1 s) when their jars are built or peers is set.
func defaultContenders(kstreamsJar, flinkJar string, peers bool) []string {
	cs := []string{"plain-copy", restored}
	if _, err := os.Stat(kstreamsJar); err == nil || peers {
		cs = append(cs, "kstreams-keyed-sum-exactly_once_v2-1s")
	}
	if _, err := os.Stat(flinkJar); err == nil || peers {
		cs = append(cs, "flink-keyed-sum-exactly_once-1s")
	}
	return cs
}

func gitCommit() string {
	b, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return ""
	}
	c := strings.TrimSpace(string(b))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
		c += " (with uncommitted changes)"
	}
	return c
}

// render writes <out>.csv, <out>.png when a chart script is set and
// runs, and <out>.md.
func render(o options, c curve, ps []point) error {
	f, err := os.Create(o.out + ".csv")
	if err != nil {
		return err
	}
	if err := writeCSV(f, ps); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	chart := ""
	if o.chart != "" {
		title := fmt.Sprintf("%s: %s, %d CPUs", filepath.Base(o.out), c.Title, runtime.NumCPU())
		cmd := exec.Command("python3", o.chart, "--curve", c.Name, o.out+".csv", o.out+".png", title)
		if out, err := cmd.CombinedOutput(); err != nil {
			log.Printf("curves: no chart (%v): %s", err, strings.TrimSpace(string(out)))
		} else {
			chart = filepath.Base(o.out) + ".png"
		}
	}
	var b bytes.Buffer
	writeReport(&b, c, ps, machine(), chart)
	return os.WriteFile(o.out+".md", b.Bytes(), 0o644)
}

// machine describes this machine in one line.
func machine() string {
	model := ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kb); err == nil {
			mem = fmt.Sprintf(", %.1f GiB memory", float64(kb)/(1<<20))
		}
	}
	return fmt.Sprintf("%d CPUs (%s)%s", runtime.NumCPU(), model, mem)
}
