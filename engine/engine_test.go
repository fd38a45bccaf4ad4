package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint/kstore"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/internal/datagen"
	"github.com/eoflow/pipeline/internal/fault"
	"github.com/eoflow/pipeline/internal/kread"
	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
	"github.com/eoflow/pipeline/internal/testkit/paritycheck"
	"github.com/eoflow/pipeline/metrics/metricstest"
	"github.com/eoflow/pipeline/sink"
)

func TestMain(m *testing.M) { kafkatest.Main(m) }

// paritySum loads examples/parity-sum/config.yaml with the given settings,
// the file users run.
func paritySum(t *testing.T, env map[string]string) *config.Config {
	t.Helper()
	return parseConfig(t, paritySumFile(t), env)
}

func paritySumFile(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile("../examples/parity-sum/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// paritySumEdited is parity-sum with the first old in its file replaced by
// new: a changed job.
func paritySumEdited(t *testing.T, env map[string]string, old, new string) *config.Config {
	t.Helper()
	data := paritySumFile(t)
	changed := strings.Replace(string(data), old, new, 1)
	if changed == string(data) {
		t.Fatalf("parity-sum's config has no %q", old)
	}
	return parseConfig(t, []byte(changed), env)
}

func parseConfig(t testing.TB, data []byte, env map[string]string) *config.Config {
	t.Helper()
	cfg, err := config.Parse("config.yaml", data, func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	})
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg
}

// testEnv is a fresh job with its own topics on the shared broker.
type testEnv struct {
	t       *testing.T
	brokers []string
	conn    []kgo.Opt
	env     map[string]string
	// parity: the inputs carry "parity" (datagen.Options.Parity), the
	// input of parity-sum-by-field.
	parity bool
}

func newTestEnv(t *testing.T, guarantee string) *testEnv {
	k := kafkatest.Broker(t)
	base := kafkatest.Topic(t, "job")
	e := &testEnv{t: t, brokers: k.Bootstrap(), conn: []kgo.Opt{kgo.SeedBrokers(k.Bootstrap()...)}}
	e.env = map[string]string{
		"KAFKA_BROKERS":       strings.Join(k.Bootstrap(), ","),
		"JOB_NAME":            base,
		"INPUT_TOPIC":         base + "-in",
		"OUTPUT_TOPIC":        base + "-out",
		"GUARANTEE":           guarantee,
		"CHECKPOINT_INTERVAL": "100ms",
		"ADMIN_LISTEN":        "off",
		"LOG_LEVEL":           "debug",
	}
	kafkatest.CreateTopic(t, e.brokers, e.env["INPUT_TOPIC"], 4, nil)
	return e
}

func (e *testEnv) numbers(from, count int64) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := datagen.Numbers(ctx, e.conn, datagen.Options{Topic: e.env["INPUT_TOPIC"], From: from, Count: count, Parity: e.parity}); err != nil {
		e.t.Fatal(err)
	}
}

// running is a job run in the background; stop ends it and returns Run's
// result.
type running struct {
	job    *Job
	cancel context.CancelFunc
	done   chan error
	logs   *syncBuffer
}

// stop ends the job at once, as a crash would: a transaction it had open
// stays open until the next start fences it (or it times out).
func (r *running) stop() error {
	r.cancel()
	return <-r.done
}

// finish stops the job gracefully (Job.Stop): after its final checkpoint
// no transaction of it is left open.
func (r *running) finish() error {
	r.job.Stop()
	return <-r.done
}

func start(t *testing.T, cfg *config.Config) *running {
	t.Helper()
	return startWith(t, cfg)
}

// awaitFinal waits until the output's last values are those of inputs
// 1..n, and returns the judged outputs.
func (e *testEnv) awaitFinal(n int64, r *running) *paritycheck.Report {
	e.t.Helper()
	deadline := time.Now().Add(3 * time.Minute) // generous: a loaded CI machine, a broker restarting
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		outs, err := paritycheck.Read(ctx, e.conn, e.env["OUTPUT_TOPIC"])
		cancel()
		if err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) { // the job creates it
			e.t.Fatal(err)
		}
		rep := paritycheck.Judge(outs, n)
		if rep.StateExact() {
			return rep
		}
		select {
		case err := <-r.done:
			e.t.Fatalf("job stopped early (%v); output so far: %v", err, rep)
		default:
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("output did not reach the totals of 1..%d: %v", n, rep)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestParitySumExactlyOnce(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	e.numbers(1, 3000)
	r := start(t, paritySum(t, e.env))
	rep := e.awaitFinal(3000, r)
	if !rep.Exact() || rep.Outputs["odd"]+rep.Outputs["even"] != 3000 {
		t.Fatalf("not exactly one output per input: %v", rep)
	}
	e.awaitGroupAtEnd()
	if err := r.stop(); err != nil {
		t.Fatalf("Run after stop: %v", err)
	}
}

// awaitGroupAtEnd waits until the consumer group named after the job has
// committed the input's end offsets: lag tools see the real lag (none).
func (e *testEnv) awaitGroupAtEnd() {
	e.t.Helper()
	adm := kadm.NewClient(kafkatest.Client(e.t, e.brokers))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, e.env["INPUT_TOPIC"])
	if err != nil {
		e.t.Fatal(err)
	}
	for {
		committed, err := adm.FetchOffsets(ctx, e.env["JOB_NAME"])
		if err != nil {
			e.t.Fatal(err)
		}
		var total int64
		ends.Each(func(o kadm.ListedOffset) {
			c, ok := committed.Lookup(o.Topic, o.Partition)
			if !ok || c.Err != nil {
				total += o.Offset
				return
			}
			total += o.Offset - c.At
		})
		if total == 0 {
			return
		}
		select {
		case <-ctx.Done():
			e.t.Fatalf("the job's consumer group still lags %d records behind the input", total)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// A stopped job restores state and offsets from its checkpoint: the sums
// continue without a gap or a repeat.
func TestParitySumContinuesAfterRestart(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	cfg := paritySum(t, e.env)
	e.numbers(1, 2000)
	r := start(t, cfg)
	e.awaitFinal(2000, r)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}

	e.numbers(2001, 2000)
	r = start(t, cfg)
	rep := e.awaitFinal(4000, r)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if !rep.Exact() {
		t.Fatalf("restart lost or repeated outputs: %v", rep)
	}
	if !strings.Contains(r.logs.String(), "msg=restored") || strings.Contains(r.logs.String(), "checkpoint=0 ") {
		t.Fatalf("second run did not restore from a checkpoint:\n%s", r.logs.String())
	}
}

// Without a crash the weaker guarantees neither lose nor repeat anything.
func TestParitySumWeakerGuaranteesWithoutFailures(t *testing.T) {
	for _, g := range []string{"at_least_once", "at_most_once"} {
		t.Run(g, func(t *testing.T) {
			e := newTestEnv(t, g)
			e.numbers(1, 2000)
			r := start(t, paritySum(t, e.env))
			rep := e.awaitFinal(2000, r)
			if err := r.stop(); err != nil {
				t.Fatal(err)
			}
			if !rep.Exact() {
				t.Fatalf("%s without failures: %v", g, rep)
			}
		})
	}
}

// on_checkpoint emits each changed key once per checkpoint: far fewer
// outputs than inputs, the same final values.
func TestParitySumEmitOnCheckpoint(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	e.env["EMIT"] = "on_checkpoint"
	e.numbers(1, 5000)
	r := start(t, paritySum(t, e.env))
	rep := e.awaitFinal(5000, r)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if total := rep.Outputs["odd"] + rep.Outputs["even"]; total >= 5000 {
		t.Fatalf("on_checkpoint wrote %d outputs for 5000 inputs: %v", total, rep)
	}
}

// Bad records never stop the job: each goes to the dead-letter topic with
// the reason and its origin in headers, and the good ones are summed.
func TestBadRecordsGoToDeadLetter(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	e.numbers(1, 100)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := kafkatest.Client(t, e.brokers, kgo.DefaultProduceTopic(e.env["INPUT_TOPIC"]))
	bad := map[string]string{ // value -> expected code
		`not json`:   "decode",
		`{"m": 1}`:   "missing_field",
		`{"n": "x"}`: "eval",
		// Not UTF-8 inside a string: refused, not read as n = 5.
		"{\"n\": 5, \"s\": \"caf\xe9\"}": "decode",
	}
	for v := range bad {
		if err := p.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// The odd sum would leave int64: refused, the sum stays exact. It goes
	// behind {"n":1} in that record's partition, so the odd sum is never
	// still 0 when it arrives (partitions are read in no fixed order: on
	// an empty sum it would fit, and every later odd number overflow).
	const overflow = `{"n": 9223372036854775807}`
	bad[overflow] = "overflow"
	var one *kgo.Record
	if err := kread.All(ctx, e.conn, e.env["INPUT_TOPIC"], func(r *kgo.Record) error {
		if string(r.Value) == string(datagen.Value(1)) {
			one = r
		}
		return nil
	}); err != nil || one == nil {
		t.Fatalf("finding {\"n\":1} in the input: %v", err)
	}
	pinned := kafkatest.Client(t, e.brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := pinned.ProduceSync(ctx, &kgo.Record{Topic: one.Topic, Partition: one.Partition, Value: []byte(overflow)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	e.numbers(101, 100)
	cfg := paritySum(t, e.env)
	r := start(t, cfg)
	rep := e.awaitFinal(200, r)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if !rep.Exact() {
		t.Fatalf("good records around bad ones: %v", rep)
	}
	got := map[string]*kgo.Record{}
	if err := kread.All(ctx, e.conn, cfg.Sinks[0].DeadLetterTopic, func(r *kgo.Record) error {
		got[string(r.Value)] = r
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(bad) {
		t.Fatalf("dead letters %v, want one per bad record %v", keys(got), keys(bad))
	}
	for v, code := range bad {
		r := got[v]
		if r == nil {
			t.Errorf("no dead letter for %q", v)
			continue
		}
		if c := sink.Header(r, sink.HeaderCode); c != code {
			t.Errorf("%q: code %q (reason %q), want %q", v, c, sink.Header(r, sink.HeaderReason), code)
		}
		if sink.Header(r, sink.HeaderTopic) != e.env["INPUT_TOPIC"] || sink.Header(r, sink.HeaderOffset) == "" || sink.Header(r, sink.HeaderReason) == "" {
			t.Errorf("%q: origin or reason missing from headers %v", v, r.Headers)
		}
	}
}

func keys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// A checkpoint taken with another key-group count is refused, not
// misread: the job stops with a message naming both counts.
func TestIncompatibleCheckpointIsRefused(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	e.numbers(1, 100)
	r := start(t, paritySum(t, e.env))
	e.awaitFinal(100, r)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}

	cfg := paritySum(t, e.env)
	cfg.Checkpoint.KeyGroups = 64
	r = start(t, cfg)
	select {
	case err := <-r.done:
		if !errors.Is(err, ErrIncompatible) || !strings.Contains(err.Error(), "128") || !strings.Contains(err.Error(), "64") {
			t.Fatalf("Run = %v, want ErrIncompatible naming 128 and 64", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("an incompatible checkpoint did not stop the job")
	}
}

// A stateless job (filter and map, no key_by) writes each kept input once.
func TestStatelessFilterMap(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	e.numbers(1, 1000)
	yaml := fmt.Sprintf(`
name: %s
kafka: {brokers: %s}
checkpoint: {interval: 100ms}
admin: {listen: "off"}
sources: [{topics: %s}]
steps:
  - filter: n %% 10 == 0
  - map:
      tens: n / 10
      n: n
sinks: [{topic: %s}]
`, e.env["JOB_NAME"], e.env["KAFKA_BROKERS"], e.env["INPUT_TOPIC"], e.env["OUTPUT_TOPIC"])
	r := start(t, parseConfig(t, []byte(yaml), nil))
	vals := e.awaitOutputs(100, r)
	seen := map[string]bool{}
	for _, v := range vals {
		seen[v] = true
	}
	if !seen[`{"tens":1,"n":10}`] || !seen[`{"tens":100,"n":1000}`] || len(seen) != 100 {
		t.Fatalf("outputs %v", vals[:5])
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}

// syncBuffer is a bytes.Buffer safe for the job's goroutines to log into.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// failEverywhere arms every fault point once, at different hits, so one run
// fails (and restarts) at each of them.
func failEverywhere() *fault.Injector {
	return fault.New(map[fault.Point]int{
		fault.AfterBarrier:      3,
		fault.DuringRestore:     2,
		fault.WhileWritingState: 6,
		fault.BeforeCommit:      5,
		fault.AfterCommit:       8,
	})
}

// newJob builds a job whose logs go to the returned buffer (shown when
// the test fails).
func newJob(t *testing.T, cfg *config.Config, opts ...Option) (*Job, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	j, err := New(cfg, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), opts...)
	if err != nil {
		t.Fatal(err)
	}
	j.restartBackoff = 50 * time.Millisecond
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs of job %s:\n%s", cfg.Name, logs.String())
		}
	})
	return j, logs
}

func startWith(t *testing.T, cfg *config.Config, opts ...Option) *running {
	t.Helper()
	job, logs := newJob(t, cfg, opts...)
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{job: job, cancel: cancel, done: make(chan error, 1), logs: logs}
	go func() { r.done <- job.Run(ctx) }()
	t.Cleanup(cancel)
	return r
}

// After a failure at any point the job restarts from its last checkpoint,
// and under exactly_once the output is still one failure-free run's.
func TestExactlyOnceSurvivesFailuresAtEveryPoint(t *testing.T) {
	for _, job := range []struct {
		name string
		cfg  func(*testing.T, *testEnv) *config.Config
	}{
		{"parity-sum", func(t *testing.T, e *testEnv) *config.Config { return paritySum(t, e.env) }},
		// The integer path: its native states, restored from the
		// changelog after every failure (intpath_test.go).
		{"parity-sum-by-field", paritySumByField},
	} {
		t.Run(job.name, func(t *testing.T) {
			e := newTestEnv(t, "exactly_once")
			r := startWith(t, job.cfg(t, e), WithFaults(failEverywhere()))
			n := e.feedUntilEveryFault(r)
			rep := e.awaitFinal(n, r)
			if err := r.stop(); err != nil {
				t.Fatal(err)
			}
			if !rep.Exact() {
				t.Fatalf("exactly_once after failures: %v", rep)
			}
		})
	}
}

// feedUntilEveryFault writes input in rounds while the job runs, fails and
// recovers, until every fault point has fired; it returns how many numbers
// it wrote.
func (e *testEnv) feedUntilEveryFault(r *running) int64 {
	e.t.Helper()
	var n int64
	for round := 0; ; round++ {
		e.numbers(n+1, 1000)
		n += 1000
		missing := 0
		for _, p := range fault.Points {
			if !strings.Contains(r.logs.String(), "injected failure at "+string(p)) {
				missing++
			}
		}
		if missing == 0 {
			return n
		}
		if round == 60 {
			e.t.Fatalf("after %d numbers, %d fault points never fired", n, missing)
		}
		time.Sleep(150 * time.Millisecond)
	}
}

// Under at_least_once the same failures may repeat outputs but never lose
// one, and the state stays exact (state and checkpoint commit together).
func TestAtLeastOnceSurvivesFailuresAtEveryPoint(t *testing.T) {
	e := newTestEnv(t, "at_least_once")
	r := startWith(t, paritySum(t, e.env), WithFaults(failEverywhere()))
	n := e.feedUntilEveryFault(r)
	rep := e.awaitFinal(n, r)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if rep.Missing != 0 || !rep.StateExact() {
		t.Fatalf("at_least_once lost outputs or state: %v", rep)
	}
	t.Logf("at_least_once after 5 failures: %v", rep)
}

// A transaction timeout above the brokers' limit is refused at start, with
// both settings and the fix named.
func TestTransactionTimeoutAboveBrokerLimitIsRefused(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	cfg := paritySum(t, e.env)
	cfg.Kafka.TransactionTimeout = 20 * time.Minute // brokers default to 15m
	r := start(t, cfg)
	select {
	case err := <-r.done:
		msg := fmt.Sprint(err)
		if !errors.Is(err, ErrUnfit) || !strings.Contains(msg, "kafka.transaction_timeout") || !strings.Contains(msg, "transaction.max.timeout.ms") || !strings.Contains(msg, "15m0s") {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the job did not stop")
	}
}

// A second instance of the same job fences the first: the first stops with
// ErrFenced (it must not restart and fight back), the second carries on,
// and the output is still exactly one failure-free run's.
func TestSecondInstanceFencesTheFirst(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	cfg := paritySum(t, e.env)
	e.numbers(1, 2000)
	first := start(t, cfg)
	e.awaitFinal(2000, first)

	second := start(t, cfg)
	e.numbers(2001, 2000)
	select {
	case err := <-first.done:
		if !errors.Is(err, sink.ErrFenced) {
			t.Fatalf("the first instance stopped with %v, want ErrFenced", err)
		}
		if !strings.Contains(first.logs.String(), "fenced: another instance of this job took over") {
			t.Fatalf("no clear fencing message in the first instance's log:\n%s", first.logs.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("the first instance was not fenced")
	}
	rep := e.awaitFinal(4000, second)
	if err := second.stop(); err != nil {
		t.Fatal(err)
	}
	if !rep.Exact() {
		t.Fatalf("two instances: %v", rep)
	}
}

// Stop takes a final checkpoint that covers everything read, then Run
// returns nil: the next start has nothing to replay.
func TestStopTakesAFinalCheckpoint(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	e.env["CHECKPOINT_INTERVAL"] = "20s" // after the early first one, only the final checkpoint can cover the input
	cfg := paritySum(t, e.env)
	logs := &syncBuffer{}
	job, err := New(cfg, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- job.Run(context.Background()) }()
	deadline := time.Now().Add(time.Minute)
	// An attempt's first checkpoint comes soon after it starts; the input
	// goes in after it.
	for job.Status().Checkpoint.LastCompleted < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("no first checkpoint:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.numbers(1, 3000)
	for !job.Ready() || readIn(t, job, e.env["INPUT_TOPIC"]) < 3000 {
		if time.Now().After(deadline) {
			t.Fatalf("the job did not read its input:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	job.Stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after Stop: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Stop did not end Run")
	}
	if st := job.Status(); st.State != StateStopped || st.Checkpoint.LastCompleted != 2 {
		t.Fatalf("after Stop: %+v", st)
	}
	// The final checkpoint holds every result.
	r := &running{done: make(chan error, 1), logs: logs}
	rep := e.awaitFinal(3000, r)
	if !rep.Exact() {
		t.Fatalf("after a graceful stop: %v", rep)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rec, err := kstore.Latest(ctx, e.conn, cfg.Name)
	if err != nil || rec == nil {
		t.Fatalf("latest checkpoint: %v, %v", rec, err)
	}
	var sum int64
	for _, o := range rec.Offsets {
		sum += o.Offset
	}
	if sum != 3000 {
		t.Fatalf("the final checkpoint's offsets add up to %d, want all 3000 inputs", sum)
	}
}

// readIn is how many records the job has read from topic, from its
// metrics.
func readIn(t *testing.T, j *Job, topic string) int64 {
	text := metricstest.Scrape(t, j.metrics.Handler())
	v, _ := metricstest.Value(text, fmt.Sprintf(`pipeline_records_in_total{pipeline=%q,topic=%q}`, j.cfg.Name, topic))
	return int64(v)
}

// The worker count may change between runs: key groups are redistributed
// over the new workers from the state topic, and the sums continue.
func TestWorkerCountMayChange(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	cfg := paritySum(t, e.env)
	cfg.Workers = 1
	e.numbers(1, 2000)
	r := start(t, cfg)
	e.awaitFinal(2000, r)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	cfg = paritySum(t, e.env)
	cfg.Workers = 3
	e.numbers(2001, 2000)
	r = start(t, cfg)
	rep := e.awaitFinal(4000, r)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if !rep.Exact() || !strings.Contains(r.logs.String(), "workers=3") {
		t.Fatalf("after 1 -> 3 workers: %v", rep)
	}
}
