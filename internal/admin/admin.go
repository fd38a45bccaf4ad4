package admin

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/eoflow/pipeline/runtime"
)

// Job is what the API reads; *runtime.Job implements it.
type Job interface {
	Status() runtime.Status
	Ready() bool
	Checkpoints() []runtime.CheckpointInfo
}

var _ Job = (*runtime.Job)(nil)

// Handler serves the endpoints for job, with metrics at /metrics.
func Handler(job Job, metrics http.Handler) http.Handler {
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
	// Profiles, for finding where CPU goes (`go tool pprof
	// http://ADDR/debug/pprof/profile?seconds=10`). Read-only, and the
	// listener is loopback unless configured otherwise.
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("GET /api/v1/job", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, job.Status())
	})
	mux.HandleFunc("GET /api/v1/checkpoints", func(w http.ResponseWriter, _ *http.Request) {
		cps := job.Checkpoints()
		if cps == nil {
			cps = []runtime.CheckpointInfo{}
		}
		writeJSON(w, map[string]any{"checkpoints": cps})
	})
	return mux
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
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
