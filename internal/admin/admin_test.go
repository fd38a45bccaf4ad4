package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eoflow/pipeline/checkpoint/savepoint"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/engine"
)

type fakeJob struct {
	st    engine.Status
	ready bool
	cps   []engine.CheckpointInfo
	// failures answers CheckpointFailures.
	failures []engine.CheckpointFailure
	// savepoint answers Savepoint; asked records the dirs asked for.
	savepoint func(dir string) (savepoint.Summary, error)
	asked     []string
	// stopped records the dirs of SavepointAndStop; stopErr is its error.
	stopped []string
	stopErr error
}

func (f *fakeJob) Savepoint(_ context.Context, dir string) (savepoint.Summary, error) {
	f.asked = append(f.asked, dir)
	return f.savepoint(dir)
}

func (f *fakeJob) SavepointAndStop(_ context.Context, dir string) (savepoint.Summary, error) {
	f.stopped = append(f.stopped, dir)
	if f.stopErr != nil {
		return savepoint.Summary{}, f.stopErr
	}
	return savepoint.Summary{Dir: dir, ID: "sha256:cd", CheckpointID: 12}, nil
}

func (f *fakeJob) Status() engine.Status                          { return f.st }
func (f *fakeJob) Ready() bool                                    { return f.ready }
func (f *fakeJob) Checkpoints() []engine.CheckpointInfo           { return f.cps }
func (f *fakeJob) CheckpointFailures() []engine.CheckpointFailure { return f.failures }

// testOptions serves a small job with admin settings a and /metrics from
// metrics.
func testOptions(metrics http.Handler, a config.Admin) Options {
	cfg := testConfig()
	cfg.Admin = a
	return Options{Config: cfg, Metrics: metrics}
}

func get(t *testing.T, h http.Handler, method, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec.Code, rec.Body.String()
}

func TestEndpoints(t *testing.T) {
	job := &fakeJob{st: engine.Status{Job: "j", Guarantee: "exactly_once", State: engine.StateStarting}}
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "m 1\n") })
	h := Handler(job, testOptions(metrics, config.Admin{}))

	if code, body := get(t, h, "GET", "/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz = %d %q", code, body)
	}
	if code, body := get(t, h, "GET", "/readyz"); code != 503 || body != "starting\n" {
		t.Errorf("/readyz before restore = %d %q, want 503", code, body)
	}
	job.ready, job.st.State = true, engine.StateRunning
	if code, _ := get(t, h, "GET", "/readyz"); code != 200 {
		t.Errorf("/readyz when running = %d", code)
	}
	if code, body := get(t, h, "GET", "/metrics"); code != 200 || body != "m 1\n" {
		t.Errorf("/metrics = %d %q", code, body)
	}
	code, body := get(t, h, "GET", "/api/v1/job")
	var st engine.Status
	if code != 200 || json.Unmarshal([]byte(body), &st) != nil || st.Job != "j" || st.State != engine.StateRunning {
		t.Errorf("/api/v1/job = %d %s", code, body)
	}
	code, body = get(t, h, "GET", "/api/v1/checkpoints")
	if code != 200 || !strings.Contains(body, `"checkpoints": []`) {
		t.Errorf("/api/v1/checkpoints with none = %d %s", code, body)
	}
	job.cps = []engine.CheckpointInfo{{ID: 7, DurationMs: 12}}
	_, body = get(t, h, "GET", "/api/v1/checkpoints")
	var cps struct{ Checkpoints []engine.CheckpointInfo }
	if json.Unmarshal([]byte(body), &cps) != nil || len(cps.Checkpoints) != 1 || cps.Checkpoints[0].ID != 7 {
		t.Errorf("/api/v1/checkpoints = %s", body)
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
	root := t.TempDir()
	job := &fakeJob{savepoint: func(dir string) (savepoint.Summary, error) {
		switch filepath.Base(dir) {
		case "taken":
			return savepoint.Summary{}, fmt.Errorf("%w: %w: %s holds \"x\"", engine.ErrSavepoint, savepoint.ErrExists, dir)
		case "busy":
			return savepoint.Summary{}, fmt.Errorf("%w: %w: checkpoint 9 holds %s/sp-1", engine.ErrSavepoint, engine.ErrSavepointBusy, root)
		case "fails":
			return savepoint.Summary{}, fmt.Errorf("%w: disk full", engine.ErrSavepoint)
		}
		return savepoint.Summary{Dir: dir, ID: "sha256:ab", CheckpointID: 9,
			Operators: []savepoint.OperatorSummary{{ID: "sums", Keys: 3, Bytes: 40}, {ID: "more", Keys: 2, Bytes: 2}}}, nil
	}}
	h := Handler(job, testOptions(http.NotFoundHandler(), config.Admin{Token: "s3cret", SavepointDir: root}))
	const path = "/api/v1/savepoints"

	code, _, body := post(t, h, path, "s3cret", `{"dir": "sp-1"}`)
	var ok SavepointResponse
	if code != 200 || json.Unmarshal([]byte(body), &ok) != nil {
		t.Fatalf("POST = %d %s", code, body)
	}
	if want := (engine.SavepointInfo{Dir: filepath.Join(root, "sp-1"), ID: "sha256:ab", CheckpointID: 9, Keys: 5, Bytes: 42}); ok.Savepoint != want {
		t.Errorf("savepoint = %+v, want %+v", ok.Savepoint, want)
	}

	tests := []struct {
		name, token, body string
		code              int
		msg               string
	}{
		{"no token", "", `{"dir": "sp-2"}`, 401, "missing or wrong bearer token"},
		{"wrong token", "s3cre", `{"dir": "sp-2"}`, 401, "missing or wrong bearer token"},
		{"not JSON", "s3cret", `dir=sp-2`, 400, "the body must be JSON"},
		{"unknown field", "s3cret", `{"dir": "sp-2", "force": true}`, 400, "unknown field"},
		{"no dir", "s3cret", `{}`, 400, `"dir" is required`},
		{"too large", "s3cret", `{"dir": "` + strings.Repeat("a", maxRequestBody) + `"}`, 400, "too large"},
		{"outside", "s3cret", `{"dir": "../sp-2"}`, 400, "leaves admin.savepoint_dir"},
		{"taken", "s3cret", `{"dir": "taken"}`, 409, "taken holds"},
		{"busy", "s3cret", `{"dir": "busy"}`, 409, "being taken at that checkpoint"},
		{"fails", "s3cret", `{"dir": "fails"}`, 500, "savepoint not taken: disk full"},
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
	off := Handler(job, testOptions(http.NotFoundHandler(), config.Admin{SavepointDir: root}))
	job.asked = nil
	if code, _, body := post(t, off, path, "", `{"dir": "sp-3"}`); code != 403 || !strings.Contains(body, "set admin.token") || len(job.asked) > 0 {
		t.Errorf("POST without admin.token = %d %s (asked %v)", code, body, job.asked)
	}
	if code, _ := get(t, h, "PUT", path); code != http.StatusMethodNotAllowed {
		t.Errorf("PUT %s = %d, want 405", path, code)
	}
}

// {"stop": true} asks the job to stop with the savepoint as its final
// checkpoint, answers once it stopped, and says so; a job stopping
// already answers 409. In group mode the answer notes the processes that
// run on.
func TestSavepointEndpointStops(t *testing.T) {
	root := t.TempDir()
	job := &fakeJob{savepoint: func(string) (savepoint.Summary, error) {
		t.Error("a stop took a savepoint of the running job instead")
		return savepoint.Summary{}, nil
	}}
	h := Handler(job, testOptions(http.NotFoundHandler(), config.Admin{Token: "s3cret", SavepointDir: root}))
	const path = "/api/v1/savepoints"

	code, _, body := post(t, h, path, "s3cret", `{"dir": "final", "stop": true}`)
	var ok SavepointResponse
	if code != 200 || json.Unmarshal([]byte(body), &ok) != nil || !ok.Stopped || ok.Note != "" ||
		ok.Savepoint.Dir != filepath.Join(root, "final") || ok.Savepoint.CheckpointID != 12 {
		t.Fatalf("POST stop = %d %s", code, body)
	}
	if len(job.stopped) != 1 || job.stopped[0] != filepath.Join(root, "final") {
		t.Fatalf("SavepointAndStop asked for %v", job.stopped)
	}

	job.stopErr = fmt.Errorf("%w: %w", engine.ErrSavepoint, engine.ErrStopping)
	if code, _, body := post(t, h, path, "s3cret", `{"dir": "again", "stop": true}`); code != 409 || !strings.Contains(body, "stopping already") {
		t.Errorf("POST stop while stopping = %d %s, want 409", code, body)
	}

	job.stopErr = nil
	job.st.Group = &engine.GroupInfo{Instance: "b", Members: []string{"a", "b", "c"}}
	code, _, body = post(t, h, path, "s3cret", `{"dir": "group", "stop": true}`)
	ok = SavepointResponse{}
	if code != 200 || json.Unmarshal([]byte(body), &ok) != nil || !strings.Contains(ok.Note, "the others (a, c) ran on") {
		t.Fatalf("POST stop in group mode = %d %s", code, body)
	}
}

// A savepoint request cannot write outside admin.savepoint_dir: not with
// "..", not with an absolute path elsewhere, not through a symbolic link,
// and not by having missing parents created. What is inside is accepted,
// relative or absolute, and the job is asked for the resolved path.
func TestSavepointDirIsConfined(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "savepoints")
	outside := filepath.Join(base, "elsewhere")
	for _, d := range []string{filepath.Join(root, "daily"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Links: one out of root, one that stays inside, and one to root
	// itself through another name (an operator's alias for the volume).
	for link, to := range map[string]string{
		filepath.Join(root, "out"):       outside,
		filepath.Join(root, "today"):     filepath.Join(root, "daily"),
		filepath.Join(root, "sp-link"):   outside,
		filepath.Join(base, "alias"):     root,
		filepath.Join(root, "loop-back"): base,
	} {
		if err := os.Symlink(to, link); err != nil {
			t.Fatal(err)
		}
	}

	tests := []struct {
		dir  string
		want string // the directory the job is asked for; "" when refused
		msg  string // part of the 400's message
	}{
		{dir: "sp-1", want: filepath.Join(root, "sp-1")},
		{dir: "./sp-1", want: filepath.Join(root, "sp-1")},
		{dir: "daily/sp-1", want: filepath.Join(root, "daily", "sp-1")},
		{dir: "daily/../sp-1", want: filepath.Join(root, "sp-1")},
		{dir: filepath.Join(root, "sp-1"), want: filepath.Join(root, "sp-1")},
		{dir: "today/sp-1", want: filepath.Join(root, "daily", "sp-1")},

		{dir: "../sp-1", msg: "leaves admin.savepoint_dir"},
		{dir: "daily/../../sp-1", msg: "leaves admin.savepoint_dir"},
		{dir: "..", msg: "leaves admin.savepoint_dir"},
		{dir: ".", msg: "admin.savepoint_dir (" + root + ") itself"},
		{dir: root, msg: "itself"},
		{dir: filepath.Join(outside, "sp-1"), msg: "is outside admin.savepoint_dir"},
		{dir: "/tmp/sp-1", msg: "is outside admin.savepoint_dir"},
		// Absolute paths are compared with admin.savepoint_dir as written
		// and as its own links resolve, not through other names.
		{dir: filepath.Join(base, "alias", "sp-1"), msg: "is outside admin.savepoint_dir"},
		{dir: root + "-evil/sp-1", msg: "is outside admin.savepoint_dir"},
		{dir: "out/sp-1", msg: "through a symbolic link"},
		{dir: "loop-back/elsewhere/sp-1", msg: "through a symbolic link"},
		{dir: "sp-link", msg: "is a symbolic link"},
		{dir: "missing/sp-1", msg: "only the savepoint's own directory is created"},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			var asked []string
			job := &fakeJob{savepoint: func(dir string) (savepoint.Summary, error) {
				asked = append(asked, dir)
				return savepoint.Summary{Dir: dir}, nil
			}}
			h := Handler(job, testOptions(http.NotFoundHandler(), config.Admin{Token: "t", SavepointDir: root}))
			body, _ := json.Marshal(SavepointRequest{Dir: tt.dir})
			code, _, resp := post(t, h, "/api/v1/savepoints", "t", string(body))
			if tt.want != "" {
				if code != 200 || len(asked) != 1 || asked[0] != tt.want {
					t.Fatalf("POST %q = %d %s, asked %q; want 200 and %q", tt.dir, code, resp, asked, tt.want)
				}
				return
			}
			var e ErrorResponse
			if code != 400 || json.Unmarshal([]byte(resp), &e) != nil || !strings.Contains(e.Error, tt.msg) || len(asked) > 0 {
				t.Fatalf("POST %q = %d %s, asked %q; want 400 with %q and the job not asked", tt.dir, code, resp, asked, tt.msg)
			}
		})
	}
	// admin.savepoint_dir configured through a link: paths below the link
	// and below where it leads are both inside.
	for _, dir := range []string{filepath.Join(base, "alias", "sp-1"), filepath.Join(root, "sp-1"), "sp-1"} {
		job := &fakeJob{savepoint: func(dir string) (savepoint.Summary, error) { return savepoint.Summary{Dir: dir}, nil }}
		h := Handler(job, testOptions(http.NotFoundHandler(), config.Admin{Token: "t", SavepointDir: filepath.Join(base, "alias")}))
		body, _ := json.Marshal(SavepointRequest{Dir: dir})
		if code, _, resp := post(t, h, "/api/v1/savepoints", "t", string(body)); code != 200 || len(job.asked) != 1 || job.asked[0] != filepath.Join(root, "sp-1") {
			t.Errorf("admin.savepoint_dir %s/alias: POST %q = %d %s, asked %q", base, dir, code, resp, job.asked)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused request created a parent: %v", err)
	}
	if entries, _ := os.ReadDir(outside); len(entries) > 0 {
		t.Errorf("something was created outside admin.savepoint_dir: %v", entries)
	}
}

// The configured directory itself is made when missing (the default,
// ./savepoints, need not exist before the first savepoint).
func TestSavepointDirIsCreated(t *testing.T) {
	root := filepath.Join(t.TempDir(), "a", "savepoints")
	job := &fakeJob{savepoint: func(dir string) (savepoint.Summary, error) { return savepoint.Summary{Dir: dir}, nil }}
	h := Handler(job, testOptions(http.NotFoundHandler(), config.Admin{Token: "t", SavepointDir: root}))
	if code, _, body := post(t, h, "/api/v1/savepoints", "t", `{"dir": "sp-1"}`); code != 200 {
		t.Fatalf("POST into a missing admin.savepoint_dir = %d %s", code, body)
	}
	if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
		t.Fatalf("admin.savepoint_dir not created: %v", err)
	}
	if len(job.asked) != 1 || job.asked[0] != filepath.Join(root, "sp-1") {
		t.Errorf("asked %q", job.asked)
	}
}

// Profiles need the token: the image listens on 0.0.0.0, and a profile
// costs the job and shows its internals.
func TestPprofNeedsTheToken(t *testing.T) {
	h := Handler(&fakeJob{}, testOptions(http.NotFoundHandler(), config.Admin{Token: "t"}))
	const path = "/debug/pprof/goroutine?debug=1"
	for _, p := range []string{path, "/debug/pprof/", "/debug/pprof/profile?seconds=1", "/debug/pprof/trace?seconds=1"} {
		if code, _ := get(t, h, "GET", p); code != http.StatusUnauthorized {
			t.Errorf("GET %s without the token = %d, want 401", p, code)
		}
	}
	req := httptest.NewRequest("GET", path, nil)
	req.Header.Set("Authorization", "Bearer t")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), "goroutine profile") {
		t.Errorf("GET %s with the token = %d %.80q", path, rec.Code, rec.Body.String())
	}
	off := Handler(&fakeJob{}, testOptions(http.NotFoundHandler(), config.Admin{}))
	if code, body := get(t, off, "GET", path); code != http.StatusForbidden || !strings.Contains(body, "set admin.token") {
		t.Errorf("GET %s with no admin.token = %d %s, want 403", path, code, body)
	}
}

func TestServerListensAndStops(t *testing.T) {
	srv, err := Listen("127.0.0.1:0", Handler(&fakeJob{}, testOptions(http.NotFoundHandler(), config.Admin{})))
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
