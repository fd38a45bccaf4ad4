package admin

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func getJSON[T any](t *testing.T, h http.Handler, target string) T {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", target, nil))
	var v T
	if rec.Code != 200 {
		t.Fatalf("GET %s = %d %s", target, rec.Code, rec.Body)
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
		t.Fatalf("GET %s: %v", target, err)
	}
	return v
}

func nodeByID(t *testing.T, g GraphResponse, id string) GraphNode {
	t.Helper()
	for _, n := range g.Nodes {
		if n.ID == id {
			return n
		}
	}
	t.Fatalf("no node %q in %+v", id, g.Nodes)
	return GraphNode{}
}

func val(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

// The graph lays the metrics over the configuration's job graph: each
// node gets its own numbers, and the edges are the file's.
func TestGraphView(t *testing.T) {
	h, _, _ := richServer(t)
	g := getJSON[GraphResponse](t, h, "/api/v1/graph")
	if len(g.Nodes) != 6 {
		t.Fatalf("%d nodes, want 2 sinks, 3 steps and a source", len(g.Nodes))
	}
	for _, c := range []struct {
		id                        string
		records, keys, late, open any
		deadLetters, blocked      float64
		runsIn                    string
		tasks                     int
	}{
		{id: "numbers", records: 100.0, runsIn: "sources", blocked: 1, tasks: 1},
		{id: "parity", records: 98.0, deadLetters: 1, runsIn: "sources", blocked: 1, tasks: 1},
		{id: "sums", records: 98.0, keys: 2.0, runsIn: "workers", blocked: 0.001, tasks: 1},
		{id: "per-10s", records: 97.0, keys: 0.0, late: 1.0, open: 2.0, runsIn: "workers", blocked: 0.001, tasks: 1},
		{id: "sink-0:sums", records: 90.0, runsIn: "sink"},
		{id: "sink-1:windows", records: 3.0, runsIn: "sink"},
	} {
		n := nodeByID(t, g, c.id)
		if val(n.Records) != c.records || val(n.Keys) != c.keys || val(n.Late) != c.late || val(n.WindowsOpen) != c.open ||
			n.DeadLetters != c.deadLetters || n.RunsIn != c.runsIn || n.BlockedSeconds != c.blocked || n.Tasks != c.tasks {
			t.Errorf("%s: records %v keys %v late %v open %v dead %v runs in %s blocked %v over %d tasks; want %+v",
				c.id, val(n.Records), val(n.Keys), val(n.Late), val(n.WindowsOpen), n.DeadLetters, n.RunsIn, n.BlockedSeconds, n.Tasks, c)
		}
	}
	// A stateless step's records in: passed, dropped and failed.
	if p := nodeByID(t, g, "parity"); val(p.RecordsIn) != 99.0 || val(p.Dropped) != 0.0 {
		t.Errorf("parity: records in %v, dropped %v; want 99 and 0", val(p.RecordsIn), val(p.Dropped))
	}
	if s := nodeByID(t, g, "sums"); s.RecordsIn != nil || s.Dropped != nil {
		t.Errorf("sums: records in %v, dropped %v; want null for a keyed operator", val(s.RecordsIn), val(s.Dropped))
	}
	if p := nodeByID(t, g, "parity"); p.Detail != `n % 2 == 0 ? "even" : "odd"` || len(p.Inputs) != 1 || len(p.Outputs) != 2 {
		t.Errorf("parity: %+v", p)
	}
	if w := nodeByID(t, g, "per-10s"); w.Detail != "tumbling 10s: count: count()" || w.StepKind != "window" {
		t.Errorf("per-10s: %+v", w)
	}
}

func TestFlowView(t *testing.T) {
	h, _, _ := richServer(t)
	f := getJSON[FlowResponse](t, h, "/api/v1/flow")
	if f.RecordsIn != 100 || f.RecordsOut != 93 || f.DeadLetters != 1 || f.Late != 1 || f.Lag == nil || *f.Lag != 5 {
		t.Errorf("in %v out %v dead %v late %v lag %v", f.RecordsIn, f.RecordsOut, f.DeadLetters, f.Late, val(f.Lag))
	}
	if len(f.LagPartitions) != 1 || f.LagPartitions[0].Partition != 0 {
		t.Errorf("lag partitions %+v: the pseudo-partition -1 must not show", f.LagPartitions)
	}
	kinds := map[string]string{}
	for _, o := range f.Outputs {
		kinds[o.Topic] = o.Kind
	}
	if kinds["sums"] != "output" || kinds["j-dead-letter"] != "dead_letter" || kinds["j-late"] != "late" {
		t.Errorf("output kinds %v", kinds)
	}
	if f.RestartsByReason["timeout"] != 1 || f.CheckpointsFailedByReason["timeout"] != 1 || f.DeadLettersByCode["decode"] != 1 {
		t.Errorf("by reason: restarts %v, failed %v, dead letters %v", f.RestartsByReason, f.CheckpointsFailedByReason, f.DeadLettersByCode)
	}
}

func TestEventTimeView(t *testing.T) {
	h, _, _ := richServer(t)
	e := getJSON[EventTimeResponse](t, h, "/api/v1/eventtime")
	at := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	if !e.Enabled || e.Watermark == nil || !e.Watermark.Equal(at) || e.LateSideOutput != 1 {
		t.Errorf("enabled %v watermark %v late %v", e.Enabled, e.Watermark, e.LateSideOutput)
	}
	if len(e.Partitions) != 1 || !e.Partitions[0].Idle || e.Partitions[0].Watermark == nil || !e.Partitions[0].Watermark.Equal(at) {
		t.Errorf("partitions %+v", e.Partitions)
	}
	if len(e.Windows) != 1 || e.Windows[0].Open != 2 || e.Windows[0].Fired != 4 || e.Windows[0].Late != 1 {
		t.Errorf("windows %+v", e.Windows)
	}
}

// The tails show keys, values and headers as text, cut to a length, with
// bytes that are not UTF-8 escaped; a topic that cannot be read says why.
func TestTailShowsRecordsSafely(t *testing.T) {
	h, _, _ := richServer(t)
	d := getJSON[TailResponse](t, h, "/api/v1/dead-letters")
	if len(d.Topics) != 1 || d.Topics[0] != "j-dead-letter" || len(d.Records) != 1 {
		t.Fatalf("dead letters %+v", d)
	}
	r := d.Records[0]
	if r.Key == nil || *r.Key != `k\xff` || !r.Escaped || !r.Truncated || len(r.Value) != maxValueShow || r.ValueBytes != 2007 ||
		r.Headers[0].Key != "pipeline.error.code" || r.Headers[0].Value != "decode" {
		t.Errorf("record %+v", r)
	}
	l := getJSON[TailResponse](t, h, "/api/v1/late-records")
	if len(l.Topics) != 1 || l.Topics[0] != "j-late" || len(l.Records) != 1 || l.Records[0].Key != nil || l.Records[0].Truncated || l.Records[0].Escaped {
		t.Errorf("late records %+v", l)
	}
	failing := Handler(&fakeJob{}, Options{Config: testConfig(), Records: fakeRecords{err: errBrokerDown}})
	f := getJSON[TailResponse](t, failing, "/api/v1/dead-letters")
	if len(f.Errors) != 1 || !strings.Contains(f.Errors[0], "j-dead-letter: broker down") || len(f.Records) != 0 {
		t.Errorf("failing tail %+v", f)
	}
}

type brokerDown struct{}

func (brokerDown) Error() string { return "broker down" }

var errBrokerDown error = brokerDown{}

func TestShowBytes(t *testing.T) {
	for _, c := range []struct {
		in           string
		limit        int
		want         string
		cut, escaped bool
	}{
		{"plain", 10, "plain", false, false},
		{"<script>", 10, "<script>", false, false}, // text, never markup: the UI writes it as text
		{"a\xffb", 10, `a\xffb`, false, true},
		{"héllo", 2, "h", true, false}, // not through é
		{"abc\xff", 4, "abc", true, true},
		{"", 4, "", false, false},
	} {
		got, cut, esc := showBytes([]byte(c.in), c.limit)
		if got != c.want || cut != c.cut || esc != c.escaped {
			t.Errorf("showBytes(%q, %d) = %q %v %v, want %q %v %v", c.in, c.limit, got, cut, esc, c.want, c.cut, c.escaped)
		}
	}
}

// The savepoint list finds savepoints one level down, says why one
// cannot be read, and whether taking one is on.
func TestSavepointList(t *testing.T) {
	h, _, root := richServer(t)
	l := getJSON[SavepointsResponse](t, h, "/api/v1/savepoints")
	if l.Dir != root || !l.CanCreate || len(l.Savepoints) != 2 {
		t.Fatalf("list %+v", l)
	}
	byName := map[string]ListedSavepoint{}
	for _, s := range l.Savepoints {
		byName[s.Name] = s
	}
	if g := byName["daily/sp-golden"]; g.Error != "" || g.Job == "" || g.CheckpointID == 0 {
		t.Errorf("golden savepoint %+v", g)
	}
	if b := byName["broken"]; b.Error == "" {
		t.Errorf("broken savepoint listed without its error: %+v", b)
	}
	missing := Handler(&fakeJob{}, testOptions(nil, testConfig().Admin))
	if l := getJSON[SavepointsResponse](t, missing, "/api/v1/savepoints"); len(l.Savepoints) != 0 || l.CanCreate {
		t.Errorf("no savepoint dir: %+v", l)
	}
}

// The configuration shows no secret.
func TestConfigView(t *testing.T) {
	h, _, _ := richServer(t)
	c := getJSON[ConfigResponse](t, h, "/api/v1/config")
	if strings.Contains(c.YAML, "kafka-s3cret") || !strings.Contains(c.YAML, "********") || len(c.Masked) != 2 || c.File != "job.yaml" {
		t.Errorf("config %+v", c)
	}
}

// The UI is served with a policy that lets it load nothing from another
// host.
func TestUIServedWithItsPolicy(t *testing.T) {
	h, _, _ := richServer(t)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/ui/", nil))
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `<script src="app.js"`) {
		t.Fatalf("GET /ui/ = %d %.200s", rec.Code, rec.Body)
	}
	if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "connect-src 'self'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
}
