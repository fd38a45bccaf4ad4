package engine

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/checkpoint/savepoint"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/internal/datagen"
	"github.com/eoflow/pipeline/internal/fault"
	"github.com/eoflow/pipeline/internal/kread"
	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
	"github.com/eoflow/pipeline/metrics"
	"github.com/eoflow/pipeline/source"
	"github.com/eoflow/pipeline/state"
)

// groupEnv turns e's job into a group-mode job.
func groupEnv(e *testEnv) {
	e.env["SCALE_MODE"] = "group"
	e.env["SCALE_PARTITIONS"] = "4"
	e.env["SESSION_TIMEOUT"] = "6s"
}

// paritySumGroup is the parity-sum example in group mode.
func paritySumGroup(t *testing.T, env map[string]string) *config.Config {
	cfg := paritySum(t, env)
	if cfg.Scale.Mode != config.ScaleGroup {
		t.Fatalf("scale.mode %q, want group", cfg.Scale.Mode)
	}
	return cfg
}

// Two members of one job, in one test process: each input once, exact
// sums, through the repartition topic; the status says who owns what;
// the first keeps its state across the second's arrival.
func TestGroupModeTwoMembers(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	groupEnv(e)
	e.numbers(1, 2000)
	a := startWith(t, paritySumGroup(t, e.env), WithInstanceID("a"))
	// b joins once a runs: a's assignment is revoked while it works.
	for deadline := time.Now().Add(time.Minute); !strings.Contains(a.logs.String(), "checkpoint completed"); {
		if time.Now().After(deadline) {
			t.Fatal("a completed no checkpoint within a minute")
		}
		time.Sleep(50 * time.Millisecond)
	}
	jb, logs := newJob(t, paritySumGroup(t, e.env), WithInstanceID("b"))
	ctx, cancel := context.WithCancel(context.Background())
	b := &running{cancel: cancel, done: make(chan error, 1), logs: logs}
	go func() { b.done <- jb.Run(ctx) }()
	t.Cleanup(cancel)
	e.numbers(2001, 2000)
	rep := e.awaitFinal(4000, a)
	if !rep.Exact() {
		t.Fatalf("not exactly once: %v", rep)
	}
	// The status says who b is and what it owns, once both are in.
	deadline := time.Now().Add(time.Minute)
	for {
		g := jb.Status().Group
		if g != nil && g.Instance == "b" && len(g.Members) == 2 && len(g.Assigned) > 0 && g.Generation > 0 {
			if !slices.IsSorted(g.Assigned) || len(slices.Compact(slices.Clone(g.Assigned))) != len(g.Assigned) {
				t.Fatalf("assigned partitions repeat or are unsorted: %v", g.Assigned)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status of b: %+v", g)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// b took partitions from a: a committed its open epoch at the
	// revocation (the coordinator takes the commit while it prepares the
	// rebalance), and kept the state of what it still owned instead of
	// restoring it.
	for _, want := range []string{"committing a final checkpoint before the rebalance", "final checkpoint committed", "kept the state of the partitions this process still owns"} {
		for !strings.Contains(a.logs.String(), want) {
			if time.Now().After(deadline) {
				t.Fatalf("a did not log %q", want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// On top of the kept state, every sum goes on exactly.
	e.numbers(4001, 2000)
	if rep := e.awaitFinal(6000, a); !rep.Exact() {
		t.Fatalf("not exactly once after the rebalance: %v", rep)
	}
	for _, r := range []*running{a, b} {
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.Contains(a.logs.String()+b.logs.String(), "member attempt") {
		t.Fatal("no member attempt logged")
	}
}

// A job moves between modes only through a savepoint: a group-mode start
// on a single-mode job's checkpoints is refused, and the other way round,
// before anything is written.
func TestModeSwitchIsRefused(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	e.numbers(1, 100)
	r := start(t, paritySum(t, e.env))
	e.awaitFinal(100, r)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	groupEnv(e)
	r = startWith(t, paritySumGroup(t, e.env), WithInstanceID("a"))
	select {
	case err := <-r.done:
		if !errors.Is(err, ErrIncompatible) || !strings.Contains(err.Error(), "ran in single mode") {
			t.Fatalf("group mode on single-mode checkpoints: Run = %v, want ErrIncompatible saying it ran in single mode", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("group mode started on a single-mode job's checkpoints")
	}

	g := newTestEnv(t, "exactly_once")
	groupEnv(g)
	g.numbers(1, 100)
	r = startWith(t, paritySumGroup(t, g.env), WithInstanceID("a"))
	g.awaitFinal(100, r)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	delete(g.env, "SCALE_MODE")
	r = start(t, paritySum(t, g.env))
	select {
	case err := <-r.done:
		if !errors.Is(err, ErrIncompatible) || !strings.Contains(err.Error(), "ran in group mode") {
			t.Fatalf("single mode on a group-mode job: Run = %v, want ErrIncompatible saying it ran in group mode", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("single mode started on a group-mode job")
	}
}

// A group-mode job without key_by needs no repartition topic: each
// member writes what its source partitions keep.
func TestGroupModeStateless(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	groupEnv(e)
	cfg := paritySumEdited(t, e.env, "  - id: parity\n    key_by: 'n % 2 == 0 ? \"even\" : \"odd\"'\n  - id: sums\n    aggregate:\n      emit: ${EMIT:-every_record}\n      values:\n        count: count()\n        sum: sum(n)\n",
		"  - filter: n % 2 == 0\n")
	e.numbers(1, 1000)
	a := startWith(t, cfg, WithInstanceID("a"))
	b := startWith(t, cfg, WithInstanceID("b"))
	got := e.awaitOutputs(500, a)
	seen := map[string]bool{}
	for _, v := range got {
		if seen[v] {
			t.Fatalf("output %s twice", v)
		}
		seen[v] = true
	}
	for _, r := range []*running{a, b} {
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
	}
	if topics := e.topics(); slicesContains(topics, e.env["JOB_NAME"]+"-repartition") {
		t.Fatalf("a stateless job created a repartition topic: %v", topics)
	}
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// awaitOutputs waits until the output topic holds n records and returns
// their values; more than n fails.
func (e *testEnv) awaitOutputs(n int, r *running) []string {
	e.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		vals := e.outputValues()
		if len(vals) == n {
			return vals
		}
		select {
		case err := <-r.done:
			e.t.Fatalf("job stopped early (%v) with %d outputs", err, len(vals))
		default:
		}
		if len(vals) > n || time.Now().After(deadline) {
			e.t.Fatalf("%d outputs, want %d", len(vals), n)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// topics lists the cluster's topics.
func (e *testEnv) topics() []string {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	listed, err := kadm.NewClient(kafkatest.Client(e.t, e.brokers)).ListTopics(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	return listed.Names()
}

// A group-mode job stops with a savepoint while input keeps arriving: the
// sources stop, the repartition topic drains, and the final checkpoint
// is written as an ordinary savepoint (source offsets only); single mode
// continues from it exactly. With a second member running, the stop takes
// no savepoint and says why.
func TestGroupModeStopWithSavepoint(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	groupEnv(e)
	a, logs := newJob(t, paritySumGroup(t, e.env), WithInstanceID("a"))
	done := runBackground(a)
	const total = 20000
	feedWait := e.feedInBackground(total, 10000)
	// Committed outputs, not records read: the first attempt may read
	// and then end in the rebalance that adds the repartition topic
	// (created after the first join) before it commits anything.
	e.awaitCommittedOutputs(1000, logs)
	// datagen deals the numbers round-robin over 4 partitions, so two
	// hold only odd numbers and two only even ones: the first thousand
	// outputs may all be of partitions read first. The savepoint must
	// hold both keys.
	e.awaitCommittedKeys(logs, "even", "odd")
	dir := filepath.Join(t.TempDir(), "sp")
	a.StopWithSavepoint(dir)
	if err := awaitDone(t, done); err != nil {
		t.Fatalf("Run after StopWithSavepoint: %v\n%s", err, logs.String())
	}
	if !strings.Contains(logs.String(), "the repartition topic is drained") {
		t.Fatalf("no drain before the savepoint:\n%s", logs.String())
	}
	sp := openSavepoint(t, dir)
	for _, o := range sp.Manifest().Offsets() {
		if o.Topic != e.env["INPUT_TOPIC"] {
			t.Fatalf("the savepoint holds offsets of %s: %v", o.Topic, sp.Manifest().Offsets())
		}
	}
	if op := sp.Manifest().Operator("sums"); op == nil || op.Keys != 2 {
		t.Fatalf("the savepoint's aggregate: %+v", op)
	}
	if read, counted := savepointCounts(t, a, sp); counted != read {
		t.Fatalf("the savepoint's offsets cover %d inputs, its state counts %d\n%s", read, counted, logs.String())
	}
	feedWait()

	// Single mode from the group's savepoint: under another name (the
	// group-mode job's topics stay its own), reading the same input and
	// writing the same output, so the outputs continue exactly.
	single := map[string]string{}
	for k, v := range e.env {
		single[k] = v
	}
	delete(single, "SCALE_MODE")
	single["JOB_NAME"] = e.env["JOB_NAME"] + "-single"
	job, logs := newJob(t, paritySum(t, single), WithSavepointRestore(sp, savepoint.RestoreOptions{}))
	done = runBackground(job)
	rep := e.awaitFinal(total, &running{done: done, logs: logs})
	if !rep.Exact() {
		t.Fatalf("single mode after the group's savepoint: %v", rep)
	}
	job.Stop()
	if err := awaitDone(t, done); err != nil {
		t.Fatal(err)
	}
}

// A stop with a savepoint that arrives while an epoch commits, with
// records the sources read after that epoch's barrier still held by the
// sink (they go out in the next epoch's transaction): the committing
// epoch cannot show the repartition topic drained, however empty it
// looks when it completes. Only a checkpoint whose barrier came after the
// sources stopped can; the savepoint's state then counts every input its
// source offsets cover. The hold makes the schedule certain: the epoch
// held has nothing to shuffle, its keyed side has read everything, and
// the new inputs are read while it commits.
func TestGroupModeStopWithSavepointWhileAnEpochCommits(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	groupEnv(e)
	var hold atomic.Bool
	holding := make(chan checkpoint.ID, 1)
	release := make(chan struct{})
	a, logs := newJob(t, paritySumGroup(t, e.env), WithInstanceID("a"), withBeforeCommit(func(id checkpoint.ID) {
		if hold.CompareAndSwap(true, false) {
			holding <- id
			<-release
		}
	}))
	done := runBackground(a)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	e.numbers(1, 1000)
	e.awaitFinal(1000, &running{done: done, logs: logs})

	// The next epoch to commit has nothing to shuffle: every input is
	// shuffled and aggregated already.
	hold.Store(true)
	var held checkpoint.ID
	select {
	case held = <-holding:
	case <-time.After(time.Minute):
		t.Fatalf("no epoch committed:\n%s", logs.String())
	}
	// Counted from here: a first attempt may have read inputs and ended
	// in a rebalance before it committed them.
	before := readIn(t, a, e.env["INPUT_TOPIC"])
	e.numbers(1001, 1000)
	e.awaitRead(a, before+1000, logs)
	dir := filepath.Join(t.TempDir(), "sp")
	a.StopWithSavepoint(dir)
	for deadline := time.Now().Add(time.Minute); !strings.Contains(logs.String(), "the sources stop, and the repartition topic drains first"); {
		if time.Now().After(deadline) {
			t.Fatalf("the stop did not begin:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(release)
	if err := awaitDone(t, done); err != nil {
		t.Fatalf("Run after StopWithSavepoint: %v\n%s", err, logs.String())
	}
	read, counted := savepointCounts(t, a, openSavepoint(t, dir))
	if read != 2000 || counted != read {
		t.Fatalf("the savepoint (the epoch held was %d) has read %d inputs and counted %d, want 2000 and 2000\n%s", held, read, counted, logs.String())
	}
}

// A live group savepoint whose pause runs out while its export reads the
// state: the members read on meanwhile, so the state it would read may
// hold inputs after the offsets it fetched. It fails and says why instead
// of writing that cut, and the job stays exact. The hook holds the export
// until the group has committed more input.
func TestGroupModeLiveSavepointFailsWhenThePauseRunsOut(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	groupEnv(e)
	cfg := paritySumGroup(t, e.env)
	cfg.Checkpoint.Timeout = 3 * time.Second // a pause lasts 6 s at most: ready within 4.5 s
	readOn := func() {
		// Until the keyed side has committed state for inputs read
		// after the pause.
		before := len(e.outputValues())
		deadline := time.Now().Add(time.Minute)
		for len(e.outputValues()) <= before {
			if time.Now().After(deadline) {
				t.Errorf("the group committed no output for a minute after the export began (%d)", before)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	a, logs := newJob(t, cfg, WithInstanceID("a"), withBeforeExportState(readOn))
	r := &running{job: a, done: runBackground(a), logs: logs}
	// Input keeps arriving until the savepoint is done, however long the
	// start takes: the hook waits for output of inputs read after the
	// pause.
	stopFeed := e.feedUntilStopped(4000)
	e.awaitCommittedOutputs(1000, logs)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "sp")
	if _, err := a.Savepoint(ctx, dir); !errors.Is(err, errCutMoved) {
		t.Fatalf("a savepoint whose pause ran out during the export: %v, want %v\n%s", err, errCutMoved, logs.String())
	}
	if _, err := savepoint.Open(dir); err == nil {
		t.Fatal("the failed savepoint left a savepoint behind")
	}
	total := stopFeed()
	if rep := e.awaitFinal(total, r); !rep.Exact() {
		t.Fatalf("after the failed savepoint: %v", rep)
	}
	a.Stop()
	if err := awaitDone(t, r.done); err != nil {
		t.Fatal(err)
	}
}

// feedUntilStopped writes the numbers 1, 2, ... at rate per second, a
// thousand at a time, until the returned func is called; that returns the
// last number written.
func (e *testEnv) feedUntilStopped(rate float64) (stop func() int64) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int64, 1)
	go func() {
		next := int64(1)
		defer func() { done <- next - 1 }()
		for ctx.Err() == nil {
			wctx, wcancel := context.WithTimeout(context.Background(), time.Minute)
			_, err := datagen.Numbers(wctx, e.conn, datagen.Options{Topic: e.env["INPUT_TOPIC"], From: next, Count: 1000, Rate: rate})
			wcancel()
			if err != nil {
				e.t.Errorf("writing input: %v", err)
				return
			}
			next += 1000
		}
	}()
	var once sync.Once
	var last int64
	stop = func() int64 {
		once.Do(func() {
			cancel()
			last = <-done
		})
		return last
	}
	e.t.Cleanup(func() { stop() })
	return stop
}

// savepointCounts is how many inputs the source offsets of a parity-sum
// savepoint cover (the input was written without transactions, so its
// offsets count records), and how many its state counts.
func savepointCounts(t *testing.T, j *Job, sp *savepoint.Reader) (read, counted int64) {
	t.Helper()
	for _, o := range sp.Manifest().Offsets() {
		read += o.Offset
	}
	err := sp.Scan("sums", state.Range{End: state.KeyGroup(j.cfg.Checkpoint.KeyGroups)}, func(en savepoint.Entry) error {
		st, err := j.plan.targets[0].agg.DecodeState(en.Value)
		if err != nil {
			return err
		}
		n, _ := st.Value("count")
		counted += n.(int64)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return read, counted
}

// awaitCommittedOutputs waits until the output topic holds at least n
// committed records.
func (e *testEnv) awaitCommittedOutputs(n int, logs *syncBuffer) {
	e.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		got := len(e.outputValues())
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%d committed outputs, want %d:\n%s", got, n, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// awaitCommittedKeys waits until the output topic holds a committed
// output of each of keys (parity-sum's outputs carry their key).
func (e *testEnv) awaitCommittedKeys(logs *syncBuffer, keys ...string) {
	e.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		vals := e.outputValues()
		missing := slices.DeleteFunc(slices.Clone(keys), func(k string) bool {
			return slices.ContainsFunc(vals, func(v string) bool {
				return strings.Contains(v, `"key":"`+k+`"`)
			})
		})
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("no committed output of %v:\n%s", missing, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// outputValues are the values of the output topic's committed records
// (none before the topic exists).
func (e *testEnv) outputValues() []string {
	e.t.Helper()
	var vals []string
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := kread.All(ctx, e.conn, e.env["OUTPUT_TOPIC"], func(r *kgo.Record) error {
		vals = append(vals, string(r.Value))
		return nil
	})
	if err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
		e.t.Fatal(err)
	}
	return vals
}

// Savepoints while two members run: a live one (every member pauses its
// sources, the repartition topic drains, the asking member writes it from
// Kafka), then a stop with a savepoint of one member while the other runs
// on. The group's output stays exact; the live savepoint is a consistent
// cut: single mode from it, over the same input into a new output topic,
// ends at the exact totals.
func TestGroupModeSavepointsWhileTwoRun(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	groupEnv(e)
	a, logsA := newJob(t, paritySumGroup(t, e.env), WithInstanceID("a"))
	doneA := runBackground(a)
	b := startWith(t, paritySumGroup(t, e.env), WithInstanceID("b"))
	const total = 20000
	deadline := time.Now().Add(time.Minute)
	for {
		if g := a.Status().Group; g != nil && len(g.Members) == 2 && a.Ready() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a never saw b: %+v\n%s", a.Status().Group, logsA.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Fed once both run, so that a reads its partitions' share: fed
	// before, the input could all be read by b while the group formed
	// (it did, on a loaded machine), leaving a nothing to read.
	feedWait := e.feedInBackground(total, 5000)
	e.awaitRead(a, 1000, logsA)
	live := filepath.Join(t.TempDir(), "live")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sum, err := a.Savepoint(ctx, live)
	if err != nil {
		t.Fatalf("savepoint while two run: %v\n%s", err, logsA.String())
	}
	if sum.Operators == nil {
		t.Fatalf("savepoint summary %+v", sum)
	}
	feedWait()
	if rep := e.awaitFinal(total, b); !rep.Exact() {
		t.Fatalf("after the live savepoint: %v", rep)
	}

	e.numbers(total+1, 1000)
	stopped := filepath.Join(t.TempDir(), "stopped")
	a.StopWithSavepoint(stopped)
	if err := awaitDone(t, doneA); err != nil {
		t.Fatalf("a's stop with a savepoint while b runs: %v\n%s", err, logsA.String())
	}
	openSavepoint(t, stopped)
	if rep := e.awaitFinal(total+1000, b); !rep.Exact() {
		t.Fatalf("b after a stopped with a savepoint: %v", rep)
	}

	// The live savepoint is a consistent cut of the group.
	e2 := *e
	e2.env = map[string]string{}
	for k, v := range e.env {
		e2.env[k] = v
	}
	delete(e2.env, "SCALE_MODE")
	e2.env["JOB_NAME"] = e.env["JOB_NAME"] + "-check"
	e2.env["OUTPUT_TOPIC"] = e.env["OUTPUT_TOPIC"] + "-check"
	r := startWith(t, paritySum(t, e2.env), WithSavepointRestore(openSavepoint(t, live), savepoint.RestoreOptions{}))
	if rep := e2.awaitFinal(total+1000, r); !rep.StateExact() {
		t.Fatalf("single mode from the live savepoint: %v", rep)
	}
}

// A single-mode job's savepoint starts the same job in group mode, on two
// processes both started from it: one imports it (the owner of the first
// source partition), the other waits, both continue exactly; started
// again from the same savepoint they do not import it twice.
func TestGroupModeFromSavepoint(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	sp := e.stoppedWithSavepoint(3000)
	groupEnv(e)
	e.numbers(3001, 2000)
	opt := WithSavepointRestore(sp, savepoint.RestoreOptions{})
	a := startWith(t, paritySumGroup(t, e.env), WithInstanceID("a"), opt)
	b := startWith(t, paritySumGroup(t, e.env), WithInstanceID("b"), opt)
	rep := e.awaitFinal(5000, a)
	if !rep.Exact() {
		t.Fatalf("group mode after the savepoint: %v", rep)
	}
	imports := strings.Count(a.logs.String()+b.logs.String(), "imported savepoint")
	if imports != 1 {
		t.Fatalf("%d imports, want 1", imports)
	}
	for _, r := range []*running{a, b} {
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
	}
	e.numbers(5001, 1000)
	a = startWith(t, paritySumGroup(t, e.env), WithInstanceID("a"), opt)
	b = startWith(t, paritySumGroup(t, e.env), WithInstanceID("b"), opt)
	rep = e.awaitFinal(6000, a)
	if !rep.Exact() {
		t.Fatalf("restarted from the same savepoint: %v", rep)
	}
	if n := strings.Count(a.logs.String()+b.logs.String(), "imported savepoint"); n != 0 {
		t.Fatalf("imported again on restart (%d)", n)
	}
}

// at_least_once in group mode: the outputs go outside the transaction,
// the repartition records, state and offsets inside it; without failures
// the totals are exact.
func TestGroupModeAtLeastOnce(t *testing.T) {
	e := newTestEnv(t, "at_least_once")
	groupEnv(e)
	e.numbers(1, 2000)
	a := startWith(t, paritySumGroup(t, e.env), WithInstanceID("a"))
	b := startWith(t, paritySumGroup(t, e.env), WithInstanceID("b"))
	e.numbers(2001, 1000)
	if rep := e.awaitFinal(3000, a); !rep.StateExact() {
		t.Fatalf("at_least_once totals: %v", rep)
	}
	for _, r := range []*running{a, b} {
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
	}
}

// quietReader hands out one poll of records, then has nothing more.
type quietReader struct {
	recs   []*kgo.Record
	polled bool
}

func (r *quietReader) Poll(ctx context.Context, _ int) ([]*kgo.Record, error) {
	if !r.polled {
		r.polled = true
		return r.recs, nil
	}
	<-ctx.Done()
	return nil, ctx.Err()
}
func (r *quietReader) Advance(*kgo.Record)          {}
func (r *quietReader) Positions() []source.Position { return nil }
func (r *quietReader) Close()                       {}

// A source that dropped records during a group savepoint's pause ends
// its attempt when the pause ends, even when no record comes after it:
// its client fetched past what it dropped, and only a new attempt reads
// it again.
func TestPauseEndsTheAttemptOnQuietInput(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	groupEnv(e)
	cfg := paritySumGroup(t, e.env)
	p, err := compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.shuffle = newShuffle(cfg)
	var paused atomic.Value
	paused.Store("savepoint-1")
	worker := make(chan batch, 16)
	s := &sourceTask{
		id: "source-0", reader: &quietReader{recs: []*kgo.Record{{Topic: e.env["INPUT_TOPIC"], Value: []byte(`{"n": 1}`)}}},
		router: p.newRouter(1), workers: []chan<- batch{worker}, reports: make(chan taskReport, 16),
		metrics: metrics.New(nil, cfg.Name),
		gate:    &groupGate{repartition: p.shuffle.repartition, pausedBy: func() string { return paused.Load().(string) }},
	}
	done := make(chan error, 1)
	go func() { done <- s.run(context.Background()) }()
	time.Sleep(50 * time.Millisecond) // it polled, dropped the record, and waits
	paused.Store("")
	s.trigger(1, false) // a barrier wakes the poll, as every checkpoint does
	select {
	case err := <-done:
		if !errors.Is(err, errPauseEnded) {
			t.Fatalf("run = %v, want errPauseEnded", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the source did not end its attempt after the pause")
	}
	if b := <-worker; len(b.msgs) != 1 || b.msgs[0].kind != msgBarrier || b.msgs[0].barrier.pausedFor != "" {
		t.Fatalf("first batch to the worker: %+v (the dropped record must not be sent)", b)
	}
}

// A group-mode job is checked without an instance id (pipeline validate
// builds it); running it needs one.
func TestGroupModeInstanceIDNeededToRun(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	groupEnv(e)
	j, err := New(paritySumGroup(t, e.env), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("New without an instance id: %v", err)
	}
	if err := j.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "no instance id") {
		t.Fatalf("Run without an instance id = %v", err)
	}
	if _, err := New(paritySumGroup(t, e.env), slog.New(slog.DiscardHandler), WithInstanceID("a b")); err == nil {
		t.Fatal("an instance id with a space was accepted")
	}
}

// A process that joins a running group under a new instance id, with an
// aggregate that does not fit the state (sum(n * 10) for sum(n)), has no
// checkpoint of its own, yet would restore and extend the state the others
// wrote. It is refused with single mode's message, before it joins; the
// group runs on exactly.
func TestGroupModeRefusesAChangedJoiner(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	// Single mode's refusal of the same change, for its message.
	single := newTestEnv(t, "exactly_once")
	single.numbers(1, 100)
	r := start(t, paritySum(t, single.env))
	single.awaitFinal(100, r)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	r = start(t, paritySumEdited(t, single.env, "sum: sum(n)", "sum: sum(n * 10)"))
	singleErr := <-r.done
	if !errors.Is(singleErr, ErrIncompatible) {
		t.Fatalf("single mode with a changed aggregate: %v", singleErr)
	}

	groupEnv(e)
	e.numbers(1, 2000)
	a := startWith(t, paritySumGroup(t, e.env), WithInstanceID("a"))
	e.awaitFinal(2000, a)
	b := startWith(t, paritySumEdited(t, e.env, "sum: sum(n)", "sum: sum(n * 10)"), WithInstanceID("b"))
	select {
	case err := <-b.done:
		want := strings.ReplaceAll(singleErr.Error(), single.env["JOB_NAME"], e.env["JOB_NAME"])
		if !errors.Is(err, ErrIncompatible) || !sameButCheckpointID(err.Error(), want) {
			t.Fatalf("a joiner with a changed aggregate: Run = %v\nwant single mode's refusal: %v", err, want)
		}
		t.Logf("the joiner was refused: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("a joiner with a changed aggregate runs in the group")
	}
	if strings.Contains(b.logs.String(), "member attempt") {
		t.Fatalf("the refused joiner ran an attempt:\n%s", b.logs.String())
	}
	e.numbers(2001, 2000)
	if rep := e.awaitFinal(4000, a); !rep.Exact() {
		t.Fatalf("the group after the refused joiner: %v", rep)
	}
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
}

// sameButCheckpointID reports whether two messages differ at most in the
// numbers they carry (checkpoint ids).
func sameButCheckpointID(a, b string) bool {
	// A run of digits, not each digit: checkpoint 2 and checkpoint 50 are
	// the same message.
	digits := regexp.MustCompile(`[0-9]+`)
	return digits.ReplaceAllString(a, "#") == digits.ReplaceAllString(b, "#")
}

// A session timeout below the brokers' minimum (6 s by default) is
// refused by every JoinGroup: the process stops with the brokers' error
// and the range to set, instead of waiting to join forever.
func TestGroupModeSessionTimeoutTheBrokersRefuse(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	groupEnv(e)
	e.env["SESSION_TIMEOUT"] = "3s"
	r := startWith(t, paritySumGroup(t, e.env), WithInstanceID("a"))
	select {
	case err := <-r.done:
		if !errors.Is(err, ErrUnfit) || !errors.Is(err, kerr.InvalidSessionTimeout) ||
			!strings.Contains(err.Error(), "scale.session_timeout 3s") || !strings.Contains(err.Error(), "6s to 30m0s") {
			t.Fatalf("Run = %v, want ErrUnfit naming scale.session_timeout 3s, the brokers' range and INVALID_SESSION_TIMEOUT", err)
		}
		t.Logf("refused: %v", err)
		if st := r.job.Status(); st.State != StateFailed {
			t.Fatalf("status %s, want failed", st.State)
		}
	case <-time.After(time.Minute):
		t.Fatal("a session timeout the brokers refuse: the job still waits to join")
	}
}

// Members learn of a rebalance at their next heartbeat, and under the
// eager protocol the ones that learn first revoke everything and wait in
// the join for the rest, their partitions unread meanwhile. The interval
// must not grow with the session timeout: at a sixth of a 120 s session
// (20 s) a group's first start left partitions unread for 20 s at every
// join.
func TestHeartbeatIntervalDoesNotGrowWithTheSession(t *testing.T) {
	for _, session := range []time.Duration{time.Second, 6 * time.Second, 10 * time.Second, 120 * time.Second, 30 * time.Minute} {
		hb := heartbeatInterval(session)
		if hb > time.Second || hb > session/3 || hb <= 0 {
			t.Errorf("session %v: heartbeat every %v, want at most 1s and a third of the session", session, hb)
		}
	}
	// The group client uses it.
	env := map[string]string{"KAFKA_BROKERS": "127.0.0.1:1", "JOB_NAME": "job", "INPUT_TOPIC": "in", "OUTPUT_TOPIC": "out",
		"ADMIN_LISTEN": "off", "SCALE_MODE": "group", "SCALE_PARTITIONS": "4", "SESSION_TIMEOUT": "120s"}
	j, err := New(paritySumGroup(t, env), slog.New(slog.DiscardHandler), WithInstanceID("a"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := newMembership(j)
	if err != nil {
		t.Fatal(err)
	}
	defer m.close()
	if got := m.cl.OptValue(kgo.HeartbeatInterval); got != time.Second {
		t.Fatalf("the group client heartbeats every %v with a 120s session, want 1s", got)
	}
}

// With a 120 s session timeout, a process that joins a running group is
// dealt its partitions within a few seconds, not at the others' next
// heartbeat up to a sixth of the session later. b joins right after a's
// assignment, when a's next heartbeat under the old interval was almost
// 20 s away.
func TestGroupModeJoinerStartsPromptlyWithALongSession(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	groupEnv(e)
	e.env["SESSION_TIMEOUT"] = "120s"
	e.numbers(1, 1000)
	a := startWith(t, paritySumGroup(t, e.env), WithInstanceID("a"))
	assigned := func(r *running, topic string) bool {
		g := r.job.Status().Group
		if g == nil {
			return false
		}
		for _, tp := range g.Assigned {
			if strings.HasPrefix(tp, topic+"/") {
				return true
			}
		}
		return false
	}
	deadline := time.Now().Add(time.Minute)
	for !assigned(a, RepartitionTopic(e.env["JOB_NAME"])) {
		if time.Now().After(deadline) {
			t.Fatalf("a was not assigned the repartition topic: %+v", a.job.Status().Group)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A new job's first process joins once its topics exist: its first
	// assignment holds the repartition topic, with no second rebalance
	// to add it.
	if strings.Contains(a.logs.String(), "the consumer group rebalanced") {
		t.Fatalf("a rebalanced alone on its first start:\n%s", a.logs.String())
	}
	started := time.Now()
	b := startWith(t, paritySumGroup(t, e.env), WithInstanceID("b"))
	for !assigned(b, e.env["INPUT_TOPIC"]) && !assigned(b, RepartitionTopic(e.env["JOB_NAME"])) {
		if time.Since(started) > 10*time.Second {
			t.Fatalf("b was dealt nothing %v after it started (a session timeout of 120s): %+v", time.Since(started).Round(time.Millisecond), b.job.Status().Group)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("b was dealt partitions %v after it started", time.Since(started).Round(time.Millisecond))
	e.numbers(1001, 1000)
	if rep := e.awaitFinal(2000, a); !rep.Exact() {
		t.Fatalf("after b joined: %v", rep)
	}
	for _, r := range []*running{a, b} {
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
	}
}

// A process that waits to restart after a failure answers a rebalance at
// once: the other members wait in the join for it, their partitions
// unread, and it used to answer only when its next attempt began (a
// restart backoff grows to 30 s).
func TestGroupModeRebalanceDuringARestartBackoff(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	groupEnv(e)
	e.numbers(1, 1000)
	ja, logs := newJob(t, paritySumGroup(t, e.env), WithInstanceID("a"), WithFaults(fault.New(map[fault.Point]int{fault.BeforeCommit: 3})))
	ja.restartBackoff = time.Minute // the wait is 30 s to a minute
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	a := &running{job: ja, cancel: cancel, done: make(chan error, 1), logs: logs}
	go func() { a.done <- ja.Run(ctx) }()
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(logs.String(), "job failed; restarting") {
		if time.Now().After(deadline) {
			t.Fatalf("the injected failure did not happen:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	started := time.Now()
	b := startWith(t, paritySumGroup(t, e.env), WithInstanceID("b"))
	for {
		if g := b.job.Status().Group; g != nil && len(g.Assigned) > 0 {
			break
		}
		if time.Since(started) > 20*time.Second {
			t.Fatalf("b was dealt nothing %v after it started, while a waited to restart: %+v", time.Since(started).Round(time.Millisecond), b.job.Status().Group)
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.numbers(1001, 1000)
	if rep := e.awaitFinal(2000, b); !rep.Exact() {
		t.Fatalf("after the rebalance: %v", rep)
	}
	for _, r := range []*running{a, b} {
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
	}
}
