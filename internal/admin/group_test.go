package admin

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/engine"
	"github.com/eoflow/pipeline/metrics"
)

// memberJob is a group-mode process instance among members, with its
// admin address and those of the others.
func memberJob(instance string, members []string, admins map[string]string, partitions ...string) *fakeJob {
	return &fakeJob{ready: true, st: engine.Status{
		Job: "j", Guarantee: "exactly_once", Mode: "group", State: engine.StateRunning,
		Topology:   engine.Topology{Sources: []engine.SourceInfo{}, Steps: []engine.StepInfo{}, Sinks: []engine.SinkInfo{}, KeyGroups: 128},
		Partitions: []engine.PartitionInfo{}, RecentRestarts: []engine.RestartInfo{},
		Checkpoint: engine.CheckpointState{Interval: "1s"},
		Group: &engine.GroupInfo{
			Instance: instance, MemberID: "m-" + instance, Generation: 4, Members: members, Admins: admins,
			Assigned: partitions, KeyGroups: []engine.KeyGroupRange{}, Rebalances: []engine.AssignmentInfo{},
		},
	}}
}

// memberMetrics is a process's registry after it read in records and
// handed sums records of them to the aggregate.
func memberMetrics(in, sums float64) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, "j")
	m.Input("numbers").Add(int(in), int(in)*10)
	m.Input("j-repartition").Add(int(sums), int(sums)*10)
	m.Output("j-repartition").Add(int(in), int(in)*10)
	m.Output("sums").Add(int(sums), int(sums)*10)
	m.StepRecords("parity", "passed").Add(in)
	m.OperatorRecords("sums").Add(sums)
	m.SetLag("numbers", int32(in)%7, 3) // a: partition 3, b: 2
	return reg
}

// GET /api/v1/group gathers the whole job: this process's numbers, those
// of a member that answers (its real handler), and an explicit
// unreachable entry for one that does not answer in time and one that
// advertised no address. The totals add up those that answered, the
// job's own topic in neither total. No request to a member carries the
// token the page sent.
func TestGroupGathersEveryMember(t *testing.T) {
	cfg := testConfig()
	cfg.Admin.Token = "secret"
	cfg.Scale.Mode = config.ScaleGroup
	members := []string{"a", "b", "c", "d"}
	var (
		mu   sync.Mutex
		auth []string
	)
	b := Handler(memberJob("b", members, nil, "numbers/1", "j-repartition/1"), Options{Config: cfg, Gatherer: memberMetrics(30, 20)})
	bSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		b.ServeHTTP(w, r)
	}))
	t.Cleanup(bSrv.Close)
	// c accepts the connection and never answers.
	hung := make(chan struct{})
	cSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-hung:
		}
	}))
	t.Cleanup(func() { close(hung); cSrv.Close() })
	admins := map[string]string{
		"a": "127.0.0.1:8080",
		"b": strings.TrimPrefix(bSrv.URL, "http://"),
		"c": strings.TrimPrefix(cSrv.URL, "http://"),
		// d advertised none
	}
	a := Handler(memberJob("a", members, admins, "numbers/0", "j-repartition/0"),
		Options{Config: cfg, Gatherer: memberMetrics(10, 5), PeerTimeout: 300 * time.Millisecond})

	req := httptest.NewRequest("GET", "/api/v1/group", nil)
	req.Header.Set("Authorization", "Bearer secret")
	rec := httptest.NewRecorder()
	a.ServeHTTP(rec, req)
	if rec.Code != 200 {
		t.Fatalf("GET /api/v1/group = %d %s", rec.Code, rec.Body)
	}
	g := decodeJSON[GroupResponse](t, rec.Body.Bytes())

	if g.Mode != "group" || g.Generation != 4 || g.Complete || len(g.Processes) != 4 {
		t.Fatalf("mode %s, generation %d, complete %v, %d processes; want group, 4, false, 4", g.Mode, g.Generation, g.Complete, len(g.Processes))
	}
	byID := map[string]ProcessView{}
	for i, p := range g.Processes {
		if p.Instance != members[i] {
			t.Errorf("process %d is %q, want %q (sorted by instance)", i, p.Instance, members[i])
		}
		byID[p.Instance] = p
	}
	if p := byID["a"]; !p.Self || !p.Reachable || p.Job == nil || p.Job.Group.Instance != "a" {
		t.Errorf("a (this process): %+v", p)
	}
	if p := byID["b"]; p.Self || !p.Reachable || p.Job == nil || p.Job.Group.Instance != "b" || p.Flow.RecordsIn != 30 ||
		strings.Join(p.Job.Group.Assigned, ",") != "numbers/1,j-repartition/1" {
		t.Errorf("b: %+v", p)
	}
	if p := byID["c"]; p.Reachable || p.Job != nil || p.Flow != nil || p.Graph != nil || !strings.Contains(p.Error, "no answer from "+admins["c"]) {
		t.Errorf("c (does not answer): reachable %v, error %q", p.Reachable, p.Error)
	}
	if p := byID["d"]; p.Reachable || p.Admin != "" || !strings.Contains(p.Error, "advertised no admin address") {
		t.Errorf("d (no address): reachable %v, error %q", p.Reachable, p.Error)
	}

	// The sums of a and b: the sources' records, not the repartition
	// topic's.
	if g.Flow.RecordsIn != 40 || g.Flow.RecordsOut != 25 || g.Flow.Lag == nil || *g.Flow.Lag != 6 {
		t.Errorf("job flow: in %v, out %v, lag %v; want 40, 25, 6", g.Flow.RecordsIn, g.Flow.RecordsOut, val(g.Flow.Lag))
	}
	for _, f := range g.Flow.Inputs {
		if f.Topic == "j-repartition" && (f.Kind != "internal" || f.Records != 25) {
			t.Errorf("the repartition topic read: %+v, want internal, 25", f)
		}
	}
	for id, want := range map[string]float64{"numbers": 40, "parity": 40, "sums": 25, "sink-0:sums": 25} {
		if n := nodeByID(t, g.Graph, id); val(n.Records) != want {
			t.Errorf("job graph: %s records %v, want %v", id, val(n.Records), want)
		}
	}

	mu.Lock()
	defer mu.Unlock()
	if len(auth) != 3 {
		t.Errorf("b was asked %d times, want 3 (job, flow, graph)", len(auth))
	}
	for _, h := range auth {
		if h != "" {
			t.Errorf("a request to another process carried Authorization %q", h)
		}
	}
}

// In single mode the answer is this process, complete.
func TestGroupSingleMode(t *testing.T) {
	job := &fakeJob{st: engine.Status{Job: "j", Mode: "single", State: engine.StateRunning}}
	reg := prometheus.NewRegistry()
	metrics.New(reg, "j").Input("numbers").Add(7, 70)
	h := Handler(job, Options{Config: testConfig(), Gatherer: reg})
	g := getJSON[GroupResponse](t, h, "/api/v1/group")
	if !g.Complete || len(g.Processes) != 1 || !g.Processes[0].Self || !g.Processes[0].Reachable || g.Flow.RecordsIn != 7 {
		t.Errorf("single mode: %+v", g)
	}
}

func decodeJSON[T any](t *testing.T, data []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	return v
}
