package schema

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/internal/kclient"
	"github.com/eoflow/pipeline/metrics"
)

// ErrUnavailable wraps a registry request that got no answer: the registry
// is unreachable, timed out, answered 5xx or 429, or refused the
// credentials. Nothing about the schema is known: wait and ask again.
var ErrUnavailable = errors.New("schema registry unavailable")

// Registry is the job's schema registry client: franz-go's sr.Client,
// a cache of the schemas it fetched by id (compiled for reading, and
// kept for the life of the process: a schema id never changes meaning),
// and the bookkeeping of outages (a log line when one starts and when it
// ends, and metrics). Safe for concurrent use.
type Registry struct {
	cl      *sr.Client
	urls    []string
	log     *slog.Logger
	metrics *metrics.Metrics
	now     func() time.Time

	// ids is the cache, copied on write: the hot path (a decoder looking
	// up each record's id) reads it without a lock.
	ids atomic.Pointer[map[int]*entry]
	mu  sync.Mutex // serializes fetches and writes of ids, and outage

	outage struct {
		since time.Time // zero: none
	}
}

// entry is one schema id as the registry answered it: a schema compiled
// for reading, or why records naming it cannot be read (an id the
// registry does not have, a schema that does not compile).
type entry struct {
	id     int
	schema sr.Schema
	avro   *avroReader
	proto  *protoFile
	json   *jsonFile
	err    error
}

// NewRegistry makes the client. Nothing connects yet.
func NewRegistry(cfg config.SchemaRegistry, log *slog.Logger, m *metrics.Metrics) (*Registry, error) {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if t := cfg.TLS; t.Enabled || t.CAFile != "" || t.CertFile != "" || t.InsecureSkipVerify || t.ServerName != "" {
		tc, err := kclient.TLSConfig(t)
		if err != nil {
			return nil, fmt.Errorf("schema_registry.tls: %w", err)
		}
		transport.TLSClientConfig = tc
	} else {
		transport.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	opts := []sr.ClientOpt{
		sr.URLs(cfg.URL...),
		sr.HTTPClient(&http.Client{Timeout: cfg.Timeout, Transport: transport}),
		sr.UserAgent("eoflow-pipeline"),
	}
	if cfg.Username != "" {
		opts = append(opts, sr.BasicAuth(cfg.Username, cfg.Password))
	}
	if cfg.Token != "" {
		opts = append(opts, sr.BearerToken(cfg.Token))
	}
	cl, err := sr.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("schema_registry: %w", err)
	}
	if m == nil {
		m = metrics.New(nil, "schema")
	}
	r := &Registry{cl: cl, urls: cfg.URL, log: log, metrics: m, now: time.Now}
	r.ids.Store(&map[int]*entry{})
	return r, nil
}

// Client is the underlying sr.Client.
func (r *Registry) Client() *sr.Client { return r.cl }

// cached returns the entry of id, or nil when it was never fetched.
func (r *Registry) cached(id int) *entry { return (*r.ids.Load())[id] }

// fetch makes sure id is in the cache: it asks the registry for it once
// (and for the schemas it references), compiles it, and keeps the answer,
// an unknown id included. The error is ErrUnavailable (wrapped) when the
// registry gave no answer, or ctx's.
func (r *Registry) fetch(ctx context.Context, id int) error {
	if r.cached(id) != nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cached(id) != nil {
		return nil // fetched while we waited for the lock
	}
	s, err := r.cl.SchemaByID(ctx, id)
	e := &entry{id: id, schema: s}
	switch {
	case err == nil:
		if e.err = e.compile(ctx, r); errors.Is(e.err, ErrUnavailable) || ctx.Err() != nil {
			return r.failed("fetch", e.err)
		}
	case notFound(err):
		e.err = fmt.Errorf("schema id %d: the registry has no such schema", id)
	case unavailable(ctx, err):
		return r.failed("fetch", err)
	default:
		e.err = fmt.Errorf("schema id %d: the registry refused it: %w", id, err)
	}
	r.answered()
	old := *r.ids.Load()
	next := make(map[int]*entry, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[id] = e
	r.ids.Store(&next)
	r.metrics.SchemaRegistryCached(len(next))
	return nil
}

// references fetches the schemas s references, depth first (each once),
// for a parser: the referenced subjects and versions with their text.
func (r *Registry) references(ctx context.Context, s sr.Schema, seen map[string]bool, out *[]sr.SubjectSchema) error {
	for _, ref := range s.References {
		key := fmt.Sprintf("%s/%d", ref.Subject, ref.Version)
		if seen[key] {
			continue
		}
		seen[key] = true
		ss, err := r.cl.SchemaByVersion(ctx, ref.Subject, ref.Version)
		if err != nil {
			if unavailable(ctx, err) {
				return fmt.Errorf("%w: %w", ErrUnavailable, err)
			}
			return fmt.Errorf("reference %s version %d: %w", ref.Subject, ref.Version, err)
		}
		if err := r.references(ctx, ss.Schema, seen, out); err != nil {
			return err
		}
		// The parser needs the name the schema was referenced by.
		ss.Subject = ref.Name
		*out = append(*out, ss)
	}
	return nil
}

// failed records a request that got no answer (an outage begins, or goes
// on) and returns it as ErrUnavailable.
func (r *Registry) failed(op string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		if ctxErr := contextErr(err); ctxErr != nil {
			return ctxErr
		}
	}
	r.metrics.SchemaRegistryError(op)
	if r.outage.since.IsZero() {
		r.outage.since = r.now()
		r.metrics.SchemaRegistryWaiting(true)
		msg := "schema registry unreachable: the job waits for it and retries; nothing is lost or dead-lettered for it"
		var re *sr.ResponseError
		if errors.As(err, &re) && (re.StatusCode == http.StatusUnauthorized || re.StatusCode == http.StatusForbidden) {
			msg = "schema registry refused the job's credentials (schema_registry.username and password, or token): the job waits and retries; nothing is lost or dead-lettered for it"
		}
		r.log.Warn(msg, "url", strings.Join(r.urls, ","), "request", op, "err", err)
	}
	if errors.Is(err, ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// answered ends an outage, if one was on.
func (r *Registry) answered() {
	if r.outage.since.IsZero() {
		return
	}
	waited := r.now().Sub(r.outage.since)
	r.outage.since = time.Time{}
	r.metrics.SchemaRegistryWaiting(false)
	r.metrics.SchemaRegistryWaited(waited)
	r.log.Info("schema registry reachable again", "url", strings.Join(r.urls, ","), "waited", waited.Round(time.Millisecond))
}

// do runs one request of kind op that must get an answer: while the
// registry gives none it retries, backing off from 100 ms to 5 s, until
// ctx ends. Any answer (an error the registry gave included) is returned.
func (r *Registry) do(ctx context.Context, op string, fn func(context.Context) error) error {
	backoff := 100 * time.Millisecond
	for {
		err := fn(ctx)
		if err == nil || !unavailable(ctx, err) {
			r.mu.Lock()
			r.answered()
			r.mu.Unlock()
			return err
		}
		r.mu.Lock()
		ferr := r.failed(op, err)
		r.mu.Unlock()
		if !errors.Is(ferr, ErrUnavailable) {
			return ferr
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// contextErr is the context error err wraps, if it is one.
func contextErr(err error) error {
	switch {
	case errors.Is(err, context.Canceled):
		return context.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return context.DeadlineExceeded
	}
	return nil
}

// notFound reports whether the registry answered that a schema, subject
// or version does not exist (error codes 40401-40403). A 404 without a
// registry error code is not an answer about the schema: a wrong URL.
func notFound(err error) bool {
	var re *sr.ResponseError
	if !errors.As(err, &re) || re.StatusCode != http.StatusNotFound {
		return false
	}
	return re.ErrorCode >= 40401 && re.ErrorCode <= 40403 || re.ErrorCode == 40400 ||
		re.ErrorCode == 404 && strings.Contains(strings.ToLower(re.Message), "not found")
}

// unavailable reports whether err means the registry gave no answer to
// rely on: to be retried.
func unavailable(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil {
		return false
	}
	if errors.Is(err, ErrUnavailable) {
		return true
	}
	var re *sr.ResponseError
	if errors.As(err, &re) {
		switch {
		case re.StatusCode >= 500, re.StatusCode == http.StatusTooManyRequests, re.StatusCode == http.StatusRequestTimeout,
			re.StatusCode == http.StatusUnauthorized, re.StatusCode == http.StatusForbidden:
			return true
		case re.StatusCode == http.StatusNotFound:
			return !notFound(err)
		}
		return false
	}
	return true // no answer at all: refused, reset, timed out, DNS
}
