package cli

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var (
	firstURL  = regexp.MustCompile(`^web UI: +(http://\S+)/ui/\nmetrics: +(http://\S+)\n`)
	resultRow = regexp.MustCompile(`checkpoint (\d+) +running +odd: count=(\d+) sum=\d+ +even: count=(\d+)`)
)

// The demo runs everything in one process: within seconds it prints
// results and checkpoint progress, and the first URL it prints serves
// /metrics.
func TestDemo(t *testing.T) {
	out := &syncBuf{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runDemo(ctx, "127.0.0.1:0", 1000, out) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("demo: %v", err)
		}
		if t.Failed() {
			t.Logf("demo output:\n%s", out.String())
		}
	}()

	deadline := time.Now().Add(60 * time.Second)
	for {
		if rows := resultRow.FindAllStringSubmatch(out.String(), -1); rows != nil {
			m := rows[len(rows)-1]
			cp, _ := strconv.Atoi(m[1])
			odd, _ := strconv.Atoi(m[2])
			if cp > 0 && odd > 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no results with a completed checkpoint within a minute")
		}
		time.Sleep(200 * time.Millisecond)
	}
	m := firstURL.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("the demo's first lines are not the web UI's and the metrics' URLs")
	}
	resp, err := http.Get(m[1] + "/api/v1/graph")
	if err != nil {
		t.Fatal(err)
	}
	graph, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Contains(graph, []byte(`"id": "sums"`)) {
		t.Fatalf("%s/api/v1/graph: %d\n%.500s", m[1], resp.StatusCode, graph)
	}
	resp, err = http.Get(m[2])
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Contains(body, []byte("pipeline_records_in_total{")) || !bytes.Contains(body, []byte("pipeline_checkpoint_last_completed_id{")) {
		t.Fatalf("%s: %d\n%.500s", m[2], resp.StatusCode, body)
	}
}
