package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/source"
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
// reason.
type taskReport struct {
	task checkpoint.TaskID
	id   checkpoint.ID
	err  error
}

// commitResult is the outcome of committing checkpoint N, with what the
// sink measured of its epoch.
type commitResult struct {
	id  checkpoint.ID
	err error
	at  time.Time
	// offsets are the checkpoint's source offsets and eventTime its event
	// time (nil: the job has none), for its savepoint.
	offsets   []checkpoint.SourceOffset
	eventTime *checkpoint.EventTime
	// alignment is how long the sink held inputs back for barrier N,
	// commit the transaction's commit round trip.
	alignment, commit time.Duration
	stateBytes        int64
	outputs           int64
}

// coordinatorLoop owns the checkpoint.Coordinator of one attempt and does
// what its Ready asks (checkpoint/doc.go, steps 1 to 8). It never blocks on
// a task: triggers go to sources through their own mailboxes, commits to the
// sink through a channel with room for every commit the coordinator may
// hand out.
type coordinatorLoop struct {
	coord   *checkpoint.Coordinator
	reports chan taskReport
	results chan commitResult
	commits chan<- checkpoint.ID
	trigger func(checkpoint.ID)
	tick    time.Duration
	now     func() time.Time
	log     *slog.Logger
	// onCompleted is told about every completed checkpoint: when it was
	// triggered and what its commit reported.
	onCompleted func(res commitResult, triggered time.Time)
	// onAborted is told the reason of every aborted checkpoint.
	onAborted func(reason checkpoint.AbortReason)
	// stop asks for a graceful stop: a final checkpoint, then errStopped
	// once it committed.
	stop    <-chan struct{}
	finalID checkpoint.ID
	// stopSavepoint, read once stop is closed, is where the final
	// checkpoint goes as a savepoint ("" for none).
	stopSavepoint func() string
	// finalDone: the final checkpoint completed; the attempt ends once no
	// savepoint is pending.
	finalDone bool
	// savepointReqs are Job.Savepoint's requests; exportReports the
	// workers' answers; sp the savepoints being taken.
	savepointReqs <-chan *savepointRequest
	exportReports chan exportReport
	sp            *savepoints
	// partitionsAdded says which partitions were added to the source
	// topics (partitionWatch); the attempt then ends after the next
	// checkpoint completes (errPartitionsAdded). added holds them from
	// then on; restartDue is set once that checkpoint completed.
	partitionsAdded <-chan []source.TopicPartition
	added           []source.TopicPartition
	restartDue      bool
	// triggered remembers when each checkpoint started, for its duration;
	// results what its commit reported, until the coordinator completes it.
	triggered map[checkpoint.ID]time.Time
	outcomes  map[checkpoint.ID]commitResult
	// group is set in group mode: how a savepoint drains the repartition
	// topic first (nil in single mode).
	group *groupStop
	// draining: a stop with a savepoint waits for the repartition topic
	// to drain before its final checkpoint; drainDone: it has, and the
	// final checkpoint is to be taken once the coordinator's Ready is
	// done with.
	draining, drainDone bool
	// pausedAfter is the last checkpoint triggered before the sources
	// stopped. Only a later one shows the drain: an earlier barrier may
	// precede records the sources read before they stopped, and those
	// records reach the repartition topic only in a later epoch's
	// transaction (held by the sink while this one commits, or still on
	// their way through the graph), so the topic can look drained when
	// the checkpoint completes while they are still to come.
	pausedAfter checkpoint.ID
	// remote is the outcome of the group savepoint of a stop, taken on
	// its own goroutine (remoteWait) while the loop goes on; ctx is the
	// loop's, which ends it.
	remote     chan error
	remoteWait sync.WaitGroup
	ctx        context.Context
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

func (l *coordinatorLoop) run(ctx context.Context) error {
	ticker := time.NewTicker(l.tick)
	defer ticker.Stop()
	ctx, cancel := context.WithCancel(ctx)
	l.ctx = ctx
	defer l.remoteWait.Wait()
	defer cancel() // first: a group savepoint in flight gives up
	l.init()
	defer l.sp.abandon(errors.New("the job stopped or failed before the savepoint was complete; take it again once the job runs"))
	stop := l.stop
	for {
		select {
		case <-ctx.Done():
			return nil
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
			if err := l.done(); err != nil {
				return err
			}
		case <-ticker.C:
			l.onTick()
		case r := <-l.reports:
			l.onReport(r)
		case res := <-l.results:
			l.onResult(res)
		}
		if err := l.act(); err != nil {
			return err
		}
	}
}

func (l *coordinatorLoop) init() {
	l.triggered = map[checkpoint.ID]time.Time{}
	l.outcomes = map[checkpoint.ID]commitResult{}
}

// onStop takes the final checkpoint of a graceful stop, as a savepoint if
// one was asked for.
func (l *coordinatorLoop) onStop() error {
	if l.group != nil && l.stopSavepoint() != "" {
		// A savepoint of a group-mode job must hold every record read
		// from the sources in its state: the sources stop, the keyed side
		// reads the repartition topic to its end, then the final
		// checkpoint is taken (finalCheckpoint, from onCompleted).
		if !l.group.soleOwner {
			// Other processes run: every member pauses while this one
			// writes the savepoint from Kafka (groupsavepoint.go), then
			// this one stops. The loop goes on meanwhile: it is a member
			// that must pause and ack too.
			remote := make(chan error, 1)
			l.remote = remote
			dir := l.stopSavepoint()
			l.remoteWait.Add(1)
			go func() {
				defer l.remoteWait.Done()
				remote <- l.group.savepoint(l.ctx, dir)
			}()
			return nil
		}
		l.log.Info("stopping with a savepoint: the sources stop, and the repartition topic drains first")
		l.draining = true
		l.group.pause()
		l.pausedAfter = l.coord.LastTriggered()
		if _, err := l.coord.TriggerNow(l.now()); err != nil {
			l.log.Debug("the checkpoint after the sources stopped waits for the one in flight", "err", err)
		}
		return nil
	}
	return l.finalCheckpoint(true)
}

// finalCheckpoint takes the final checkpoint of a graceful stop, as a
// savepoint when one was asked for and withSavepoint.
func (l *coordinatorLoop) finalCheckpoint(withSavepoint bool) error {
	id, err := l.coord.Stop(l.now())
	if err != nil {
		return err
	}
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
		if _, err := l.coord.TriggerNow(l.now()); err != nil {
			l.log.Debug("a checkpoint is in flight already", "err", err)
		}
	}
}

func (l *coordinatorLoop) onTick() {
	// A worker exporting a savepoint answers no barrier until it is done:
	// the next checkpoint waits rather than times out (which would fail
	// the job over a large export).
	if !l.sp.exporting() {
		l.coord.Tick(l.now())
	}
}

func (l *coordinatorLoop) onReport(r taskReport) {
	var err error
	if r.err != nil {
		err = l.coord.Decline(r.task, r.id, r.err)
	} else {
		err = l.coord.Ack(r.task, r.id)
	}
	if err != nil {
		l.log.Debug("checkpoint report ignored", "task", r.task, "checkpoint", r.id, "err", err)
	}
}

func (l *coordinatorLoop) onResult(res commitResult) {
	var err error
	if res.err != nil {
		err = l.coord.CommitFailed(res.id, res.err)
	} else {
		l.outcomes[res.id] = res
		err = l.coord.Committed(res.id, res.at)
	}
	if err != nil {
		l.log.Warn("commit outcome ignored", "checkpoint", res.id, "err", err)
	}
}

// act carries out the coordinator's Ready in the documented order.
func (l *coordinatorLoop) act() error {
	if err := l.actReady(); err != nil {
		return err
	}
	if l.drainDone {
		l.drainDone = false
		if err := l.finalCheckpoint(true); err != nil {
			return err
		}
		if err := l.actReady(); err != nil {
			return err
		}
	}
	return l.done()
}

func (l *coordinatorLoop) actReady() error {
	for l.coord.HasReady() {
		rd := l.coord.Ready()
		for _, a := range rd.Aborted {
			l.log.Warn("checkpoint aborted", "checkpoint", a.ID, "reason", a.Reason.String(), "err", a.Err)
			if l.onAborted != nil {
				l.onAborted(a.Reason)
			}
			l.sp.aborted(a.ID, fmt.Errorf("checkpoint %d aborted (%s): %w", a.ID, a.Reason, a.Err))
		}
		if rd.Fail != nil {
			l.coord.Advance()
			return rd.Fail
		}
		for _, id := range rd.Trigger {
			l.triggered[id] = l.now()
			l.trigger(id)
		}
		if rd.Commit != 0 {
			l.commits <- rd.Commit
		}
		for _, id := range rd.Completed {
			res := l.outcomes[id]
			l.log.Debug("checkpoint completed", "checkpoint", id, "duration", res.at.Sub(l.triggered[id]))
			if l.onCompleted != nil {
				l.onCompleted(res, l.triggered[id])
			}
			delete(l.triggered, id)
			delete(l.outcomes, id)
			offsets := res.offsets
			if l.group != nil {
				offsets = l.group.keep(offsets)
			}
			l.sp.completed(id, offsets, res.eventTime)
			if l.draining && l.finalID == 0 && id > l.pausedAfter {
				// A failure to tell (the broker slow or away for a
				// moment) is asked again at the next checkpoint.
				switch drained, err := l.group.drained(res.offsets); {
				case err != nil:
					l.log.Warn("could not tell whether the repartition topic is drained; the next checkpoint looks again", "checkpoint", id, "err", err)
				case drained:
					l.draining, l.drainDone = false, true
					l.log.Info("the repartition topic is drained", "checkpoint", id)
				}
			}
			if id == l.finalID {
				l.log.Info("final checkpoint committed", "checkpoint", id)
				l.finalDone = true
			}
			if l.added != nil {
				l.restartDue = true
			}
		}
		l.coord.Advance()
	}
	return nil
}

// done ends the attempt once a checkpoint it waited for completed and no
// savepoint is pending on it: the final one of a graceful stop, or the
// first after partitions were added.
func (l *coordinatorLoop) done() error {
	if len(l.sp.pending) > 0 {
		return nil
	}
	switch {
	case l.finalDone:
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
	id, err := l.coord.TriggerNow(l.now())
	if err != nil {
		fail(fmt.Errorf("%w: %w", ErrSavepoint, err))
		return
	}
	if err := l.sp.start(id, req.dir, req, l.now()); err != nil {
		fail(err)
	}
}
