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
	"github.com/eoflow/pipeline/internal/fault"
	"github.com/eoflow/pipeline/internal/mutant"
	"github.com/eoflow/pipeline/metrics"
	"github.com/eoflow/pipeline/operator"
	"github.com/eoflow/pipeline/sink"
	"github.com/eoflow/pipeline/state"
)

// sinkTask is the graph's last task: it hands every message to the
// producers and, at each barrier, seals the epoch.
//
// Under exactly_once one Kafka transaction per epoch holds the epoch's
// outputs, dead letters, state changes and, last, the checkpoint record.
// Under at_least_once outputs go through an idempotent producer that is
// flushed before the internal topics' transaction (state changes and the
// checkpoint record) commits, so a checkpoint never covers an output that
// could still be lost.
//
// The sink only produces. When barrier N has arrived from every input it
// produces checkpoint record N into the transaction, acks N with its
// account of the epoch, and holds whatever arrives after barrier N until
// the coordinator loop says epoch N+1 is open (docs/exactly-once.md, the
// hold-back rule). Every epoch begins, prepares, commits or aborts through
// the loop's epoch machine (twophase.Machine), while the graph goes on.
type sinkTask struct {
	id checkpoint.TaskID
	// txn is the epoch's transaction (nil under at_most_once): state
	// changes, shuffled records and checkpoint records go there. outputs
	// is where outputs, dead letters and late records go: the same
	// transaction under exactly_once, else the plain producer.
	txn     transaction
	outputs producer
	// own lays out the job's own records; the mode decides.
	own     ownRecords
	inputs  <-chan batch
	nInputs int
	reports chan<- taskReport
	// opened says which epoch is open once the one sealed is done
	// (coordinatorLoop.announce).
	opened <-chan checkpoint.ID
	// newRecord fills the job-wide fields of checkpoint N.
	newRecord func(id checkpoint.ID, offsets []checkpoint.SourceOffset, state []checkpoint.StateSummary, et *checkpoint.EventTime) *checkpoint.Record
	// tables cuts the tables at the seal (tableSet.cut): their positions,
	// for the record, and the dead letters of their records before them,
	// for the epoch.
	tables func() ([]checkpoint.TableOffsets, []*kgo.Record, []checkpoint.SourceOffset)
	// timed: the job has event time, and every checkpoint record carries
	// the barrier's.
	timed   bool
	now     func() time.Time
	log     *slog.Logger
	faults  *fault.Injector
	metrics *metrics.Metrics
	epoch   epochStats
	// limits say how large a record each topic accepts (fitRecord), and
	// deadLetterTopic is the dead-letter topic of each sink's topic.
	limits          sink.Limits
	deadLetterTopic map[string]string
	// deadLetterLog rate-limits the warnings of fitRecord with the
	// plan's dead letters.
	deadLetterLog *deadLetterLog

	align aligner
	// aligned is barrier N once it arrived from every input, until run
	// seals the epoch; sealed is N from then until epoch N+1 is open.
	// Meanwhile every input stays blocked in the aligner, so what arrives
	// is held, not produced: it belongs to epoch N+1.
	aligned *barrier
	sealed  checkpoint.ID
	// deferred is only ever set by a mutant (internal/mutant).
	deferred []*kgo.Record
	// planted is a bug a test put in (plantedbug.go; none outside tests).
	planted plantedBug
}

// producer is where the sink hands records to Kafka.
type producer interface {
	Produce(ctx context.Context, rec *kgo.Record)
}

// ownRecords lays out the job's own records in its internal topics:
// under which key its checkpoint records go, in which partition each
// state record goes, and what records, if any, join an epoch besides its
// checkpoint record when the sink seals it with barrier b, and whether
// the checkpoint record holds the records joins as of event time hold
// (heldInRecord; a group member writes them per source partition among
// sealed's records instead: groupheld.go). Single mode has one layout
// (singleRecords), a group member another (memberRecords).
type ownRecords interface {
	checkpointKey() string
	placeState(rec *kgo.Record)
	sealed(topic string, b *barrier) []*kgo.Record
	heldInRecord() bool
}

// singleRecords is single mode's layout: checkpoint records under the
// job's name, state records as the store keyed them, nothing else.
type singleRecords struct{}

func (singleRecords) checkpointKey() string                 { return "" }
func (singleRecords) placeState(*kgo.Record)                {}
func (singleRecords) sealed(string, *barrier) []*kgo.Record { return nil }
func (singleRecords) heldInRecord() bool                    { return true }

// maxHeldWhileCommitting bounds what the sink takes in while an epoch
// commits: past it the sink stops reading, and the graph waits as it did
// before commits ran beside it. At half a million records a second a
// commit of a few milliseconds holds a few thousand.
const maxHeldWhileCommitting = 1 << 16

func (s *sinkTask) run(ctx context.Context) error {
	to := chanLinks{reports: s.reports}
	s.epoch.reset()
	for {
		inputs := s.inputs
		if s.sealed != 0 && s.align.heldMsgs >= maxHeldWhileCommitting {
			inputs = nil // enough held: let the graph wait
		}
		select {
		case <-ctx.Done():
			return nil
		case b := <-inputs:
			if err := s.handle(ctx, b); err != nil {
				return err
			}
		case e := <-s.opened:
			if err := s.open(ctx, e); err != nil {
				return err
			}
		}
		if on, err := s.sealAligned(ctx, to); !on || err != nil {
			return err
		}
	}
}

// sealAligned seals the epoch whose barrier has arrived from every input,
// if one has, and acks it to the coordinator loop. It reports false when
// ctx ended.
func (s *sinkTask) sealAligned(ctx context.Context, to links) (bool, error) {
	b := s.aligned
	if b == nil {
		return true, nil
	}
	s.aligned = nil
	rep, err := s.seal(ctx, b)
	if !to.report(ctx, rep) {
		return false, nil
	}
	if err != nil {
		return true, fmt.Errorf("preparing checkpoint %d: %w", b.id, err)
	}
	return true, nil
}

// open releases what the sink held since it sealed the epoch before e:
// epoch e is open at every participant now, and what arrived meanwhile is
// its, in the order it arrived.
func (s *sinkTask) open(ctx context.Context, e checkpoint.ID) error {
	if s.sealed == 0 || e != s.sealed+1 {
		return fmt.Errorf("sink: told epoch %d is open while holding after epoch %d", e, s.sealed)
	}
	s.sealed = 0
	if mutant.On("checkpoint-record-after-commit") {
		// The bug: checkpoint record N goes into transaction N+1.
		for _, rec := range s.deferred {
			s.txn.Produce(ctx, rec)
		}
		s.deferred = nil
	}
	for _, hb := range s.align.release() {
		if err := s.handle(ctx, hb); err != nil {
			return err
		}
	}
	return nil
}

// handle processes one input batch; once barrier N has arrived from every
// input, aligned is set and the inputs stay blocked.
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
			s.outputs.Produce(ctx, rec)
			s.epoch.output(rec)
		case msgShuffle:
			s.txn.Produce(ctx, s.stamp(m.rec, now))
		case msgState:
			for i := range m.changes.len() {
				rec := m.changes.record(i)
				s.own.placeState(rec)
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
			return s.onBarrier(b.from, m.barrier)
		}
		return nil
	})
}

func (s *sinkTask) onBarrier(from int, b *barrier) error {
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

// seal ends epoch N at the sink: checkpoint record N joins the
// transaction as its last record, and the report acks barrier N with the
// epoch's account (or declines it: the checkpoint record cannot be
// written). The epoch's stats go with it; the sink counts epoch N+1 from
// here.
func (s *sinkTask) seal(ctx context.Context, b *barrier) (taskReport, error) {
	rep := taskReport{task: s.id, id: b.id}
	var et *checkpoint.EventTime
	if s.timed {
		et = recordEventTime(b.watermark, b.times)
	}
	state := mergeState(b.state)
	rec := s.newRecord(b.id, b.offsets, state, et)
	if len(b.held) > 0 && s.own.heldInRecord() {
		var h operator.Hold
		for _, r := range b.held {
			h.Add(r)
		}
		rec.Held = operator.AppendHold(nil, &h)
	}
	var tableCommits []checkpoint.SourceOffset
	if s.tables != nil {
		var dls []*kgo.Record
		rec.Tables, dls, tableCommits = s.tables()
		now := s.now()
		for _, dl := range dls {
			out := s.stamp(s.fitRecord(message{kind: msgDeadLetter, rec: dl}), now)
			s.outputs.Produce(ctx, out)
			s.epoch.output(out)
		}
	}
	recs, err := checkpointRecords(rec, s.own.checkpointKey(), s.limits, s.metrics)
	if err != nil {
		rep.err = err
		return rep, err
	}
	for _, rec := range recs {
		if mutant.On("checkpoint-record-after-commit") {
			s.deferred = append(s.deferred, rec)
			continue
		}
		s.txn.Produce(ctx, rec)
	}
	for _, extra := range s.own.sealed(recs[0].Topic, b) {
		s.txn.Produce(ctx, extra)
	}
	rep.epoch = &sealedEpoch{offsets: b.offsets, eventTime: et, tables: rec.Tables, held: b.held, tableCommits: tableCommits, state: state, stats: s.epoch}
	s.epoch = epochStats{}
	s.sealed = b.id
	if mutant.On("sink-early-release") || s.planted == plantedEarlyRelease {
		// The bug: what arrived after barrier N goes into transaction N,
		// before the loop says N+1 is open.
		for _, hb := range s.align.release() {
			if err := s.handle(ctx, hb); err != nil {
				return rep, err
			}
		}
	}
	return rep, nil
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
	alignStart  time.Time
	// sampled input timestamps of outputs, for end-to-end latency: one
	// in sampleEvery keeps the cost off the hot path.
	sampled []time.Time
}

type flowCount struct{ records, bytes int }

const sampleEvery = 16

func (e *epochStats) reset() {
	clear(e.flows)
	e.outputs, e.stateBytes, e.statePieces, e.sampled = 0, 0, 0, e.sampled[:0]
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
