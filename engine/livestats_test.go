package engine

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/metrics"
)

// metricValue is the value of the pipeline_ series name{label=value} in
// reg (0 when absent).
func metricValue(t *testing.T, reg prometheus.Gatherer, name, label, value string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if hasLabel(m, label, value) {
				if c := m.GetCounter(); c != nil {
					return c.GetValue()
				}
				return m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

// A worker counts the records it hands each target of a job graph, and a
// dead letter counts at the step the record failed at.
func TestWorkerCountsRecordsPerTargetAndDeadLettersPerStep(t *testing.T) {
	cfg := parseConfig(t, []byte(`
name: live
workers: 1
kafka: {brokers: ["127.0.0.1:9092"]}
sources:
  - {id: numbers, topics: [numbers]}
steps:
  - {id: by-parity, from: numbers, key_by: 'n % 2 == 0 ? "even" : "odd"'}
  - {id: sums, aggregate: {values: {count: count()}}}
  - {id: tens, from: numbers, filter: 'n % 10 == 0'}
sinks:
  - {from: sums, topic: sums}
  - {from: tens, topic: tens}
`), nil)
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, cfg.Name)
	j, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), WithMetrics(m))
	if err != nil {
		t.Fatal(err)
	}
	ops, err := j.emptyOperators(0, map[int]*atomic.Int64{})
	if err != nil {
		t.Fatal(err)
	}
	r := j.plan.newRouter(1)
	sinkIn := make(chan batch, 1)
	w := &workerTask{ops: ops, sink: sinkIn, align: newAligner(1), handled: newTargetCounts(m, j.plan)}
	var msgs []message
	for _, v := range []string{`{"n": 10}`, `{"n": 3}`, `{"n": 20}`, `{"m": 1}`} {
		out, _ := r.route1(&kgo.Record{Topic: "numbers", Value: []byte(v)})
		msgs = append(msgs, out...)
	}
	if err := w.handle(batch{msgs: msgs}); err != nil {
		t.Fatal(err)
	}
	for op, want := range map[string]float64{"sums": 3, "tens": 2} {
		if got := metricValue(t, reg, "pipeline_operator_records_total", "operator", op); got != want {
			t.Errorf("pipeline_operator_records_total{operator=%q} = %v, want %v", op, got, want)
		}
	}
	// {"m": 1} fails both branches: missing n at by-parity's key_by and
	// at tens's filter.
	for op, want := range map[string]float64{"by-parity": 1, "tens": 1, "sums": 0} {
		if got := metricValue(t, reg, "pipeline_operator_dead_letters_total", "operator", op); got != want {
			t.Errorf("pipeline_operator_dead_letters_total{operator=%q} = %v, want %v", op, got, want)
		}
	}
}

// Every stateless step counts its records, also one whose output no sink
// reads: here the filter "small" feeds only a key_by and an aggregate, on
// a branch beside another.
func TestRouterCountsStepsNoSinkReads(t *testing.T) {
	cfg := parseConfig(t, []byte(`
name: live
workers: 1
kafka: {brokers: ["127.0.0.1:9092"]}
sources:
  - {id: numbers, topics: [numbers]}
steps:
  - {id: small, from: numbers, filter: 'n < 15'}
  - {id: by-parity, key_by: 'n % 2 == 0 ? "even" : "odd"'}
  - {id: sums, aggregate: {values: {count: count()}}}
  - {id: tens, from: numbers, filter: 'n % 10 == 0'}
sinks:
  - {from: sums, topic: sums}
  - {from: tens, topic: tens}
`), nil)
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, cfg.Name)
	j, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), WithMetrics(m))
	if err != nil {
		t.Fatal(err)
	}
	r := j.plan.newRouter(1)
	r.steps = newStepCounts(m, j.plan)
	for _, v := range []string{`{"n": 10}`, `{"n": 3}`, `{"n": 20}`, `{"m": 1}`, `{"n": 14}`} {
		r.route1(&kgo.Record{Topic: "numbers", Value: []byte(v)})
	}
	r.flushSteps()
	r.route1(&kgo.Record{Topic: "numbers", Value: []byte(`{"n": 30}`)}) // counted at the next flush
	r.flushSteps()
	for _, c := range []struct {
		step, result string
		want         float64
	}{
		{"small", "passed", 3}, {"small", "dropped", 2}, {"small", "failed", 1},
		{"by-parity", "passed", 3}, {"by-parity", "dropped", 0}, {"by-parity", "failed", 0},
		{"tens", "passed", 3}, {"tens", "dropped", 2}, {"tens", "failed", 1},
		{"sums", "passed", 0},
	} {
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := 0.0
		for _, f := range families {
			if f.GetName() != "pipeline_step_records_total" {
				continue
			}
			for _, s := range f.GetMetric() {
				if hasLabel(s, "operator", c.step) && hasLabel(s, "result", c.result) {
					got = s.GetCounter().GetValue()
				}
			}
		}
		if got != c.want {
			t.Errorf("pipeline_step_records_total{operator=%q,result=%q} = %v, want %v", c.step, c.result, got, c.want)
		}
	}
}

func TestOperatorOf(t *testing.T) {
	cfg := parseConfig(t, []byte(`
name: live
kafka: {brokers: ["127.0.0.1:9092"]}
sources: [{id: numbers, topics: [numbers]}]
steps:
  - {id: parity, key_by: 'n % 2'}
  - {id: sums, aggregate: {values: {sum: sum(n)}}}
sinks: [{topic: out}]
`), nil)
	p, err := compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for step, want := range map[string]string{
		"steps[0].key_by":               "parity",
		"steps[1].aggregate.values.sum": "sums",
		"steps[1]":                      "sums",
		"sources[0].event_time":         "numbers",
		"steps[2].filter":               "job", // no such step
		"steps[x]":                      "job",
		"steps":                         "job",
		"route":                         "job",
		"":                              "job",
	} {
		if got := p.operatorOf(step); got != want {
			t.Errorf("operatorOf(%q) = %q, want %q", step, got, want)
		}
	}
}

// send counts the time it waited for room, and gives up when the context
// ends.
func TestSendCountsBlockedTime(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, "job")
	blocked := m.TaskBlocked("source-0")
	ch := make(chan batch, 1)
	ctx := context.Background()
	if !send(ctx, ch, batch{from: 1}, blocked) {
		t.Fatal("send to an empty channel failed")
	}
	if got := metricValue(t, reg, "pipeline_task_blocked_seconds_total", "task", "source-0"); got != 0 {
		t.Fatalf("blocked %v s on a channel with room", got)
	}
	done := make(chan bool)
	go func() { done <- send(ctx, ch, batch{from: 2}, blocked) }() // the channel is full: it waits
	if b := <-ch; b.from != 1 {
		t.Fatalf("first batch from %d", b.from)
	}
	if !<-done {
		t.Fatal("send failed")
	}
	if b := <-ch; b.from != 2 {
		t.Fatalf("second batch from %d", b.from)
	}
	// The receive above may have come before the sender found the channel
	// full; a third send into the full channel must wait.
	ch <- batch{from: 3}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if send(cctx, ch, batch{from: 4}, blocked) {
		t.Fatal("send into a full channel succeeded after its context ended")
	}
	if got := metricValue(t, reg, "pipeline_task_blocked_seconds_total", "task", "source-0"); got <= 0 {
		t.Fatalf("blocked %v s after waiting on a full channel", got)
	}
}
