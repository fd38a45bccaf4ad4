package engine

import (
	"context"
	"fmt"
	"slices"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/metrics"
	"github.com/eoflow/pipeline/window"
)

// workerTask runs the keyed operator for its key groups. Its inputs are
// the source tasks; it aligns barriers over them.
type workerTask struct {
	id      checkpoint.TaskID
	index   int
	ops     workerOps
	inputs  <-chan batch
	nInputs int
	sink    chan<- batch
	reports chan<- taskReport
	// exports says which barriers are savepoints, and exportReports takes
	// the worker's export results.
	exports       *exportRegistry
	exportReports chan<- exportReport

	align aligner
	// timed: the job has event time; watermark is W of the last barrier
	// (window.NoWatermark: none yet). shuffled: it is group mode's keyed
	// side, whose watermark is the least of the repartition partitions'
	// (groupeventtime.go).
	timed     bool
	shuffled  bool
	watermark int64
	metrics   *metrics.Metrics
	// handled counts the records handed to each target, blocked the time
	// spent waiting for room in the sink's channel (livestats.go).
	handled *targetCounts
	blocked metrics.Blocked
	// What handling inputs produced, for run to send on: messages for the
	// sink, the barriers acked and the savepoint exports made, in order.
	out      []message
	acked    []checkpoint.ID
	exported []exportReport
	// returns gives the operator.Records of processed inputs back to
	// their slabs, a run at a time.
	returns slabReturns
	// aligned is the barrier snapshotted and not yet resumed from (0:
	// none): it must reach the sink before a savepoint's export runs, and
	// the inputs held during the alignment wait for both.
	aligned checkpoint.ID
}

func (w *workerTask) run(ctx context.Context) error {
	to := chanLinks{sink: w.sink, reports: w.reports, exports: w.exportReports, blocked: w.blocked}
	for {
		select {
		case <-ctx.Done():
			return nil
		case b := <-w.inputs:
			if on, err := w.step(ctx, b, to); !on || err != nil {
				return err
			}
		}
	}
}

// step handles one input batch and hands on what it produced; after a
// barrier it completed, it goes on with what the alignment held back. It
// reports false when ctx ended.
func (w *workerTask) step(ctx context.Context, b batch, to links) (bool, error) {
	if err := w.handle(b); err != nil {
		return true, err
	}
	if !w.flush(ctx, to) {
		return false, nil
	}
	for w.aligned != 0 {
		if err := w.resume(); err != nil {
			return true, err
		}
		if !w.flush(ctx, to) {
			return false, nil
		}
	}
	return true, nil
}

// handle processes one input batch. It does no I/O: what it produces
// waits in out, acked and exported for flush.
func (w *workerTask) handle(b batch) error {
	if w.out == nil { // one output per input is the common case
		w.out = newBatch(batchRoom(len(b.msgs)))
	}
	w.ops.prefetch(b.msgs)
	defer w.returns.flush()
	defer w.handled.flush()
	return w.align.each(b, func(m message) error {
		switch m.kind {
		case msgRecord:
			w.handled.add(m.target)
			outs, dls := w.ops.process(m)
			if m.slab != nil {
				w.returns.add(m.slab) // process is done with m.op
			}
			for _, r := range outs {
				w.out = append(w.out, message{kind: msgRecord, rec: r})
			}
			w.out = append(w.out, dls...)
		case msgDeadLetter, msgLate, msgShuffle:
			w.out = append(w.out, m)
		case msgBarrier:
			return w.onBarrier(b.from, m.barrier)
		default:
			return fmt.Errorf("worker %d: unexpected message kind %d", w.index, m.kind)
		}
		return nil
	})
}

func (w *workerTask) onBarrier(from int, b *barrier) error {
	done, err := w.align.arrive(from, b)
	if err != nil || done == nil {
		return err
	}
	// Every input is at barrier N: the state is that of exactly the
	// records before it. Snapshot, then send the barrier on.
	done.watermark = window.NoWatermark
	if w.timed {
		if w.shuffled {
			w.watermark = groupWatermark(w.watermark, done.shuffled)
		} else {
			w.watermark = jobWatermark(w.watermark, done.times)
		}
		done.watermark = w.watermark
		if w.index == 0 && w.metrics != nil { // every worker computes the same
			w.metrics.SetWatermark(w.watermark)
		}
	}
	outputs, changes, summary := w.ops.snapshot(done.watermark)
	w.out = slices.Grow(w.out, len(outputs)+2)
	for _, r := range outputs {
		w.out = append(w.out, message{kind: msgRecord, rec: r})
	}
	if changes.len() > 0 {
		w.out = append(w.out, message{kind: msgState, changes: &changes})
	}
	done.state = summary
	w.out = append(w.out, message{kind: msgBarrier, barrier: done})
	w.acked = append(w.acked, done.id)
	w.aligned = done.id
	return nil // the rest of this input waits in the aligner for resume
}

// resume goes on after a barrier was sent on: it exports the state if the
// barrier is a savepoint's, before any record after the barrier changes it
// (the checkpoint does not wait for this), then processes what the
// alignment held back.
func (w *workerTask) resume() error {
	id := w.aligned
	w.aligned = 0
	if ex := w.exports.get(id); ex != nil {
		w.exported = append(w.exported, exportReport{id: id, worker: w.index, err: ex.exportState(w.ops)})
	}
	for _, hb := range w.align.release() {
		// A barrier that completes in what was held sets aligned again;
		// what follows it is held again, by input, in the aligner.
		if err := w.handle(hb); err != nil {
			return err
		}
	}
	return nil
}

// flush sends what handling produced: the messages to the sink first, so
// a barrier is on its way before the coordinator hears of it, then the
// acks and the export reports. It reports false when ctx ended.
func (w *workerTask) flush(ctx context.Context, to links) bool {
	if len(w.out) > 0 {
		if !to.toSink(ctx, batch{from: w.index, msgs: w.out}) {
			return false
		}
		w.out = nil
	}
	for _, id := range w.acked {
		if !to.report(ctx, taskReport{task: w.id, id: id}) {
			return false
		}
	}
	w.acked = w.acked[:0]
	for _, rep := range w.exported {
		if !to.exported(ctx, rep) {
			return false
		}
	}
	w.exported = w.exported[:0]
	return true
}
