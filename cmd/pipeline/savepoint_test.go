package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/eoflow/pipeline/internal/datagen"
	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
	"github.com/eoflow/pipeline/metrics/metricstest"
)

// pipelineCmd runs a short pipeline command (not `run`) with the job's
// environment and returns its exit code, stdout and stderr.
func (j *job) pipelineCmd(args ...string) (int, string, string) {
	j.t.Helper()
	cmd := exec.Command(j.bin, args...)
	cmd.Env = os.Environ()
	for k, v := range j.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		j.t.Fatal(err)
	}
	return code, stdout.String(), stderr.String()
}

// feed writes the numbers from..from+count-1 at rate per second in the
// background; wait returns once all are written.
func (j *job) feed(from, count int64, rate float64) (wait func()) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if _, err := datagen.Numbers(ctx, j.conn, datagen.Options{Topic: j.env["INPUT_TOPIC"], From: from, Count: count, Rate: rate}); err != nil {
			j.t.Error(err)
		}
	}()
	return wg.Wait
}

// withStep writes a copy of the parity-sum example with step (YAML, two
// spaces deep) inserted first, and returns its path.
func withStep(t *testing.T, step string) string {
	return exampleWith(t, "steps:\n", step)
}

// exampleWith writes a copy of the parity-sum example with insert added
// after the first occurrence of after, and returns its path.
func exampleWith(t *testing.T, after, insert string) string {
	t.Helper()
	data, err := os.ReadFile("../../examples/parity-sum/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), after) {
		t.Fatalf("the parity-sum example no longer has %q to add %q after", after, insert)
	}
	changed := strings.Replace(string(data), after, after+insert, 1)
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// The savepoint workflow as a user runs it, on real processes, with input
// arriving throughout:
//
//  1. `pipeline savepoint create` asks the running job for a savepoint;
//  2. SIGTERM with --stop-with-savepoint ends the job with a final one;
//  3. the job, upgraded (a filter that drops nothing) and started with
//     --from-savepoint, continues the outputs exactly;
//  4. SIGTERM under load, and a restart with the same command line,
//     neither lose nor repeat anything;
//  5. an incompatible change is refused with its message, and starts
//     nothing.
func TestSavepointsThroughTheCommandLine(t *testing.T) {
	j := newJob(t, "exactly_once")
	j.env["ADMIN_LISTEN"] = "127.0.0.1:0"
	j.env["PIPELINE_ADMIN_TOKEN"] = "test-token"
	dir := t.TempDir()
	j.env["SAVEPOINT_DIR"] = dir // where the API may write; --stop-with-savepoint is not bound by it
	running, final := filepath.Join(dir, "while-running"), filepath.Join(dir, "final")
	const total = 30000

	j.args = []string{"--stop-with-savepoint", final}
	j.start()
	wait := j.feed(1, total/2, 5000)
	j.awaitRead(2000)

	// 1. A savepoint of the running job, through its admin API.
	addr := "http://" + adminAddr.FindStringSubmatch(j.output())[1]
	if code, _, stderr := j.pipelineCmd("savepoint", "create", "-admin", addr, "-token", "wrong", running); code != 1 || !strings.Contains(stderr, "wrong bearer token") {
		t.Fatalf("savepoint create with a wrong token: exit %d, %s", code, stderr)
	}
	// The token comes from $PIPELINE_ADMIN_TOKEN, which the job reads too; the address from
	// the log, as the file says port 0.
	code, stdout, stderr := j.pipelineCmd("savepoint", "create", "-c", "../../examples/parity-sum/config.yaml", "-admin", addr, running)
	if code != 0 || !strings.Contains(stdout, "savepoint written: "+running) {
		t.Fatalf("savepoint create: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, stdout, _ := j.pipelineCmd("savepoint", "inspect", running); code != 0 || !strings.Contains(stdout, j.env["JOB_NAME"]) || !strings.Contains(stdout, "sums (aggregate): 2 keys") {
		t.Fatalf("savepoint inspect: exit %d\n%s", code, stdout)
	}

	// 2. SIGTERM under load: the final checkpoint becomes a savepoint.
	j.terminate()
	if !strings.Contains(j.output(), `msg="savepoint written"`) {
		t.Fatal("no savepoint written on SIGTERM")
	}
	wait()
	wait = j.feed(total/2+1, total/2, 5000)

	// 3. The upgrade, from the final savepoint.
	j.config = withStep(t, "  - id: positive\n    filter: 'n > 0'\n")
	j.args = []string{"--from-savepoint", final}
	j.start()
	j.awaitRead(5000)

	// 4. SIGTERM under load, then the same command line again.
	j.terminate()
	j.start()
	wait()
	rep := j.awaitFinal(total, false)
	j.terminate()
	if !rep.Exact() {
		t.Fatalf("after savepoint, upgrade, SIGTERM and restart: %v", rep)
	}
	if strings.Count(j.output(), `msg="imported savepoint"`) != 1 || !strings.Contains(j.output(), "the savepoint was imported before") {
		t.Fatal("the savepoint was not imported exactly once")
	}
	j.noOpenTransactions()

	// 5. A changed key_by is refused, for a new job name, with nothing
	// created on the cluster.
	refused := kafkatest.Topic(t, "refused")
	j.env["JOB_NAME"] = refused
	keyBy := withStep(t, "")
	data, _ := os.ReadFile(keyBy)
	if err := os.WriteFile(keyBy, bytes.Replace(data, []byte(`n % 2 == 0 ? "even" : "odd"`), []byte(`n % 2 == 1 ? "odd" : "even"`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	code, _, stderr = j.pipelineCmd("run", "-c", keyBy, "--from-savepoint", final)
	if code != 1 || !strings.Contains(stderr, `operator "sums": key_by was`) || !strings.Contains(stderr, "fix:") {
		t.Fatalf("run with a changed key_by: exit %d\n%s", code, stderr)
	}
	t.Logf("refused in %v:\n%s", time.Since(start).Round(time.Millisecond), stderr)
	cl := kafkatest.Client(t, strings.Split(j.env["KAFKA_BROKERS"], ","))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topics, err := kadm.NewClient(cl).ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name := range topics {
		if strings.HasPrefix(name, refused) {
			t.Errorf("a refused start created topic %s", name)
		}
	}
}

// awaitRead waits until the running job has read n records, from its
// admin API's partitions and metrics.
func (j *job) awaitRead(n int64) {
	j.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if m := adminAddr.FindAllStringSubmatch(j.output(), -1); len(m) == j.started {
			if got := j.readIn("http://" + m[len(m)-1][1]); got >= n {
				return
			}
		}
		if time.Now().After(deadline) {
			j.t.Fatalf("the job did not read %d records", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// readIn is pipeline_records_in_total of the job's input, from /metrics
// (0 while it cannot tell).
func (j *job) readIn(base string) int64 {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return 0
	}
	v, _ := metricstest.Value(string(body), fmt.Sprintf(`pipeline_records_in_total{pipeline=%q,topic=%q}`, j.env["JOB_NAME"], j.env["INPUT_TOPIC"]))
	return int64(v)
}

// A job started without --stop-with-savepoint is stopped with a savepoint
// through its admin API (`savepoint create --stop`), under load: the
// process exits 0, the savepoint restores, and the outputs across the stop
// neither lose nor repeat anything.
func TestStopWithSavepointThroughTheAPI(t *testing.T) {
	j := newJob(t, "exactly_once")
	j.env["ADMIN_LISTEN"] = "127.0.0.1:0"
	j.env["PIPELINE_ADMIN_TOKEN"] = "test-token"
	root := t.TempDir()
	j.env["SAVEPOINT_DIR"] = root
	const total = 20000

	j.start()
	wait := j.feed(1, total/2, 5000)
	j.awaitRead(2000)
	addr := "http://" + adminAddr.FindStringSubmatch(j.output())[1]
	code, stdout, stderr := j.pipelineCmd("savepoint", "create", "-admin", addr, "--stop", "final")
	final := filepath.Join(root, "final")
	if code != 0 || !strings.Contains(stdout, "savepoint written: "+final) || !strings.Contains(stdout, "the job stopped") {
		t.Fatalf("savepoint create --stop: exit %d\n%s%s", code, stdout, stderr)
	}
	select {
	case err := <-j.exited:
		j.cmd = nil
		if err != nil {
			t.Fatalf("the job stopped with a savepoint exited with %v, want 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the job did not exit after savepoint create --stop answered")
	}
	// Asking again finds no job.
	if code, _, stderr := j.pipelineCmd("savepoint", "create", "-admin", addr, "--stop", "again"); code != 1 || !strings.Contains(stderr, "no job answers") {
		t.Fatalf("savepoint create --stop of a stopped job: exit %d\n%s", code, stderr)
	}
	wait()

	wait = j.feed(total/2+1, total/2, 5000)
	j.args = []string{"--from-savepoint", final}
	j.start()
	wait()
	rep := j.awaitFinal(total, false)
	j.terminate()
	if !rep.Exact() {
		t.Fatalf("across a stop with a savepoint over the API: %v", rep)
	}
	if strings.Count(j.output(), `msg="imported savepoint"`) != 1 {
		t.Fatal("the savepoint was not imported")
	}
}
