package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/checkpoint/kstore"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/internal/fault"
	"github.com/eoflow/pipeline/internal/twophasev1"
	"github.com/eoflow/pipeline/metrics"
	"github.com/eoflow/pipeline/sink"
	"github.com/eoflow/pipeline/state"
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
	txn       transaction    // nil under at_most_once
	plain     outputProducer // outputs unless exactly_once
	// driver commits each epoch through the two-phase commit: the
	// transaction as the decision log and, under at_least_once, the
	// output producer. nil under at_most_once. The sink only produces
	// records; every epoch begins, prepares, commits or aborts through
	// the driver.
	driver  *twophasev1.Driver
	inputs  <-chan batch
	nInputs int
	reports chan<- taskReport
	commits <-chan checkpoint.ID
	results chan<- commitResult
	// newRecord fills the job-wide fields of checkpoint N.
	newRecord func(id checkpoint.ID, offsets []checkpoint.SourceOffset, state []checkpoint.StateSummary, et *checkpoint.EventTime) *checkpoint.Record
	// timed: the job has event time, and every checkpoint record carries
	// the barrier's.
	timed   bool
	now     func() time.Time
	log     *slog.Logger
	faults  *fault.Injector
	metrics *metrics.Metrics
	epoch   epochStats
	// committed is told the offsets of every committed checkpoint.
	committed func([]checkpoint.SourceOffset)
	// limits say how large a record each topic accepts (fitRecord), and
	// deadLetterTopic is the dead-letter topic of each sink's topic.
	limits          sink.Limits
	deadLetterTopic map[string]string
	// deadLetterLog rate-limits the warnings of fitRecord with the
	// plan's dead letters.
	deadLetterLog *deadLetterLog

	align aligner
	// inflight is the outcome of the epoch committing on its own
	// goroutine; nil while none is. Meanwhile every input stays blocked
	// in the aligner, so what arrives is held, not produced: it belongs to
	// the next transaction, which begins only when this one has ended.
	inflight chan error
	// aligned is barrier N once it arrived from every input, until run
	// starts its commit.
	aligned *barrier
	// beforeCommit, if set, runs on the committing goroutine before each
	// commit (tests: hold a commit open and watch the graph go on).
	beforeCommit func(checkpoint.ID)

	// Group mode: the key of the member's checkpoint records, how the
	// epoch's barrier offsets join its transaction, and the keyed work's
	// layout (state records go to their key group's partition).
	recordKey     string
	commitOffsets func(ctx context.Context, offsets []checkpoint.SourceOffset) error
	shuffle       *shuffle
	// ackKey is the key of this member's acks of a group savepoint's
	// pause.
	ackKey string
}

// maxHeldWhileCommitting bounds what the sink takes in while an epoch
// commits: past it the sink stops reading, and the graph waits as it did
// before commits ran beside it. At half a million records a second a
// commit of a few milliseconds holds a few thousand.
const maxHeldWhileCommitting = 1 << 16

func (s *sinkTask) run(ctx context.Context) error {
	s.epoch.reset()
	// The committing goroutine is this task's: it ends once ctx does, and
	// the task waits for it.
	defer func() {
		if s.inflight != nil {
			<-s.inflight
		}
	}()
	for {
		inputs := s.inputs
		if s.inflight != nil && s.align.heldMsgs >= maxHeldWhileCommitting {
			inputs = nil // enough held: let the graph wait
		}
		select {
		case <-ctx.Done():
			return nil
		case b := <-inputs:
			if err := s.handle(ctx, b); err != nil {
				return err
			}
		case err := <-s.inflight:
			s.inflight = nil
			if err != nil {
				return err
			}
			// Transaction N ended and N+1 began: what was held meanwhile
			// is N+1's, in the order it arrived.
			for _, hb := range s.align.release() {
				if err := s.handle(ctx, hb); err != nil {
					return err
				}
			}
		}
		if b := s.aligned; b != nil && s.inflight == nil {
			// Every input is blocked now, and stays so until the commit's
			// outcome reaches this loop: the graph goes on while epoch N
			// commits, and the sink holds what comes meanwhile (DESIGN §2,
			// step 3).
			s.aligned = nil
			inflight := make(chan error, 1)
			s.inflight = inflight
			go func() { inflight <- s.commit(ctx, b) }()
		}
	}
}

// handle processes one input batch; once barrier N has arrived from every
// input it commits epoch N and replays what it held back meanwhile.
func (s *sinkTask) handle(ctx context.Context, b batch) error {
	if s.txn == nil {
		// at_most_once: no commit to wait for; count each batch as sent.
		defer s.epoch.publish(s.metrics, s.now())
	}
	now := s.now() // for the timestamps' check: a batch takes far less than its margin
	return s.align.each(b, func(m message) error {
		switch m.kind {
		case msgRecord, msgDeadLetter, msgLate:
			rec := s.stamp(s.fitRecord(m), now)
			if s.guarantee == config.ExactlyOnce {
				s.txn.Produce(ctx, rec)
			} else {
				s.plain.Produce(ctx, rec)
			}
			s.epoch.output(rec)
		case msgShuffle:
			s.txn.Produce(ctx, s.stamp(m.rec, now))
			s.epoch.shuffled++
		case msgState:
			for i := range m.changes.len() {
				rec := m.changes.record(i)
				if s.shuffle != nil {
					s.shuffle.place(rec)
				}
				if !s.limits.Fits(rec) {
					// The store split every value it could: this one
					// would fail the checkpoint at every attempt.
					return stateTooLarge(rec, s.limits, s.metrics)
				}
				s.txn.Produce(ctx, rec)
				s.epoch.stateBytes += int64(len(rec.Key) + len(rec.Value))
				if state.IsPiece(rec.Key) {
					s.epoch.statePieces++
				}
				if err := s.faults.Hit(fault.WhileWritingState); err != nil {
					return err
				}
			}
		case msgBarrier:
			return s.onBarrier(ctx, b.from, m.barrier)
		}
		return nil
	})
}

func (s *sinkTask) onBarrier(ctx context.Context, from int, b *barrier) error {
	if !s.align.pending() {
		s.epoch.alignStart = s.now()
	}
	done, err := s.align.arrive(from, b)
	if err != nil || done == nil {
		return err
	}
	s.aligned = done
	return nil
}

// commit prepares epoch N (checkpoint record N joins the transaction as
// its last record, and everything is flushed), acks barrier N, waits for
// the coordinator's go and commits: the transaction's commit is the
// decision, after which the driver begins epoch N+1. It runs on a
// goroutine of its own, and owns the producers, the driver and the
// epoch's stats until it returns: the sink's loop only holds inputs back
// meanwhile. Everything the sink received after barrier N belongs to
// epoch N+1.
func (s *sinkTask) commit(ctx context.Context, b *barrier) error {
	prepErr := s.prepare(ctx, b)
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
	if s.beforeCommit != nil {
		s.beforeCommit(id)
	}
	if err := s.faults.Hit(fault.BeforeCommit); err != nil {
		return err
	}
	res := s.decide(ctx, b)
	select {
	case s.results <- res:
	case <-ctx.Done():
	}
	if res.err != nil {
		return fmt.Errorf("committing checkpoint %d: %w", id, res.err)
	}
	return s.faults.Hit(fault.AfterCommit)
}

// prepare produces checkpoint record N into epoch N, last, and prepares
// the epoch at every participant: everything of it is on the brokers,
// invisible until the decision.
func (s *sinkTask) prepare(ctx context.Context, b *barrier) error {
	var et *checkpoint.EventTime
	if s.timed {
		et = recordEventTime(b.watermark, b.times)
	}
	recs, err := checkpointRecords(s.newRecord(b.id, b.offsets, mergeState(b.state), et), s.recordKey, s.limits, s.metrics)
	if err != nil {
		return err
	}
	for _, rec := range recs {
		s.txn.Produce(ctx, rec)
	}
	if s.ackKey != "" && b.pausedFor != "" {
		// Every source paused before this barrier: what they shuffled
		// commits with this epoch, and nothing after it.
		s.txn.Produce(ctx, &kgo.Record{Topic: recs[0].Topic, Key: []byte(s.ackKey), Value: []byte(b.pausedFor)})
	}
	if err := s.driver.Prepare(ctx, b.id); err != nil {
		return err
	}
	if s.commitOffsets != nil {
		// After the flush: the transaction holds records (the checkpoint
		// record at least), so the client will end it at the
		// coordinator, and the offsets with it.
		return s.commitOffsets(ctx, b.offsets)
	}
	return nil
}

// checkpointRecords are the Kafka records of checkpoint rec under key
// ("": the job's name), in pieces if it is larger than a record of the
// checkpoint topic (kstore.CheckpointRecords). One that cannot be written
// even so stops the job (ErrUnfit): every attempt would fail alike.
func checkpointRecords(rec *checkpoint.Record, key string, limits sink.Limits, m *metrics.Metrics) ([]*kgo.Record, error) {
	if key == "" {
		key = rec.Job
	}
	topic := checkpoint.TopicName(rec.Job)
	recs, err := kstore.CheckpointRecords(rec, key, limits.Payload(topic))
	if errors.Is(err, kstore.ErrRecordTooLarge) {
		if m != nil {
			m.InternalRecordTooLarge(topic)
		}
		return nil, fmt.Errorf("%w: %w (max.message.bytes %d): raise max.message.bytes of %s", ErrUnfit, err, limits.Batch(topic), topic)
	}
	return recs, err
}

// decide commits prepared epoch N (the coordinator handed out its commit)
// and reports what the epoch was.
func (s *sinkTask) decide(ctx context.Context, b *barrier) commitResult {
	alignment := s.now().Sub(s.epoch.alignStart)
	commitStart := s.now()
	err := s.driver.Commit(ctx, b.id)
	at := s.now()
	res := commitResult{id: b.id, err: err, at: at, offsets: b.offsets, alignment: alignment, commit: at.Sub(commitStart),
		stateBytes: s.epoch.stateBytes, outputs: s.epoch.outputs}
	if s.timed {
		res.eventTime = recordEventTime(b.watermark, b.times)
	}
	if err != nil {
		return res
	}
	// The epoch's outputs are visible now: count them, and how long
	// their inputs took to get here. The driver began epoch N+1.
	s.metrics.TransactionCommitted(res.commit)
	s.metrics.TransactionBegan()
	s.epoch.publish(s.metrics, at)
	for _, st := range mergeState(b.state) {
		s.metrics.SetState(st.Operator, int64(st.Keys), int64(st.Bytes))
	}
	if s.committed != nil {
		s.committed(b.offsets)
	}
	return res
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

// epochStats is what the sink measures of the epoch it is filling, and
// publishes when the epoch's outputs become visible.
type epochStats struct {
	flows      map[string]*flowCount
	outputs    int64
	stateBytes int64
	// statePieces counts the state records that are pieces of a value.
	statePieces int
	// shuffled counts the records sent to the repartition topic.
	shuffled   int64
	alignStart time.Time
	// sampled input timestamps of outputs, for end-to-end latency: one
	// in sampleEvery keeps the cost off the hot path.
	sampled []time.Time
}

type flowCount struct{ records, bytes int }

const sampleEvery = 16

func (e *epochStats) reset() {
	clear(e.flows)
	e.outputs, e.stateBytes, e.shuffled, e.statePieces, e.sampled = 0, 0, 0, 0, e.sampled[:0]
}

func (e *epochStats) output(r *kgo.Record) {
	if e.flows == nil {
		e.flows = map[string]*flowCount{}
	}
	f := e.flows[r.Topic]
	if f == nil {
		f = &flowCount{}
		e.flows[r.Topic] = f
	}
	f.records++
	f.bytes += len(r.Key) + len(r.Value)
	if e.outputs%sampleEvery == 0 && !r.Timestamp.IsZero() {
		e.sampled = append(e.sampled, r.Timestamp)
	}
	e.outputs++
}

// publish reports the epoch's outputs as visible at the given time, and
// starts counting the next epoch.
func (e *epochStats) publish(m *metrics.Metrics, visible time.Time) {
	for topic, f := range e.flows {
		if f.records > 0 {
			m.Output(topic).Add(f.records, f.bytes)
		}
	}
	for _, ts := range e.sampled {
		m.EndToEnd(ts, visible)
	}
	m.StatePiecesWritten(e.statePieces)
	e.reset()
}
