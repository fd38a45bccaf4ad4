package admin

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/eoflow/pipeline/runtime"
)

type fakeJob struct {
	st    runtime.Status
	ready bool
	cps   []runtime.CheckpointInfo
}

func (f *fakeJob) Status() runtime.Status                { return f.st }
func (f *fakeJob) Ready() bool                           { return f.ready }
func (f *fakeJob) Checkpoints() []runtime.CheckpointInfo { return f.cps }

func get(t *testing.T, h http.Handler, method, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec.Code, rec.Body.String()
}

func TestEndpoints(t *testing.T) {
	job := &fakeJob{st: runtime.Status{Job: "j", Guarantee: "exactly_once", State: runtime.StateStarting}}
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "m 1\n") })
	h := Handler(job, metrics)

	if code, body := get(t, h, "GET", "/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz = %d %q", code, body)
	}
	if code, body := get(t, h, "GET", "/readyz"); code != 503 || body != "starting\n" {
		t.Errorf("/readyz before restore = %d %q, want 503", code, body)
	}
	job.ready, job.st.State = true, runtime.StateRunning
	if code, _ := get(t, h, "GET", "/readyz"); code != 200 {
		t.Errorf("/readyz when running = %d", code)
	}
	if code, body := get(t, h, "GET", "/metrics"); code != 200 || body != "m 1\n" {
		t.Errorf("/metrics = %d %q", code, body)
	}
	code, body := get(t, h, "GET", "/api/v1/job")
	var st runtime.Status
	if code != 200 || json.Unmarshal([]byte(body), &st) != nil || st.Job != "j" || st.State != runtime.StateRunning {
		t.Errorf("/api/v1/job = %d %s", code, body)
	}
	code, body = get(t, h, "GET", "/api/v1/checkpoints")
	if code != 200 || !strings.Contains(body, `"checkpoints": []`) {
		t.Errorf("/api/v1/checkpoints with none = %d %s", code, body)
	}
	job.cps = []runtime.CheckpointInfo{{ID: 7, DurationMs: 12}}
	_, body = get(t, h, "GET", "/api/v1/checkpoints")
	var cps struct{ Checkpoints []runtime.CheckpointInfo }
	if json.Unmarshal([]byte(body), &cps) != nil || len(cps.Checkpoints) != 1 || cps.Checkpoints[0].ID != 7 {
		t.Errorf("/api/v1/checkpoints = %s", body)
	}
	if code, body := get(t, h, "GET", "/debug/pprof/goroutine?debug=1"); code != 200 || !strings.Contains(body, "goroutine profile") {
		t.Errorf("/debug/pprof/goroutine = %d %.80q", code, body)
	}
	if code, _ := get(t, h, "POST", "/api/v1/job"); code != http.StatusMethodNotAllowed {
		t.Errorf("POST /api/v1/job = %d, want 405: the API is read-only", code)
	}
	if code, _ := get(t, h, "GET", "/nope"); code != 404 {
		t.Errorf("unknown path = %d", code)
	}
}

func TestServerListensAndStops(t *testing.T) {
	srv, err := Listen("127.0.0.1:0", Handler(&fakeJob{}, http.NotFoundHandler()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	resp, err := http.Get("http://" + srv.Addr() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("healthz over the wire: %d", resp.StatusCode)
	}
	if _, err := Listen(srv.Addr(), http.NotFoundHandler()); err == nil {
		t.Fatal("a taken address must be an error at Listen")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("server did not stop")
	}
}
