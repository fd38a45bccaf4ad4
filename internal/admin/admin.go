package admin

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eoflow/pipeline/checkpoint/savepoint"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/engine"
	"github.com/eoflow/pipeline/internal/ui"
)

// Job is what the API reads and asks; *engine.Job implements it.
type Job interface {
	Status() engine.Status
	Ready() bool
	Checkpoints() []engine.CheckpointInfo
	CheckpointFailures() []engine.CheckpointFailure
	Savepoint(ctx context.Context, dir string) (savepoint.Summary, error)
	SavepointAndStop(ctx context.Context, dir string) (savepoint.Summary, error)
}

var _ Job = (*engine.Job)(nil)

// maxRequestBody bounds what a POST may send: a path fits easily.
const maxRequestBody = 64 << 10

// SavepointRequest is the body of POST /api/v1/savepoints.
type SavepointRequest struct {
	// Dir is where the savepoint goes, on the job's machine: a directory
	// below admin.savepoint_dir, named relative to it ("sp-1"), or an
	// absolute path that lies below it. Its parent must exist; it must
	// not, or be empty.
	Dir string `json:"dir"`
	// Stop makes the savepoint the job's final checkpoint and stops it
	// (exit 0), as run --stop-with-savepoint does on a signal: the upgrade
	// path. The answer comes once the job has stopped.
	Stop bool `json:"stop,omitempty"`
}

// SavepointResponse is the answer to POST /api/v1/savepoints.
type SavepointResponse struct {
	Savepoint engine.SavepointInfo `json:"savepoint"`
	// Stopped: the job stopped after it ({"stop": true}).
	Stopped bool `json:"stopped,omitempty"`
	// Note says what else to know, e.g. that other processes of a
	// group-mode job run on.
	Note string `json:"note,omitempty"`
}

// ErrorResponse is the body of every error answer of the API.
type ErrorResponse struct {
	Error string `json:"error"`
}

// Options are what the handler serves besides the job.
type Options struct {
	// Config is the job's configuration: its admin section (Token, the
	// bearer token of the endpoints that act or cost, empty turning them
	// off; SavepointDir, where savepoints go, the default when empty), its
	// job graph, the topics of the tails, and GET /api/v1/config.
	Config *config.Config
	// Metrics serves /metrics. Gatherer is the job's registry: the JSON
	// views read their numbers from it (nil: from none).
	Metrics  http.Handler
	Gatherer prometheus.Gatherer
	// Records reads the tails of the dead-letter and late topics (nil:
	// those endpoints answer 503).
	Records RecordReader
	// PeerTimeout bounds each request GET /api/v1/group makes to the
	// job's other processes (group mode; default 1.5s).
	PeerTimeout time.Duration
}

// Handler serves the endpoints for job: the admin API (doc.go,
// docs/api.yaml), /metrics, and the web UI at /ui/.
func Handler(job Job, o Options) http.Handler {
	mux := http.NewServeMux()
	for _, r := range newServer(job, o).routes() {
		mux.HandleFunc(r.pattern, r.handler)
	}
	return mux
}

// server holds what the handlers share.
type server struct {
	job          Job
	o            Options
	cfg          *config.Config
	token        string
	savepointDir string
	views        *views
	tails        *tails
	peers        *peerClient
	ui           http.Handler
}

func newServer(job Job, o Options) *server {
	cfg := o.Config
	if cfg == nil {
		cfg = &config.Config{}
	}
	s := &server{job: job, o: o, cfg: cfg, token: cfg.Admin.Token, savepointDir: cfg.Admin.SavepointDir, ui: ui.Handler()}
	if s.savepointDir == "" {
		s.savepointDir = config.DefaultSavepointDir
	}
	if s.o.Metrics == nil {
		s.o.Metrics = http.NotFoundHandler()
	}
	s.views = newViews(cfg, o.Gatherer)
	s.peers = newPeerClient(o.PeerTimeout)
	s.tails = newTails(cfg, o.Records)
	return s
}

// route is one endpoint: a ServeMux pattern and its handler. Every route
// is documented in docs/api.yaml (api_test.go holds them to it).
type route struct {
	pattern string
	handler http.HandlerFunc
}

func (s *server) routes() []route {
	rs := []route{
		{"GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			_, _ = w.Write([]byte("ok\n"))
		}},
		{"GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
			st := s.job.Status()
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			if !s.job.Ready() {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
			_, _ = w.Write([]byte(string(st.State) + "\n"))
		}},
		{"GET /metrics", s.o.Metrics.ServeHTTP},
		{"GET /api/v1/job", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, s.job.Status()) }},
		{"GET /api/v1/checkpoints", s.checkpoints},
		{"GET /api/v1/graph", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, s.views.graph()) }},
		{"GET /api/v1/flow", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, s.views.flow()) }},
		{"GET /api/v1/group", s.group},
		{"GET /api/v1/eventtime", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, s.views.eventTime()) }},
		{"GET /api/v1/dead-letters", func(w http.ResponseWriter, r *http.Request) { s.tails.serve(w, r, deadLetters) }},
		{"GET /api/v1/late-records", func(w http.ResponseWriter, r *http.Request) { s.tails.serve(w, r, lateRecords) }},
		{"GET /api/v1/savepoints", s.listSavepoints},
		{"POST /api/v1/savepoints", s.savepoint},
		{"GET /api/v1/config", s.config},
		// The web UI (internal/ui); / leads to it.
		{"GET /{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ui/", http.StatusFound) }},
		{"GET /ui/", s.ui.ServeHTTP},
	}
	// Profiles, for finding where CPU goes. They need the token: the
	// image listens on 0.0.0.0, a CPU profile or trace costs the job
	// while it runs, and stacks and heap samples show its internals.
	// `curl -H "Authorization: Bearer $TOKEN" -o cpu.pprof
	// http://ADDR/debug/pprof/profile?seconds=10`, then `go tool pprof cpu.pprof`.
	for _, p := range []struct {
		pattern string
		h       http.HandlerFunc
	}{
		{"GET /debug/pprof/", pprof.Index},
		{"GET /debug/pprof/profile", pprof.Profile},
		{"GET /debug/pprof/trace", pprof.Trace},
	} {
		rs = append(rs, route{p.pattern, func(w http.ResponseWriter, r *http.Request) {
			if s.authorized(w, r) {
				p.h(w, r)
			}
		}})
	}
	return rs
}

// CheckpointsResponse is the answer to GET /api/v1/checkpoints.
type CheckpointsResponse struct {
	// Checkpoints are the recently completed ones, Failures the recently
	// aborted ones, newest first.
	Checkpoints []engine.CheckpointInfo    `json:"checkpoints"`
	Failures    []engine.CheckpointFailure `json:"failures"`
	// Interval is checkpoint.interval.
	Interval string `json:"interval"`
}

func (s *server) checkpoints(w http.ResponseWriter, _ *http.Request) {
	resp := CheckpointsResponse{Checkpoints: s.job.Checkpoints(), Failures: s.job.CheckpointFailures(), Interval: s.job.Status().Checkpoint.Interval}
	if resp.Checkpoints == nil {
		resp.Checkpoints = []engine.CheckpointInfo{}
	}
	if resp.Failures == nil {
		resp.Failures = []engine.CheckpointFailure{}
	}
	writeJSON(w, resp)
}

func (s *server) savepoint(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	var req SavepointRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, `the body must be JSON like {"dir": "sp-1"}: `+err.Error())
		return
	}
	if req.Dir == "" {
		writeError(w, http.StatusBadRequest, `"dir" is required: the savepoint's directory, below admin.savepoint_dir`)
		return
	}
	dir, err := savepointTarget(s.savepointDir, req.Dir)
	switch {
	case errors.Is(err, errOutside):
		writeError(w, http.StatusBadRequest, err.Error())
		return
	case err != nil:
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	// The request's context only bounds the wait: a client that gives
	// up does not leave half a savepoint behind (the job finishes or
	// removes it), nor a job half stopped (it stops all the same).
	var (
		sum  savepoint.Summary
		note string
	)
	if req.Stop {
		note = othersRunOn(s.job.Status())
		sum, err = s.job.SavepointAndStop(r.Context(), dir)
	} else {
		sum, err = s.job.Savepoint(r.Context(), dir)
	}
	switch {
	case errors.Is(err, savepoint.ErrExists), errors.Is(err, engine.ErrSavepointBusy), errors.Is(err, engine.ErrStopping):
		writeError(w, http.StatusConflict, err.Error())
	case err != nil:
		writeError(w, http.StatusInternalServerError, err.Error())
	default:
		writeJSON(w, SavepointResponse{Savepoint: engine.NewSavepointInfo(sum), Stopped: req.Stop, Note: note})
	}
}

// ConfigResponse is the answer to GET /api/v1/config.
type ConfigResponse struct {
	// File is the job file the process loaded.
	File string `json:"file"`
	// YAML is the effective configuration (config.Config.Effective):
	// every ${VAR} replaced, every default applied, secrets masked.
	YAML string `json:"yaml"`
	// Masked are the paths of the secrets replaced.
	Masked []string `json:"masked"`
}

func (s *server) config(w http.ResponseWriter, _ *http.Request) {
	text, masked, err := s.cfg.Effective()
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	if masked == nil {
		masked = []string{}
	}
	writeJSON(w, ConfigResponse{File: s.cfg.File(), YAML: string(text), Masked: masked})
}

// othersRunOn is the note of a stop with a savepoint in group mode while
// other processes were members: they run on, so the savepoint is the
// job's final state only if they stopped first.
func othersRunOn(st engine.Status) string {
	if st.Group == nil {
		return ""
	}
	var others []string
	for _, m := range st.Group.Members {
		if m != st.Group.Instance {
			others = append(others, m)
		}
	}
	if len(others) == 0 {
		return ""
	}
	return fmt.Sprintf("group mode: this process (%s) stopped; the others (%s) ran on when it was asked, reading after the savepoint: "+
		"for an upgrade, stop them first and take the savepoint on the last one", st.Group.Instance, strings.Join(others, ", "))
}

// authorized checks the request's bearer token, answering it if wrong.
// The comparison takes the same time for every wrong token of a length.
func (s *server) authorized(w http.ResponseWriter, r *http.Request) bool {
	token := s.token
	if token == "" {
		writeError(w, http.StatusForbidden, "this endpoint is off: set admin.token in the job's configuration to enable it (requests then send it as a bearer token)")
		return false
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
		w.Header().Set("WWW-Authenticate", `Bearer realm="pipeline"`)
		writeError(w, http.StatusUnauthorized, "missing or wrong bearer token (admin.token of the job's configuration)")
		return false
	}
	return true
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSONStatus(w, code, ErrorResponse{Error: msg})
}

func writeJSON(w http.ResponseWriter, v any) { writeJSONStatus(w, http.StatusOK, v) }

func writeJSONStatus(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// Server serves a Handler on an address until its context ends.
type Server struct {
	ln  net.Listener
	srv *http.Server
}

// Listen binds addr now, so a taken port is an error before the job starts.
func Listen(addr string, h http.Handler) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &Server{ln: ln, srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}}, nil
}

// WithHandler sets the handler, for a server bound before its handler
// could be built (the address goes into the job's configuration).
func (s *Server) WithHandler(h http.Handler) *Server {
	s.srv.Handler = h
	return s
}

// Close stops listening; for a server that never runs (Run closes its
// own). Closing it again, or after Run, does no harm.
func (s *Server) Close() error {
	if err := s.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

// Addr is the address it listens on (useful with port 0).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Run serves until ctx ends, then shuts down gracefully.
func (s *Server) Run(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(s.ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(shutCtx)
	if e := <-errc; !errors.Is(e, http.ErrServerClosed) {
		err = errors.Join(err, e)
	}
	return err
}
