package engine

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/checkpoint/kstore"
	"github.com/eoflow/pipeline/internal/fault"
	"github.com/eoflow/pipeline/metrics"
	"github.com/eoflow/pipeline/operator/keyed"
	"github.com/eoflow/pipeline/sink"
	"github.com/eoflow/pipeline/state"
)

// workerOps are one worker's operators, one per target of the plan (by
// target index): a keyed operator for each aggregate and window, over the
// key groups the worker owns, and a pass-through for each output. The
// worker hands each input to its target's operator and snapshots all of
// them at a barrier, so one checkpoint holds every branch's state.
type workerOps []keyedOperator

var (
	_ keyedOperator = workerOps(nil)
	_ prefetcher    = workerOps(nil)
)

func (ops workerOps) process(m message) (out []*kgo.Record, deadLetters []message) {
	return ops[m.target].process(m)
}

func (ops workerOps) snapshot(watermark int64) (outputs []*kgo.Record, changes stateChanges, summary []checkpoint.StateSummary) {
	if len(ops) == 1 { // a linear job: nothing to gather
		return ops[0].snapshot(watermark)
	}
	for _, op := range ops {
		o, c, s := op.snapshot(watermark)
		outputs = append(outputs, o...)
		if c.len() > 0 {
			changes.topic = c.topic
			changes.recs = append(changes.recs, c.recs...)
		}
		summary = append(summary, s...)
	}
	return outputs, changes, summary
}

func (ops workerOps) prefetch(msgs []message) {
	for _, op := range ops {
		if p, ok := op.(prefetcher); ok {
			p.prefetch(msgs)
		}
	}
}

// stateful are the operators of ops that hold keyed state.
func (ops workerOps) stateful() []keyed.Stateful {
	var out []keyed.Stateful
	for _, op := range ops {
		if t, ok := op.(*targetOp); ok {
			if s, ok := t.stateful(); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

// statefulOf is every operator of every worker that holds keyed state.
func statefulOf(all []workerOps) []keyed.Stateful {
	var out []keyed.Stateful
	for _, ops := range all {
		out = append(out, ops.stateful()...)
	}
	return out
}

// keysOf counts the keys the operators of every worker hold, by operator
// id.
func keysOf(all []workerOps) map[string]int {
	keys := map[string]int{}
	for _, st := range statefulOf(all) {
		keys[st.ID()] += st.Store().Len()
	}
	return keys
}

// emptyOperators builds worker w's operators with no state. open counts
// the open windows of each window operator over all workers (by target
// index; emptyOperators fills it for w == 0).
func (j *Job) emptyOperators(w int, open map[int]*atomic.Int64) (workerOps, error) {
	p := j.plan
	groups := j.cfg.Checkpoint.KeyGroups
	rng := state.RangeFor(w, j.workers, groups)
	env := p.env(j.now)
	eventTime := p.time != nil && len(p.time.byTopic) > 0
	ops := make(workerOps, len(p.targets))
	for i, t := range p.targets {
		var op keyed.Operator
		switch {
		case !t.keyed():
			op = keyed.NewPassThrough(env, t.sinks, p.graph.Linear(), p.format)
		case t.interval != nil:
			jo, err := keyed.NewIntervalJoin(env, t.sinks, t.interval, groups, rng)
			if err != nil {
				return nil, err
			}
			op = jo
		case t.window != nil:
			if open[i] == nil {
				open[i] = new(atomic.Int64)
			}
			wo, err := keyed.NewWindow(env, t.sinks, t.window, t.agg, groups, rng, open[i])
			if err != nil {
				return nil, err
			}
			op = wo
		default:
			ao, err := keyed.NewAggregate(env, t.sinks, t.agg, groups, rng, eventTime)
			if err != nil {
				return nil, err
			}
			op = ao
		}
		ops[i] = newTargetOp(op, i, j.cfg.Name)
	}
	return ops, nil
}

// allEmptyOperators builds every worker's operators with no state.
func (j *Job) allEmptyOperators() ([]workerOps, error) {
	open := map[int]*atomic.Int64{}
	all := make([]workerOps, j.workers)
	for w := range all {
		ops, err := j.emptyOperators(w, open)
		if err != nil {
			return nil, err
		}
		all[w] = ops
	}
	return all, nil
}

// restoringOperators builds every worker's operators and, for a job with
// keyed state, a Restorer per worker for them to be filled through, each
// store's maps sized for the keys expected of its operator (over all
// workers; expected maps operator ids to key counts).
func (j *Job) restoringOperators(expected map[string]int) ([]workerOps, []*state.Restorer, error) {
	all, err := j.allEmptyOperators()
	if err != nil {
		return nil, nil, err
	}
	if !j.plan.keyed {
		return all, nil, nil
	}
	for _, st := range statefulOf(all) {
		st.Store().Grow(expected[st.ID()])
	}
	restorers, err := j.restorersOf(all, (*state.Restorer).Register)
	return all, restorers, err
}

// restorersOf is a Restorer per worker of all, each store registered
// through register (Register for empty stores, RegisterRetained for
// those that keep state: keptstate.go).
func (j *Job) restorersOf(all []workerOps, register func(*state.Restorer, state.Restorable) error) ([]*state.Restorer, error) {
	restorers := make([]*state.Restorer, len(all))
	for w, ops := range all {
		for _, st := range ops.stateful() {
			store := st.Store()
			if restorers[w] == nil {
				r, err := state.NewRestorer(j.cfg.Checkpoint.KeyGroups, store.Range())
				if err != nil {
					return nil, err
				}
				restorers[w] = r
			}
			if err := register(restorers[w], store); err != nil {
				return nil, err
			}
		}
	}
	return restorers, nil
}

// fillOperators reads the state topic (read) into all's stores through
// restorers, and returns how many keys they hold then. A state record of
// an operator the configuration no longer has is refused.
func (j *Job) fillOperators(ctx context.Context, all []workerOps, restorers []*state.Restorer, read stateReader) (int, error) {
	if err := j.readStateInto(ctx, read, restorers); err != nil {
		return 0, fmt.Errorf("restoring state: %w", err)
	}
	for _, r := range restorers {
		if gone := r.Unclaimed(); len(gone) > 0 {
			return 0, fmt.Errorf("%w: the state topic holds state of operators %v, which the configuration no longer has", ErrIncompatible, gone)
		}
	}
	return heldKeys(all), nil
}

// heldKeys counts the keys every operator of all holds.
func heldKeys(all []workerOps) int {
	keys := 0
	for _, st := range statefulOf(all) {
		keys += st.Store().Len()
	}
	return keys
}

// stateReader calls fn with every committed record of the job's state
// topic, in order (cluster.ReadState).
type stateReader func(ctx context.Context, fn func(key, value []byte) error) error

// restoreOperators builds every worker's operators and fills their state
// from the job's state topic, in one pass over it. latest (nil for a new
// job) says how many keys to expect. It returns how many keys it
// restored.
func (j *Job) restoreOperators(ctx context.Context, latest *checkpoint.Record, read stateReader) ([]workerOps, int, error) {
	expected := map[string]int{}
	if latest != nil {
		for _, st := range latest.State {
			expected[st.Operator] = int(min(st.Keys, 1<<30))
		}
	}
	all, restorers, err := j.restoringOperators(expected)
	if err != nil {
		return nil, 0, err
	}
	if restorers == nil {
		return all, 0, nil // no keyed operator: no state
	}
	if err := j.faults.Hit(fault.DuringRestore); err != nil {
		return nil, 0, err
	}
	keys, err := j.fillOperators(ctx, all, restorers, read)
	if err != nil {
		return nil, 0, err
	}
	return all, keys, nil
}

// stateTopic is the topic the job's keyed state goes to: the group-state
// topic in group mode.
func (j *Job) stateTopic() string {
	if j.shuffle != nil {
		return j.shuffle.state
	}
	return kstore.StateTopic(j.cfg.Name)
}

// limitState gives the stores of every worker's operators the state topic's record limit
// (limits, read from the brokers): a value larger than a record goes
// there in pieces instead of failing every attempt at its checkpoint
// with MESSAGE_TOO_LARGE.
func (j *Job) limitState(all []workerOps, limits sink.Limits) {
	for _, st := range statefulOf(all) {
		st.Store().SetRecordLimit(limits.Payload(j.stateTopic()))
	}
}

// stateTooLarge is the error of rec, a state record that does not fit
// its topic even after the store split its value (state/pieces.go): its
// key is too long to leave room for pieces. Every attempt would write it
// again, so the job stops (ErrUnfit) and says what to change.
func stateTooLarge(rec *kgo.Record, limits sink.Limits, m *metrics.Metrics) error {
	if m != nil {
		m.InternalRecordTooLarge(rec.Topic)
	}
	what := "a state record"
	if k, err := state.DecodeChangelogKey(rec.Key); err == nil {
		key := k.Key
		if len(key) > 64 {
			key = key[:64]
		}
		what = fmt.Sprintf("the state of key %q (%d bytes) of operator %s", key, len(k.Key), k.Operator)
	}
	why := "its key is too long to split the value over several records (a key must leave half a record for the value)"
	if 2*len(rec.Key) < limits.Payload(rec.Topic) {
		why = "and it was not split over several records"
	}
	return fmt.Errorf("%w: %s needs a record of %d bytes, more than the topic %s accepts (max.message.bytes %d): %s. "+
		"Raise max.message.bytes of %s, or key the records by shorter values",
		ErrUnfit, what, sink.BatchBytes(rec), rec.Topic, limits.Batch(rec.Topic), why, rec.Topic)
}

// restoreBatch is how many state records the reader hands a restoring
// worker at once.
const restoreBatch = 1024

// readStateInto reads the job's state topic once and feeds every record to
// the Restorer of the worker owning its key group, each Restorer on a
// goroutine of its own: at a million keys, decoding and inserting the
// states, not reading the topic, is what a restore spends its time on
// (bench/results/2026-12-02-recovery.md).
func (j *Job) readStateInto(ctx context.Context, read stateReader, restorers []*state.Restorer) error {
	groups := j.cfg.Checkpoint.KeyGroups
	g, gctx := errgroup.WithContext(ctx)
	feeds := make([]chan []state.ChangelogRecord, len(restorers))
	for w, r := range restorers {
		feed := make(chan []state.ChangelogRecord, 4)
		feeds[w] = feed
		g.Go(func() error {
			for batch := range feed {
				for _, rec := range batch {
					if err := r.Add(rec); err != nil {
						return err
					}
				}
			}
			return nil
		})
	}
	// Every feed is closed when the read ends, however it ends: a read
	// that panics (the simulations crash a process inside its calls)
	// would otherwise leave the restorers' goroutines waiting forever.
	closed := false
	closeFeeds := func() {
		if !closed {
			closed = true
			for _, f := range feeds {
				close(f)
			}
		}
	}
	defer closeFeeds()
	pending := make([][]state.ChangelogRecord, len(restorers))
	send := func(w int) error {
		select {
		case feeds[w] <- pending[w]:
			pending[w] = make([]state.ChangelogRecord, 0, restoreBatch)
			return nil
		case <-gctx.Done():
			return gctx.Err()
		}
	}
	readErr := read(gctx, func(key, value []byte) error {
		if err := j.faults.Hit(fault.DuringRestore); err != nil {
			return err
		}
		k, err := state.DecodeChangelogKey(key)
		if err != nil {
			return fmt.Errorf("state topic: %w", err)
		}
		if int(k.Group) >= groups {
			return fmt.Errorf("%w: state record of key group %d, but the job has %d key groups", ErrIncompatible, k.Group, groups)
		}
		w := state.WorkerOf(k.Group, len(restorers), groups)
		// The record's bytes stay valid: the client never reuses them.
		pending[w] = append(pending[w], state.ChangelogRecord{Key: key, Value: value})
		if len(pending[w]) == restoreBatch {
			return send(w)
		}
		return nil
	})
	for w := range pending {
		if readErr == nil && len(pending[w]) > 0 {
			readErr = send(w)
		}
	}
	closeFeeds()
	// A worker's error (a value its codec rejects) cancels the read, so
	// it is the cause: report it first. Committed state that does not
	// decode stays so: restarting cannot help.
	if err := g.Wait(); err != nil {
		return fmt.Errorf("%w: %w", ErrIncompatible, err)
	}
	if readErr != nil {
		return readErr
	}
	// Every record is in: join the values written in pieces.
	for _, r := range restorers {
		if err := r.Finish(); err != nil {
			return fmt.Errorf("%w: %w", ErrDamaged, err)
		}
	}
	return nil
}
