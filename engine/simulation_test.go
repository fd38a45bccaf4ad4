package engine

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/checkpoint/kstore"
	"github.com/eoflow/pipeline/checkpoint/savepoint"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/internal/testkit/memkafka"
	"github.com/eoflow/pipeline/sink"
	"github.com/eoflow/pipeline/twophase"
	"github.com/eoflow/pipeline/window"
)

// The broker-free, deterministic simulation of the whole task graph
// (docs/testing.md, "The seeded simulations"). A seed fixes everything: the input, which task takes the
// next step, how much a poll returns, how far the clock moves, and where
// the process is killed, between steps or inside any call into the Kafka
// model (before or after it took effect). The job's own code runs: the
// operators, the source, worker and sink tasks' handling, the aligner,
// the checkpoint coordinator, the two-phase commit, the restore. Only
// the goroutines and channels around them are replaced by one scheduler,
// which is what makes a seed replay exactly.
//
// After every commit and every recovery the invariants of docs/exactly-once.md are
// checked against an oracle computed from the input (see check); at the
// end, a graceful stop must leave every input's result committed exactly
// once and no transaction open.
//
// Replay one seed with its trace:
//
//	go test ./engine -run 'TestSimulation/parity-sum/exactly_once' -sim.seed=N -v

var (
	simSeed  = flag.Uint64("sim.seed", 0, "run only this seed of the simulation, and print its trace")
	simSeeds = flag.Int("sim.seeds", 0, "run this many seeds per job and guarantee (default: 1000, 300 with -short, 50 under -race)")
)

// simJob is a job the simulation runs, with its oracle.
type simJob struct {
	name   string
	config string // YAML; ${GUARANTEE} is set per run
	// keyOf is the oracle's key of input n.
	keyOf func(n int64) string
	// windowed: the job is parity-windows (simwindows_test.go), whose
	// inputs carry an event time and whose oracle is by window.
	windowed bool
	// keyField: the inputs carry their key as the field "k" (a string),
	// which the job keys by: the integer path (operator/intpath.go).
	keyField bool
	// guarantees the job runs under (nil: exactly_once and
	// at_least_once).
	guarantees []config.Guarantee
	// bigState: the job's keys grow a state larger than a record of the
	// state topic (simbigstate_test.go).
	bigState bool
	// extra are the outputs of a job graph besides "out": each a topic,
	// and the oracle's key of input n in it (false: n does not reach
	// it). A pass-through branch writes the input itself: each input
	// that reaches it is judged as one key of its own, count 1, sum n.
	extra []simExtra
	// table: the job joins the table "tiers" (simjoin_test.go), which
	// changes while it runs.
	table bool
	// interval: the job is an interval join of the evens with the odds
	// in event time (simintervaljoin_test.go), whose oracle is by pair.
	interval bool
	// asOf: the job joins the table "tiers" as of event time
	// (simasofjoin_test.go), whose oracle is by input.
	asOf bool
	// seedShare is the percentage of the seeds of TestSimulation the job
	// runs (0: all), for a job whose paths others cover mostly.
	seedShare int
}

// simExtra is one more output topic of a job graph.
type simExtra struct {
	topic       string
	keyOf       func(n int64) (string, bool)
	passThrough bool
}

// graphYAML is a job graph (config: from:): a sum by parity, a sum by n
// mod 3 over the merge of two filter branches (the evens and the odds,
// so every input once), and a filter branch written as it is.
const graphYAML = `name: ${JOB_NAME}
guarantee: ${GUARANTEE}
kafka:
  brokers: ${KAFKA_BROKERS}
checkpoint:
  interval: ${CHECKPOINT_INTERVAL}
sources:
  - id: numbers
    topics: ${INPUT_TOPIC}
steps:
  - id: parity
    key_by: 'n % 2 == 0 ? "even" : "odd"'
  - id: sums
    aggregate: {values: {count: count(), sum: sum(n)}}
  - {id: evens, from: numbers, filter: 'n % 2 == 0'}
  - {id: odds, from: numbers, filter: 'n % 2 == 1'}
  - {id: mod3, from: [evens, odds], key_by: '"m" + string(n % 3)'}
  - {id: mod3-sums, aggregate: {values: {count: count(), sum: sum(n)}}}
  - {id: tens, from: numbers, filter: 'n % 10 == 0'}
sinks:
  - {from: sums, topic: "${OUTPUT_TOPIC}"}
  - {from: mod3-sums, topic: out2}
  - {from: tens, topic: out3}
admin:
  listen: ${ADMIN_LISTEN}
`

var simJobs = []simJob{
	{name: "parity-sum", config: paritySumYAML, keyOf: func(n int64) string {
		if n%2 == 0 {
			return "even"
		}
		return "odd"
	}},
	{name: "keyed-sums", config: strings.Replace(paritySumYAML, `'n % 2 == 0 ? "even" : "odd"'`, `'"k" + string(n % 37)'`, 1),
		keyOf: func(n int64) string { return fmt.Sprintf("k%d", n%37) }},
	// The same sums keyed by a field of the input: the chain the integer
	// path takes, whose states the store keeps in its native form. Its
	// states are kept, encoded and restored the same way under either
	// guarantee, whose commit paths the jobs above cover: exactly_once
	// only, for the CI's time.
	{name: "field-keyed-sums", config: strings.Replace(paritySumYAML, `'n % 2 == 0 ? "even" : "odd"'`, `k`, 1),
		keyOf: func(n int64) string { return fmt.Sprintf("k%d", n%37) }, keyField: true,
		guarantees: []config.Guarantee{config.ExactlyOnce}},
	// A job graph: two aggregates with other keys, a merge and a filter
	// branch, every branch committed in the same epoch's transaction
	// (exactly_once only, for the CI's time: its commit path is the
	// other jobs').
	{name: "graph", config: graphYAML, keyOf: func(n int64) string {
		if n%2 == 0 {
			return "even"
		}
		return "odd"
	}, extra: []simExtra{
		{topic: "out2", keyOf: func(n int64) (string, bool) { return fmt.Sprintf("m%d", n%3), true }},
		{topic: "out3", keyOf: func(n int64) (string, bool) { return strconv.FormatInt(n, 10), n%10 == 0 }, passThrough: true},
	}, guarantees: []config.Guarantee{config.ExactlyOnce}},
	joinSimJob,
}

var paritySumYAML = func() string {
	data, err := os.ReadFile("../examples/parity-sum/config.yaml")
	if err != nil {
		panic(err)
	}
	return string(data)
}()

// simInput is one input record: a number, or a record that cannot be
// decoded (bad), which must become exactly one dead letter.
type simInput struct {
	n   int64
	bad bool
	ts  int64 // event time, epoch ms (windowed jobs)
	// misplaced: bad, but only after its event time moved its
	// partition's clock (a record a co-partitioned job finds in the
	// wrong partition, or keyed otherwise; groupsim_test.go keyInput).
	misplaced bool
}

// simRun is one seeded run of one job under one guarantee.
type simRun struct {
	w         *world
	job       simJob
	guarantee config.Guarantee
	cfg       *config.Config
	j         *Job
	clock     time.Time
	// inputs[p][offset] is what partition p holds; pending what is not
	// written yet.
	inputs  [][]simInput
	pending []simInput
	// faultSteps: crashes happen only in the first faultSteps steps, so
	// every run ends with the job finishing its input.
	faultSteps, steps int
	crashes, restarts int
	// paused: this attempt was paused past the transaction timeout, a
	// fault whose failure may surface after faultSteps.
	paused bool
	pauses int
	// bug, if set, is planted in the job's code paths (plantedbug.go,
	// TestSimulationFindsBugs).
	bug plantedBug
	// committed is what check has read of the committed topics.
	committed committedView
	// dir holds the run's savepoints; savepoints are those completed.
	dir             string
	savepoints      []string
	savepointsAsked int
	// A continuation (run --from-savepoint) restores plan from the
	// savepoint; base is the savepoint's offsets per input partition,
	// where its outputs must go on from.
	plan *savepoint.RestorePlan
	base []int64
	// baseWatermark is the savepoint's watermark (windowed jobs): what
	// it fired, the run before committed.
	baseWatermark int64
	baseWant      map[string]simAgg
	baseBad       int
	// silent: the last input partition gets no input until the last
	// simSilentUntil inputs (bigState jobs).
	silent bool
	// tableWrites counts the table's changes while the job runs (join).
	tableWrites int
	// asOfTable is the table of the join as of event time, as written;
	// asOfReplay, in a continuation from a savepoint, the versions the
	// run before wrote, for its table's topic.
	asOfTable  asOfTableModel
	asOfReplay []simVersion
	// asOfHeld is the most records a committed checkpoint held.
	asOfHeld int
	// baseHeld (a continuation of a join as of event time) are the
	// inputs the savepoint's checkpoint held, as its record in the run
	// before says: below base, only these are the continuation's to
	// commit.
	baseHeld map[simTP]bool
}

const (
	simPartitions = 3
	simMaxSteps   = 60_000
)

func newSimRun(t testing.TB, seed uint64, job simJob, g config.Guarantee, dir string) *simRun {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	start := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	r := &simRun{
		w:         &world{rng: rng, kafka: memkafka.New(start), root: dir},
		job:       job,
		guarantee: g,
		clock:     start,
		dir:       dir,
	}
	env := map[string]string{
		"KAFKA_BROKERS": "127.0.0.1:9", "JOB_NAME": job.name, "INPUT_TOPIC": "in", "OUTPUT_TOPIC": "out",
		"GUARANTEE": string(g), "CHECKPOINT_INTERVAL": []string{"20ms", "100ms", "1s"}[rng.IntN(3)], "ADMIN_LISTEN": "off",
	}
	if job.windowed || job.interval || job.asOf {
		r.windowEnv(env)
	}
	r.cfg = parseConfig(t, []byte(job.config), env)
	r.cfg.Workers = 1 + rng.IntN(3)
	j, err := New(r.cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	j.now = func() time.Time { return r.clock }
	r.j = j
	r.createTopics(t)
	r.inputs = make([][]simInput, simPartitions)
	for n := range int64(30 + rng.IntN(200)) {
		r.pending = append(r.pending, simInput{n: n + 1, bad: rng.IntN(40) == 0})
	}
	if job.windowed || job.interval || job.asOf {
		r.drawEventTimes()
	}
	if job.bigState {
		r.growState()
	}
	r.drawFaults()
	return r
}

func (r *simRun) createTopics(t testing.TB) {
	topics := []string{"in", "out", r.cfg.Sinks[0].DeadLetterTopic, kstore.StateTopic(r.job.name), checkpoint.TopicName(r.job.name)}
	for _, x := range r.job.extra {
		topics = append(topics, x.topic)
	}
	if r.job.windowed || r.job.interval {
		topics = append(topics, simLateTopic)
	}
	for _, topic := range topics {
		n := 1
		if topic == "in" {
			n = simPartitions
		} else if topic == "out" || slices.ContainsFunc(r.job.extra, func(x simExtra) bool { return x.topic == topic }) {
			n = 2
		}
		if err := r.w.kafka.CreateTopic(topic, n); err != nil {
			t.Fatal(err)
		}
	}
	if r.job.table {
		r.createTable(t)
	}
	if r.job.asOf {
		if err := r.createAsOfTable(); err != nil {
			t.Fatal(err)
		}
	}
}

func (r *simRun) drawFaults() {
	r.w.crashP = []float64{0, 0.002, 0.01, 0.03}[r.w.rng.IntN(4)]
	r.faultSteps = 100 + r.w.rng.IntN(2000)
}

// continuation is a new process started from one of r's savepoints (run
// --from-savepoint dir) with another worker count, on a cluster holding
// r's input and nothing else: its outputs must go on exactly from the
// savepoint's checkpoint, as if the job had never stopped.
func (r *simRun) continuation(t testing.TB, dir string) (*simRun, error) {
	return r.continuationWith(t, dir, nil)
}

// continuationWith is continuation with the configuration changed by
// change (nil: none) besides its worker count.
func (r *simRun) continuationWith(t testing.TB, dir string, change func(*config.Config)) (*simRun, error) {
	rd, err := savepoint.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: opening savepoint %s: %v", errViolation, dir, err)
	}
	c := &simRun{
		w:         &world{rng: r.w.rng, kafka: memkafka.New(r.clock), trace: r.w.trace, hash: r.w.hash, root: r.w.root, maxBytes: r.w.maxBytes, pieces: r.w.pieces},
		job:       r.job,
		guarantee: r.guarantee,
		clock:     r.clock,
		dir:       filepath.Join(r.dir, "continued"),
		bug:       r.bug,
		inputs:    r.inputs,
	}
	if r.job.asOf {
		// The same table: every version the run before wrote, and the
		// writes to come after them.
		c.asOfReplay = slices.Clone(r.asOfTable.versions)
		c.asOfTable.ts, c.tableWrites = r.asOfTable.ts, r.tableWrites
		id := rd.Manifest().CheckpointID
		held, ok := r.committed.heldAt[id]
		if !ok {
			return nil, fmt.Errorf("%w: savepoint %s is of checkpoint %d, which the run never committed", errViolation, dir, id)
		}
		c.baseHeld = held
	}
	cfg := *r.cfg
	cfg.Workers = 1 + r.cfg.Workers%3
	if change != nil {
		change(&cfg)
	}
	c.cfg = &cfg
	opts := savepoint.RestoreOptions{Partitions: map[string]int{"in": simPartitions}}
	if c.plan, err = savepoint.CheckRestore(rd.Manifest(), savepoint.DescribeConfig(c.cfg), opts); err != nil {
		return nil, fmt.Errorf("%w: savepoint %s refused: %v", errViolation, dir, err)
	}
	c.baseWatermark = window.NoWatermark
	if et := rd.Manifest().EventTime; et != nil && et.Watermark != nil {
		c.baseWatermark = *et.Watermark
	}
	c.base = make([]int64, simPartitions)
	for _, o := range c.plan.Offsets {
		c.base[o.Partition] = o.Offset
	}
	if c.j, err = New(c.cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), WithSavepointRestore(rd, opts)); err != nil {
		t.Fatal(err)
	}
	c.j.now = func() time.Time { return c.clock }
	c.j.plantedBug = r.bug
	c.createTopics(t)
	for p, ins := range r.inputs {
		for _, in := range ins {
			if _, err := c.w.kafka.Append(memkafka.Record{Topic: "in", Partition: int32(p), Value: c.job.inputValue(in), Timestamp: c.clock}); err != nil {
				t.Fatal(err)
			}
		}
	}
	c.drawFaults()
	c.w.log("continuing from savepoint %s (offsets %v) with %d workers", dir, c.base, c.cfg.Workers)
	return c, nil
}

func (j simJob) inputValue(in simInput) []byte {
	switch {
	case in.bad:
		return []byte(`{"n": oops`)
	case in.ts != 0:
		return fmt.Appendf(nil, `{"n": %d, "ts": %d}`, in.n, in.ts)
	case j.keyField:
		return fmt.Appendf(nil, `{"k":%q,"n":%d}`, j.keyOf(in.n), in.n)
	}
	return fmt.Appendf(nil, `{"n": %d}`, in.n)
}

// write appends up to k pending inputs to random partitions.
func (r *simRun) write(k int) {
	for ; k > 0 && len(r.pending) > 0; k-- {
		in := r.pending[0]
		r.pending = r.pending[1:]
		p := r.w.rng.IntN(simPartitions)
		if r.silent && p == simPartitions-1 && len(r.pending) >= simSilentUntil {
			p = r.w.rng.IntN(simPartitions - 1)
		}
		if _, err := r.w.kafka.Append(memkafka.Record{Topic: "in", Partition: int32(p), Value: r.job.inputValue(in), Timestamp: r.clock}); err != nil {
			panic(err)
		}
		r.inputs[p] = append(r.inputs[p], in)
	}
}

// run runs attempts until the job stopped gracefully after reading every
// input, and returns the first invariant that broke.
func (r *simRun) run() error {
	for r.steps < simMaxSteps {
		stopped, err := r.attempt()
		if err != nil {
			return err
		}
		if stopped {
			return r.checkEnd()
		}
		r.restarts++
		// A restart is a step too: an attempt that fails before its graph
		// runs (a restore refused over and over) must not loop forever.
		r.steps++
	}
	return fmt.Errorf("no end after %d steps (%d crashes, %d restarts): the job stopped making progress", r.steps, r.crashes, r.restarts)
}

// errViolation marks a broken invariant, as opposed to a failure the job
// must survive.
var errViolation = errors.New("invariant violated")

// attempt is one life of the process: recover, restore, run steps until
// it crashes, fails or stops. A violation ends the run.
func (r *simRun) attempt() (stopped bool, err error) {
	ctx := context.Background()
	a := &attempt{j: r.j, cluster: simCluster{w: r.w, job: r.job.name}, limits: r.w.limits(),
		adapters: simAdapters{w: r.w, now: func() time.Time { return r.clock }}}
	defer func() {
		rec := recover()
		if rec == nil {
			return
		}
		c, ok := rec.(simCrash)
		if !ok {
			panic(rec)
		}
		r.crashes++
		r.w.log("attempt %d killed %s", r.restarts, c.at)
		stopped, err = false, nil
	}()
	r.paused = false
	faulty := r.steps < r.faultSteps
	if !faulty {
		r.w.crashP = 0
	}
	// The job's own recovery, producers and readers (adapters.go), on
	// the model's clients.
	if err := (singleMode{}).recover(ctx, a); err != nil {
		r.w.log("recovery failed: %v", err)
		return false, r.unexpected(err)
	}
	if err := r.check("recovery"); err != nil {
		return false, err
	}
	if err := (singleMode{}).restore(ctx, a, r.plan); err != nil {
		r.w.log("restore failed: %v", err)
		return false, r.unexpected(err)
	}
	if err := a.loadTables(ctx, r.tableReader); err != nil {
		r.w.log("reading the tables failed: %v", err)
		return false, r.unexpected(err)
	}
	r.w.log("attempt %d restored checkpoint %d", r.restarts, a.loop.m.LastCompleted())
	readers, err := (singleMode{}).readers(a)
	if err != nil {
		return false, err
	}
	g, err := newGraph(a, readers)
	if err != nil {
		return false, err
	}
	s := &simAttempt{simGraph: newSimGraph(r.w, a, g), r: r}
	s.committed = func(id checkpoint.ID) error { return r.check(fmt.Sprintf("checkpoint %d", id)) }
	stopped, ferr := s.run()
	if ferr != nil {
		if errors.Is(ferr, errViolation) {
			return false, ferr
		}
		if errors.Is(ferr, twophase.ErrFenced) || errors.Is(ferr, sink.ErrFenced) {
			// No other instance ever runs here: nothing can have taken over.
			return false, fmt.Errorf("%w: the job took a failure for a takeover and would exit: %v", errViolation, ferr)
		}
		r.w.log("attempt %d failed: %v", r.restarts, ferr)
		if err := r.unexpected(ferr); err != nil {
			return false, err
		}
	}
	// As attempt.run: abort the epoch left open rather than leave it to
	// the next fence.
	_ = a.loop.shutdown(ctx, ferr)
	if stopped {
		return true, nil
	}
	return false, nil
}

// unexpected tells failures the job must survive (it restarts) from ones
// that mean a bug: with no fault injected, a failure is a bug.
func (r *simRun) unexpected(err error) error {
	if r.w.crashP == 0 && r.steps >= r.faultSteps && !r.paused && !errors.Is(err, errCrashStep) {
		return fmt.Errorf("%w: a failure without any fault injected: %v", errViolation, err)
	}
	return nil
}

var errCrashStep = errors.New("killed between two steps")

// simGraph runs one attempt's task graph, one step at a time: a source's
// poll or barriers, a worker's batch, the sink's batch, seal or open, the
// committer's next call. The single-mode simulation and the group-mode
// one (groupsim_test.go) take these steps among their own.
type simGraph struct {
	w   *world
	a   *attempt
	g   *graph
	ctx context.Context
	// workerQ and sinkQ are the channels' contents.
	workerQ [][]batch
	sinkQ   []batch
	// committed, if set, is called once the decision log committed a
	// checkpoint of the graph.
	committed func(id checkpoint.ID) error
}

func newSimGraph(w *world, a *attempt, g *graph) *simGraph {
	return &simGraph{w: w, a: a, g: g, ctx: context.Background(), workerQ: make([][]batch, len(g.workers))}
}

// simAttempt is one attempt of the single-mode simulation: its graph's
// steps, and the run's own (input, time, stop, savepoints, faults).
type simAttempt struct {
	*simGraph
	r         *simRun
	stopAsked bool
	// savepoint is the savepoint asked for and not yet answered.
	savepoint *savepointRequest
}

type simStep int

const (
	stepWrite simStep = iota
	stepSource
	stepWorker
	stepSink
	stepSeal
	stepCall
	stepOpen
	stepTick
	stepStop
	stepSavepoint
	stepPause
	stepCrash
	stepTable
	stepTableWrite
)

func (s *simAttempt) run() (stopped bool, err error) {
	r := s.r
	for ; r.steps < simMaxSteps; r.steps++ {
		if r.steps == r.faultSteps {
			r.w.crashP = 0
		}
		step, arg := s.choose()
		if err := s.do(step, arg); err != nil {
			return false, err
		}
		if err := s.g.loop.react(); err != nil {
			if errors.Is(err, errStopped) {
				return true, s.stopped(err)
			}
			return false, err
		}
		if err := s.savepointAnswered(); err != nil {
			return false, err
		}
	}
	return false, nil
}

// choose picks the next step among those that can be taken now.
func (s *simAttempt) choose() (simStep, int) {
	r := s.r
	var opts simOptions
	if len(r.pending) > 0 {
		opts.add(stepWrite, 0, 3)
	}
	s.options(opts.add)
	opts.add(stepTick, 0, 2)
	if s.g.tables != nil {
		for i := range s.g.tables.tasks {
			opts.add(stepTable, i, 2)
		}
		if r.tableWrites < 30 {
			opts.add(stepTableWrite, 0, 1)
		}
	}
	if !s.stopAsked && r.steps >= r.faultSteps && len(r.pending) == 0 && s.readAll() && (!r.job.asOf || r.tableWrites >= asOfTableWrites) {
		opts.add(stepStop, 0, 1)
	}
	if s.savepoint == nil && !s.stopAsked && r.savepointsAsked < 3 {
		opts.add(stepSavepoint, 0, 1)
	}
	if r.steps < r.faultSteps && r.w.crashP > 0 {
		opts.add(stepCrash, 0, 1)
		if r.pauses < 2 {
			opts.add(stepPause, 0, 1)
		}
	}
	return opts.pick(r.w.rng)
}

// simOptions are the steps a scheduler may take next, with their
// weights.
type simOptions []struct{ step, arg, weight int }

func (o *simOptions) add(step simStep, arg, weight int) {
	*o = append(*o, struct{ step, arg, weight int }{int(step), arg, weight})
}

// pick draws one step, by weight.
func (o simOptions) pick(rng *rand.Rand) (simStep, int) {
	total := 0
	for _, x := range o {
		total += x.weight
	}
	n := rng.IntN(total)
	for _, x := range o {
		if n < x.weight {
			return simStep(x.step), x.arg
		}
		n -= x.weight
	}
	panic("unreachable")
}

// options adds the graph's steps that can be taken now.
func (s *simGraph) options(add func(step simStep, arg, weight int)) {
	for i := range s.g.sources {
		add(stepSource, i, 4)
	}
	for w, q := range s.workerQ {
		if len(q) > 0 {
			add(stepWorker, w, 6)
		}
	}
	if len(s.sinkQ) > 0 {
		add(stepSink, 0, 6)
	}
	if s.g.sink.aligned != nil {
		add(stepSeal, 0, 4)
	}
	if len(s.g.loop.c.queue) > 0 {
		add(stepCall, 0, 4)
	}
	if len(s.g.sink.opened) > 0 {
		add(stepOpen, 0, 4)
	}
}

// readAll reports whether every source read every input written.
func (s *simAttempt) readAll() bool {
	for _, src := range s.g.sources {
		for _, p := range src.reader.Positions() {
			if int(p.Offset) < len(s.r.inputs[p.Partition]) {
				return false
			}
		}
	}
	return true
}

// step takes one of the graph's steps (options).
func (s *simGraph) step(step simStep, arg int) error {
	l := s.g.loop
	switch step {
	case stepSource:
		// The task's own turn (sourceTask.step): the barriers asked for,
		// or a poll routed.
		_, err := s.g.sources[arg].step(s.ctx, make([][]message, len(s.g.workers)), simLinks{s})
		return err
	case stepWorker:
		b := s.workerQ[arg][0]
		s.workerQ[arg] = s.workerQ[arg][1:]
		_, err := s.g.workers[arg].step(s.ctx, b, simLinks{s})
		return err
	case stepSink:
		st := s.g.sink
		b := s.sinkQ[0]
		s.sinkQ = s.sinkQ[1:]
		return st.handle(s.ctx, b)
	case stepSeal:
		// Barrier N aligned at the sink: checkpoint record N into the
		// transaction, and the sink's ack.
		_, err := s.g.sink.sealAligned(s.ctx, simLinks{s})
		return err
	case stepCall:
		// The committer makes the oldest participant call.
		c := l.c.queue[0]
		l.c.queue = l.c.queue[1:]
		o := l.c.do(s.ctx, c)
		l.feed(o)
		if c.a.Kind == twophase.ActCommit && c.a.Participant == l.c.txn.Name() && o.msg.Err == nil {
			s.w.log("%scheckpoint %d committed", s.w.prefix(), c.a.Epoch)
			if s.committed != nil {
				if err := s.committed(c.a.Epoch); err != nil {
					return err
				}
			}
		}
	case stepOpen:
		// The sink learns that the next epoch is open, and writes what it
		// held into it.
		st := s.g.sink
		return st.open(s.ctx, <-st.opened)
	default:
		return fmt.Errorf("not a step of the graph: %d", step)
	}
	return nil
}

func (s *simAttempt) do(step simStep, arg int) error {
	r, l := s.r, s.g.loop
	switch step {
	case stepWrite:
		r.write(1 + r.w.rng.IntN(40))
	case stepTick:
		d := time.Duration(1+r.w.rng.IntN(int(r.cfg.Checkpoint.Interval/time.Millisecond))) * time.Millisecond
		r.clock = r.clock.Add(d)
		r.w.kafka.Advance(d)
		l.onTick()
	case stepStop:
		s.stopAsked = true
		// (Not while a savepoint is pending: the final checkpoint may be
		// that one's, and the runtime refuses two savepoints of one.)
		if r.w.rng.IntN(2) == 0 && s.savepoint == nil {
			r.j.stopSavepoint = r.savepointDir()
			r.w.log("stop with savepoint %s asked", r.j.stopSavepoint)
		} else {
			r.w.log("stop asked")
		}
		return l.onStop()
	case stepSavepoint:
		r.savepointsAsked++
		s.savepoint = &savepointRequest{dir: r.savepointDir(), done: make(chan savepointOutcome, 1)}
		r.w.log("savepoint %s asked", s.savepoint.dir)
		l.requestSavepoint(s.savepoint)
	case stepPause:
		// The process stops (a long GC pause, SIGSTOP, a frozen VM) past
		// the transaction timeout: the coordinator aborts the open
		// transaction, and the job must restart from its checkpoint, not
		// take the aborted epoch for a takeover.
		d := r.cfg.Kafka.TransactionTimeout + time.Duration(1+r.w.rng.IntN(5000))*time.Millisecond
		r.w.log("paused for %v", d)
		r.paused = true
		r.pauses++
		r.clock = r.clock.Add(d)
		r.w.kafka.Advance(d)
		l.onTick()
	case stepCrash:
		r.w.log("crash between steps")
		panic(simCrash{at: "between steps"})
	case stepTable:
		// The table's task applies what one poll of its topic returns.
		return s.g.tables.tasks[arg].poll(s.ctx)
	case stepTableWrite:
		if r.job.asOf {
			r.writeAsOfTable()
			break
		}
		r.writeTable()
	default:
		return s.step(step, arg)
	}
	return nil
}

// savepointDir is where the next savepoint goes.
func (r *simRun) savepointDir() string {
	return filepath.Join(r.dir, fmt.Sprintf("savepoint-%d-%d", r.restarts, r.steps))
}

// savepointAnswered takes the answer to the savepoint asked for, if there
// is one: a savepoint that failed without any fault injected is a bug.
func (s *simAttempt) savepointAnswered() error {
	if s.savepoint == nil {
		return nil
	}
	select {
	case out := <-s.savepoint.done:
		s.savepoint = nil
		return s.r.savepointDone(out.summary.Dir, out.err)
	default:
		return nil
	}
}

func (r *simRun) savepointDone(dir string, err error) error {
	if err != nil {
		r.w.log("savepoint failed: %v", err)
		if r.w.crashP == 0 {
			return fmt.Errorf("%w: a savepoint failed without any fault injected: %v", errViolation, err)
		}
		return nil
	}
	r.w.log("savepoint %s written", dir)
	r.savepoints = append(r.savepoints, dir)
	return nil
}

// stopped is the end of a graceful stop, with the final savepoint if one
// was asked for.
func (s *simAttempt) stopped(err error) error {
	r := s.r
	r.w.log("stopped gracefully")
	if dir := r.j.stopSavepoint; dir != "" {
		var se *stoppedError
		if !errors.As(err, &se) {
			return fmt.Errorf("%w: stopped with %v", errViolation, err)
		}
		return r.savepointDone(dir, se.savepoint)
	}
	return nil
}

// simLinks are the channels between the graph's tasks as the
// simulation has them: the workers' and the sink's queues, and the
// coordinator loop, told at once.
type simLinks struct{ s *simGraph }

var _ links = simLinks{}

func (l simLinks) toWorker(_ context.Context, w int, b batch) bool {
	l.s.workerQ[w] = append(l.s.workerQ[w], b)
	return true
}

func (l simLinks) toSink(_ context.Context, b batch) bool {
	l.s.sinkQ = append(l.s.sinkQ, b)
	return true
}

func (l simLinks) report(_ context.Context, r taskReport) bool {
	l.s.g.loop.onReport(r)
	return true
}

func (l simLinks) exported(_ context.Context, r exportReport) bool {
	l.s.g.loop.sp.exported(r)
	return true
}

// committedView is what a read_committed reader has seen so far of the
// job's outputs, dead letters and checkpoints. Below the last stable
// offset nothing changes any more, so check reads only what is new since
// its last call instead of every topic from the start.
type committedView struct {
	next   map[memkafka.TP]int64
	seen   map[string]map[int64]int // key -> count -> outputs with it
	last   map[string]simAgg        // key -> output with the highest count
	dead   int
	newest kstore.Newest
	// parity-windows: every committed output by window, the late topic's
	// records by input, and the newest checkpoint's watermark.
	windows   map[simWin][]simAgg
	late      map[simTP]int
	watermark int64
	// interval join: every committed result, and each key's last
	// committed result (their order).
	pairs    map[simPair]int
	lastPair map[string]simPair
	// join as of event time: how many times each input was committed,
	// and the inputs each committed checkpoint held.
	asOf   map[int64]int
	heldAt map[checkpoint.ID]map[simTP]bool
}

type simAgg struct{ count, sum int64 }

// tail returns the records of topic committed since the last call.
func (v *committedView) tail(w *world, topic string) []memkafka.Record {
	n, err := w.kafka.Partitions(topic)
	if err != nil {
		return nil
	}
	var out []memkafka.Record
	for p := range int32(n) {
		tp := memkafka.TP{Topic: topic, Partition: p}
		for {
			from := v.next[tp]
			recs, next, err := w.kafka.ReadCommitted(tp, from, 1<<20)
			if err != nil || next == from {
				break
			}
			out = append(out, recs...)
			v.next[tp] = next
		}
	}
	return out
}

// catchUp reads what was committed since the last call.
func (r *simRun) catchUp() error {
	v := &r.committed
	if v.next == nil {
		v.next, v.seen, v.last = map[memkafka.TP]int64{}, map[string]map[int64]int{}, map[string]simAgg{}
		v.newest.Job = r.job.name
	}
	for _, rec := range v.tail(r.w, checkpoint.TopicName(r.job.name)) {
		if err := v.newest.Add(fromModel(rec)); err != nil {
			return err
		}
		if cp := v.newest.Record; r.job.asOf && cp != nil {
			if v.heldAt == nil {
				v.heldAt = map[checkpoint.ID]map[simTP]bool{}
			}
			if _, ok := v.heldAt[cp.ID]; !ok {
				held, err := heldInputs(cp)
				if err != nil {
					return err
				}
				v.heldAt[cp.ID] = held
			}
		}
	}
	if err := v.newest.Err(); err != nil {
		return err
	}
	if r.job.windowed {
		return r.catchUpWindows()
	}
	if r.job.interval {
		return r.catchUpPairs()
	}
	if r.job.asOf {
		return r.catchUpAsOf()
	}
	outputs := []simExtra{{topic: "out"}}
	outputs = append(outputs, r.job.extra...)
	for _, x := range outputs {
		for _, out := range v.tail(r.w, x.topic) {
			var o struct {
				Key        string
				Count, Sum int64
				N          int64
			}
			if err := json.Unmarshal(out.Value, &o); err != nil {
				return fmt.Errorf("output %s: %v", out.Value, err)
			}
			if x.passThrough {
				o.Key, o.Count, o.Sum = strconv.FormatInt(o.N, 10), 1, o.N
			}
			key := o.Key
			if x.topic != "out" {
				key = x.topic + "|" + key // each output's keys apart
			}
			if v.seen[key] == nil {
				v.seen[key] = map[int64]int{}
			}
			v.seen[key][o.Count]++
			if o.Count > v.last[key].count {
				v.last[key] = simAgg{o.Count, o.Sum}
			}
		}
	}
	v.dead += len(v.tail(r.w, r.cfg.Sinks[0].DeadLetterTopic))
	return nil
}

// check compares what is committed with the oracle: the newest
// checkpoint's offsets are an input prefix, and under exactly_once the
// committed outputs and dead letters must be exactly those of that prefix
// (invariants 1, 2 and 4: a state ahead of or behind its offsets shows as
// a count that repeats or skips); under at_least_once they must cover it.
// Checkpoint ids must increase (invariant 3: kstore.Newest refuses
// anything else).
func (r *simRun) check(when string) error {
	if err := r.catchUp(); err != nil {
		return fmt.Errorf("%w at %s: %v", errViolation, when, err)
	}
	v := &r.committed
	if r.job.windowed {
		return r.checkWindows(when)
	}
	if r.job.interval {
		return r.checkPairs(when)
	}
	if r.job.asOf {
		return r.checkAsOf(when)
	}
	offsets, _, err := r.committedCut(when, false)
	if err != nil {
		return err
	}
	want, bad := r.oracle(offsets)
	// A continuation's outputs go on from its savepoint's.
	if r.base != nil && r.baseWant == nil {
		r.baseWant, r.baseBad = r.oracle(r.base)
	}
	from, fromBad := r.baseWant, r.baseBad
	bad -= fromBad
	exact := r.guarantee == config.ExactlyOnce
	for k, a := range want {
		for c := from[k].count + 1; c <= a.count; c++ {
			n := v.seen[k][c]
			if n == 0 || (exact && n > 1) {
				return fmt.Errorf("%w at %s: key %q: output with count %d committed %d times; the checkpoint covers %d inputs of the key", errViolation, when, k, c, n, a.count)
			}
		}
		if exact && a.count > from[k].count && v.last[k] != a {
			return fmt.Errorf("%w at %s: key %q: last committed output %+v, the checkpoint's input says %+v", errViolation, when, k, v.last[k], a)
		}
	}
	for k, counts := range v.seen {
		for c := range counts {
			if c <= from[k].count {
				return fmt.Errorf("%w at %s: key %q: output with count %d committed, but the savepoint restored %d", errViolation, when, k, c, from[k].count)
			}
		}
	}
	if exact {
		for k, counts := range v.seen {
			if int64(len(counts)) > want[k].count-from[k].count {
				return fmt.Errorf("%w at %s: key %q: %d outputs committed, but the checkpoint covers %d inputs of the key", errViolation, when, k, len(counts), want[k].count-from[k].count)
			}
		}
		if v.dead != bad {
			return fmt.Errorf("%w at %s: %d dead letters committed; the checkpoint covers %d bad inputs", errViolation, when, v.dead, bad)
		}
	} else if v.dead < bad {
		return fmt.Errorf("%w at %s: %d dead letters committed; the checkpoint covers %d bad inputs", errViolation, when, v.dead, bad)
	}
	return nil
}

// oracle is the aggregate of every key, and the number of bad inputs, of
// the inputs before offsets (nil: none).
func (r *simRun) oracle(offsets []int64) (map[string]simAgg, int) {
	want := map[string]simAgg{}
	var bad int
	for p, off := range offsets {
		for _, in := range r.inputs[p][:off] {
			if in.bad {
				bad++
				continue
			}
			add := func(k string) {
				a := want[k]
				a.count++
				a.sum += in.n
				want[k] = a
			}
			add(r.job.keyOf(in.n))
			for _, x := range r.job.extra {
				if k, ok := x.keyOf(in.n); ok {
					add(x.topic + "|" + k)
				}
			}
		}
	}
	return want, bad
}

// committedCut is the input prefix the newest committed checkpoint covers:
// its offset in each input partition and, when timed, its watermark. With
// nothing committed yet, a continuation is still where its savepoint was.
// An offset beyond the input, or a timed checkpoint without event time,
// is a violation.
func (r *simRun) committedCut(when string, timed bool) (offsets []int64, watermark int64, err error) {
	rec := r.committed.newest.Record
	offsets = make([]int64, simPartitions)
	watermark = window.NoWatermark
	if rec == nil {
		if r.base != nil {
			copy(offsets, r.base)
			watermark = r.baseWatermark
		}
		return offsets, watermark, nil
	}
	for _, o := range rec.Offsets {
		if o.Topic != "in" || int(o.Partition) >= simPartitions || int(o.Offset) > len(r.inputs[o.Partition]) {
			return nil, 0, fmt.Errorf("%w at %s: checkpoint %d has offset %v beyond the input", errViolation, when, rec.ID, o)
		}
		offsets[o.Partition] = o.Offset
	}
	if timed {
		if rec.EventTime == nil {
			return nil, 0, fmt.Errorf("%w at %s: checkpoint %d has no event time", errViolation, when, rec.ID)
		}
		watermark = rec.EventTime.Watermark
	}
	return offsets, watermark, nil
}

// checkEnd: after the graceful stop every input is covered by the last
// checkpoint, and no transaction is left open (invariant 6).
func (r *simRun) checkEnd() error {
	if err := r.check("the end"); err != nil {
		return err
	}
	rec := r.committed.newest.Record
	total := 0
	for _, p := range r.inputs {
		total += len(p)
	}
	covered := 0
	if rec != nil {
		for _, o := range rec.Offsets {
			covered += int(o.Offset)
		}
	}
	if covered != total {
		return fmt.Errorf("%w: stopped gracefully with %d of %d inputs in the last checkpoint", errViolation, covered, total)
	}
	if open := r.w.kafka.OpenTransactions(); len(open) > 0 {
		return fmt.Errorf("%w: transactions left open after a graceful stop: %v", errViolation, open)
	}
	return nil
}

// simulate runs one seed: the job until it stopped gracefully, then, if it
// wrote savepoints, a second process from one of them until it stopped
// too. It returns the run that ended last.
func simulate(t testing.TB, seed uint64, job simJob, g config.Guarantee, bug plantedBug, dir string) (*simRun, error) {
	defer os.RemoveAll(dir)
	r := newSimRun(t, seed, job, g, dir)
	r.bug = bug
	r.j.plantedBug = bug
	if err := r.run(); err != nil || len(r.savepoints) == 0 {
		return r, err
	}
	c, err := r.continuation(t, r.savepoints[r.w.rng.IntN(len(r.savepoints))])
	if err != nil {
		return r, err
	}
	err = c.run()
	c.steps, c.crashes, c.restarts = c.steps+r.steps, c.crashes+r.crashes, c.restarts+r.restarts
	if err != nil {
		err = fmt.Errorf("continued from a savepoint with %d workers: %w", c.cfg.Workers, err)
	}
	return c, err
}

// simTempDir is a directory for the runs' savepoints: in memory where
// the machine has a tmpfs, because a savepoint syncs every file it writes
// and thousands of runs would wait on the disk.
func simTempDir(t testing.TB) string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "pipeline-sim-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}

// simDefaultSeeds is how many seeds a test runs per job and guarantee:
// full, less with -short (it must stay under a minute), and few under the
// race detector, which slows the runs tenfold and finds nothing more in
// a single-goroutine schedule (scripts/test.sh runs the full count
// without it). -sim.seeds overrides.
func simDefaultSeeds(full int) int {
	switch {
	case *simSeeds > 0:
		return *simSeeds
	case raceEnabled:
		return max(full/20, 40)
	case testing.Short():
		return full * 3 / 10
	}
	return full
}

// runSeeds runs seeds 1..seeds of job under g (or only -sim.seed) and
// returns how many broke an invariant, and the first of them.
func runSeeds(t testing.TB, job simJob, g config.Guarantee, seeds int, bug plantedBug) (failures int, first string) {
	from, to := uint64(1), uint64(seeds)
	if *simSeed != 0 {
		from, to = *simSeed, *simSeed
	}
	dir := simTempDir(t)
	for seed := from; seed <= to; seed++ {
		r, err := simulate(t, seed, job, g, bug, filepath.Join(dir, fmt.Sprint(seed)))
		if *simSeed != 0 {
			for _, line := range r.w.trace {
				t.Log(line)
			}
		}
		if err == nil {
			continue
		}
		failures++
		if first == "" {
			first = fmt.Sprintf("%s/%s seed %d (%d steps, %d crashes, %d restarts): %v", job.name, g, seed, r.steps, r.crashes, r.restarts, err)
		}
		if bug == noPlantedBug {
			t.Errorf("seed %d (%d steps, %d crashes, %d restarts): %v\nreplay: go test ./engine -run 'TestSimulation/%s/%s' -sim.seed=%d -v",
				seed, r.steps, r.crashes, r.restarts, err, job.name, g, seed)
			if failures > 3 {
				t.FailNow()
			}
		}
	}
	return failures, first
}

// TestSimulation runs real jobs through seeded schedules with crashes
// anywhere and checks the invariants of docs/exactly-once.md after every commit and recovery.
func TestSimulation(t *testing.T) {
	seeds := simDefaultSeeds(1000)

	// The runs allocate much and keep little: collect less often.
	old := debug.SetGCPercent(400)
	t.Cleanup(func() { debug.SetGCPercent(old) })
	for _, job := range simJobs {
		guarantees := job.guarantees
		if guarantees == nil {
			guarantees = []config.Guarantee{config.ExactlyOnce, config.AtLeastOnce}
		}
		for _, g := range guarantees {
			n := seeds
			if job.seedShare > 0 {
				n = max(seeds*job.seedShare/100, 1)
			}
			t.Run(job.name+"/"+string(g), func(t *testing.T) {
				t.Parallel()
				runSeeds(t, job, g, n, noPlantedBug)
			})
		}
	}
}

// TestSimulationIsDeterministic: a seed replays exactly, step for step.
func TestSimulationIsDeterministic(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		var hashes [2]uint64
		for i := range hashes {
			r, err := simulate(t, seed, simJobs[0], config.ExactlyOnce, noPlantedBug, filepath.Join(simTempDir(t), "run"))
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			hashes[i] = r.w.hash
		}
		if hashes[0] != hashes[1] {
			t.Fatalf("seed %d ran two different schedules (%x, %x)", seed, hashes[0], hashes[1])
		}
	}
}

// TestSimulationFindsBugs plants bugs in production code paths (the
// source task, the sink: plantedbug.go) and requires the
// simulation to catch each within a few hundred seeds.
func TestSimulationFindsBugs(t *testing.T) {
	for _, c := range []struct {
		name string
		bug  plantedBug
	}{{"lost barrier", plantedLostBarrier}, {"no hold-back while committing", plantedEarlyRelease}} {
		t.Run(c.name, func(t *testing.T) {
			failures, first := runSeeds(t, simJobs[0], config.ExactlyOnce, simDefaultSeeds(100), c.bug)
			if failures == 0 {
				t.Fatalf("the simulation did not notice %s", c.name)
			}
			t.Logf("%s: %d failing runs; first: %s", c.name, failures, first)
		})
	}
}
