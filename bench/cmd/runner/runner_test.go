package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
)

func TestMain(m *testing.M) { kafkatest.Main(m) }

const defaultTestIdle = 60 * time.Second

func TestTsOf(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
	}{
		{`{"key":"k1","amount":3,"ts":1700000000123,"pad":"x"}`, 1700000000123},
		{`{"key":"k1","sum":9,"count":2,"ts": 42}`, 42},
		{`{"key":"k1"}`, -1},
	} {
		if got := tsOf([]byte(c.in)); got != c.want {
			t.Errorf("tsOf(%s) = %d, want %d", c.in, got, c.want)
		}
	}
}

// TestMeasurePlainCopy runs the runner's measurement of the plain copy on
// a tiny input against a real broker: every input is counted once, every
// probe gets a latency, and the process was sampled. No timing is asserted.
func TestMeasurePlainCopy(t *testing.T) {
	const n = 500
	v := []byte(`{"key":"k1","amount":1,"ts":1,"pad":"x"}`)
	o, c, adm := plainCopyOn(t, 4, n, v)
	o.probe, o.probeRate, o.keys, o.idle, o.countBytes = 50, 500, 10, defaultTestIdle, true
	r, err := measure(context.Background(), o, adm, &inputSizes{}, c)
	if err != nil {
		t.Fatal(err)
	}
	if r.Records != n {
		t.Errorf("records = %d, want %d", r.Records, n)
	}
	if r.LatencySamples != o.probe {
		t.Errorf("latency samples = %d, want %d", r.LatencySamples, o.probe)
	}
	// The window runs from the first output's append time to when the
	// reader saw the last: never empty, whatever the machine's load.
	if r.Seconds <= 0 || r.RecordsPerSec <= 0 {
		t.Errorf("seconds = %v, records/s = %v, want both > 0", r.Seconds, r.RecordsPerSec)
	}
	// No record keys: the bytes are the values'.
	if r.InputBytes != n*int64(len(v)) || r.MBPerSec <= 0 {
		t.Errorf("input bytes = %d, MB/s = %v, want %d and > 0", r.InputBytes, r.MBPerSec, n*len(v))
	}
	if r.PeakRSSMiB <= 0 {
		t.Errorf("peak RSS = %v, want > 0", r.PeakRSSMiB)
	}
}

// plainCopyOn builds the plain copy and fills a fresh input topic of
// partitions partitions with n records of value; it returns options
// reading it under a run id of its own (the output topics are named after
// it, and a reused broker (KAFKA_BOOTSTRAP) still has the last run's),
// the plain-copy contender and an admin client. The topics go at the end.
func plainCopyOn(t *testing.T, partitions int, n int, value []byte) (options, contender, *kadm.Client) {
	t.Helper()
	k := kafkatest.Broker(t)
	bin := filepath.Join(t.TempDir(), "plaincopy")
	if out, err := exec.Command("go", "build", "-o", bin, "../plaincopy").CombinedOutput(); err != nil {
		t.Fatalf("build plaincopy: %v\n%s", err, out)
	}
	in := kafkatest.Topic(t, "bench-in")
	kafkatest.CreateTopic(t, k.Bootstrap(), in, int32(partitions), nil)
	cl := kafkatest.Client(t, k.Bootstrap(), kgo.DefaultProduceTopic(in))
	for range n {
		cl.Produce(context.Background(), &kgo.Record{Value: value}, nil)
	}
	if err := cl.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	o := options{brokers: strings.Join(k.Bootstrap(), ","), input: in, run: kafkatest.Topic(t, "run"), plaincopy: bin, partitions: partitions}
	var c contender
	for _, x := range contenders(o) {
		if x.Name == "plain-copy" {
			c = x
		}
	}
	adm := kadm.NewClient(cl)
	t.Cleanup(func() {
		cleanup(context.Background(), adm, "bench-"+o.run)
		_, _ = adm.DeleteTopics(context.Background(), in)
	})
	return o, c, adm
}

// TestFlinkContenders checks that the Flink contenders launch the peer jar
// with the argument convention its main expects (the Kafka Streams peer's:
// brokers input output id guarantee intervalMs threads), with a guarantee
// it accepts and the interval in milliseconds.
func TestFlinkContenders(t *testing.T) {
	o := options{brokers: "b:9092", input: "in", flinkJar: "flink.jar"}
	want := map[string][2]string{
		"flink-keyed-sum-exactly_once-1s":    {"exactly_once", "1000"},
		"flink-keyed-sum-exactly_once-100ms": {"exactly_once", "100"},
		"flink-keyed-sum-at_least_once-1s":   {"at_least_once", "1000"},
	}
	seen := 0
	for _, c := range contenders(o) {
		if c.Kind != "flink" || c.Job == "windowed" {
			continue
		}
		seen++
		w, ok := want[c.Name]
		if !ok {
			t.Errorf("unexpected Flink contender %s", c.Name)
			continue
		}
		if !c.Daemon || c.Job != "keyed-sum" {
			t.Errorf("%s: daemon %v job %s, want a keyed-sum daemon", c.Name, c.Daemon, c.Job)
		}
		argv, _ := c.Cmd("out", "id")
		if len(argv) != 11 || argv[0] != "java" || argv[3] != "flink.jar" {
			t.Fatalf("%s: argv %q", c.Name, argv)
		}
		got := argv[4:]
		if got[0] != "b:9092" || got[1] != "in" || got[2] != "out" || got[3] != "id" || got[4] != w[0] || got[5] != w[1] {
			t.Errorf("%s: args %q, want brokers in out id %s %s threads", c.Name, got, w[0], w[1])
		}
	}
	if seen != len(want) {
		t.Errorf("%d Flink contenders, want %d", seen, len(want))
	}
}

// The windowed contenders of the three engines read the windowed input and
// start the peers' WindowedSum with the keyed sum's argument convention.
func TestWindowedContenders(t *testing.T) {
	o := options{brokers: "b:9092", input: "in", windowedInput: "win", flinkJar: "flink.jar", kstreamsJar: "ks.jar", jobs: "jobs", pipeline: "pipeline"}
	kinds := map[string]bool{}
	for _, c := range contenders(o) {
		if c.Job != "windowed" {
			continue
		}
		kinds[c.Kind] = true
		argv, env := c.Cmd("out", "id")
		switch c.Kind {
		case "pipeline":
			if argv[3] != "jobs/windowed.yaml" || !slices.Contains(env, "INPUT_TOPIC=win") {
				t.Errorf("%s: %q %q", c.Name, argv, env)
			}
		default:
			if argv[4] != "bench.WindowedSum" || argv[6] != "win" || argv[7] != "out" {
				t.Errorf("%s: %q", c.Name, argv)
			}
		}
	}
	if len(kinds) != 3 {
		t.Errorf("windowed contenders of %v, want pipeline, kstreams and flink", kinds)
	}
	if got := windowEndOf([]byte(`{"key":"k1","window_start":"2026-12-04T10:00:00Z","window_end":"2026-12-04T10:00:01Z","count":1,"sum":2}`)); got != 1796378401000 {
		t.Errorf("windowEndOf = %d", got)
	}
}

// TestCPUSeconds reads this process's own CPU time from /proc: it grows
// with work done, and a process that cannot be read counts nothing.
func TestCPUSeconds(t *testing.T) {
	self := os.Getpid()
	before := cpuSeconds(self)
	x := 0
	for start := time.Now(); time.Since(start) < 300*time.Millisecond; {
		x++
	}
	if after := cpuSeconds(self); after <= before {
		t.Errorf("CPU seconds %v then %v after a busy loop (%d turns), want more", before, after, x)
	}
	if got := cpuSeconds(-1); got != 0 {
		t.Errorf("cpuSeconds(-1) = %v, want 0", got)
	}
}

// TestMeasureSteadyNeedsInputThatOutlastsTheWindow: a steady-state
// measurement whose contender drains the whole input before the window
// ends is refused, not reported as a rate that ran out of work.
func TestMeasureSteadyNeedsInputThatOutlastsTheWindow(t *testing.T) {
	o, c, adm := plainCopyOn(t, 2, 100, []byte(`{"key":"k1","amount":1}`))
	o.warmup, o.window = 2*time.Second, time.Second
	_, err := measureSteady(context.Background(), o, adm, c)
	if err == nil || !strings.Contains(err.Error(), "ran out") {
		t.Fatalf("measureSteady on 100 records: %v, want the input-ran-out error", err)
	}
	// Two at once (the -pair-with mode), each on a topic of its own.
	cleanup(context.Background(), adm, "bench-"+o.run)
	twin := c
	twin.Name += "-base"
	rs, err := measureTogether(context.Background(), o, adm, []contender{c, twin})
	if err == nil || !strings.Contains(err.Error(), "ran out") || len(rs) != 2 || rs[1].Name != twin.Name {
		t.Fatalf("measureTogether on 100 records: %v (%d results), want the input-ran-out error", err, len(rs))
	}
}

// A contender of several processes is measured over its process tree:
// the sampler finds the launcher's children and adds up their CPU and
// peak memory.
func TestSamplerCountsTheProcessTree(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 30 & sleep 30 & wait")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, c := range descendants(cmd.Process.Pid) {
			_ = syscall.Kill(c, syscall.SIGKILL)
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	var kids []int
	for len(kids) < 2 {
		kids = descendants(cmd.Process.Pid)
		time.Sleep(10 * time.Millisecond)
	}
	s := &sampler{pid: cmd.Process.Pid}
	s.sample()
	_, tree := s.get()
	alone := &sampler{pid: kids[0]}
	alone.sample()
	_, one := alone.get()
	if one <= 0 || tree < 2*one {
		t.Fatalf("peak memory of the tree %d KiB, of one sleep %d KiB: the children are not counted", tree, one)
	}
}
