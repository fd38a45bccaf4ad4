package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/eoflow/pipeline/sink"
	"github.com/eoflow/pipeline/source"
)

// atMostOnceStopPlan is what a graceful stop does without checkpoints:
// the tasks stop at once, the producer flushes what they handed it, and
// the records polled but not yet written are dropped (their offsets were
// committed when they were polled).
const atMostOnceStopPlan = "stopping: flushing the outputs written so far; at_most_once keeps no checkpoints, " +
	"so records read but not yet written are lost and the next run resumes at the offsets committed to the consumer group, with empty state"

// attemptAtMostOnce runs the job once without checkpoints: each source
// task is a member of the consumer group named after the job and commits
// offsets before it processes what it polled; state lives only in memory.
// A crash loses the records in flight and the state, and never repeats an
// output. It never completes a checkpoint, so it never reports progress.
func (j *Job) attemptAtMostOnce(parent context.Context) (progressed bool, err error) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	a := &attempt{j: j}
	defer a.close()
	if err := a.openAdmin(); err != nil {
		return false, err
	}
	if err := j.ensureSinkTopics(ctx, a.adm); err != nil {
		return false, err
	}
	a.limits = j.describeLimits(ctx, a.adm)
	plain, err := sink.NewPlain(j.conn, a.limits.Opts()...)
	if err != nil {
		return false, err
	}
	a.plain = plain
	a.closers = append(a.closers, plain.Close)
	if a.ops, err = j.allEmptyOperators(); err != nil {
		return false, err
	}
	// One group member per core and source; the group spreads partitions.
	var readers []recordReader
	for range runtime.GOMAXPROCS(0) {
		for _, src := range j.cfg.Sources {
			r, err := source.NewGroupReader(j.conn, j.cfg.Name, src.Topics, src.Start)
			if err != nil {
				closeReaders(readers)
				return false, err
			}
			readers = append(readers, r)
		}
	}
	g, err := newGraph(a, readers)
	if err != nil {
		closeReaders(readers)
		return false, err
	}
	defer g.close()
	j.log.Info("running without checkpoints (at_most_once)", "workers", j.workers, "group", j.cfg.Name)
	eg, gctx := errgroup.WithContext(ctx)
	g.start(gctx, eg)
	err = eg.Wait()
	if err == nil && parent.Err() == nil {
		err = errors.New("task graph stopped without a cause")
	}
	flushCtx, cancelFlush := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelFlush()
	if ferr := a.plain.Flush(flushCtx); ferr != nil {
		err = errors.Join(err, fmt.Errorf("flushing outputs: %w", ferr))
	}
	return false, err
}
