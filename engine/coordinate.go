package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/internal/mutant"
	"github.com/eoflow/pipeline/metrics"
	"github.com/eoflow/pipeline/operator"
	"github.com/eoflow/pipeline/source"
	"github.com/eoflow/pipeline/twophase"
)

// errStopped ends an attempt after its final checkpoint committed: a
// graceful stop, not a failure.
var errStopped = errors.New("stopped after a final checkpoint")

// errYielded ends a group member's attempt whose assignment the group
// revoked, after its final checkpoint committed (coordinatorLoop.onYield).
var errYielded = errors.New("the consumer group revoked the assignment; its work is committed")

// stoppedError is errStopped with the outcome of the final checkpoint's
// savepoint (StopWithSavepoint): nil if none was asked for or it was
// written.
type stoppedError struct{ savepoint error }

func (e *stoppedError) Error() string {
	if e.savepoint == nil {
		return errStopped.Error()
	}
	return errStopped.Error() + ", but " + e.savepoint.Error()
}

func (e *stoppedError) Is(target error) bool { return target == errStopped }
func (e *stoppedError) Unwrap() error        { return e.savepoint }

// taskReport is a task's answer to barrier N: an ack, or a decline with the
// reason. The sink's ack says what epoch N was (sealed).
type taskReport struct {
	task  checkpoint.TaskID
	id    checkpoint.ID
	err   error
	epoch *sealedEpoch
}

// sealedEpoch is the sink's account of epoch N, given with its ack: barrier
// N aligned and checkpoint record N went into the transaction, last.
type sealedEpoch struct {
	offsets   []checkpoint.SourceOffset
	eventTime *checkpoint.EventTime // nil: the job has none
	// tables are where the job's tables stood, as the record says.
	tables []checkpoint.TableOffsets
	// held are the records joins as of event time held at the barrier
	// (in single mode the record holds them too: checkpoint.Record.Held;
	// a group member writes them per source partition): a savepoint of
	// the checkpoint takes them.
	held []operator.HeldRecord
	// tableCommits (group mode) are the table positions the epoch's
	// transaction commits to the group beside offsets: those of the
	// partitions whose dead letters the member writes.
	tableCommits []checkpoint.SourceOffset
	state        []checkpoint.StateSummary
	// stats are the epoch's outputs, published once they are visible;
	// stats.alignStart is when barrier N first reached the sink.
	stats epochStats
}

// commitResult is what a completed checkpoint was, for its metrics and
// status.
type commitResult struct {
	id        checkpoint.ID
	at        time.Time
	offsets   []checkpoint.SourceOffset
	eventTime *checkpoint.EventTime
	tables    []checkpoint.TableOffsets
	// alignment is how long the sink held inputs back for barrier N
	// before the decision was asked for, commit the decision's round trip.
	alignment, commit time.Duration
	stateBytes        int64
	outputs           int64
}

// coordinatorLoop is the one owner of an attempt's epoch machine
// (twophase.Machine): it feeds it every message (the tasks' acks, ticks,
// savepoint and stop requests, the participants' outcomes) and carries out
// every action (twophase/doc.go, "Driving a Machine"). It never blocks on
// a task: triggers go to sources through their own mailboxes, the sink
// learns that the next epoch is open from a channel with room for it, and
// participant calls go to the committer's goroutine.
//
// It lives as long as the attempt: it recovers the participants before the
// task graph exists (recover), commits a savepoint's import (importEpoch),
// runs with the graph (run), and aborts what is left when it stopped
// (shutdown).
type coordinatorLoop struct {
	m   *twophase.Machine
	c   *committer
	log *slog.Logger
	now func() time.Time
	met *metrics.Metrics

	// recovered is the checkpoint the decision log read: the one the
	// attempt restores once the machine resumes from it.
	recovered *checkpoint.Record
	// epochs is what the loop knows of each epoch in flight;
	// lastTriggered is the newest checkpoint triggered.
	epochs        map[checkpoint.ID]*epochInfo
	lastTriggered checkpoint.ID
	// fault is an injected failure after a decision: run ends with it.
	fault error

	// The task graph's side, set by newGraph.
	reports chan taskReport
	// opened tells the sink that the epoch after the one it sealed is
	// open; announced is the newest open epoch it knows of.
	opened    chan checkpoint.ID
	announced checkpoint.ID
	// trigger asks the sources for barrier id; final says that nothing
	// follows it (finalBarrier).
	trigger func(id checkpoint.ID, final bool)
	tick    time.Duration
	// onCompleted is told about every completed checkpoint of the graph,
	// onAborted the id, reason and error of every aborted one, committed
	// the offsets of every completed one.
	onCompleted func(res commitResult, triggered time.Time)
	onAborted   func(id checkpoint.ID, reason twophase.AbortReason, err error)
	committed   func([]checkpoint.SourceOffset)
	// stop asks for a graceful stop: a final checkpoint, then errStopped
	// once it is done. stopSavepoint, read once stop is closed, is where
	// the final checkpoint goes as a savepoint ("" for none).
	stop          <-chan struct{}
	stopSavepoint func() string
	// yield is closed when the consumer group revokes the assignment
	// (group mode; nil in single mode): see onYield.
	yield <-chan struct{}
	// savepointReqs are Job.Savepoint's requests; exportReports the
	// workers' answers; sp the savepoints being taken.
	savepointReqs <-chan *savepointRequest
	exportReports chan exportReport
	sp            *savepoints
	// partitionsAdded says which partitions were added to the source
	// topics (partitionWatch).
	partitionsAdded <-chan []source.TopicPartition
	// group is set in group mode: how a stop with a savepoint drains the
	// repartition topic first (nil in single mode).
	group *groupStop
	// state is what the loop is doing besides taking checkpoints
	// (loopphase.go).
	state loopState
	// ctx is run's, which ends the committer and a group savepoint of a
	// stop; wg waits for both.
	ctx context.Context
	wg  sync.WaitGroup
}

// epochInfo is what the loop knows of an epoch in flight, for its calls
// and its metrics.
type epochInfo struct {
	// sealed is the sink's account, from its ack (nil: a savepoint's
	// import, not an epoch of the task graph).
	sealed *sealedEpoch
	// offsets are what a group member's Prepare commits to the group.
	offsets []checkpoint.SourceOffset
	// triggered is when the checkpoint started (zero: not yet); asked and
	// decided when its decision was asked of the decision log and landed.
	triggered, asked, decided time.Time
}

// epoch is what the loop knows of epoch id, made on first use.
func (l *coordinatorLoop) epoch(id checkpoint.ID) *epochInfo {
	e := l.epochs[id]
	if e == nil {
		e = &epochInfo{}
		l.epochs[id] = e
	}
	return e
}

// groupStop is what a group-mode stop with a savepoint needs (see
// coordinatorLoop.onStop): whether this process owns every partition,
// how to stop its sources, whether a checkpoint's offsets show the
// repartition topic drained, and which offsets a savepoint keeps.
type groupStop struct {
	soleOwner bool
	// savepoint takes a savepoint of the whole group while it runs.
	savepoint func(ctx context.Context, dir string) error
	pause     func()
	drained   func(offsets []checkpoint.SourceOffset) (bool, error)
	keep      func(offsets []checkpoint.SourceOffset) []checkpoint.SourceOffset
}

// newCoordinatorLoop returns the loop of an attempt whose commit path is m
// over the committer's participants.
func newCoordinatorLoop(m *twophase.Machine, c *committer, log *slog.Logger, now func() time.Time, met *metrics.Metrics) *coordinatorLoop {
	return &coordinatorLoop{
		m: m, c: c, log: log, now: now, met: met,
		epochs:        map[checkpoint.ID]*epochInfo{},
		sp:            &savepoints{},
		stopSavepoint: func() string { return "" },
		state:         loopState{phase: phaseRunning},
	}
}

// recover runs the machine's recovery to its end: every participant
// fenced, every epoch they held in doubt settled, the last decided
// checkpoint read (recovered), and the next epoch open everywhere.
func (l *coordinatorLoop) recover(ctx context.Context) error {
	return l.settle(ctx, func() bool { return l.m.Open() != 0 })
}

// importEpoch commits the open epoch, into which the caller produced a
// savepoint's state and checkpoint record id, as checkpoint id: no task
// graph runs, so nothing acks it (offsets are what a group member's
// transaction commits to the group). The next epoch is open when it
// returns.
func (l *coordinatorLoop) importEpoch(ctx context.Context, id checkpoint.ID, offsets []checkpoint.SourceOffset) error {
	if open := l.m.Open(); open != id {
		return fmt.Errorf("importing as checkpoint %d, but epoch %d is open", id, open)
	}
	l.epoch(id).offsets = offsets
	if err := l.m.Step(twophase.Msg{Type: twophase.MsgTriggerNow, Now: l.now()}); err != nil {
		return err
	}
	return l.settle(ctx, func() bool { return l.m.LastCompleted() >= id && l.m.Open() > id })
}

// settle carries out the machine's actions and makes their calls itself,
// one at a time, until done says so or the machine failed. Nothing else
// runs meanwhile: the task graph does not exist (yet, or any more).
func (l *coordinatorLoop) settle(ctx context.Context, done func() bool) error {
	for {
		if err := l.act(); err != nil {
			return err
		}
		if done() {
			return nil
		}
		if len(l.c.queue) == 0 {
			return fmt.Errorf("the commit path stalled in state %v", l.m.State())
		}
		c := l.c.queue[0]
		l.c.queue = l.c.queue[1:]
		l.feed(l.c.do(ctx, c))
		if l.fault != nil {
			return l.fault
		}
	}
}

// shutdown ends the attempt's commit path once the task graph stopped
// (cause says why): it takes the outcome of a call that finished after
// the loop stopped, gives up every epoch not decided, and makes the
// aborts (best effort: the next start's fence aborts them anyway), now
// rather than leaving them to it, so that read_committed readers of the
// outputs are not held back meanwhile. It skips every other call: the
// next recovery settles what they would have done.
func (l *coordinatorLoop) shutdown(ctx context.Context, cause error) error {
	select {
	case c := <-l.c.calls: // handed over, never started
		l.c.queue = slices.Insert(l.c.queue, 0, c)
	default:
	}
	select {
	case o := <-l.c.outcomes:
		l.feed(o)
	default:
	}
	l.c.busy = false
	if st := l.m.State(); st != twophase.StateFailed && st != twophase.StateStopped {
		if cause == nil {
			cause = errors.New("the task graph stopped")
		}
		_ = l.m.Step(twophase.Msg{Type: twophase.MsgAbort, Now: l.now(), Err: cause})
	}
	var errs []error
	for {
		_ = l.act() // the failure is known; only the aborts are left to make
		l.c.queue = slices.DeleteFunc(l.c.queue, func(c call) bool { return c.a.Kind != twophase.ActAbort })
		if len(l.c.queue) == 0 {
			return errors.Join(errs...)
		}
		c := l.c.queue[0]
		l.c.queue = l.c.queue[1:]
		o := l.c.do(ctx, c)
		if err := o.msg.Err; err != nil {
			errs = append(errs, fmt.Errorf("aborting epoch %d at %s: %w", c.a.Epoch, c.a.Participant, err))
		}
		l.feed(o)
	}
}

func (l *coordinatorLoop) run(ctx context.Context) error {
	ticker := time.NewTicker(l.tick)
	defer ticker.Stop()
	ctx, cancel := context.WithCancel(ctx)
	l.ctx = ctx
	defer l.wg.Wait() // the committer, and a group savepoint of a stop
	defer cancel()    // first: both give up
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		l.c.run(ctx)
	}()
	defer l.sp.abandon(errors.New("the job stopped or failed before the savepoint was complete; take it again once the job runs"))
	stop, yield := l.stop, l.yield
	for {
		send, next := l.c.next()
		select {
		case <-ctx.Done():
			return nil
		case send <- next:
			l.c.sent()
		case o := <-l.c.outcomes:
			l.c.busy = false
			l.feed(o)
		case <-stop:
			stop = nil // once
			if err := l.onStop(); err != nil {
				return err
			}
		case <-yield:
			yield = nil // once
			if err := l.onYield(); err != nil {
				return err
			}
		case req := <-l.savepointReqs:
			l.requestSavepoint(req)
		case added := <-l.partitionsAdded:
			if err := l.onPartitionsAdded(added); err != nil {
				return err
			}
		case err := <-l.state.remote:
			if err := l.onGroupSavepoint(err); err != nil {
				return err
			}
		case r := <-l.exportReports:
			l.sp.exported(r)
		case <-ticker.C:
			l.onTick()
		case r := <-l.reports:
			l.onReport(r)
		}
		if err := l.react(); err != nil {
			return err
		}
	}
}

// react is what the loop does after every event: carry out the machine's
// actions, then end the attempt if it is over (a failure, an injected
// fault, the stop, a restart due).
func (l *coordinatorLoop) react() error {
	if err := l.act(); err != nil {
		return err
	}
	if l.fault != nil {
		return l.fault
	}
	return l.done()
}

// start tells the machine that the task graph runs, with these tasks
// acking every checkpoint; its periodic checkpoints are due from
// scheduled on (scheduleStart). The sink starts with the open epoch.
func (l *coordinatorLoop) start(scheduled time.Time, tasks []checkpoint.TaskID) error {
	l.announced = l.m.Open()
	return l.m.Step(twophase.Msg{Type: twophase.MsgStart, Now: scheduled, Tasks: tasks})
}

// feed steps the machine with a call's outcome.
func (l *coordinatorLoop) feed(o outcome) {
	a := o.c.a
	switch {
	case a.Kind == twophase.ActReadDecision && o.msg.Err == nil:
		l.recovered = o.rec
	case a.Participant != l.c.txn.Name():
	case a.Kind == twophase.ActBegin && o.msg.Err == nil:
		l.met.TransactionBegan()
	case a.Kind == twophase.ActCommit && l.m.State() != twophase.StateRecovering:
		e := l.epoch(a.Epoch)
		e.asked, e.decided = o.start, o.msg.Now
	case a.Kind == twophase.ActAbort:
		l.met.TransactionAborted()
	}
	if o.fault != nil && l.fault == nil {
		l.fault = o.fault
	}
	if err := l.m.Step(o.msg); err != nil {
		// The machine refused the outcome of its own call: a bug.
		l.log.Error("commit path: outcome refused", "call", a.String(), "err", err)
	}
}

// onTick advances time. A worker exporting a savepoint answers no barrier
// until it is done: the next checkpoint waits rather than times out
// (which would fail the job over a large export).
func (l *coordinatorLoop) onTick() {
	if !l.sp.exporting() {
		l.step(twophase.Msg{Type: twophase.MsgTick, Now: l.now()})
	}
}

func (l *coordinatorLoop) onReport(r taskReport) {
	if r.epoch != nil {
		e := l.epoch(r.id)
		e.sealed, e.offsets = r.epoch, r.epoch.offsets
	}
	msg := twophase.Msg{Type: twophase.MsgAck, Task: r.task, Epoch: r.id}
	if r.err != nil {
		msg = twophase.Msg{Type: twophase.MsgDecline, Task: r.task, Epoch: r.id, Err: r.err}
	}
	if err := l.m.Step(msg); err != nil {
		l.log.Debug("checkpoint report ignored", "task", r.task, "checkpoint", r.id, "err", err)
	}
}

// step feeds the machine a message of the loop's own; a refusal (a
// savepoint asked while failing) is logged.
func (l *coordinatorLoop) step(msg twophase.Msg) {
	if err := l.m.Step(msg); err != nil {
		l.log.Debug("epoch machine: message ignored", "err", err)
	}
}

// act carries out the machine's actions, in order (twophase/doc.go).
func (l *coordinatorLoop) act() error {
	for l.m.HasReady() {
		rd := l.m.Ready()
		l.m.Advance()
		for _, a := range rd.Actions {
			switch a.Kind {
			case twophase.ActResume:
				if id := l.recoveredID(); id != a.Epoch {
					return fmt.Errorf("the commit path resumes from checkpoint %d, but the decision log read %d", a.Epoch, id)
				}
			case twophase.ActTrigger:
				l.epoch(a.Epoch).triggered, l.lastTriggered = l.now(), a.Epoch
				if l.trigger != nil {
					l.trigger(a.Epoch, l.finalBarrier(a.Epoch))
				}
			case twophase.ActCompleted:
				if err := l.checkpointCompleted(a.Epoch); err != nil {
					return err
				}
			case twophase.ActDone:
				if err := l.epochDone(a.Epoch); err != nil {
					return err
				}
			case twophase.ActFail:
				l.failed(a.Err)
				return a.Err
			}
			if a.Calls() {
				c := call{a: a}
				if e := l.epochs[a.Epoch]; e != nil {
					c.graph = e.sealed != nil
					if a.Kind == twophase.ActPrepare {
						c.offsets = e.offsets
						if e.sealed != nil && len(e.sealed.tableCommits) > 0 {
							c.offsets = append(slices.Clone(e.offsets), e.sealed.tableCommits...)
						}
					}
				}
				l.c.queue = append(l.c.queue, c)
			}
		}
		if mutant.On("open-epoch-announced-late") {
			l.announce() // the bug: only along with an action
		}
	}
	if mutant.On("open-epoch-announced-late") {
		return nil
	}
	// An epoch opens when the last participant's Begin succeeded, an
	// outcome after which the machine has nothing to do: announced here,
	// not with the next action (the next checkpoint's trigger, a whole
	// interval later), or the sink holds everything until then.
	l.announce()
	return nil
}

func (l *coordinatorLoop) recoveredID() checkpoint.ID {
	if l.recovered == nil {
		return 0
	}
	return l.recovered.ID
}

// announce tells the sink once the epoch after the one it sealed is open:
// it then writes what it held back into it. The sink seals epoch N before
// N+1 can open, and reads the channel before it seals N+1, so its one
// slot is always free; a stale value in it would only be replaced.
func (l *coordinatorLoop) announce() {
	open := l.m.Open()
	if open <= l.announced || l.opened == nil {
		return
	}
	l.announced = open
	select {
	case <-l.opened:
	default:
	}
	l.opened <- open
}

// checkpointCompleted: checkpoint id is durable. The epoch's outputs are
// visible; savepoints and stop waiters are answered.
func (l *coordinatorLoop) checkpointCompleted(id checkpoint.ID) error {
	e := l.epoch(id)
	delete(l.epochs, id)
	l.met.TransactionCommitted(e.decided.Sub(e.asked))
	se, triggered := e.sealed, e.triggered
	if se == nil {
		return nil // a savepoint's import
	}
	res := commitResult{
		id: id, at: e.decided, offsets: se.offsets, eventTime: se.eventTime, tables: se.tables,
		alignment: e.asked.Sub(se.stats.alignStart), commit: e.decided.Sub(e.asked),
		stateBytes: se.stats.stateBytes, outputs: se.stats.outputs,
	}
	l.log.Debug("checkpoint completed", "checkpoint", id, "duration", res.at.Sub(triggered))
	se.stats.publish(l.met, res.at)
	for _, st := range se.state {
		l.met.SetState(st.Operator, int64(st.Keys), int64(st.Bytes))
	}
	if l.committed != nil {
		l.committed(se.offsets)
	}
	if l.onCompleted != nil {
		l.onCompleted(res, triggered)
	}
	offsets := res.offsets
	if l.group != nil {
		offsets = l.group.keep(offsets)
	}
	l.sp.completed(id, offsets, res.eventTime, res.tables, se.held)
	return l.onDrainedCheck(id, res.offsets)
}

// failed reports every checkpoint the failure aborted: the one that failed
// for its reason, the others as job_failed, but not one whose decision is
// in doubt for another reason (it may yet land).
func (l *coordinatorLoop) failed(fe *twophase.FailError) {
	ids := slices.SortedFunc(maps.Keys(l.epochs), cmp.Compare)
	for _, id := range ids {
		if l.epochs[id].triggered.IsZero() {
			continue
		}
		reason := twophase.ReasonJobFailed
		switch {
		case id == fe.Epoch:
			reason = fe.Reason
		case id == fe.InDoubt:
			continue
		}
		l.log.Warn("checkpoint aborted", "checkpoint", id, "reason", reason.String(), "err", fe.Err)
		if l.onAborted != nil {
			l.onAborted(id, reason, fe.Err)
		}
		l.sp.aborted(id, fmt.Errorf("checkpoint %d aborted (%s): %w", id, reason, fe))
		delete(l.epochs, id)
	}
}

// requestSavepoint starts a savepoint at a checkpoint triggered now.
func (l *coordinatorLoop) requestSavepoint(req *savepointRequest) {
	fail := func(err error) { req.done <- savepointOutcome{err: err} }
	if l.state.phase == phaseStopping {
		fail(fmt.Errorf("%w: the job is stopping", ErrSavepoint))
		return
	}
	if err := l.m.Step(twophase.Msg{Type: twophase.MsgTriggerNow, Now: l.now()}); err != nil {
		fail(fmt.Errorf("%w: %w", ErrSavepoint, err))
		return
	}
	if err := l.sp.start(l.m.Promised(), req.dir, req, l.now()); err != nil {
		fail(err)
	}
}
