package srtest

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr/srfake"
)

// Registry is an srfake registry on a fixed loopback port.
type Registry struct {
	*srfake.Registry
	t    testing.TB
	addr string
	mu   sync.Mutex
	srv  *http.Server
	done chan struct{}
}

// Start serves a new registry until the test ends.
func Start(t testing.TB) *Registry {
	t.Helper()
	r := &Registry{Registry: srfake.NewRegistry(), t: t}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.addr = ln.Addr().String()
	r.serve(ln)
	t.Cleanup(r.Stop)
	return r
}

// URL is the registry's base URL; it stays the same across Stop and
// Resume.
func (r *Registry) URL() string { return "http://" + r.addr }

func (r *Registry) serve(ln net.Listener) {
	srv := &http.Server{Handler: serialized(r.Registry, r.Handler()), ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			r.t.Errorf("srtest: %v", err)
		}
	}()
	r.mu.Lock()
	r.srv, r.done = srv, done
	r.mu.Unlock()
}

// Stop stops serving (connections are refused) and closes the open
// ones; the schemas are kept.
func (r *Registry) Stop() {
	r.mu.Lock()
	srv, done := r.srv, r.done
	r.srv = nil
	r.mu.Unlock()
	if srv == nil {
		return
	}
	_ = srv.Close()
	<-done
}

// Resume serves again on the same port.
func (r *Registry) Resume() {
	r.t.Helper()
	var ln net.Listener
	var err error
	for range 50 { // the port may linger a moment after Close
		if ln, err = net.Listen("tcp", r.addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		r.t.Fatalf("srtest: listening on %s again: %v", r.addr, err)
	}
	r.serve(ln)
}

// Wait blocks until the registry answers, or ctx ends.
func (r *Registry) Wait(ctx context.Context) error {
	for {
		resp, err := http.Get(r.URL() + "/subjects")
		if err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
