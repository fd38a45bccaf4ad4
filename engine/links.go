package engine

import (
	"context"

	"github.com/eoflow/pipeline/metrics"
)

// links are where a task's step hands on what it produced: batches to a
// worker or to the sink, acks and export reports to the coordinator
// loop. A task's goroutine steps over the graph's channels (chanLinks);
// the simulations step the same tasks over their own queues, one step at
// a time in the order a seed draws, so the steps they prove are the
// ones that run here. A call reports false when ctx ended before the
// peer took what it was handed.
type links interface {
	toWorker(ctx context.Context, worker int, b batch) bool
	toSink(ctx context.Context, b batch) bool
	report(ctx context.Context, r taskReport) bool
	exported(ctx context.Context, r exportReport) bool
}

// chanLinks are the graph's channels, as one task sees them; blocked
// counts the task's time waiting for room in a batch channel
// (livestats.go).
type chanLinks struct {
	workers []chan<- batch
	sink    chan<- batch
	reports chan<- taskReport
	exports chan<- exportReport
	blocked metrics.Blocked
}

func (l chanLinks) toWorker(ctx context.Context, w int, b batch) bool {
	return send(ctx, l.workers[w], b, l.blocked)
}

func (l chanLinks) toSink(ctx context.Context, b batch) bool {
	return send(ctx, l.sink, b, l.blocked)
}

func (l chanLinks) report(ctx context.Context, r taskReport) bool {
	select {
	case l.reports <- r:
		return true
	case <-ctx.Done():
		return false
	}
}

func (l chanLinks) exported(ctx context.Context, r exportReport) bool {
	select {
	case l.exports <- r:
		return true
	case <-ctx.Done():
		return false
	}
}
