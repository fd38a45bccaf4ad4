package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/eoflow/pipeline/checkpoint/savepoint"
	"github.com/eoflow/pipeline/runtime"
)

type fakeJob struct {
	st    runtime.Status
	ready bool
	cps   []runtime.CheckpointInfo
	// savepoint answers Savepoint; asked records the dirs asked for.
	savepoint func(dir string) (savepoint.Summary, error)
	asked     []string
}

func (f *fakeJob) Savepoint(_ context.Context, dir string) (savepoint.Summary, error) {
	f.asked = append(f.asked, dir)
	return f.savepoint(dir)
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
	h := Handler(job, metrics, "")

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
		t.Errorf("POST /api/v1/job = %d, want 405: job status is read-only", code)
	}
	if code, _ := get(t, h, "GET", "/nope"); code != 404 {
		t.Errorf("unknown path = %d", code)
	}
}

func post(t *testing.T, h http.Handler, path, token, body string) (int, http.Header, string) {
	t.Helper()
	req := httptest.NewRequest("POST", path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Header(), rec.Body.String()
}

func TestSavepointEndpoint(t *testing.T) {
	job := &fakeJob{savepoint: func(dir string) (savepoint.Summary, error) {
		switch dir {
		case "/taken":
			return savepoint.Summary{}, fmt.Errorf("%w: %w: /taken holds \"x\"", runtime.ErrSavepoint, savepoint.ErrExists)
		case "/fails":
			return savepoint.Summary{}, fmt.Errorf("%w: disk full", runtime.ErrSavepoint)
		}
		return savepoint.Summary{Dir: dir, ID: "sha256:ab", CheckpointID: 9,
			Operators: []savepoint.OperatorSummary{{ID: "sums", Keys: 3, Bytes: 40}, {ID: "more", Keys: 2, Bytes: 2}}}, nil
	}}
	h := Handler(job, http.NotFoundHandler(), "s3cret")
	const path = "/api/v1/savepoints"

	code, _, body := post(t, h, path, "s3cret", `{"dir": "/sp/1"}`)
	var ok SavepointResponse
	if code != 200 || json.Unmarshal([]byte(body), &ok) != nil {
		t.Fatalf("POST = %d %s", code, body)
	}
	if want := (runtime.SavepointInfo{Dir: "/sp/1", ID: "sha256:ab", CheckpointID: 9, Keys: 5, Bytes: 42}); ok.Savepoint != want {
		t.Errorf("savepoint = %+v, want %+v", ok.Savepoint, want)
	}

	tests := []struct {
		name, token, body string
		code              int
		msg               string
	}{
		{"no token", "", `{"dir": "/sp/2"}`, 401, "missing or wrong bearer token"},
		{"wrong token", "s3cre", `{"dir": "/sp/2"}`, 401, "missing or wrong bearer token"},
		{"not JSON", "s3cret", `dir=/sp/2`, 400, "the body must be JSON"},
		{"unknown field", "s3cret", `{"dir": "/sp/2", "force": true}`, 400, "unknown field"},
		{"no dir", "s3cret", `{}`, 400, `"dir" is required`},
		{"too large", "s3cret", `{"dir": "` + strings.Repeat("a", maxRequestBody) + `"}`, 400, "too large"},
		{"taken", "s3cret", `{"dir": "/taken"}`, 409, "/taken holds"},
		{"fails", "s3cret", `{"dir": "/fails"}`, 500, "savepoint not taken: disk full"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job.asked = nil
			code, hdr, body := post(t, h, path, tt.token, tt.body)
			var e ErrorResponse
			if code != tt.code || json.Unmarshal([]byte(body), &e) != nil || !strings.Contains(e.Error, tt.msg) {
				t.Fatalf("POST = %d %s, want %d with %q", code, body, tt.code, tt.msg)
			}
			if code == 401 && hdr.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
			if code < 409 && len(job.asked) > 0 {
				t.Errorf("the job was asked for %v on a refused request", job.asked)
			}
		})
	}

	// Without a token configured, the endpoint is off, whatever is sent.
	off := Handler(job, http.NotFoundHandler(), "")
	job.asked = nil
	if code, _, body := post(t, off, path, "", `{"dir": "/sp/3"}`); code != 403 || !strings.Contains(body, "set admin.token") || len(job.asked) > 0 {
		t.Errorf("POST without admin.token = %d %s (asked %v)", code, body, job.asked)
	}
	if code, _ := get(t, h, "GET", path); code != http.StatusMethodNotAllowed {
		t.Errorf("GET %s = %d, want 405", path, code)
	}
}

func TestServerListensAndStops(t *testing.T) {
	srv, err := Listen("127.0.0.1:0", Handler(&fakeJob{}, http.NotFoundHandler(), ""))
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
