package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/engine"
	"github.com/eoflow/pipeline/internal/datagen"
	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
	"github.com/eoflow/pipeline/metrics"
)

func TestMain(m *testing.M) { kafkatest.Main(m) }

// member is one process of a group-mode job run in this test: the job and
// its admin server on a port of its own.
type member struct {
	job    *engine.Job
	base   string
	cancel context.CancelFunc
	done   chan struct{}
}

// stopMembers stops every member at once (one by one, each would wait for
// the rebalance its leaving starts) and waits for them.
func stopMembers(ms ...member) {
	for _, m := range ms {
		m.cancel()
	}
	for _, m := range ms {
		<-m.done
		<-m.done
	}
}

// startMember runs cfg as instance, with an admin server on a free
// loopback port whose address it advertises, until stopped.
func startMember(t *testing.T, cfg *config.Config, instance string) member {
	t.Helper()
	srv, err := Listen("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, cfg.Name)
	job, err := engine.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)),
		engine.WithInstanceID(instance), engine.WithMetrics(m), engine.WithAdminAddress(engine.AdvertisedAdmin("", srv.Addr())))
	if err != nil {
		t.Fatal(err)
	}
	srv.WithHandler(Handler(job, Options{Config: cfg, Metrics: m.Handler(), Gatherer: reg}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { _ = srv.Run(ctx); done <- struct{}{} }()
	go func() { _ = job.Run(ctx); done <- struct{}{} }()
	return member{job: job, base: "http://" + srv.Addr(), cancel: cancel, done: done}
}

// Two processes of a group-mode job on the real broker, each with its own
// admin server: either one's GET /api/v1/group shows both, the other's
// partitions as it reports them itself, and the whole job's records,
// found through the address each advertised in the consumer group.
func TestGroupShowsTheOtherProcessOnTheBroker(t *testing.T) {
	k := kafkatest.Broker(t) // skips under -short
	base := kafkatest.Topic(t, "ui-group")
	in, out := base+"-in", base+"-out"
	kafkatest.CreateTopic(t, k.Bootstrap(), in, 4, nil)
	const n = 1000
	cfg, err := config.Parse("job.yaml", fmt.Appendf(nil, `
name: %s
kafka: {brokers: [%s]}
scale: {mode: group, session_timeout: 6s}
checkpoint: {interval: 100ms}
sources: [{id: numbers, topics: [%s], start: earliest}]
steps: [{id: evens, filter: 'n %% 2 == 0'}]
sinks: [{topic: %s}]
admin: {listen: "off"}
`, base, strings.Join(k.Bootstrap(), ", "), in, out), nil)
	if err != nil {
		t.Fatal(err)
	}
	a := startMember(t, cfg, "a")
	b := startMember(t, cfg, "b")
	t.Cleanup(func() { stopMembers(a, b) })
	// Both in, then the input: each reads its own partitions' share.
	await(t, a.base, func(g GroupResponse) bool { return ready(g, b.job.Status().Group) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := datagen.Numbers(ctx, []kgo.Opt{kgo.SeedBrokers(k.Bootstrap()...)}, datagen.Options{Topic: in, From: 1, Count: n}); err != nil {
		t.Fatal(err)
	}
	g := await(t, a.base, func(g GroupResponse) bool { return ready(g, b.job.Status().Group) && g.Flow.RecordsIn == n })

	pb := g.Processes[1]
	if pb.Instance != "b" || pb.Self || pb.Admin != strings.TrimPrefix(b.base, "http://") {
		t.Errorf("b as a sees it: instance %q, self %v, admin %q; want b, false, %s", pb.Instance, pb.Self, pb.Admin, b.base)
	}
	if got, want := pb.Job.Group.Assigned, b.job.Status().Group.Assigned; !slices.Equal(got, want) {
		t.Errorf("b's partitions as a shows them: %v; b says %v", got, want)
	}
	if pb.Flow.RecordsIn == 0 || pb.Flow.RecordsIn == n {
		t.Errorf("b read %v of the %d records: the partitions are not shared", pb.Flow.RecordsIn, n)
	}
	evens := nodeByID(t, g.Graph, "evens")
	if val(evens.RecordsIn) != float64(n) || val(evens.Records) != float64(n/2) || val(evens.Dropped) != float64(n/2) {
		t.Errorf("the job's filter: in %v, passed %v, dropped %v; want %d, %d, %d", val(evens.RecordsIn), val(evens.Records), val(evens.Dropped), n, n/2, n/2)
	}
	// b's UI shows a just the same.
	if gb := getGroup(t, b.base); !gb.Complete || len(gb.Processes) != 2 || gb.Processes[0].Instance != "a" || !gb.Processes[0].Reachable || gb.Processes[0].Self {
		t.Errorf("b's /api/v1/group: %+v", gb.Processes)
	}
}

// ready reports whether g shows both processes, reachable, with the
// partitions b owns now.
func ready(g GroupResponse, bs *engine.GroupInfo) bool {
	if !g.Complete || len(g.Processes) != 2 || bs == nil || len(bs.Assigned) == 0 {
		return false
	}
	pa, pb := g.Processes[0], g.Processes[1]
	return pa.Self && pa.Reachable && pb.Reachable && pb.Job != nil && pb.Job.Group != nil &&
		len(pa.Job.Group.Assigned) > 0 && slices.Equal(pb.Job.Group.Assigned, bs.Assigned)
}

// await polls base's /api/v1/group until ok holds for it.
func await(t *testing.T, base string, ok func(GroupResponse) bool) GroupResponse {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		g := getGroup(t, base)
		if ok(g) {
			return g
		}
		if time.Now().After(deadline) {
			raw, _ := json.MarshalIndent(g, "", "  ")
			t.Fatalf("%s/api/v1/group never became what the test waits for; last:\n%.4000s", base, raw)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func getGroup(t *testing.T, base string) GroupResponse {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/group")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var g GroupResponse
	if err := json.NewDecoder(resp.Body).Decode(&g); err != nil {
		t.Fatal(err)
	}
	return g
}
