package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A real Prometheus server (Debian's package) scrapes the running pipeline
// process, and its query API returns the checkpoint, throughput and latency
// series the dashboard and alerts are built on.
func TestPrometheusScrapesTheJob(t *testing.T) {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("no prometheus server on PATH: apt-get install prometheus (.ci/run does)")
	}
	j := newJob(t, "exactly_once")
	j.env["ADMIN_LISTEN"] = "127.0.0.1:0"
	j.numbers(1, 2000)
	j.start()
	j.awaitFinal(2000, false)
	m := adminAddr.FindStringSubmatch(j.output())
	if m == nil {
		t.Fatal("no admin address in the log")
	}

	dir := t.TempDir()
	promPort := freePort(t)
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: pipeline
    static_configs:
      - targets: [%q]
`, m[1])
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	prom := exec.Command(bin,
		"--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address=127.0.0.1:"+strconv.Itoa(promPort),
	)
	logs, _ := os.Create(filepath.Join(dir, "prometheus.log"))
	prom.Stdout, prom.Stderr = logs, logs
	if err := prom.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = prom.Process.Kill()
		_ = prom.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "prometheus.log"))
			t.Logf("prometheus log:\n%s", b)
		}
	})
	api := fmt.Sprintf("http://127.0.0.1:%d", promPort)

	// Each query must return a series with a positive value: what
	// Prometheus scraped from the job itself.
	queries := map[string]string{
		"checkpoints":    `pipeline_checkpoint_last_completed_id`,
		"throughput in":  `pipeline_records_in_total`,
		"throughput out": `pipeline_records_out_total`,
		"e2e latency":    `pipeline_end_to_end_latency_seconds_count`,
		"commit latency": `pipeline_transaction_commit_duration_seconds_count`,
		"scrape up":      `up{job="pipeline"}`,
	}
	deadline := time.Now().Add(90 * time.Second)
	for name, q := range queries {
		for {
			v, err := queryValue(api, q)
			if err == nil && v > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s never returned a positive value (last: %v, %v)", name, q, v, err)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	j.terminate()
}

// queryValue runs an instant query and returns the largest value returned.
func queryValue(api, q string) (float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", api+"/api/v1/query?query="+url.QueryEscape(q), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string
		Data   struct {
			Result []struct {
				Value [2]any
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return 0, err
	}
	if body.Status != "success" {
		return 0, fmt.Errorf("status %q", body.Status)
	}
	best := 0.0
	for _, r := range body.Data.Result {
		s, _ := r.Value[1].(string)
		if v, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil && v > best {
			best = v
		}
	}
	if len(body.Data.Result) == 0 {
		return 0, fmt.Errorf("no series")
	}
	return best, nil
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
