package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/internal/fault"
	"github.com/eoflow/pipeline/sink"
	"github.com/eoflow/pipeline/twophase"
)

// sinkTask is the graph's last task: it hands every message to the
// producers and, at each barrier, commits the epoch.
//
// Under exactly_once one Kafka transaction per epoch holds the epoch's
// outputs, dead letters, state changes and, last, the checkpoint record.
// Under at_least_once outputs go through an idempotent producer that is
// flushed before the internal topics' transaction (state changes and the
// checkpoint record) commits, so a checkpoint never covers an output that
// could still be lost.
type sinkTask struct {
	id        checkpoint.TaskID
	guarantee config.Guarantee
	txn       *sink.Txn   // nil under at_most_once
	plain     *sink.Plain // outputs unless exactly_once
	// driver commits each epoch through the two-phase commit: the
	// decision log dl (the transaction) and, under at_least_once, the
	// output producer. nil under at_most_once.
	driver  *twophase.Driver
	dl      *kafkaDecisionLog
	inputs  <-chan batch
	nInputs int
	reports chan<- taskReport
	commits <-chan checkpoint.ID
	results chan<- commitResult
	// newRecord fills the job-wide fields of checkpoint N.
	newRecord func(id checkpoint.ID, offsets []checkpoint.SourceOffset, state []checkpoint.StateSummary) *checkpoint.Record
	now       func() time.Time
	log       *slog.Logger
	faults    *fault.Injector
	// committed is told the offsets of every committed checkpoint.
	committed func([]checkpoint.SourceOffset)

	// alignment of barrier N over the inputs
	blocked  []bool
	arrived  int
	held     []batch // messages of blocked inputs, in arrival order
	aligning *barrier
}

func (s *sinkTask) run(ctx context.Context) error {
	s.blocked = make([]bool, s.nInputs)
	if s.txn != nil { // nil: at_most_once, no checkpoints
		if err := s.txn.Begin(); err != nil {
			return err
		}
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case b := <-s.inputs:
			if err := s.handle(ctx, b); err != nil {
				return err
			}
		}
	}
}

// handle processes one input batch; once barrier N has arrived from every
// input it commits epoch N and replays what it held back meanwhile.
func (s *sinkTask) handle(ctx context.Context, b batch) error {
	for i, m := range b.msgs {
		if s.blocked[b.from] {
			s.held = append(s.held, batch{from: b.from, msgs: b.msgs[i:]})
			return nil
		}
		switch m.kind {
		case msgRecord, msgDeadLetter:
			if s.guarantee == config.ExactlyOnce {
				s.txn.Produce(ctx, m.rec)
			} else {
				s.plain.Produce(ctx, m.rec)
			}
		case msgState:
			s.txn.Produce(ctx, m.rec)
			if err := s.faults.Hit(fault.WhileWritingState); err != nil {
				return err
			}
		case msgBarrier:
			if err := s.onBarrier(ctx, b.from, m.barrier); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *sinkTask) onBarrier(ctx context.Context, from int, b *barrier) error {
	if s.aligning == nil {
		s.aligning = &barrier{id: b.id, offsets: b.offsets}
	} else if s.aligning.id != b.id {
		return fmt.Errorf("sink: barrier %d from input %d while aligning %d", b.id, from, s.aligning.id)
	}
	s.aligning.state = append(s.aligning.state, b.state...)
	s.blocked[from] = true
	s.arrived++
	if s.arrived < s.nInputs {
		return nil
	}
	done := s.aligning
	s.aligning, s.arrived = nil, 0
	if err := s.commit(ctx, done); err != nil {
		return err
	}
	for i := range s.blocked {
		s.blocked[i] = false
	}
	held := s.held
	s.held = nil
	for _, hb := range held {
		if err := s.handle(ctx, hb); err != nil {
			return err
		}
	}
	return nil
}

// commit prepares epoch N (the checkpoint record joins the transaction
// and everything is flushed), acks barrier N, waits for the coordinator's
// go, and commits: the transaction's commit is the decision. Everything the
// sink received after barrier N waits meanwhile: it belongs to transaction
// N+1, which begins only when N has ended.
func (s *sinkTask) commit(ctx context.Context, b *barrier) error {
	s.dl.stage(s.newRecord(b.id, b.offsets, mergeState(b.state)))
	prepErr := s.driver.Prepare(ctx, twophase.Epoch(b.id))
	select {
	case s.reports <- taskReport{task: s.id, id: b.id, err: prepErr}:
	case <-ctx.Done():
		return nil
	}
	if prepErr != nil {
		return fmt.Errorf("preparing checkpoint %d: %w", b.id, prepErr)
	}
	var id checkpoint.ID
	select {
	case id = <-s.commits:
	case <-ctx.Done():
		return nil
	}
	if id != b.id {
		return fmt.Errorf("sink: asked to commit checkpoint %d while holding %d", id, b.id)
	}
	err := s.faults.Hit(fault.BeforeCommit)
	if err == nil {
		err = s.driver.Commit(ctx, twophase.Epoch(id))
	}
	select {
	case s.results <- commitResult{id: id, err: err, at: s.now()}:
	case <-ctx.Done():
	}
	if err != nil {
		return fmt.Errorf("committing checkpoint %d: %w", id, err)
	}
	if s.committed != nil {
		s.committed(b.offsets)
	}
	if err := s.faults.Hit(fault.AfterCommit); err != nil {
		return err
	}
	return s.txn.Begin()
}

// mergeState adds up the per-worker summaries of each operator.
func mergeState(parts []checkpoint.StateSummary) []checkpoint.StateSummary {
	index := map[string]int{}
	var out []checkpoint.StateSummary
	for _, p := range parts {
		if i, ok := index[p.Operator]; ok {
			out[i].Keys += p.Keys
			out[i].Bytes += p.Bytes
			continue
		}
		index[p.Operator] = len(out)
		out = append(out, p)
	}
	return out
}
