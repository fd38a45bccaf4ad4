// Package metricstest helps tests that read the pipeline's metrics: it
// puts a sample in every metric so that a scrape shows all of them, scrapes
// a handler, reads the names out of the text, and runs promtool.
package metricstest

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/metrics"
)

// Exercise observes one value on every metric of m, including one Kafka
// client's (which is closed when t ends), so a scrape shows every family
// metrics.New registers, labelled ones included.
func Exercise(t testing.TB, m *metrics.Metrics) {
	t.Helper()
	now := time.Now()
	m.SetInfo("exactly_once", "v0.0.0-test")
	m.Input("numbers").Add(1, 9)
	m.Output("parity-sums").Add(1, 30)
	m.SetLag("numbers", 0, 42)
	m.EndToEnd(now.Add(-150*time.Millisecond), now)
	m.DeadLettered("decode")
	m.TimestampReplaced("parity-sums")
	m.SetCheckpointInterval(time.Second)
	m.CheckpointCompleted(metrics.Checkpoint{ID: 7, Duration: 40 * time.Millisecond, Alignment: 2 * time.Millisecond, Bytes: 4096})
	m.CheckpointFailed("timeout")
	m.Restored(6, 300*time.Millisecond)
	m.SavepointCompleted(2 * time.Second)
	m.SavepointFailed()
	m.SetTransactionTimeout(time.Minute)
	m.TransactionBegan()
	m.TransactionCommitted(8 * time.Millisecond)
	m.TransactionAborted()
	m.Fenced()
	m.Restarted("commit_failed")
	m.SetState("sums", 2, 128)
	m.StatePiecesWritten(3)
	m.InternalRecordTooLarge("parity-sum-state")
	m.SetPartitionWatermark("numbers", 0, now.Add(-5*time.Second).UnixMilli())
	m.SetWatermark(now.Add(-6 * time.Second).UnixMilli())
	m.SetOpenWindows("per-10s", 2)
	m.WindowsFired("per-10s", 1)
	m.LateRecord("per-10s", "side_output")
	m.OperatorRecords("sums").Add(1)
	m.StepRecords("parity", "passed").Add(1)
	m.OperatorDeadLetter("parity")
	m.TaskBlocked("source-0").Add(time.Millisecond)
	m.SetPartitionIdle("numbers", 0, false)
	m.KeysExpired("sums", 1)
	m.SetGroupMember("a")
	m.SetAssignment(3, map[string]int{"numbers": 2, "parity-sum-repartition": 16}, 2)
	m.SetLocalShuffle(8)
	m.SchemaRegistryError("fetch")
	m.SchemaRegistryWaiting(true)
	m.SchemaRegistryWaited(time.Second)
	m.SchemaRegistryCached(2)
	m.Table("customers", []string{"no_key", "key", "decode"}).Updates.Inc()
	m.SetTable("customers", 3, 120, 0)
	m.TableRestored("customers", 20*time.Millisecond)
	m.Join("enrich").Joined(true)

	// No broker is needed: a client builds its metrics when created.
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), m.KafkaHooks("exercise"))
	if err != nil {
		t.Fatalf("kafka client: %v", err)
	}
	t.Cleanup(cl.Close)
}

// Scrape GETs h as Prometheus would and returns the exposition text.
func Scrape(t testing.TB, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s: %v\n%s", resp.Status, err, body)
	}
	return string(body)
}

// Series returns the name of every sample in the exposition text, with the
// _bucket, _sum and _count series of histograms and summaries as they
// appear: the names a PromQL query can select.
func Series(text string) map[string]bool {
	names := make(map[string]bool)
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			names[line[:i]] = true
		}
	}
	return names
}

// Value returns the value of one sample in the exposition text, named as
// it is written there, labels included, e.g.
// `pipeline_records_in_total{pipeline="job",topic="in"}`.
func Value(text, sample string) (float64, bool) {
	for line := range strings.Lines(text) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), sample+" ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(rest, 64)
		return v, err == nil
	}
	return 0, false
}

// Families returns every family in the exposition text (its TYPE lines)
// with its HELP text, "" when it has none.
func Families(text string) map[string]string {
	fams, help := make(map[string]string), make(map[string]string)
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), " ", 4)
		if len(f) < 3 || f[0] != "#" {
			continue
		}
		switch {
		case f[1] == "TYPE":
			fams[f[2]] = ""
		case f[1] == "HELP" && len(f) == 4:
			help[f[2]] = f[3]
		}
	}
	for name := range fams {
		fams[name] = help[name]
	}
	return fams
}

// Promtool returns the path of promtool. When it is missing the test
// fails, with the command that installs it, unless -short is set; then it
// is skipped.
func Promtool(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err == nil {
		return path
	}
	const install = "apt-get update && apt-get install -y prometheus"
	if testing.Short() {
		t.Skipf("promtool not on PATH (-short); install it with: %s", install)
	}
	t.Fatalf("promtool not on PATH; install it with: %s", install)
	return ""
}

// RunPromtool runs promtool with args in dir, stdin as its input, and
// returns its combined output and whether it exited 0.
func RunPromtool(t testing.TB, dir, stdin string, args ...string) (string, bool) {
	t.Helper()
	cmd := exec.Command(Promtool(t), args...)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("promtool %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), err == nil
}
