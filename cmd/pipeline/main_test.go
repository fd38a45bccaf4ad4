package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/internal/datagen"
	"github.com/eoflow/pipeline/internal/fault"
	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
	"github.com/eoflow/pipeline/internal/testkit/paritycheck"
)

func TestMain(m *testing.M) { kafkatest.Main(m) }

var build struct {
	once sync.Once
	path string
	err  error
}

// binary builds the pipeline command once per test run: the crash tests
// kill a real process, at fault points that only the faultpoints build
// tag compiles in.
func binary(t *testing.T) string {
	t.Helper()
	build.once.Do(func() {
		dir, err := os.MkdirTemp("", "pipeline-bin-")
		if err != nil {
			build.err = err
			return
		}
		build.path = filepath.Join(dir, "pipeline")
		args := []string{"build", "-tags", "faultpoints", "-o", build.path}
		if raceEnabled {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
		if err != nil {
			build.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if build.err != nil {
		t.Fatal(build.err)
	}
	return build.path
}

// job is the parity-sum example run as a real process.
type job struct {
	t       *testing.T
	bin     string
	env     map[string]string
	conn    []kgo.Opt
	logs    bytes.Buffer
	cmd     *exec.Cmd
	exited  chan error
	mu      sync.Mutex
	started int
	// config is the job's file (default: the parity-sum example), args
	// more flags of `pipeline run`.
	config string
	args   []string
}

func newJob(t *testing.T, guarantee string) *job {
	k := kafkatest.Broker(t)
	base := kafkatest.Topic(t, "job")
	j := &job{t: t, bin: binary(t), conn: []kgo.Opt{kgo.SeedBrokers(k.Bootstrap()...)}}
	j.env = map[string]string{
		"KAFKA_BROKERS":       strings.Join(k.Bootstrap(), ","),
		"JOB_NAME":            base,
		"INPUT_TOPIC":         base + "-in",
		"OUTPUT_TOPIC":        base + "-out",
		"GUARANTEE":           guarantee,
		"CHECKPOINT_INTERVAL": "100ms",
		"ADMIN_LISTEN":        "off",
	}
	kafkatest.CreateTopic(t, k.Bootstrap(), j.env["INPUT_TOPIC"], 4, nil)
	t.Cleanup(func() {
		j.kill()
		if t.Failed() {
			t.Logf("pipeline output:\n%s", j.output())
		}
	})
	return j
}

func (j *job) output() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.logs.String()
}

type lockedWriter struct{ j *job }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.j.mu.Lock()
	defer w.j.mu.Unlock()
	return w.j.logs.Write(p)
}

// start runs the pipeline with extra environment (e.g. armed faults).
func (j *job) start(extra ...string) {
	j.t.Helper()
	config := j.config
	if config == "" {
		config = "../../examples/parity-sum/config.yaml"
	}
	cmd := exec.Command(j.bin, append([]string{"run", "-c", config}, j.args...)...)
	cmd.Env = os.Environ()
	for k, v := range j.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env, extra...)
	cmd.Stdout, cmd.Stderr = lockedWriter{j}, lockedWriter{j}
	if err := cmd.Start(); err != nil {
		j.t.Fatal(err)
	}
	j.cmd, j.exited = cmd, make(chan error, 1)
	j.started++
	go func() { j.exited <- cmd.Wait() }()
}

// kill sends SIGKILL and waits for the process to be gone.
func (j *job) kill() {
	if j.cmd == nil {
		return
	}
	_ = j.cmd.Process.Signal(syscall.SIGKILL)
	<-j.exited
	j.cmd = nil
}

func (j *job) numbers(from, count int64) {
	j.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := datagen.Numbers(ctx, j.conn, datagen.Options{Topic: j.env["INPUT_TOPIC"], From: from, Count: count}); err != nil {
		j.t.Fatal(err)
	}
}

func envInt(t *testing.T, key string, def int64) int64 {
	t.Helper()
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a whole number", key, v)
	}
	return n
}

func (j *job) judge(n int64) *paritycheck.Report {
	j.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	outs, err := paritycheck.Read(ctx, j.conn, j.env["OUTPUT_TOPIC"])
	if err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
		j.t.Fatal(err)
	}
	return paritycheck.Judge(outs, n)
}

// awaitFinal waits until the output holds the totals of 1..n, restarting
// the process whenever it has died.
func (j *job) awaitFinal(n int64, restart bool) *paritycheck.Report {
	j.t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		if rep := j.judge(n); rep.StateExact() {
			return rep
		}
		select {
		case err := <-j.exited:
			if !restart {
				j.t.Fatalf("pipeline exited: %v", err)
			}
			j.cmd = nil
			j.start()
		default:
		}
		if time.Now().After(deadline) {
			j.t.Fatalf("no final totals of 1..%d: %v", n, j.judge(n))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// SIGTERM stops the job cleanly: exit 0, nothing lost or repeated. While
// it runs, the admin endpoints answer over HTTP and /metrics shows the
// checkpoints and the flow.
func TestSIGTERMStopsCleanly(t *testing.T) {
	j := newJob(t, "exactly_once")
	j.env["ADMIN_LISTEN"] = "127.0.0.1:0"
	j.numbers(1, 2000)
	j.start()
	j.awaitFinal(2000, false)
	j.checkAdmin(2000)
	j.terminate()
	if !strings.Contains(j.output(), `msg="final checkpoint committed"`) {
		t.Error("SIGTERM did not end with a final checkpoint")
	}
	j.noOpenTransactions()
	if rep := j.judge(2000); !rep.Exact() {
		t.Fatalf("after SIGTERM: %v", rep)
	}
}

// crashes kills the job with SIGKILL at every fault point (armed in the
// child) and at random moments, while input keeps arriving in small pieces
// (so that every epoch changes state), restarting it after each kill. It
// writes at least total numbers and returns how many it wrote.
func crashes(t *testing.T, j *job, total int64, randomKills int, seed uint64) int64 {
	var written int64
	piece := max(100, total/200)
	crashLoop(t, j, func() {
		j.numbers(written+1, piece)
		written += piece
		time.Sleep(50 * time.Millisecond)
	}, randomKills, rand.New(rand.NewPCG(seed, 0)))
	if written < total {
		j.numbers(written+1, total-written)
		written = total
	}
	return written
}

// crashLoop kills the job at every fault point (armed in the child: 2 or 3
// hits of it, so the kill lands in a running job with state, not only at
// start-up) and then randomKills times at random moments, restarting it
// after each kill, while feed writes a piece of input each call.
func crashLoop(t *testing.T, j *job, feed func(), randomKills int, rng *rand.Rand) {
	t.Helper()
	crashLoopAt(t, j, fault.Points, feed, randomKills, rng)
}

// crashLoopAt is crashLoop visiting the given fault points only (a job
// without keyed state never passes fault.WhileWritingState).
func crashLoopAt(t *testing.T, j *job, points []fault.Point, feed func(), randomKills int, rng *rand.Rand) {
	t.Helper()
	feedUntil := func(stop func() bool) {
		deadline := time.Now().Add(time.Minute)
		for !stop() {
			if time.Now().After(deadline) {
				t.Fatal("the job did not die within a minute")
			}
			feed()
		}
	}
	dead := func() bool {
		select {
		case <-j.exited:
			j.cmd = nil
			return true
		default:
			return false
		}
	}
	for _, p := range points {
		j.start(fmt.Sprintf("%s=%s@%d", fault.EnvVar, p, 2+rng.IntN(2)))
		feedUntil(dead)
		if !strings.Contains(j.output(), "fault: killing the process at "+string(p)) {
			t.Fatalf("the job exited, but not at %s", p)
		}
	}
	for range randomKills {
		j.start()
		at := time.Now().Add(time.Duration(300+rng.IntN(1500)) * time.Millisecond)
		feedUntil(func() bool { return time.Now().After(at) })
		j.kill()
	}
}

// The exactly-once proof with real process crashes (docs/exactly-once.md,
// "Invariants"): parity-sum over 4 partitions, SIGKILL at each fault point
// and at random, restarted each time; an independent read_committed reader
// then finds exactly one output per input, counts 1..n once and in order
// per key, and exact sums.
//
// CRASH_NUMBERS and CRASH_KILLS make it longer (make crash-long);
// CRASH_SEED replays a schedule.
func TestExactlyOnceUnderSIGKILL(t *testing.T) {
	total := envInt(t, "CRASH_NUMBERS", 100_000)
	randomKills := int(envInt(t, "CRASH_KILLS", 3))
	seed := uint64(envInt(t, "CRASH_SEED", time.Now().UnixNano()))
	t.Logf("seed %d (CRASH_SEED=%d replays it)", seed, seed)
	j := newJob(t, "exactly_once")
	n := crashes(t, j, total, randomKills, seed)
	j.start()
	rep := j.awaitFinal(n, true)
	if !rep.Exact() || rep.Outputs["odd"]+rep.Outputs["even"] != int(n) {
		t.Fatalf("seed %d: after %d starts: %v", seed, j.started, rep)
	}
	t.Logf("%d numbers, %d starts (%d kills): %v", n, j.started, j.started-1, rep)
	j.kcatAgrees(n)

	// Stopped, the job leaves no transaction open: the brokers say so.
	j.terminate()
	j.noOpenTransactions()
}

// terminate stops the job with SIGTERM and expects exit status 0.
func (j *job) terminate() {
	j.t.Helper()
	if err := j.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		j.t.Fatal(err)
	}
	select {
	case err := <-j.exited:
		j.cmd = nil
		if err != nil {
			j.t.Fatalf("exit after SIGTERM: %v", err)
		}
	case <-time.After(30 * time.Second):
		j.t.Fatal("no exit within 30s of SIGTERM")
	}
}

// noOpenTransactions asks the transaction coordinators about the job's
// transactional id.
func (j *job) noOpenTransactions() {
	j.t.Helper()
	cl, err := kgo.NewClient(j.conn...)
	if err != nil {
		j.t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id := j.env["JOB_NAME"] + "-txn"
	described, err := kadm.NewClient(cl).DescribeTransactions(ctx, id)
	if err != nil {
		j.t.Fatal(err)
	}
	d, ok := described[id]
	if !ok {
		j.t.Fatalf("the brokers know no transactional id %s", id)
	}
	switch d.State {
	case "Empty", "CompleteCommit", "CompleteAbort":
	default:
		j.t.Fatalf("transactional id %s is %s after the job stopped (partitions %v)", id, d.State, d.Topics)
	}
}

func newClient(conn []kgo.Opt) (*kgo.Client, error) { return kgo.NewClient(conn...) }

var adminAddr = regexp.MustCompile(`admin listening" metrics=http://([0-9.:]+)/metrics`)

// checkAdmin reads every admin endpoint of the running job.
func (j *job) checkAdmin(n int64) {
	j.t.Helper()
	m := adminAddr.FindStringSubmatch(j.output())
	if m == nil {
		j.t.Fatalf("no admin address in the log")
	}
	base := "http://" + m[1]
	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			j.t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != 200 {
		j.t.Errorf("/healthz: %d %s", code, body)
	}
	if code, body := get("/readyz"); code != 200 || body != "running\n" {
		j.t.Errorf("/readyz: %d %q", code, body)
	}
	code, body := get("/api/v1/job")
	if code != 200 || !strings.Contains(body, `"state": "running"`) || !strings.Contains(body, `"guarantee": "exactly_once"`) ||
		!strings.Contains(body, `"partition": 3`) || !strings.Contains(body, `"kind": "aggregate"`) {
		j.t.Errorf("/api/v1/job: %d %s", code, body)
	}
	if code, body := get("/api/v1/checkpoints"); code != 200 || !strings.Contains(body, `"duration_ms"`) {
		j.t.Errorf("/api/v1/checkpoints: %d %s", code, body)
	}
	code, body = get("/metrics")
	if code != 200 {
		j.t.Fatalf("/metrics: %d", code)
	}
	in := fmt.Sprintf(`pipeline_records_in_total{pipeline=%q,topic=%q} %d`, j.env["JOB_NAME"], j.env["INPUT_TOPIC"], n)
	out := fmt.Sprintf(`pipeline_records_out_total{pipeline=%q,topic=%q} %d`, j.env["JOB_NAME"], j.env["OUTPUT_TOPIC"], n)
	for _, want := range []string{in, out, "pipeline_checkpoint_last_completed_id{", "pipeline_end_to_end_latency_seconds_count{", "pipeline_kafka_"} {
		if !strings.Contains(body, want) {
			j.t.Errorf("/metrics lacks %q", want)
		}
	}
}

// kcatAgrees reads the output with kcat (librdkafka, an independent
// client) as a read_committed consumer and expects what paritycheck saw:
// one output per input and the exact final totals.
func (j *job) kcatAgrees(n int64) {
	j.t.Helper()
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		j.t.Fatal("no kcat on PATH: apt-get install kcat (.ci/run does)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, kcat, "-b", j.env["KAFKA_BROKERS"], "-C", "-t", j.env["OUTPUT_TOPIC"],
		"-X", "isolation.level=read_committed", "-o", "beginning", "-e", "-q", "-f", "%k %s\n").Output()
	if err != nil {
		j.t.Fatalf("kcat: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	last := map[string]string{}
	for _, l := range lines {
		k, v, _ := strings.Cut(l, " ")
		last[k] = v
	}
	want := paritycheck.Expected(n)
	for _, k := range []string{"odd", "even"} {
		w := fmt.Sprintf(`{"key":%q,"count":%d,"sum":%d}`, k, want[k].Count, want[k].Sum)
		if last[k] != w {
			j.t.Errorf("kcat's last %s output %s, want %s", k, last[k], w)
		}
	}
	if int64(len(lines)) != n {
		j.t.Errorf("kcat read %d outputs, want %d", len(lines), n)
	}
}
