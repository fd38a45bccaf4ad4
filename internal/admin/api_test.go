package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.yaml.in/yaml/v3"

	"github.com/eoflow/pipeline/checkpoint/savepoint"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/engine"
	"github.com/eoflow/pipeline/metrics"
)

// docs/api.yaml is held to the handlers: every route is documented and
// every documented route served (TestAPIDocumentsEveryRoute), and every
// answer of every documented status code is produced by the real handlers
// and valid against its documented schema (TestAPIAnswersMatchTheDocument).
// The schemas forbid undocumented fields, so a field added to a response
// must be documented too.

// apiDoc is the part of an OpenAPI 3.0 document the tests read.
type apiDoc struct {
	Paths      map[string]map[string]apiOperation `yaml:"paths"`
	Components struct {
		Schemas   map[string]*apiSchema  `yaml:"schemas"`
		Responses map[string]apiResponse `yaml:"responses"`
	} `yaml:"components"`
}

type apiOperation struct {
	Responses map[string]apiResponse `yaml:"responses"`
}

type apiResponse struct {
	Ref     string                                 `yaml:"$ref"`
	Content map[string]struct{ Schema *apiSchema } `yaml:"content"`
}

type apiSchema struct {
	Ref                  string                `yaml:"$ref"`
	Type                 string                `yaml:"type"`
	Format               string                `yaml:"format"`
	Nullable             bool                  `yaml:"nullable"`
	Enum                 []string              `yaml:"enum"`
	Required             []string              `yaml:"required"`
	Properties           map[string]*apiSchema `yaml:"properties"`
	AdditionalProperties yaml.Node             `yaml:"additionalProperties"`
	Items                *apiSchema            `yaml:"items"`
	// AllOf is how OpenAPI 3.0 makes a reference nullable: a $ref's
	// siblings are ignored.
	AllOf []*apiSchema `yaml:"allOf"`
}

var loadedAPI = sync.OnceValues(func() (*apiDoc, error) {
	data, err := os.ReadFile("../../docs/api.yaml")
	if err != nil {
		return nil, err
	}
	var doc apiDoc
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("docs/api.yaml: %w", err)
	}
	return &doc, nil
})

func loadAPI(t *testing.T) *apiDoc {
	t.Helper()
	doc, err := loadedAPI()
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// response is the documented response of method path with status code.
func (d *apiDoc) response(method, path string, code int) (apiResponse, bool) {
	op, ok := d.Paths[path][strings.ToLower(method)]
	if !ok {
		return apiResponse{}, false
	}
	r, ok := op.Responses[fmt.Sprint(code)]
	if ref, found := strings.CutPrefix(r.Ref, "#/components/responses/"); found {
		r, ok = d.Components.Responses[ref]
	}
	return r, ok
}

// validate checks v (decoded JSON) against s, reporting every mismatch.
func (d *apiDoc) validate(v any, s *apiSchema, at string) []string {
	if len(s.AllOf) > 0 {
		if v == nil && s.Nullable {
			return nil
		}
		var errs []string
		for _, a := range s.AllOf {
			errs = append(errs, d.validate(v, a, at)...)
		}
		return errs
	}
	if s.Ref != "" {
		name, _ := strings.CutPrefix(s.Ref, "#/components/schemas/")
		ref, ok := d.Components.Schemas[name]
		if !ok {
			return []string{at + ": unknown schema " + s.Ref}
		}
		return d.validate(v, ref, at)
	}
	if v == nil {
		if s.Nullable {
			return nil
		}
		return []string{at + ": null, not nullable"}
	}
	var errs []string
	fail := func(format string, args ...any) { errs = append(errs, at+": "+fmt.Sprintf(format, args...)) }
	switch s.Type {
	case "object":
		obj, ok := v.(map[string]any)
		if !ok {
			fail("want an object, got %T", v)
			break
		}
		for _, r := range s.Required {
			if _, ok := obj[r]; !ok {
				fail("required %q missing", r)
			}
		}
		var extra *apiSchema
		switch s.AdditionalProperties.Kind {
		case 0:
		case yaml.ScalarNode:
			if s.AdditionalProperties.Value != "false" {
				fail("additionalProperties must be false or a schema")
			}
		default:
			extra = new(apiSchema)
			if err := s.AdditionalProperties.Decode(extra); err != nil {
				fail("additionalProperties: %v", err)
			}
		}
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range obj {
				if !yield(k) {
					return
				}
			}
		}) {
			switch ps, ok := s.Properties[k]; {
			case ok:
				errs = append(errs, d.validate(obj[k], ps, at+"."+k)...)
			case extra != nil:
				errs = append(errs, d.validate(obj[k], extra, at+"."+k)...)
			default:
				fail("field %q is not documented", k)
			}
		}
	case "array":
		arr, ok := v.([]any)
		if !ok {
			fail("want an array, got %T", v)
			break
		}
		for i, x := range arr {
			errs = append(errs, d.validate(x, s.Items, fmt.Sprintf("%s[%d]", at, i))...)
		}
	case "string":
		str, ok := v.(string)
		if !ok {
			fail("want a string, got %T", v)
			break
		}
		if s.Format == "date-time" {
			if _, err := time.Parse(time.RFC3339Nano, str); err != nil {
				fail("not a date-time: %q", str)
			}
		}
		if len(s.Enum) > 0 && !slices.Contains(s.Enum, str) {
			fail("%q is not one of %v", str, s.Enum)
		}
	case "integer", "number":
		f, ok := v.(float64)
		if !ok {
			fail("want a %s, got %T", s.Type, v)
		} else if s.Type == "integer" && f != math.Trunc(f) {
			fail("want an integer, got %v", f)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			fail("want a boolean, got %T", v)
		}
	default:
		fail("schema without a type")
	}
	return errs
}

// Every route the handler serves is documented, and every documented
// operation is served.
func TestAPIDocumentsEveryRoute(t *testing.T) {
	doc := loadAPI(t)
	var documented, served []string
	for path, ops := range doc.Paths {
		for method := range ops {
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	for _, r := range newServer(&fakeJob{}, testOptions(nil, config.Admin{})).routes() {
		served = append(served, strings.Replace(r.pattern, "/{$}", "/", 1))
	}
	sort.Strings(documented)
	sort.Strings(served)
	for _, s := range served {
		if !slices.Contains(documented, s) {
			t.Errorf("%s is served but not documented in docs/api.yaml", s)
		}
	}
	for _, d := range documented {
		if !slices.Contains(served, d) {
			t.Errorf("%s is documented in docs/api.yaml but not served", d)
		}
	}
}

// testConfig is a job with a source with event time, a keyed sum and a
// window with a late topic.
func testConfig() *config.Config {
	cfg, err := config.Parse("job.yaml", []byte(`
name: j
kafka: {brokers: ["127.0.0.1:9092"], sasl: {mechanism: PLAIN, username: u, password: kafka-s3cret}}
sources:
  - id: numbers
    topics: [numbers]
    event_time: {timestamp: ts, idle_timeout: 1m}
steps:
  - {id: parity, key_by: 'n % 2 == 0 ? "even" : "odd"'}
  - {id: sums, aggregate: {values: {count: count(), sum: sum(n)}}}
  - {id: per-10s, from: parity, window: {tumbling: 10s, values: {count: count()}}}
sinks:
  - {from: sums, topic: sums}
  - {from: per-10s, topic: windows}
`), nil)
	if err != nil {
		panic(err)
	}
	return cfg
}

// fakeRecords answers Tail with records, or err.
type fakeRecords struct {
	recs map[string][]*kgo.Record
	err  error
}

func (f fakeRecords) Tail(_ context.Context, topic string, n int) ([]*kgo.Record, error) {
	if f.err != nil {
		return nil, f.err
	}
	return f.recs[topic], nil
}

// richServer is a handler whose job has something in every field the
// API shows: a group, restarts, checkpoints and failures, metrics of
// every operator, dead letters and late records, savepoints.
func richServer(t *testing.T) (http.Handler, *fakeJob, string) {
	t.Helper()
	at := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	root := t.TempDir()
	if err := os.CopyFS(filepath.Join(root, "daily", "sp-golden"), os.DirFS("../../checkpoint/savepoint/testdata/v1")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "broken"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "broken", savepoint.ManifestFile), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	sp := engine.SavepointInfo{Dir: filepath.Join(root, "sp-1"), ID: "sha256:ab", CheckpointID: 9, Created: at, Keys: 2, Bytes: 40}
	job := &fakeJob{
		ready: true,
		st: engine.Status{
			Job: "j", Guarantee: "exactly_once", Mode: "group", State: engine.StateRestarting, StartedAt: at, Error: "checkpoint 3 timed out",
			Restarts: 1, RecentRestarts: []engine.RestartInfo{{At: at, Reason: "timeout", Error: "checkpoint 3 timed out"}},
			Topology: engine.Topology{
				Sources: []engine.SourceInfo{{ID: "numbers", Topics: []string{"numbers"}}},
				Steps:   []engine.StepInfo{{ID: "parity", Kind: "key_by"}, {ID: "sums", Kind: "aggregate"}, {ID: "per-10s", Kind: "window"}},
				Sinks:   []engine.SinkInfo{{Topic: "sums", DeadLetterTopic: "j-dead-letter"}}, Workers: 2, KeyGroups: 128,
			},
			Partitions:   []engine.PartitionInfo{{Topic: "numbers", Partition: 0, StartOffset: 10}},
			Checkpoint:   engine.CheckpointState{LastCompleted: 9, LastCompletedAt: at, Interval: "1s"},
			RestoredFrom: "sha256:cd", LastSavepoint: &sp,
			Group: &engine.GroupInfo{
				Instance: "a", MemberID: "m-a", Generation: 3, Assigned: []string{"numbers/0", "j-repartition/1"}, Members: []string{"a", "b"},
				// b's address refuses connections: it is listed unreachable.
				Admins:     map[string]string{"a": "127.0.0.1:8080", "b": "127.0.0.1:1"},
				KeyGroups:  []engine.KeyGroupRange{{Partition: 1, Start: 4, End: 8}},
				Rebalances: []engine.AssignmentInfo{{At: at, Generation: 3, Members: []string{"a", "b"}, Partitions: 2}},
			},
		},
		cps:      []engine.CheckpointInfo{{ID: 9, CompletedAt: at, DurationMs: 12.5, AlignmentMs: 1, CommitMs: 8, StateBytes: 400, Outputs: 20}},
		failures: []engine.CheckpointFailure{{ID: 3, At: at, Reason: "timeout", Error: "checkpoint 3 timed out"}},
		savepoint: func(dir string) (savepoint.Summary, error) {
			switch filepath.Base(dir) {
			case "taken":
				return savepoint.Summary{}, fmt.Errorf("%w: %w", engine.ErrSavepoint, savepoint.ErrExists)
			case "fails":
				return savepoint.Summary{}, fmt.Errorf("%w: disk full", engine.ErrSavepoint)
			}
			return savepoint.Summary{Dir: dir, ID: "sha256:ef", CheckpointID: 10, Created: at}, nil
		},
	}
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, "j")
	m.Input("numbers").Add(100, 1000)
	m.Output("sums").Add(90, 900)
	m.Output("windows").Add(3, 30)
	m.Output("j-dead-letter").Add(2, 20)
	m.Output("j-late").Add(1, 10)
	m.SetLag("numbers", 0, 5)
	m.SetLag("numbers", -1, 0) // a failed fetch's pseudo-partition: not shown
	m.DeadLettered("decode")
	m.OperatorDeadLetter("parity")
	m.OperatorRecords("sums").Add(98)
	m.StepRecords("parity", "passed").Add(98)
	m.StepRecords("parity", "failed").Add(1)
	m.OperatorRecords("per-10s").Add(97)
	m.LateRecord("per-10s", "side_output")
	m.SetState("sums", 2, 64)
	m.SetOpenWindows("per-10s", 2)
	m.WindowsFired("per-10s", 4)
	m.SetWatermark(at.UnixMilli())
	m.SetPartitionWatermark("numbers", 0, at.UnixMilli())
	m.SetPartitionIdle("numbers", 0, true)
	m.TaskBlocked("source-0").Add(time.Second)
	m.TaskBlocked("worker-0").Add(time.Millisecond)
	m.Restarted("timeout")
	m.CheckpointFailed("timeout")
	records := fakeRecords{recs: map[string][]*kgo.Record{
		"j-dead-letter": {{Topic: "j-dead-letter", Partition: 0, Offset: 7, Timestamp: at, Key: []byte("k\xff"), Value: []byte(`{"n": 2` + strings.Repeat("x", 2000)),
			Headers: []kgo.RecordHeader{{Key: "pipeline.error.code", Value: []byte("decode")}}}},
		"j-late": {{Topic: "j-late", Partition: 1, Offset: 3, Timestamp: at, Value: []byte(`{"n": 1, "ts": 0}`)}},
	}}
	cfg := testConfig()
	cfg.Admin = config.Admin{Token: "t", SavepointDir: root}
	return Handler(job, Options{Config: cfg, Metrics: m.Handler(), Gatherer: reg, Records: records}), job, root
}

// apiCall is one request of TestAPIAnswersMatchTheDocument.
type apiCall struct {
	method, target, token, body string
	handler                     http.Handler // nil: the rich server's
	code                        int
}

// Every documented answer of every endpoint, produced by the real
// handlers, is valid against its documented schema; answers with a code
// the document does not list fail.
func TestAPIAnswersMatchTheDocument(t *testing.T) {
	doc := loadAPI(t)
	h, _, _ := richServer(t)
	bare := Handler(&fakeJob{st: engine.Status{Job: "j", Guarantee: "exactly_once", State: engine.StateStarting, Mode: "single", Topology: engine.Topology{Sources: []engine.SourceInfo{}, Steps: []engine.StepInfo{}, Sinks: []engine.SinkInfo{}}, Partitions: []engine.PartitionInfo{}, RecentRestarts: []engine.RestartInfo{}}},
		Options{Config: testConfig()})
	failing := Handler(&fakeJob{}, Options{Config: testConfig(), Records: fakeRecords{err: fmt.Errorf("broker down")}})
	calls := []apiCall{
		{method: "GET", target: "/healthz", code: 200},
		{method: "GET", target: "/readyz", code: 200},
		{method: "GET", target: "/readyz", handler: bare, code: 503},
		{method: "GET", target: "/metrics", code: 200},
		{method: "GET", target: "/api/v1/job", code: 200},
		{method: "GET", target: "/api/v1/job", handler: bare, code: 200},
		{method: "GET", target: "/api/v1/checkpoints", code: 200},
		{method: "GET", target: "/api/v1/checkpoints", handler: bare, code: 200},
		{method: "GET", target: "/api/v1/graph", code: 200},
		{method: "GET", target: "/api/v1/graph", handler: bare, code: 200},
		{method: "GET", target: "/api/v1/group", code: 200},
		{method: "GET", target: "/api/v1/group", handler: bare, code: 200},
		{method: "GET", target: "/api/v1/flow", code: 200},
		{method: "GET", target: "/api/v1/flow", handler: bare, code: 200},
		{method: "GET", target: "/api/v1/eventtime", code: 200},
		{method: "GET", target: "/api/v1/eventtime", handler: bare, code: 200},
		{method: "GET", target: "/api/v1/dead-letters", code: 200},
		{method: "GET", target: "/api/v1/dead-letters?limit=1", handler: failing, code: 200},
		{method: "GET", target: "/api/v1/dead-letters?limit=0", code: 400},
		{method: "GET", target: "/api/v1/dead-letters", handler: bare, code: 503},
		{method: "GET", target: "/api/v1/late-records?limit=200", code: 200},
		{method: "GET", target: "/api/v1/late-records?limit=x", code: 400},
		{method: "GET", target: "/api/v1/late-records", handler: bare, code: 503},
		{method: "GET", target: "/api/v1/savepoints", code: 200},
		{method: "GET", target: "/api/v1/savepoints", handler: bare, code: 200},
		{method: "POST", target: "/api/v1/savepoints", token: "t", body: `{"dir": "sp-2"}`, code: 200},
		{method: "POST", target: "/api/v1/savepoints", token: "t", body: `{"dir": "sp-3", "stop": true}`, code: 200},
		{method: "POST", target: "/api/v1/savepoints", token: "t", body: `{"dir": "../x"}`, code: 400},
		{method: "POST", target: "/api/v1/savepoints", body: `{"dir": "sp-4"}`, code: 401},
		{method: "POST", target: "/api/v1/savepoints", handler: bare, token: "t", body: `{"dir": "sp-4"}`, code: 403},
		{method: "POST", target: "/api/v1/savepoints", token: "t", body: `{"dir": "taken"}`, code: 409},
		{method: "POST", target: "/api/v1/savepoints", token: "t", body: `{"dir": "fails"}`, code: 500},
		{method: "GET", target: "/api/v1/config", code: 200},
		{method: "GET", target: "/", code: 302},
		{method: "GET", target: "/ui/", code: 200},
		{method: "GET", target: "/ui/app.js", code: 200},
		{method: "GET", target: "/ui/nope.js", code: 404},
		{method: "GET", target: "/debug/pprof/", token: "t", code: 200},
		{method: "GET", target: "/debug/pprof/", code: 401},
		{method: "GET", target: "/debug/pprof/", handler: bare, code: 403},
		{method: "GET", target: "/debug/pprof/profile", code: 401},
		{method: "GET", target: "/debug/pprof/profile", handler: bare, code: 403},
		{method: "GET", target: "/debug/pprof/trace", code: 401},
		{method: "GET", target: "/debug/pprof/trace", handler: bare, code: 403},
	}
	// A profile or trace takes a second each: their 200 is Go's.
	produced := map[string]bool{"GET /debug/pprof/profile 200": true, "GET /debug/pprof/trace 200": true}
	for _, c := range calls {
		handler := c.handler
		if handler == nil {
			handler = h
		}
		req := httptest.NewRequest(c.method, c.target, strings.NewReader(c.body))
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		name := c.method + " " + c.target
		if rec.Code != c.code {
			t.Errorf("%s = %d, want %d: %s", name, rec.Code, c.code, rec.Body)
			continue
		}
		path, _, _ := strings.Cut(c.target, "?")
		if strings.HasPrefix(path, "/ui/") {
			path = "/ui/"
		}
		produced[fmt.Sprintf("%s %s %d", c.method, path, rec.Code)] = true
		resp, ok := doc.response(c.method, path, rec.Code)
		if !ok {
			t.Errorf("%s answered %d, which docs/api.yaml does not document", name, rec.Code)
			continue
		}
		ctype, _, _ := strings.Cut(rec.Header().Get("Content-Type"), ";")
		if len(resp.Content) == 0 {
			continue
		}
		content, ok := resp.Content[ctype]
		if !ok {
			t.Errorf("%s answered %d as %s; documented: %v", name, rec.Code, ctype, slices.Collect(func(yield func(string) bool) {
				for k := range resp.Content {
					if !yield(k) {
						return
					}
				}
			}))
			continue
		}
		if ctype != "application/json" {
			continue
		}
		var v any
		if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
			t.Errorf("%s: not JSON: %v", name, err)
			continue
		}
		for _, e := range doc.validate(v, content.Schema, name) {
			t.Error(e)
		}
	}
	// Every documented answer was produced.
	for path, ops := range doc.Paths {
		for method, op := range ops {
			for code := range op.Responses {
				if k := fmt.Sprintf("%s %s %s", strings.ToUpper(method), path, code); !produced[k] {
					t.Errorf("%s: documented but not produced by the test", k)
				}
			}
		}
	}
}
