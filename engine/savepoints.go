package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/checkpoint/kstore"
	"github.com/eoflow/pipeline/checkpoint/savepoint"
	"github.com/eoflow/pipeline/internal/fault"
	"github.com/eoflow/pipeline/internal/mutant"
	"github.com/eoflow/pipeline/operator"
	"github.com/eoflow/pipeline/sink"
	"github.com/eoflow/pipeline/source"
)

// This file is the runtime side of savepoints (checkpoint/savepoint has
// the format and the rules): taking one at a checkpoint's barrier, and
// starting a job from one.

// ErrSavepoint wraps every failure to take a savepoint. The job itself
// goes on: a savepoint is exported beside its checkpoint, never instead of
// it.
var ErrSavepoint = errors.New("savepoint not taken")

// ErrSavepointBusy is wrapped (with ErrSavepoint) when the checkpoint that
// would serve a savepoint request already holds another savepoint:
// requests made while a checkpoint is in flight share the next one, and a
// checkpoint holds one savepoint. Ask again once that one is complete.
var ErrSavepointBusy = errors.New("another savepoint is being taken at that checkpoint")

// Savepoint takes a savepoint into dir (made absolute against the working
// directory): it triggers a checkpoint at once, every worker exports its
// key groups' state at that checkpoint's barrier, and the savepoint is
// complete once the checkpoint committed and every export is on disk. It
// returns what the savepoint holds.
//
// It waits while the job is restarting. When ctx ends first it stops
// waiting, but a savepoint already started is still finished (or removed,
// if it fails) by the job.
func (j *Job) Savepoint(ctx context.Context, dir string) (savepoint.Summary, error) {
	if !j.cfg.Guarantee.Checkpoints() {
		return savepoint.Summary{}, fmt.Errorf("%w: an at_most_once job takes no checkpoints, so it has no savepoints", ErrSavepoint)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return savepoint.Summary{}, fmt.Errorf("%w: %w", ErrSavepoint, err)
	}
	if err := savepoint.CheckTarget(abs); err != nil {
		return savepoint.Summary{}, fmt.Errorf("%w: %w", ErrSavepoint, err)
	}
	if j.shuffle != nil {
		// Group mode: every member pauses its sources, the repartition
		// topic drains, and this process writes the savepoint from Kafka.
		return j.groupSavepoint(ctx, abs)
	}
	req := &savepointRequest{dir: abs, done: make(chan savepointOutcome, 1)}
	select {
	case j.savepoints <- req:
	case <-j.stopping:
		return savepoint.Summary{}, fmt.Errorf("%w: the job is stopping", ErrSavepoint)
	case <-ctx.Done():
		return savepoint.Summary{}, fmt.Errorf("%w: the job did not take the request (is it restarting? see /api/v1/job): %w", ErrSavepoint, ctx.Err())
	}
	select {
	case out := <-req.done:
		return out.summary, out.err
	case <-ctx.Done():
		return savepoint.Summary{}, fmt.Errorf("stopped waiting for savepoint %s: %w; the job finishes it, or removes it if it fails", abs, ctx.Err())
	}
}

// StopWithSavepoint stops the job like Stop, and exports its final
// checkpoint as a savepoint into dir: the upgrade path (stop, change the
// job, start it with --from-savepoint). Run returns an error wrapping
// ErrSavepoint if the savepoint could not be written; the final checkpoint
// stands either way. Only the first of Stop and StopWithSavepoint counts.
func (j *Job) StopWithSavepoint(dir string) {
	j.stopOnce.Do(func() {
		j.stopSavepoint = dir
		close(j.stopping)
	})
}

// ErrStopping is wrapped (with ErrSavepoint) by SavepointAndStop when the
// job is stopping already: a stop is asked for once.
var ErrStopping = errors.New("the job is stopping already")

// SavepointAndStop stops the job the way StopWithSavepoint does (run
// --stop-with-savepoint on a signal): its final checkpoint is exported as
// a savepoint into dir (made absolute against the working directory),
// and Run returns. It returns once Run has, with the savepoint: the
// upgrade path of a job started without that flag (POST
// /api/v1/savepoints with "stop": true). In group mode it is what
// StopWithSavepoint does there: with other processes running, a
// savepoint of the whole group is taken and this process stops; on the
// last process, its final checkpoint after the repartition topic drained.
//
// The job stops even when the savepoint then fails (its final checkpoint
// stands, and Run's error says why). When ctx ends first it stops
// waiting; the job stops all the same.
func (j *Job) SavepointAndStop(ctx context.Context, dir string) (savepoint.Summary, error) {
	if !j.cfg.Guarantee.Checkpoints() {
		return savepoint.Summary{}, fmt.Errorf("%w: an at_most_once job takes no checkpoints, so it has no savepoints", ErrSavepoint)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return savepoint.Summary{}, fmt.Errorf("%w: %w", ErrSavepoint, err)
	}
	// Refused before the job stops, not after.
	if err := savepoint.CheckTarget(abs); err != nil {
		return savepoint.Summary{}, fmt.Errorf("%w: %w", ErrSavepoint, err)
	}
	asked := false
	j.stopOnce.Do(func() {
		j.stopSavepoint, asked = abs, true
		close(j.stopping)
	})
	if !asked {
		return savepoint.Summary{}, fmt.Errorf("%w: %w", ErrSavepoint, ErrStopping)
	}
	j.log.Info("stopping after a final checkpoint, written as a savepoint, as asked", "savepoint", abs)
	select {
	case <-j.ended:
	case <-ctx.Done():
		return savepoint.Summary{}, fmt.Errorf("stopped waiting for the job to stop with savepoint %s: %w; it stops all the same", abs, ctx.Err())
	}
	if j.runErr != nil {
		return savepoint.Summary{}, j.runErr
	}
	// Run ended without an error, so the savepoint is complete unless the
	// stop was cut short (its context ended: a second signal).
	sum, err := savepoint.Inspect(abs)
	if err != nil {
		return savepoint.Summary{}, fmt.Errorf("%w: the job stopped before the savepoint was complete: %w", ErrSavepoint, err)
	}
	return sum, nil
}

// joinsAsOf reports whether the job joins a table as of event time.
func (j *Job) joinsAsOf() bool {
	return slices.ContainsFunc(j.plan.graph.Joins(), func(d operator.JoinDesc) bool { return d.AsOf })
}

// savepointRequest is one call of Job.Savepoint, handed to the running
// attempt's coordinator loop.
type savepointRequest struct {
	dir  string
	done chan savepointOutcome // buffered: the loop never waits for the caller
}

type savepointOutcome struct {
	summary savepoint.Summary
	err     error
}

// exportRegistry tells workers, at the barrier of checkpoint N, where to
// export their state for the savepoint that N holds. The coordinator loop
// registers a savepoint before it triggers N, so no worker can pass N's
// barrier without seeing it.
type exportRegistry struct {
	mu sync.Mutex
	m  map[checkpoint.ID]*export
}

// export is one savepoint's writers, one per aggregate.
type export struct {
	ops map[string]*savepoint.OperatorWriter
}

func (r *exportRegistry) put(id checkpoint.ID, e *export) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[checkpoint.ID]*export{}
	}
	r.m[id] = e
}

func (r *exportRegistry) get(id checkpoint.ID) *export {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[id]
}

func (r *exportRegistry) remove(id checkpoint.ID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, id)
}

// exportReport is a worker's answer to an export: done, or why not.
type exportReport struct {
	id     checkpoint.ID
	worker int
	err    error
}

// exportState writes the worker's whole state into the savepoint. It runs
// at the barrier, after the snapshot went to the sink and before any record
// after the barrier: the state is exactly that of the checkpoint.
func (e *export) exportState(ops workerOps) error { return exportOps(e.ops, ops) }

// exportOps writes the state of ops, one worker's, into writers (by
// operator id). Operators without state write nothing: the savepoint holds
// only offsets for them.
func exportOps(writers map[string]*savepoint.OperatorWriter, ops workerOps) error {
	for _, a := range ops.stateful() {
		ow := writers[a.ID()]
		if ow == nil {
			return fmt.Errorf("no savepoint writer for operator %q", a.ID())
		}
		if err := ow.WriteAll(a.Store().Range(), a.Store().All()); err != nil {
			return err
		}
	}
	return nil
}

// pendingSavepoint is a savepoint the coordinator loop waits to finish:
// its checkpoint must complete and every worker must have exported.
type pendingSavepoint struct {
	id      checkpoint.ID
	req     *savepointRequest // nil for the one of StopWithSavepoint
	d       *savepoint.Descriptor
	w       *savepoint.Writer
	started time.Time
	waiting int   // workers yet to report
	err     error // the first export failure
	// offsets of the checkpoint, once it completed, and the records
	// joins as of event time held at its barrier.
	completed bool
	offsets   []checkpoint.SourceOffset
	held      []operator.HeldRecord
}

// savepoints is the coordinator loop's part in taking savepoints.
type savepoints struct {
	job      *Job
	registry *exportRegistry
	workers  int
	pending  map[checkpoint.ID]*pendingSavepoint
	// finalErr is the outcome of the final checkpoint's savepoint
	// (StopWithSavepoint), once written or failed.
	finalErr error
}

// start creates the savepoint of checkpoint id in dir and registers its
// writers for the workers. The checkpoint must not have been triggered yet.
func (s *savepoints) start(id checkpoint.ID, dir string, req *savepointRequest, now time.Time) error {
	if p := s.pending[id]; p != nil {
		return fmt.Errorf("%w: %w: checkpoint %d holds %s; ask again once it is complete", ErrSavepoint, ErrSavepointBusy, id, p.w.Dir())
	}
	j := s.job
	d := savepoint.DescribeConfig(j.cfg)
	lastLog := now
	w, err := savepoint.Create(dir, d.Meta(id, now), savepoint.Options{
		ProgressEntries: 250_000,
		Progress: func(p savepoint.Progress) {
			// Called from the workers under the writer's lock: log, at
			// most once a second.
			if t := time.Now(); t.Sub(lastLog) >= time.Second {
				lastLog = t
				j.log.Info("savepoint progress", "dir", dir, "checkpoint", id, "keys", p.Entries, "bytes", p.Bytes, "files", p.Files)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSavepoint, err)
	}
	ex := &export{ops: map[string]*savepoint.OperatorWriter{}}
	for _, agg := range d.Aggregates() {
		ow, err := w.Aggregate(agg.ID, *agg.Aggregate)
		if err != nil {
			_ = w.Abort()
			return fmt.Errorf("%w: %w", ErrSavepoint, err)
		}
		ex.ops[agg.ID] = ow
	}
	if s.pending == nil {
		s.pending = map[checkpoint.ID]*pendingSavepoint{}
	}
	s.pending[id] = &pendingSavepoint{id: id, req: req, d: d, w: w, started: now, waiting: s.workers}
	s.registry.put(id, ex)
	j.log.Info("taking a savepoint", "dir", dir, "checkpoint", id)
	return nil
}

// exporting reports whether a worker is still writing the savepoint of a
// completed checkpoint. Only then: every worker acked that checkpoint, so
// each is exporting or done, and the wait ends. (Before it completes, a
// worker may not even have its barrier: pausing then could wait forever.)
func (s *savepoints) exporting() bool {
	for _, p := range s.pending {
		if p.completed && p.waiting > 0 {
			return true
		}
	}
	return false
}

// completed is told that checkpoint id committed, with its offsets, its
// event time, its tables' positions and the records its joins as of
// event time held (checkpoint.Record.Held): what its barrier carried, as
// the checkpoint record has them.
func (s *savepoints) completed(id checkpoint.ID, offsets []checkpoint.SourceOffset, et *checkpoint.EventTime, tables []checkpoint.TableOffsets, held []operator.HeldRecord) {
	if p := s.pending[id]; p != nil {
		p.completed, p.offsets, p.held = true, offsets, held
		p.w.SetEventTime(et)
		p.w.SetTables(tables)
		s.maybeFinish(p)
	}
}

// exported is told a worker's export result.
func (s *savepoints) exported(r exportReport) {
	p := s.pending[r.id]
	if p == nil {
		return
	}
	p.waiting--
	if r.err != nil && p.err == nil {
		p.err = fmt.Errorf("worker %d: %w", r.worker, r.err)
	}
	s.maybeFinish(p)
}

// aborted fails the savepoint of a checkpoint that will not complete.
func (s *savepoints) aborted(id checkpoint.ID, why error) {
	if p := s.pending[id]; p != nil {
		s.finish(p, why)
	}
}

// abandon fails every savepoint still pending: the attempt is ending.
func (s *savepoints) abandon(why error) {
	for _, p := range s.pending {
		s.finish(p, why)
	}
}

func (s *savepoints) maybeFinish(p *pendingSavepoint) {
	if p.waiting > 0 || (!p.completed && p.err == nil) {
		return
	}
	s.finish(p, p.err)
}

// finish commits the savepoint (or, after failed, removes it) and answers
// whoever asked for it.
func (s *savepoints) finish(p *pendingSavepoint, failed error) {
	delete(s.pending, p.id)
	s.registry.remove(p.id)
	j := s.job
	var sum savepoint.Summary
	err := failed
	if err == nil {
		sum, err = s.commit(p)
	}
	if err != nil {
		_ = p.w.Abort()
		err = fmt.Errorf("%w: %s (checkpoint %d): %w", ErrSavepoint, p.w.Dir(), p.id, err)
		j.log.Error("savepoint failed", "dir", p.w.Dir(), "checkpoint", p.id, "err", err)
		j.metrics.SavepointFailed()
	} else {
		keys := uint64(0)
		for _, op := range sum.Operators {
			keys += op.Keys
		}
		took := j.now().Sub(p.started)
		j.log.Info("savepoint written", "dir", sum.Dir, "id", sum.ID, "checkpoint", p.id, "keys", keys,
			"took", took.Round(time.Millisecond))
		j.metrics.SavepointCompleted(took)
		j.status.savepoint(sum)
	}
	if p.req != nil {
		p.req.done <- savepointOutcome{summary: sum, err: err}
	} else {
		s.finalErr = err
	}
}

func (s *savepoints) commit(p *pendingSavepoint) (savepoint.Summary, error) {
	bySource, err := p.d.SourceOffsets(p.offsets)
	if err != nil {
		return savepoint.Summary{}, err
	}
	for _, id := range slices.Sorted(maps.Keys(bySource)) {
		if err := p.w.Source(id, bySource[id]); err != nil {
			return savepoint.Summary{}, err
		}
	}
	held := savepointHeld(p.held)
	if mutant.On("savepoint-drops-held") {
		// The bug: the savepoint keeps the offsets, which are past the
		// held records, but not the records: a start from it never
		// joins them.
		held = nil
	}
	if err := p.w.SetHeld(held); err != nil {
		return savepoint.Summary{}, err
	}
	if _, err := p.w.Commit(); err != nil {
		return savepoint.Summary{}, err
	}
	return savepoint.Inspect(p.w.Dir())
}

// savepointHeld is held records as a savepoint holds them (nil: none).
func savepointHeld(recs []operator.HeldRecord) []savepoint.HeldRecord {
	if len(recs) == 0 {
		return nil
	}
	out := make([]savepoint.HeldRecord, len(recs))
	for i, r := range recs {
		out[i] = savepoint.HeldRecord{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, At: r.At, Key: r.Key, Record: r.Record}
	}
	return out
}

// heldOfSavepoint is held records of a savepoint as a checkpoint record
// holds them (nil: none).
func heldOfSavepoint(recs []savepoint.HeldRecord) []byte {
	if len(recs) == 0 {
		return nil
	}
	var h operator.Hold
	for _, r := range recs {
		h.Add(operator.HeldRecord{At: r.At, Key: r.Key, Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Record: r.Record})
	}
	return operator.AppendHold(nil, &h)
}

// ---- starting from a savepoint ----

// WithSavepointRestore starts the job from the savepoint r (run
// --from-savepoint) instead of its own last checkpoint, unless the job's
// checkpoints show that it already imported r: then the savepoint is
// ignored, so restarting with the same command line continues rather than
// rewinds. opts.Partitions is filled in from the cluster.
func WithSavepointRestore(r *savepoint.Reader, opts savepoint.RestoreOptions) Option {
	return func(j *Job) { j.from = &savepointRestore{r: r, opts: opts} }
}

type savepointRestore struct {
	r    *savepoint.Reader
	opts savepoint.RestoreOptions
}

// checkSavepoint decides whether the job can start from its savepoint on
// this cluster, before anything is changed there.
func (j *Job) checkSavepoint(ctx context.Context, adm *kadm.Client) (*savepoint.RestorePlan, error) {
	var topics []string
	for _, src := range j.cfg.Sources {
		topics = append(topics, src.Topics...)
	}
	details, err := adm.ListTopics(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("listing source topics: %w", err)
	}
	opts := j.from.opts
	opts.Partitions = map[string]int{}
	for _, t := range topics {
		if td, ok := details[t]; ok && td.Err == nil {
			opts.Partitions[t] = len(td.Partitions)
		}
	}
	plan, err := savepoint.CheckRestore(j.from.r.Manifest(), savepoint.DescribeConfig(j.cfg), opts)
	if err != nil {
		return nil, err
	}
	return plan, nil
}

// importSavepoint restores every worker's state from the savepoint and
// makes it the job's newest checkpoint in one transaction: every restored
// key into the state topic, a tombstone for every key the state topic held
// that the savepoint does not, and a checkpoint record with the
// savepoint's offsets and id. Until that transaction commits nothing of
// the job changed, so a crash meanwhile imports again on the next start.
func (a *attempt) importSavepoint(ctx context.Context, plan *savepoint.RestorePlan) error {
	j, txn := a.j, a.txn
	r := j.from.r
	for _, note := range plan.Notes {
		j.log.Info("restoring from a savepoint", "savepoint", r.Dir(), "note", note)
	}
	fail := func(err error) error { return err }
	offsets, err := j.startOffsets(ctx, a.cluster, &checkpoint.Record{Offsets: plan.Offsets})
	if err != nil {
		return fail(err)
	}
	ops, keys, err := j.savepointOperators(r, plan)
	if err != nil {
		return fail(err)
	}
	if err := j.faults.Hit(fault.DuringRestore); err != nil {
		return fail(err)
	}

	// What the state topic holds now: whatever the savepoint does not have
	// must be deleted, or a later restore would bring it back.
	stale, err := liveStateKeys(ctx, a.cluster.ReadState, nil)
	if err != nil {
		return fail(err)
	}
	// The import is the epoch that recovery began.
	summary, err := j.produceState(ctx, txn, ops, stale, func(*kgo.Record) {}, a.limits)
	if err != nil {
		return fail(err)
	}
	id := checkpoint.ID(1)
	if a.latest != nil {
		id = a.latest.ID + 1
	}
	a.savepointID = r.ID()
	rec := a.newRecord(id, offsetList(offsets), mergeState(summary), importedEventTime(r.Manifest().EventTime, plan, j.plan.time))
	// The tables are read after the import (loadTables): the record
	// carries the savepoint's positions, which that read must reach.
	rec.Tables = plan.Tables
	// The records joins as of event time held at the savepoint are read
	// already (its offsets are past them): the record holds them, and the
	// source tasks get them back from it (restoreHeld), or release them
	// all at the first checkpoint if the configuration no longer joins as
	// of event time.
	held, err := r.HeldRecords(plan)
	if err != nil {
		return fail(err)
	}
	rec.Held = heldOfSavepoint(held)
	if n := r.Manifest().Held; n != nil {
		j.log.Info("restoring the records a join as of event time held at the savepoint", "savepoint", r.Dir(),
			"records", len(held), "dropped", int(n.Records)-len(held), "still_joined_as_of_event_time", j.joinsAsOf())
	}
	rec.Normalize()
	a.tablesFrom = "savepoint " + r.Dir()
	crs, err := checkpointRecords(rec, "", a.limits, j.metrics)
	if err != nil {
		return fail(err)
	}
	for _, cr := range crs {
		txn.Produce(ctx, cr)
	}
	if err := a.loop.importEpoch(ctx, id, nil); err != nil {
		return fail(fmt.Errorf("importing savepoint %s: %w", r.Dir(), err))
	}
	j.log.Info("imported savepoint", "dir", r.Dir(), "id", r.ID(), "from_job", r.Manifest().Job,
		"from_checkpoint", r.Manifest().CheckpointID, "as_checkpoint", id, "state_keys", keys, "deleted_keys", len(stale))
	a.ops, a.restored, a.offsets, a.latest = ops, keys, offsets, rec
	return nil
}

// savepointOperators builds every worker's operators with the state of
// savepoint r that plan restores, and says how many keys they hold.
func (j *Job) savepointOperators(r *savepoint.Reader, plan *savepoint.RestorePlan) ([]workerOps, int, error) {
	expected := map[string]int{}
	for _, id := range plan.Restore {
		if op := r.Manifest().Operator(id); op != nil {
			expected[id] = int(min(op.Keys, 1<<30))
		}
	}
	all, restorers, err := j.restoringOperators(expected)
	if err != nil {
		return nil, 0, err
	}
	keys := 0
	for w, rs := range restorers {
		sts := all[w].stateful()
		if _, err := r.Restore(rs, sts[0].Store().Range(), plan.Restore); err != nil {
			return nil, 0, err
		}
		if err := rs.Finish(); err != nil {
			return nil, 0, err
		}
		for _, st := range sts {
			keys += st.Store().Len()
		}
	}
	return all, keys, nil
}

// produceState writes the whole state of ops into txn as state records,
// and a tombstone for every record key of stale the state does not have
// (the state topic's live keys: a later restore would bring them back).
// A value larger than a record of the state topic (limits) goes in
// pieces, as a checkpoint writes it. place puts each record where it
// belongs (group mode: its key group's partition). It returns the
// operators' summaries, or the error of a record that cannot be written.
func (j *Job) produceState(ctx context.Context, txn transaction, all []workerOps, stale map[string]struct{}, place func(*kgo.Record), limits sink.Limits) ([]checkpoint.StateSummary, error) {
	j.limitState(all, limits)
	var summary []checkpoint.StateSummary
	for _, agg := range statefulOf(all) {
		store := agg.Store()
		for e := range store.All() {
			for _, rec := range store.EntryRecords(e) {
				delete(stale, string(rec.Key))
				sr := kstore.StateRecord(j.cfg.Name, rec.Key, rec.Value)
				place(sr)
				if !limits.Fits(sr) {
					return nil, stateTooLarge(sr, limits, j.metrics)
				}
				txn.Produce(ctx, sr)
			}
		}
		summary = append(summary, agg.Summary())
	}
	for key := range stale {
		sr := kstore.StateRecord(j.cfg.Name, []byte(key), nil)
		place(sr)
		txn.Produce(ctx, sr)
	}
	return summary, nil
}

// offsetList is offsets as a checkpoint's list (newRecord sorts it).
func offsetList(offsets map[source.TopicPartition]int64) []checkpoint.SourceOffset {
	out := make([]checkpoint.SourceOffset, 0, len(offsets))
	for tp, off := range offsets {
		out = append(out, checkpoint.SourceOffset{Topic: tp.Topic, Partition: tp.Partition, Offset: off})
	}
	return out
}

// importedEventTime is the event time a job started from a savepoint
// continues from: the savepoint's, with its partitions under their
// topics' new names, for the topics the job reads with event time. Nil
// when either side has none: the watermarks then start over, each
// partition from its first record (CheckRestore noted it).
func importedEventTime(et *savepoint.EventTime, plan *savepoint.RestorePlan, tp *timePlan) *checkpoint.EventTime {
	if et == nil || tp == nil || len(tp.byTopic) == 0 {
		return nil
	}
	rename := map[string]string{}
	for _, t := range plan.Topics {
		rename[t.From] = t.To
	}
	out := et.Checkpoint()
	kept := out.Partitions[:0]
	for _, p := range out.Partitions {
		if to, ok := rename[p.Topic]; ok {
			p.Topic = to
		}
		if tp.byTopic[p.Topic] != nil {
			kept = append(kept, p)
		}
	}
	out.Partitions = kept
	return out
}
