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

	"github.com/eoflow/pipeline/checkpoint/savepoint"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/engine"
)

// Job is what the API reads and asks; *engine.Job implements it.
type Job interface {
	Status() engine.Status
	Ready() bool
	Checkpoints() []engine.CheckpointInfo
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

// Handler serves the endpoints for job, with metrics at /metrics. Of cfg
// it uses Token, the bearer token of the endpoints that act or cost
// (savepoints, profiles; empty turns them off), and SavepointDir, the
// directory savepoints go under (the default when empty).
func Handler(job Job, metrics http.Handler, cfg config.Admin) http.Handler {
	token, savepointDir := cfg.Token, cfg.SavepointDir
	if savepointDir == "" {
		savepointDir = config.DefaultSavepointDir
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		st := job.Status()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !job.Ready() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_, _ = w.Write([]byte(string(st.State) + "\n"))
	})
	mux.Handle("GET /metrics", metrics)
	// Profiles, for finding where CPU goes. They need the token: the
	// image listens on 0.0.0.0, a CPU profile or trace costs the job
	// while it runs, and stacks and heap samples show its internals.
	// `curl -H "Authorization: Bearer $TOKEN" -o cpu.pprof
	// http://ADDR/debug/pprof/profile?seconds=10`, then `go tool pprof cpu.pprof`.
	for path, h := range map[string]http.HandlerFunc{
		"GET /debug/pprof/":        pprof.Index,
		"GET /debug/pprof/profile": pprof.Profile,
		"GET /debug/pprof/trace":   pprof.Trace,
	} {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			if authorized(w, r, token) {
				h(w, r)
			}
		})
	}
	mux.HandleFunc("GET /api/v1/job", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, job.Status())
	})
	mux.HandleFunc("GET /api/v1/checkpoints", func(w http.ResponseWriter, _ *http.Request) {
		cps := job.Checkpoints()
		if cps == nil {
			cps = []engine.CheckpointInfo{}
		}
		writeJSON(w, map[string]any{"checkpoints": cps})
	})
	mux.HandleFunc("POST /api/v1/savepoints", func(w http.ResponseWriter, r *http.Request) {
		if !authorized(w, r, token) {
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
		dir, err := savepointTarget(savepointDir, req.Dir)
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
			note = othersRunOn(job.Status())
			sum, err = job.SavepointAndStop(r.Context(), dir)
		} else {
			sum, err = job.Savepoint(r.Context(), dir)
		}
		switch {
		case errors.Is(err, savepoint.ErrExists), errors.Is(err, engine.ErrSavepointBusy), errors.Is(err, engine.ErrStopping):
			writeError(w, http.StatusConflict, err.Error())
		case err != nil:
			writeError(w, http.StatusInternalServerError, err.Error())
		default:
			writeJSON(w, SavepointResponse{Savepoint: engine.NewSavepointInfo(sum), Stopped: req.Stop, Note: note})
		}
	})
	return mux
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
func authorized(w http.ResponseWriter, r *http.Request, token string) bool {
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
