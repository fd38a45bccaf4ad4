package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/eoflow/pipeline/checkpoint/savepoint"
	"github.com/eoflow/pipeline/source"
)

// atMostOnceStopPlan is what a graceful stop does without checkpoints:
// the tasks stop at once, the producer flushes what they handed it, and
// the records polled but not yet written are dropped (their offsets were
// committed when they were polled).
const atMostOnceStopPlan = "stopping: flushing the outputs written so far; at_most_once keeps no checkpoints, " +
	"so records read but not yet written are lost and the next run resumes at the offsets committed to the consumer group, with empty state"

// atMostOnceMode runs the job without checkpoints: each source task is a
// member of the consumer group named after the job and commits offsets
// before it processes what it polled; state lives only in memory. A crash
// loses the records in flight and the state, and never repeats an output.
// It never completes a checkpoint, so it never reports progress.
type atMostOnceMode struct{}

func (atMostOnceMode) prepare(ctx context.Context, a *attempt) (*savepoint.RestorePlan, error) {
	if err := a.openAdmin(); err != nil {
		return nil, err
	}
	if err := a.j.ensureSinkTopics(ctx, a.adm); err != nil {
		return nil, err
	}
	a.limits = a.j.describeLimits(ctx, a.adm)
	return nil, nil
}

// recover has nothing to fence and no decision to read: it opens the
// plain producer of the outputs.
func (atMostOnceMode) recover(_ context.Context, a *attempt) error { return a.openPlain() }

// restore starts every operator empty.
func (atMostOnceMode) restore(_ context.Context, a *attempt, _ *savepoint.RestorePlan) error {
	var err error
	a.ops, err = a.j.allEmptyOperators()
	return err
}

// readers: one group member per core and source; the group spreads the
// partitions.
func (atMostOnceMode) readers(a *attempt) ([]recordReader, error) {
	j := a.j
	var readers []recordReader
	for range runtime.GOMAXPROCS(0) {
		for _, src := range j.cfg.Sources {
			r, err := source.NewGroupReader(j.conn, j.cfg.Name, src.Topics, src.Start)
			if err != nil {
				closeReaders(readers)
				return nil, err
			}
			readers = append(readers, r)
		}
	}
	j.log.Info("running without checkpoints (at_most_once)", "workers", j.workers, "group", j.cfg.Name)
	return readers, nil
}

func (atMostOnceMode) wire(*attempt, *graph) {}

// finish flushes what the tasks handed the producer.
func (atMostOnceMode) finish(a *attempt, err error) error {
	flushCtx, cancelFlush := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelFlush()
	if ferr := a.plain.Flush(flushCtx); ferr != nil {
		err = errors.Join(err, fmt.Errorf("flushing outputs: %w", ferr))
	}
	return err
}
