package engine

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/checkpoint/kstore"
	"github.com/eoflow/pipeline/checkpoint/savepoint"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/internal/datagen"
	"github.com/eoflow/pipeline/internal/kread"
	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
	"github.com/eoflow/pipeline/internal/testkit/paritycheck"
	"github.com/eoflow/pipeline/twophase"
)

// awaitRead waits until the job has read n records of its input.
func (e *testEnv) awaitRead(j *Job, n int64, logs *syncBuffer) {
	e.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !j.Ready() || readIn(e.t, j, e.env["INPUT_TOPIC"]) < n {
		if st := j.Status(); st.State == StateFailed || st.State == StateFenced {
			e.t.Fatalf("the job stopped: %s: %s", st.State, st.Error)
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("the job did not read %d inputs:\n%s", n, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// feedInBackground writes the numbers 1..count at rate per second while
// the test goes on; the returned func waits until they are written (or
// stops the writer when the test ends first).
func (e *testEnv) feedInBackground(count int64, rate float64) (wait func()) {
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	e.t.Cleanup(wg.Wait) // runs after stop (cleanups run last first)
	e.t.Cleanup(stop)
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = datagen.Numbers(ctx, e.conn, datagen.Options{Topic: e.env["INPUT_TOPIC"], From: 1, Count: count, Rate: rate, Parity: e.parity})
	}()
	return wg.Wait
}

func runBackground(j *Job) chan error {
	done := make(chan error, 1)
	go func() { done <- j.Run(context.Background()) }()
	return done
}

func awaitDone(t *testing.T, done chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(2 * time.Minute):
		t.Fatal("Run did not return")
		return nil
	}
}

// stoppedWithSavepoint runs parity-sum over the numbers 1..n, stops it
// with a savepoint, and opens the savepoint.
func (e *testEnv) stoppedWithSavepoint(n int64) *savepoint.Reader {
	e.t.Helper()
	job, logs := newJob(e.t, paritySum(e.t, e.env))
	done := runBackground(job)
	e.numbers(1, n)
	e.awaitFinal(n, &running{done: done, logs: logs})
	dir := filepath.Join(e.t.TempDir(), "sp")
	job.StopWithSavepoint(dir)
	if err := awaitDone(e.t, done); err != nil {
		e.t.Fatal(err)
	}
	return openSavepoint(e.t, dir)
}

// stoppedUnderLoad runs cfg while total numbers are written at 10,000 a
// second, stops it with a savepoint once it read 3,000, and opens the
// savepoint; wait waits for the rest of the input to be written.
func (e *testEnv) stoppedUnderLoad(cfg *config.Config, total int64) (sp *savepoint.Reader, wait func()) {
	e.t.Helper()
	job, logs := newJob(e.t, cfg)
	done := runBackground(job)
	wait = e.feedInBackground(total, 10000)
	e.awaitRead(job, 3000, logs)
	dir := filepath.Join(e.t.TempDir(), "sp")
	job.StopWithSavepoint(dir)
	if err := awaitDone(e.t, done); err != nil {
		e.t.Fatalf("Run after StopWithSavepoint: %v", err)
	}
	return openSavepoint(e.t, dir), wait
}

func openSavepoint(t *testing.T, dir string) *savepoint.Reader {
	t.Helper()
	r, err := savepoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The upgrade path, under load: parity-sum stops with a savepoint while
// input keeps arriving; the job is changed (a filter that drops nothing,
// three workers instead of one) and started from the savepoint; the
// outputs continue exactly where they stopped. A restart with the same
// command line then continues instead of rewinding to the savepoint.
func TestStopWithSavepointThenUpgrade(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	cfg := paritySum(t, e.env)
	cfg.Workers = 1
	// Input flows the whole time the job stops.
	const total = 20000
	sp, feedWait := e.stoppedUnderLoad(cfg, total)
	m := sp.Manifest()
	final, err := kstore.Latest(context.Background(), e.conn, cfg.Name)
	if err != nil || final == nil {
		t.Fatalf("latest checkpoint: %v %v", final, err)
	}
	if m.CheckpointID != final.ID || !sameOffsets(m.Offsets(), final.Offsets) {
		t.Fatalf("the savepoint holds checkpoint %d at %v; the final checkpoint is %d at %v", m.CheckpointID, m.Offsets(), final.ID, final.Offsets)
	}
	if op := m.Operator("sums"); op == nil || op.Keys != 2 {
		t.Fatalf("the savepoint's aggregate: %+v", op)
	}
	if err := sp.Verify(nil); err != nil {
		t.Fatal(err)
	}
	feedWait() // all input written while the job was down

	// The upgrade: a filter that drops nothing, and three workers.
	upgraded := paritySumEdited(t, e.env, "steps:\n", "steps:\n  - id: positive\n    filter: 'n > 0'\n")
	upgraded.Workers = 3
	job, logs := newJob(t, upgraded, WithSavepointRestore(sp, savepoint.RestoreOptions{}))
	done := runBackground(job)
	r := &running{done: done, logs: logs}
	rep := e.awaitFinal(total, r)
	if !rep.Exact() {
		t.Fatalf("after the upgrade: %v", rep)
	}
	if st := job.Status(); st.RestoredFrom != sp.ID() {
		t.Errorf("status restored_from_savepoint = %q, want %q", st.RestoredFrom, sp.ID())
	}
	job.Stop()
	if err := awaitDone(t, done); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "imported savepoint") {
		t.Fatal("the upgraded job did not import the savepoint")
	}

	// Same command line again, after more input: no rewind.
	e.numbers(total+1, 1000)
	job, logs = newJob(t, upgraded, WithSavepointRestore(sp, savepoint.RestoreOptions{}))
	done = runBackground(job)
	rep = e.awaitFinal(total+1000, &running{done: done, logs: logs})
	job.Stop()
	if err := awaitDone(t, done); err != nil {
		t.Fatal(err)
	}
	if !rep.Exact() || !strings.Contains(logs.String(), "the savepoint was imported before") {
		t.Fatalf("restart with the same savepoint: %v", rep)
	}
}

func sameOffsets(a, b []checkpoint.SourceOffset) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A savepoint taken while the job runs, restored into a new job that
// reads and writes other topics (--remap-topic): the new job's outputs
// start right after the savepoint's, counts and sums continuing.
func TestSavepointMovesToOtherTopics(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	cfg := paritySum(t, e.env)
	job, logs := newJob(t, cfg)
	done := runBackground(job)
	e.numbers(1, 2000)
	e.awaitFinal(2000, &running{done: done, logs: logs})

	dir := filepath.Join(t.TempDir(), "move")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sum, err := job.Savepoint(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Dir != dir || sum.CheckpointID == 0 || len(sum.Operators) != 1 || sum.Operators[0].Keys != 2 {
		t.Fatalf("savepoint summary: %+v", sum)
	}
	if st := job.Status(); st.LastSavepoint == nil || st.LastSavepoint.Dir != dir {
		t.Fatalf("status after the savepoint: %+v", st.LastSavepoint)
	}
	// The job goes on, and a second savepoint into the same place is
	// refused without harm.
	if _, err := job.Savepoint(ctx, dir); !errors.Is(err, savepoint.ErrExists) {
		t.Fatalf("a second savepoint into %s: %v", dir, err)
	}
	job.Stop()
	if err := awaitDone(t, done); err != nil {
		t.Fatal(err)
	}

	// The new topics: a copy of the input, partition by partition (so the
	// savepoint's offsets mean the same records), then 2000 more numbers.
	moved := kafkatest.Topic(t, "moved")
	newIn, newOut := moved+"-in", moved+"-out"
	kafkatest.CreateTopic(t, e.brokers, newIn, 4, nil)
	copyTopic(t, e.conn, e.env["INPUT_TOPIC"], newIn)
	if _, err := datagen.Numbers(ctx, e.conn, datagen.Options{Topic: newIn, From: 2001, Count: 2000}); err != nil {
		t.Fatal(err)
	}
	env := maps.Clone(e.env)
	env["JOB_NAME"], env["INPUT_TOPIC"], env["OUTPUT_TOPIC"] = moved, newIn, newOut
	sp := openSavepoint(t, dir)
	job, logs = newJob(t, paritySum(t, env), WithSavepointRestore(sp, savepoint.RestoreOptions{
		RemapTopics: map[string]string{e.env["INPUT_TOPIC"]: newIn},
	}))
	done = runBackground(job)
	defer func() {
		job.Stop()
		if err := awaitDone(t, done); err != nil {
			t.Error(err)
		}
	}()

	// The new output continues the old one: counts 1001.. per parity.
	want := paritycheck.Expected(4000)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		outs, err := paritycheck.Read(ctx, e.conn, newOut)
		if err == nil && len(outs["odd"]) > 0 && outs["odd"][len(outs["odd"])-1] == want["odd"] &&
			len(outs["even"]) > 0 && outs["even"][len(outs["even"])-1] == want["even"] {
			for key, o := range outs {
				for i := range o {
					if o[i].Count != int64(1001+i) {
						t.Fatalf("%s output %d has count %d, want %d: not a continuation", key, i, o[i].Count, 1001+i)
					}
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the moved job's output did not reach the totals of 1..4000: %v (%v)", outs, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// copyTopic copies every record of from into the same partition of to.
func copyTopic(t *testing.T, conn []kgo.Opt, from, to string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(append(conn, kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	err = kread.All(ctx, conn, from, func(r *kgo.Record) error {
		recs = append(recs, &kgo.Record{Topic: to, Partition: r.Partition, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// A savepoint that does not fit the configuration is refused with its
// message, and the job starts nothing: no topic of the new job is created,
// no instance fenced.
func TestIncompatibleSavepointStartsNothing(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	sp := e.stoppedWithSavepoint(500)

	tests := []struct {
		name     string
		old, new string // the edit of the job's file
		opts     savepoint.RestoreOptions
		wanted   []string
	}{
		{
			name: "key_by changed",
			old:  `n % 2 == 0 ? "even" : "odd"`, new: `n % 3 == 0 ? "even" : "odd"`,
			wanted: []string{`operator "sums": key_by was`, `n % 2 == 0`},
		},
		{
			name: "aggregate renamed",
			old:  "id: sums", new: "id: totals",
			wanted: []string{`"sums"`, savepoint.FlagAllowDroppedState},
		},
		{
			name: "value changed",
			old:  "sum: sum(n)", new: "sum: max(n)",
			wanted: []string{`value "sum" was sum(n)`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := maps.Clone(e.env)
			env["JOB_NAME"] = kafkatest.Topic(t, "refused")
			cfg := paritySumEdited(t, env, tt.old, tt.new)
			j, _ := newJob(t, cfg, WithSavepointRestore(sp, tt.opts))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err := j.Run(ctx)
			if !errors.Is(err, savepoint.ErrIncompatible) {
				t.Fatalf("Run = %v, want a savepoint refusal", err)
			}
			for _, w := range tt.wanted {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the refusal does not say %q:\n%v", w, err)
				}
			}
			adm := kadm.NewClient(kafkatest.Client(t, e.brokers))
			topics, err := adm.ListTopics(ctx, checkpoint.TopicName(cfg.Name), kstore.StateTopic(cfg.Name))
			if err != nil {
				t.Fatal(err)
			}
			for name, td := range topics {
				if td.Err == nil {
					t.Errorf("a refused start created topic %s", name)
				}
			}
		})
	}
}

// An at_most_once job has no checkpoints, so no savepoints; asking says so.
func TestSavepointOfAtMostOnceIsRefused(t *testing.T) {
	e := newTestEnv(t, "at_most_once")
	job, _ := newJob(t, paritySum(t, e.env))
	_, err := job.Savepoint(context.Background(), t.TempDir())
	if !errors.Is(err, ErrSavepoint) || !strings.Contains(err.Error(), "at_most_once") {
		t.Fatalf("Savepoint of an at_most_once job: %v", err)
	}
}

// While a worker exports the savepoint of a completed checkpoint it
// answers no barrier; the coordinator loop must not time the next
// checkpoint out meanwhile (that would fail the job over a large export),
// and must once the export is done.
func TestLongExportDelaysCheckpointTimeouts(t *testing.T) {
	env := map[string]string{"KAFKA_BROKERS": "127.0.0.1:1", "ADMIN_LISTEN": "off"}
	job, _ := newJob(t, paritySum(t, env))
	var clock atomic.Int64
	clock.Store(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC).UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	loop := runningLoop(t, twophase.Config{Interval: time.Hour, Timeout: time.Second}, now, now(), "worker-0")
	loop.step(twophase.Msg{Type: twophase.MsgTriggerNow, Now: now()}) // in flight, never acked
	settleCalls(t, loop)
	d := savepoint.DescribeConfig(job.cfg)
	w, err := savepoint.Create(filepath.Join(t.TempDir(), "sp"), d.Meta(7, now()), savepoint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sp := &savepoints{job: job, registry: &exportRegistry{}, workers: 1, pending: map[checkpoint.ID]*pendingSavepoint{
		7: {id: 7, d: d, w: w, started: now(), waiting: 1, completed: true},
	}}
	reports := make(chan exportReport, 1)
	loop.reports, loop.trigger, loop.tick, loop.log = make(chan taskReport), func(checkpoint.ID, bool) {}, time.Millisecond, job.log
	loop.stop, loop.exportReports, loop.sp = make(chan struct{}), reports, sp
	done := make(chan error, 1)
	go func() { done <- loop.run(context.Background()) }()

	clock.Add(int64(time.Minute)) // far past the timeout
	select {
	case err := <-done:
		t.Fatalf("the loop failed while a savepoint export ran: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	reports <- exportReport{id: 7, worker: 0, err: errors.New("disk full")}
	select {
	case err := <-done:
		var fe *twophase.FailError
		if !errors.As(err, &fe) || fe.Reason != twophase.ReasonTimeout {
			t.Fatalf("after the export: %v, want the checkpoint's timeout", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the timeout never fired after the export ended")
	}
}

// Restoring into a job whose state topic already holds state deletes what
// the savepoint does not have: here the aggregate is renamed, its old
// state dropped (--allow-dropped-state), so the old keys must go, or the
// next plain restart would find state of an operator that no longer
// exists.
func TestRestoreDeletesStateTheSavepointLacks(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	sp := e.stoppedWithSavepoint(1000)

	renamed := paritySumEdited(t, e.env, "id: sums", "id: totals")
	job, logs := newJob(t, renamed, WithSavepointRestore(sp, savepoint.RestoreOptions{AllowDroppedState: true}))
	done := runBackground(job)
	e.awaitRead(job, 0, logs) // running, from the savepoint's offsets: nothing left to read
	e.numbers(1001, 10)
	e.awaitRead(job, 10, logs) // records_in counts this process's reads
	job.Stop()
	if err := awaitDone(t, done); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "deleted_keys=2") {
		t.Fatalf("the import did not delete the 2 keys of the dropped aggregate")
	}

	// A plain restart restores "totals" only, and goes on counting from it.
	job, logs = newJob(t, renamed)
	done = runBackground(job)
	e.awaitRead(job, 0, logs)
	e.numbers(1011, 10)
	e.awaitRead(job, 10, logs)
	job.Stop()
	if err := awaitDone(t, done); err != nil {
		t.Fatalf("a plain restart after the import: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	outs, err := paritycheck.Read(ctx, e.conn, e.env["OUTPUT_TOPIC"])
	if err != nil {
		t.Fatal(err)
	}
	// "totals" started empty at 1001: 20 numbers since, 10 odd, 10 even.
	for _, key := range []string{"odd", "even"} {
		o := outs[key]
		if last := o[len(o)-1]; last.Count != 10 {
			t.Errorf("%s: the last output counts %d, want 10 (the renamed aggregate started empty)", key, last.Count)
		}
	}
}

// Savepoint requests made while a checkpoint is in flight share the next
// checkpoint (the coordinator queues one): the first gets it, and a second
// one, for another directory, is refused with ErrSavepointBusy (the admin
// API's 409), not a plain failure (its 500). Nothing of the second is
// written.
func TestSecondSavepointOnOneCheckpointIsBusy(t *testing.T) {
	env := map[string]string{"KAFKA_BROKERS": "127.0.0.1:1", "ADMIN_LISTEN": "off"}
	job, _ := newJob(t, paritySum(t, env))
	now := func() time.Time { return time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC) }
	loop := runningLoop(t, twophase.Config{Interval: time.Hour, Timeout: time.Minute}, now, now(), "worker-0")
	loop.step(twophase.Msg{Type: twophase.MsgTriggerNow, Now: now()}) // in flight: the next one queues
	settleCalls(t, loop)
	loop.log, loop.sp = job.log, &savepoints{job: job, registry: &exportRegistry{}, workers: 1}
	root := t.TempDir()
	first := &savepointRequest{dir: filepath.Join(root, "sp-1"), done: make(chan savepointOutcome, 1)}
	second := &savepointRequest{dir: filepath.Join(root, "sp-2"), done: make(chan savepointOutcome, 1)}
	loop.requestSavepoint(first)
	loop.requestSavepoint(second)
	select {
	case out := <-first.done:
		t.Fatalf("the first request was answered before its checkpoint ran: %v", out.err)
	default:
	}
	if len(loop.sp.pending) != 1 || loop.sp.pending[2] == nil || loop.sp.pending[2].req != first {
		t.Fatalf("pending savepoints %v, want the first request's at checkpoint 2", loop.sp.pending)
	}
	out := <-second.done
	if !errors.Is(out.err, ErrSavepointBusy) || !errors.Is(out.err, ErrSavepoint) ||
		!strings.Contains(out.err.Error(), "checkpoint 2") || !strings.Contains(out.err.Error(), "sp-1") {
		t.Fatalf("the second request: %v, want ErrSavepointBusy naming checkpoint 2 and sp-1", out.err)
	}
	if _, err := os.Stat(second.dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused savepoint's directory: %v, want none", err)
	}
	loop.sp.abandon(errors.New("test over"))
	if out := <-first.done; out.err == nil {
		t.Error("abandoning did not fail the first request")
	}
}

// Reordered values (same names, functions and arguments) are harmless: a
// savepoint restores into them, each value keeping its own state, and the
// sums go on exactly.
func TestSavepointRestoresReorderedValues(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	sp := e.stoppedWithSavepoint(500)
	reordered := paritySumEdited(t, e.env, "count: count()\n        sum: sum(n)", "sum: sum(n)\n        count: count()")
	job, logs := newJob(t, reordered, WithSavepointRestore(sp, savepoint.RestoreOptions{}))
	done := runBackground(job)
	e.numbers(501, 500)
	rep := e.awaitFinal(1000, &running{done: done, logs: logs})
	job.Stop()
	if err := awaitDone(t, done); err != nil {
		t.Fatal(err)
	}
	if !rep.Exact() {
		t.Fatalf("after restoring into reordered values: %v", rep)
	}
	if !strings.Contains(logs.String(), `values reordered: the savepoint has [count, sum], the config has [sum, count]`) {
		t.Errorf("the restore did not note the reordered values")
	}
}
