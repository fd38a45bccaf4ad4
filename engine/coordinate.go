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
	"github.com/eoflow/pipeline/metrics"
	"github.com/eoflow/pipeline/source"
	"github.com/eoflow/pipeline/twophase"
)

// errStopped ends an attempt after its final checkpoint committed: a
// graceful stop, not a failure.
var errStopped = errors.New("stopped after a final checkpoint")

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
	state     []checkpoint.StateSummary
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
	resumed   bool

	// Per epoch: the sink's account from its ack, the source offsets a
	// group member's Prepare commits, when its checkpoint was triggered,
	// and when its decision was asked for and landed.
	sealed        map[checkpoint.ID]*sealedEpoch
	offsets       map[checkpoint.ID][]checkpoint.SourceOffset
	triggered     map[checkpoint.ID]time.Time
	lastTriggered checkpoint.ID
	decisions     map[checkpoint.ID][2]time.Time
	// fault is an injected failure after a decision: run ends with it.
	fault error

	// The task graph's side, set by newGraph.
	reports chan taskReport
	// opened tells the sink that the epoch after the one it sealed is
	// open; announced is the newest open epoch it knows of.
	opened    chan checkpoint.ID
	announced checkpoint.ID
	trigger   func(checkpoint.ID)
	tick      time.Duration
	// onCompleted is told about every completed checkpoint of the graph,
	// onAborted the reason of every aborted one, committed the offsets of
	// every completed one.
	onCompleted func(res commitResult, triggered time.Time)
	onAborted   func(reason twophase.AbortReason)
	committed   func([]checkpoint.SourceOffset)
	// stop asks for a graceful stop: a final checkpoint, then errStopped
	// once it is done.
	stop    <-chan struct{}
	finalID checkpoint.ID
	// stopSavepoint, read once stop is closed, is where the final
	// checkpoint goes as a savepoint ("" for none).
	stopSavepoint func() string
	// savepointReqs are Job.Savepoint's requests; exportReports the
	// workers' answers; sp the savepoints being taken.
	savepointReqs <-chan *savepointRequest
	exportReports chan exportReport
	sp            *savepoints
	// partitionsAdded says which partitions were added to the source
	// topics (partitionWatch); the attempt then ends after the next
	// checkpoint is done (errPartitionsAdded). added holds them from
	// then on; restartDue is set once that checkpoint is done.
	partitionsAdded <-chan []source.TopicPartition
	added           []source.TopicPartition
	restartDue      bool
	// group is set in group mode: how a savepoint drains the repartition
	// topic first (nil in single mode).
	group *groupStop
	// draining: a stop with a savepoint waits for the repartition topic
	// to drain before its final checkpoint.
	draining bool
	// pausedAfter is the last checkpoint triggered before the sources
	// stopped. Only a later one shows the drain: an earlier barrier may
	// precede records the sources read before they stopped, and those
	// records reach the repartition topic only in a later epoch's
	// transaction (held by the sink while this one commits, or still on
	// their way through the graph), so the topic can look drained when
	// the checkpoint completes while they are still to come.
	pausedAfter checkpoint.ID
	// remote is the outcome of the group savepoint of a stop, taken on
	// its own goroutine while the loop goes on; ctx is the loop's, which
	// ends it.
	remote chan error
	ctx    context.Context
	wg     sync.WaitGroup
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
		sealed:        map[checkpoint.ID]*sealedEpoch{},
		offsets:       map[checkpoint.ID][]checkpoint.SourceOffset{},
		triggered:     map[checkpoint.ID]time.Time{},
		decisions:     map[checkpoint.ID][2]time.Time{},
		sp:            &savepoints{},
		stopSavepoint: func() string { return "" },
	}
}

// recover runs the machine's recovery to its end: every participant
// fenced, every epoch they held in doubt settled, the last decided
// checkpoint read (recovered), and the next epoch open everywhere.
func (l *coordinatorLoop) recover(ctx context.Context) error {
	return l.settle(ctx, func() bool { return l.resumed && l.m.Open() != 0 })
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
	l.offsets[id] = offsets
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
	stop := l.stop
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
		case req := <-l.savepointReqs:
			l.requestSavepoint(req)
		case added := <-l.partitionsAdded:
			l.onPartitionsAdded(added)
		case err := <-l.remote:
			l.remote = nil
			if err != nil {
				l.sp.finalErr = err
				l.log.Error("the group savepoint failed; stopping without it", "err", err)
			}
			if err := l.finalCheckpoint(false); err != nil {
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
	case a.Kind == twophase.ActCommit && l.resumed:
		l.decisions[a.Epoch] = [2]time.Time{o.start, o.msg.Now}
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
		l.sealed[r.id] = r.epoch
		l.offsets[r.id] = r.epoch.offsets
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
				l.resumed = true
			case twophase.ActTrigger:
				l.triggered[a.Epoch], l.lastTriggered = l.now(), a.Epoch
				if l.trigger != nil {
					l.trigger(a.Epoch)
				}
			case twophase.ActCompleted:
				l.checkpointCompleted(a.Epoch)
			case twophase.ActDone:
				l.epochDone(a.Epoch)
			case twophase.ActFail:
				l.failed(a.Err)
				return a.Err
			default:
				c := call{a: a, graph: l.sealed[a.Epoch] != nil}
				if a.Kind == twophase.ActPrepare {
					c.offsets = l.offsets[a.Epoch]
				}
				l.c.queue = append(l.c.queue, c)
			}
		}
		l.announce()
	}
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
func (l *coordinatorLoop) checkpointCompleted(id checkpoint.ID) {
	d := l.decisions[id]
	l.met.TransactionCommitted(d[1].Sub(d[0]))
	delete(l.decisions, id)
	delete(l.offsets, id)
	se := l.sealed[id]
	delete(l.sealed, id)
	triggered := l.triggered[id]
	delete(l.triggered, id)
	if se == nil {
		return // a savepoint's import
	}
	res := commitResult{
		id: id, at: d[1], offsets: se.offsets, eventTime: se.eventTime,
		alignment: d[0].Sub(se.stats.alignStart), commit: d[1].Sub(d[0]),
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
	l.sp.completed(id, offsets, res.eventTime)
	if l.draining && l.finalID == 0 && id > l.pausedAfter {
		// A failure to tell (the broker slow or away for a moment) is
		// asked again at the next checkpoint.
		switch drained, err := l.group.drained(res.offsets); {
		case err != nil:
			l.log.Warn("could not tell whether the repartition topic is drained; the next checkpoint looks again", "checkpoint", id, "err", err)
		case drained:
			l.draining = false
			l.log.Info("the repartition topic is drained", "checkpoint", id)
			if err := l.finalCheckpoint(true); err != nil {
				l.log.Error("the final checkpoint", "err", err)
			}
		}
	}
}

// epochDone: epoch id is committed everywhere.
func (l *coordinatorLoop) epochDone(id checkpoint.ID) {
	if id == l.finalID {
		l.log.Info("final checkpoint committed", "checkpoint", id)
	}
	if l.added != nil {
		l.restartDue = true
	}
}

// failed reports every checkpoint the failure aborted: the one that failed
// for its reason, the others as job_failed, but not one whose decision is
// in doubt for another reason (it may yet land).
func (l *coordinatorLoop) failed(fe *twophase.FailError) {
	ids := slices.SortedFunc(maps.Keys(l.triggered), cmp.Compare)
	for _, id := range ids {
		reason := twophase.ReasonJobFailed
		switch {
		case id == fe.Epoch:
			reason = fe.Reason
		case id == fe.InDoubt:
			continue
		}
		l.log.Warn("checkpoint aborted", "checkpoint", id, "reason", reason.String(), "err", fe.Err)
		if l.onAborted != nil {
			l.onAborted(reason)
		}
		l.sp.aborted(id, fmt.Errorf("checkpoint %d aborted (%s): %w", id, reason, fe))
		delete(l.triggered, id)
	}
}

// onStop takes the final checkpoint of a graceful stop, as a savepoint if
// one was asked for.
func (l *coordinatorLoop) onStop() error {
	if l.group != nil && l.stopSavepoint() != "" {
		// A savepoint of a group-mode job must hold every record read
		// from the sources in its state: the sources stop, the keyed side
		// reads the repartition topic to its end, then the final
		// checkpoint is taken (finalCheckpoint, from checkpointCompleted).
		if !l.group.soleOwner {
			// Other processes run: every member pauses while this one
			// writes the savepoint from Kafka (groupsavepoint.go), then
			// this one stops. The loop goes on meanwhile: it is a member
			// that must pause and ack too.
			remote := make(chan error, 1)
			l.remote = remote
			dir := l.stopSavepoint()
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				remote <- l.group.savepoint(l.ctx, dir)
			}()
			return nil
		}
		l.log.Info("stopping with a savepoint: the sources stop, and the repartition topic drains first")
		l.draining = true
		l.group.pause()
		l.pausedAfter = l.lastTriggered
		l.step(twophase.Msg{Type: twophase.MsgTriggerNow, Now: l.now()})
		return nil
	}
	return l.finalCheckpoint(true)
}

// finalCheckpoint takes the final checkpoint of a graceful stop, as a
// savepoint when one was asked for and withSavepoint.
func (l *coordinatorLoop) finalCheckpoint(withSavepoint bool) error {
	if err := l.m.Step(twophase.Msg{Type: twophase.MsgStop, Now: l.now()}); err != nil {
		return err
	}
	id := l.m.Promised()
	l.finalID = id
	l.log.Info("stopping: taking a final checkpoint", "checkpoint", id)
	if dir := l.stopSavepoint(); dir != "" && withSavepoint {
		if err := l.sp.start(id, dir, nil, l.now()); err != nil {
			l.log.Error("the final checkpoint will not be a savepoint", "err", err)
			l.sp.finalErr = err
		}
	}
	return nil
}

func (l *coordinatorLoop) onPartitionsAdded(added []source.TopicPartition) {
	l.added = added
	l.log.Info("partitions were added to a source topic; restarting after the next checkpoint to read them", "partitions", added)
	if l.finalID == 0 {
		l.step(twophase.Msg{Type: twophase.MsgTriggerNow, Now: l.now()})
	}
}

// done ends the attempt once a checkpoint it waited for is done and no
// savepoint is pending on it: the final one of a graceful stop, or the
// first after partitions were added.
func (l *coordinatorLoop) done() error {
	if len(l.sp.pending) > 0 {
		return nil
	}
	switch {
	case l.m.State() == twophase.StateStopped:
		return l.stopped()
	case l.restartDue:
		return partitionsAddedError(l.added)
	}
	return nil
}

// stopped ends the attempt after the final checkpoint (and every
// savepoint pending) is done.
func (l *coordinatorLoop) stopped() error { return &stoppedError{savepoint: l.sp.finalErr} }

// requestSavepoint starts a savepoint at a checkpoint triggered now.
func (l *coordinatorLoop) requestSavepoint(req *savepointRequest) {
	fail := func(err error) { req.done <- savepointOutcome{err: err} }
	if l.finalID != 0 {
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
