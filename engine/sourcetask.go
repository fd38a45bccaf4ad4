package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/internal/fault"
	"github.com/eoflow/pipeline/internal/mutant"
	"github.com/eoflow/pipeline/metrics"
	"github.com/eoflow/pipeline/source"
	"github.com/eoflow/pipeline/window"
)

// pollBatch is the most records a source hands on per poll.
const pollBatch = 1000

// sourceTask reads its partitions, runs the stateless steps on each record,
// and routes the result to the worker owning its key group. Between polls
// it injects the barriers the coordinator asked for.
type sourceTask struct {
	index  int
	id     checkpoint.TaskID
	reader recordReader
	// router evaluates one input record and says which worker gets the
	// resulting messages: none when filtered out, dead letters when it
	// failed.
	router  *router
	workers []chan<- batch
	reports chan<- taskReport
	faults  *fault.Injector
	metrics *metrics.Metrics
	inputs  map[string]metrics.Flow // per topic, cached
	// blocked counts the time spent waiting for room in the workers'
	// channels (livestats.go).
	blocked metrics.Blocked
	// gate, when set, may hold records back unread for a while (group
	// mode's groupGate): their positions stay where they are, so the
	// next attempt reads them.
	gate sourceGate
	// dropped: records were dropped unread while paused.
	dropped bool
	// ended: the task sent the attempt's final barrier, and reads no
	// more (coordinatorLoop.finalBarrier).
	ended bool
	// planted is a bug a test put in (plantedbug.go; none outside tests).
	planted plantedBug

	mu struct {
		sync.Mutex
		pending    []checkpoint.ID    // barriers to inject, in order
		final      checkpoint.ID      // the last barrier (0: not known yet)
		cancelPoll context.CancelFunc // wakes a poll waiting for records
	}
}

// trigger asks the task to inject barrier id, the attempt's last when
// final (the task reads nothing after it). Safe from any goroutine; it
// interrupts a poll that waits for records, so an idle input never holds a
// checkpoint back.
func (s *sourceTask) trigger(id checkpoint.ID, final bool) {
	s.mu.Lock()
	s.mu.pending = append(s.mu.pending, id)
	if final {
		s.mu.final = id
	}
	if s.mu.cancelPoll != nil {
		s.mu.cancelPoll()
	}
	s.mu.Unlock()
}

func (s *sourceTask) run(ctx context.Context) error {
	out := make([][]message, len(s.workers))
	to := chanLinks{workers: s.workers, reports: s.reports, blocked: s.blocked}
	for {
		if on, err := s.step(ctx, out, to); !on || err != nil {
			return err
		}
		if s.ended {
			<-ctx.Done() // the attempt ends once the final checkpoint is done
			return nil
		}
	}
}

// step is one turn of the task: the barriers asked for since the last
// turn, if any; else one poll, whose records it routes to the workers
// (out holds each worker's share). It reports false when ctx ended.
func (s *sourceTask) step(ctx context.Context, out [][]message, to links) (bool, error) {
	s.mu.Lock()
	pending, final := s.mu.pending, s.mu.final
	s.mu.pending = nil
	pollCtx, cancel := context.WithCancel(ctx)
	s.mu.cancelPoll = cancel
	s.mu.Unlock()
	defer cancel()

	if s.ended {
		return true, nil
	}
	if len(pending) > 0 {
		for _, id := range pending {
			// The held records the tables' event time has passed go
			// first: they belong to this epoch (asof.go).
			if on, err := s.release(ctx, out, to); !on || err != nil {
				return on, err
			}
			if on, err := s.injectBarrier(ctx, id, to); !on || err != nil {
				return on, err
			}
			if s.bundlesAfterBarrier() {
				// The bug: the bundles of the epoch's inputs go out after
				// its barrier, into the next epoch.
				s.router.flushShuffle(out)
				if !s.send(ctx, out, to) {
					return false, nil
				}
			}
			if id == final {
				// Nothing after the final barrier belongs to a
				// checkpoint: the task reads no more.
				s.ended = true
				return true, nil
			}
		}
		return true, nil // a trigger may have arrived meanwhile: look again first
	}
	if s.dropped && !s.paused() {
		// Checked here too, not only when records come: the input may be
		// quiet, and a barrier wakes the poll every interval.
		return true, errPauseEnded
	}
	recs, err := s.reader.Poll(pollCtx, pollBatch)
	if err != nil {
		if ctx.Err() != nil {
			return false, nil
		}
		if errors.Is(err, context.Canceled) {
			return true, nil // woken by trigger
		}
		return true, fmt.Errorf("source %s: %w", s.id, err)
	}
	if err := s.awaitSchemas(ctx, recs, to); err != nil {
		return true, err
	}
	if err := s.route(recs, out); err != nil {
		return true, err
	}
	return s.send(ctx, out, to), nil
}

// send hands each worker its batch of out, with the repartition bundles
// filled since the last send (group mode), and reports false when ctx
// ended first. Everything routed goes out before the next barrier.
func (s *sourceTask) send(ctx context.Context, out [][]message, to links) bool {
	if !s.bundlesAfterBarrier() {
		s.router.flushShuffle(out)
	}
	for w, msgs := range out {
		if len(msgs) == 0 {
			continue
		}
		if !to.toWorker(ctx, w, batch{from: s.index, msgs: msgs}) {
			return false
		}
		out[w] = nil
	}
	return true
}

// bundlesAfterBarrier reports whether the bug of sending repartition
// bundles after the barrier of their inputs is on (plantedbug.go, or the
// mutation suite's shuffle-bundle-after-barrier).
func (s *sourceTask) bundlesAfterBarrier() bool {
	return s.planted == plantedBundleAfterBarrier || mutant.On("shuffle-bundle-after-barrier")
}

// makeRoom gives each worker's batch of out room for its share of n
// records.
func makeRoom(out [][]message, n int) {
	for w := range out {
		if out[w] == nil {
			out[w] = newBatch(batchRoom(n / len(out)))
		}
	}
}

// injectBarrier records the partitions' next offsets and sends barrier id,
// carrying them, to every worker. Everything sent before it belongs to
// epoch id; everything after, to the next.
func (s *sourceTask) injectBarrier(ctx context.Context, id checkpoint.ID, to links) (bool, error) {
	for w, b := range s.barrierBatches(id) {
		if !to.toWorker(ctx, w, b) {
			return false, nil
		}
	}
	if err := s.faults.Hit(fault.AfterBarrier); err != nil {
		return true, err
	}
	return to.report(ctx, taskReport{task: s.id, id: id}), nil
}

// sourceGate holds some of a source task's records back unread while it
// is paused.
type sourceGate interface {
	// paused reports whether records are held back now.
	paused() bool
	// holds reports whether, while paused, records of topic are held
	// back.
	holds(topic string) bool
	// pausedFor is the id of the pause in force ("": none), which the
	// barriers carry (groupsavepoint.go).
	pausedFor() string
}

// paused reports whether the gate holds records back now.
func (s *sourceTask) paused() bool { return s.gate != nil && s.gate.paused() }

// route runs the stateless steps on recs and adds what each worker gets
// to out (by worker), advancing the reader past every record.
func (s *sourceTask) route(recs []*kgo.Record, out [][]message) error {
	draining := s.paused()
	if !draining && s.dropped {
		// The pause is over, but the reader's client fetched past what
		// was dropped: only a new attempt reads it again, from the
		// positions the checkpoints kept.
		return errPauseEnded
	}
	makeRoom(out, len(recs))
	for _, rec := range recs {
		if draining && s.gate.holds(rec.Topic) {
			s.dropped = true
			continue // not read: the position stays before it
		}
		s.router.route(rec, out)
		s.reader.Advance(rec)
	}
	s.router.flushSteps()
	s.measure(recs) // after Advance: the lag is of what is left to read
	return nil
}

// errPauseEnded ends an attempt whose sources dropped records during a
// group savepoint's pause: not a failure, the next attempt reads them.
var errPauseEnded = errors.New("the sources' pause ended")

// barrierBatches is barrier id for every worker (one batch each), carrying
// the partitions' next offsets: the input prefix of epoch id.
func (s *sourceTask) barrierBatches(id checkpoint.ID) []batch {
	b := &barrier{id: id, offsets: s.reader.Positions()}
	if s.gate != nil {
		b.pausedFor = s.gate.pausedFor()
	}
	if c := s.router.clocks; c != nil {
		b.times = c.at(b.offsets)
		if sh := s.router.shuffled; sh != nil {
			b.shuffled = sh.at(s.router.p.shuffle.repartition, b.offsets)
		}
		for _, t := range b.times {
			if t.carried {
				continue
			}
			if t.MaxEventTime != window.NoWatermark {
				s.metrics.SetPartitionWatermark(t.Topic, t.Partition, t.watermark)
			}
			s.metrics.SetPartitionIdle(t.Topic, t.Partition, t.idle)
		}
	}
	out := make([]batch, len(s.workers))
	for w := range out {
		out[w] = batch{from: s.index, msgs: []message{{kind: msgBarrier, barrier: b}}}
	}
	s.router.hold.atBarrier(b)
	if s.planted == plantedLostBarrier && id%4 == 0 {
		out[0].msgs = nil // the bug: worker 0 never gets barrier id
	}
	return out
}

// measure counts what a poll read, per topic, and updates the lag of the
// partitions the reader knows it for.
func (s *sourceTask) measure(recs []*kgo.Record) {
	if s.inputs == nil {
		s.inputs = map[string]metrics.Flow{}
	}
	for _, r := range recs {
		f, ok := s.inputs[r.Topic]
		if !ok {
			f = s.metrics.Input(r.Topic)
			s.inputs[r.Topic] = f
		}
		f.Add(1, len(r.Key)+len(r.Value))
	}
	if lr, ok := s.reader.(interface{ Lags() []source.Lag }); ok {
		for _, l := range lr.Lags() {
			s.metrics.SetLag(l.Topic, l.Partition, l.Records)
		}
	}
}
