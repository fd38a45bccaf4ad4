package runtime

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/eoflow/pipeline/checkpoint"
)

// errStopped ends an attempt after its final checkpoint committed: a
// graceful stop, not a failure.
var errStopped = errors.New("stopped after a final checkpoint")

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
	// triggered remembers when each checkpoint started, for its duration;
	// results what its commit reported, until the coordinator completes it.
	triggered map[checkpoint.ID]time.Time
	outcomes  map[checkpoint.ID]commitResult
}

func (l *coordinatorLoop) run(ctx context.Context) error {
	ticker := time.NewTicker(l.tick)
	defer ticker.Stop()
	l.triggered = map[checkpoint.ID]time.Time{}
	l.outcomes = map[checkpoint.ID]commitResult{}
	stop := l.stop
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-stop:
			stop = nil // once
			id, err := l.coord.Stop(l.now())
			if err != nil {
				return err
			}
			l.finalID = id
			l.log.Info("stopping: taking a final checkpoint", "checkpoint", id)
		case <-ticker.C:
			l.coord.Tick(l.now())
		case r := <-l.reports:
			var err error
			if r.err != nil {
				err = l.coord.Decline(r.task, r.id, r.err)
			} else {
				err = l.coord.Ack(r.task, r.id)
			}
			if err != nil {
				l.log.Debug("checkpoint report ignored", "task", r.task, "checkpoint", r.id, "err", err)
			}
		case res := <-l.results:
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
		if err := l.act(); err != nil {
			return err
		}
	}
}

// act carries out the coordinator's Ready in the documented order.
func (l *coordinatorLoop) act() error {
	for l.coord.HasReady() {
		rd := l.coord.Ready()
		if rd.Fail != nil {
			for _, a := range rd.Aborted {
				l.log.Warn("checkpoint aborted", "checkpoint", a.ID, "reason", a.Reason.String(), "err", a.Err)
				if l.onAborted != nil {
					l.onAborted(a.Reason)
				}
			}
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
			if id == l.finalID {
				l.log.Info("final checkpoint committed", "checkpoint", id)
				return errStopped
			}
		}
		l.coord.Advance()
	}
	return nil
}
