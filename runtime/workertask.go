package runtime

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
)

// keyedOperator is the stateful end of the chain as one worker runs it, on
// the key groups the worker owns.
type keyedOperator interface {
	// process applies one input and returns the output records to send on
	// (none when the operator emits only at checkpoints), or dead letters.
	process(m message) (out []*kgo.Record, deadLetters []message)
	// snapshot is called at barrier N: the outputs to emit for the epoch
	// (on_checkpoint mode), the changelog records of the keys changed
	// since the previous snapshot, and the size of the state.
	snapshot() (outputs, changes []*kgo.Record, summary []checkpoint.StateSummary)
}

// workerTask runs the keyed operator for its key groups. Its inputs are
// the source tasks; it aligns barriers over them.
type workerTask struct {
	id      checkpoint.TaskID
	index   int
	op      keyedOperator
	inputs  <-chan batch
	nInputs int
	sink    chan<- batch
	reports chan<- taskReport
	// exports says which barriers are savepoints, and exportReports takes
	// the worker's export results.
	exports       *exportRegistry
	exportReports chan<- exportReport

	align aligner
	out   []message
}

func (w *workerTask) run(ctx context.Context) error {
	w.align = newAligner(w.nInputs)
	for {
		select {
		case <-ctx.Done():
			return nil
		case b := <-w.inputs:
			if err := w.handle(ctx, b); err != nil {
				return err
			}
			if err := w.flush(ctx); err != nil {
				return err
			}
		}
	}
}

func (w *workerTask) handle(ctx context.Context, b batch) error {
	return w.align.each(b, func(m message) error {
		switch m.kind {
		case msgRecord:
			outs, dls := w.op.process(m)
			for _, r := range outs {
				w.out = append(w.out, message{kind: msgRecord, rec: r})
			}
			w.out = append(w.out, dls...)
		case msgDeadLetter:
			w.out = append(w.out, m)
		case msgBarrier:
			return w.onBarrier(ctx, b.from, m.barrier)
		default:
			return fmt.Errorf("worker %d: unexpected message kind %d", w.index, m.kind)
		}
		return nil
	})
}

func (w *workerTask) onBarrier(ctx context.Context, from int, b *barrier) error {
	done, err := w.align.arrive(from, b)
	if err != nil || done == nil {
		return err
	}
	// Every input is at barrier N: the state is that of exactly the
	// records before it. Snapshot, then send the barrier on.
	outputs, changes, summary := w.op.snapshot()
	for _, r := range outputs {
		w.out = append(w.out, message{kind: msgRecord, rec: r})
	}
	for _, r := range changes {
		w.out = append(w.out, message{kind: msgState, rec: r})
	}
	done.state = summary
	w.out = append(w.out, message{kind: msgBarrier, barrier: done})
	if err := w.flush(ctx); err != nil {
		return err
	}
	select {
	case w.reports <- taskReport{task: w.id, id: done.id}:
	case <-ctx.Done():
		return nil
	}
	if ex := w.exports.get(done.id); ex != nil {
		// A savepoint: export the whole state before any record after the
		// barrier changes it. The checkpoint does not wait for this.
		rep := exportReport{id: done.id, worker: w.index, err: ex.exportState(w.op)}
		select {
		case w.exportReports <- rep:
		case <-ctx.Done():
			return nil
		}
	}
	for _, hb := range w.align.release() {
		if err := w.handle(ctx, hb); err != nil {
			return err
		}
	}
	return nil
}

// flush sends what the worker produced so far to the sink.
func (w *workerTask) flush(ctx context.Context) error {
	if len(w.out) == 0 {
		return nil
	}
	select {
	case w.sink <- batch{from: w.index, msgs: w.out}:
		w.out = nil
	case <-ctx.Done():
	}
	return nil
}
