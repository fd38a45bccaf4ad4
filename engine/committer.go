package engine

import (
	"context"
	"time"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/internal/fault"
	"github.com/eoflow/pipeline/twophase"
)

// committer makes the participant calls the epoch machine asks for: the
// Kafka I/O of the commit path (flush, EndTransaction, InitProducerId,
// reading the last checkpoint), which blocks. Calls run one at a time, in
// the order the machine emitted them, so a participant never sees two at
// once nor one out of epoch order. While the task graph runs they run on
// the committer's goroutine (run), which the coordinator loop owns and
// waits for, so that the loop goes on feeding acks, ticks and requests
// meanwhile; before the graph starts and after it stopped the loop makes
// them itself (coordinatorLoop.settle).
type committer struct {
	parts map[string]twophase.Participant
	// txn is the decision log: its LastDecided is the checkpoint to
	// restore, and (group mode) commitOffsets adds an epoch's source
	// offsets to its transaction once it is flushed.
	txn           transaction
	commitOffsets func(ctx context.Context, offsets []checkpoint.SourceOffset) error
	// faults and beforeCommit (tests) act around the decision of an
	// epoch of the task graph.
	faults       *fault.Injector
	beforeCommit func(checkpoint.ID)
	now          func() time.Time

	// queue holds the calls emitted and not started, in order; busy is
	// set while one is on the goroutine, whose outcome comes back on
	// outcomes (room for one: the next call goes out only after it).
	queue    []call
	busy     bool
	calls    chan call
	outcomes chan outcome
}

// call is one participant call, with what the engine adds to it.
type call struct {
	a twophase.Action
	// offsets are the source offsets the decision log's Prepare adds to
	// its transaction in group mode.
	offsets []checkpoint.SourceOffset
	// graph: the epoch's records came through the task graph (not a
	// savepoint's import); its decision passes the fault points.
	graph bool
}

// outcome is what a call returned, as the machine's message.
type outcome struct {
	c   call
	msg twophase.Msg
	// rec is what ActReadDecision read: the checkpoint to restore.
	rec *checkpoint.Record
	// start is when the call began (a decision's commit time is
	// msg.Now-start).
	start time.Time
	// fault is an injected failure after a decision landed: the attempt
	// ends with it once the outcome is in.
	fault error
}

// newCommitter returns the committer of txn (the decision log); add the
// other participants to parts.
func newCommitter(txn transaction) *committer {
	return &committer{
		parts:    map[string]twophase.Participant{txn.Name(): txn},
		txn:      txn,
		now:      time.Now,
		calls:    make(chan call, 1),
		outcomes: make(chan outcome, 1),
	}
}

// run makes the calls handed to it until ctx ends.
func (c *committer) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case cl := <-c.calls:
			c.outcomes <- c.do(ctx, cl)
		}
	}
}

// do makes one call and returns its outcome.
func (c *committer) do(ctx context.Context, cl call) outcome {
	a := cl.a
	o := outcome{c: cl, start: c.now()}
	p := c.parts[a.Participant]
	var err error
	switch a.Kind {
	case twophase.ActRecover:
		var inDoubt []twophase.Epoch
		inDoubt, err = p.Recover(ctx)
		o.msg = twophase.Outcome(a, err)
		o.msg.InDoubt = inDoubt
	case twophase.ActReadDecision:
		o.rec, err = c.txn.LastDecided(ctx)
		o.msg = twophase.Outcome(a, err)
		if o.rec != nil {
			o.msg.Epoch = o.rec.ID
		}
	case twophase.ActBegin:
		err = p.Begin(ctx, a.Epoch)
	case twophase.ActPrepare:
		err = p.Prepare(ctx, a.Epoch)
		if err == nil && p == c.txn && c.commitOffsets != nil {
			// After the flush: the transaction holds records (the
			// checkpoint record at least), so the client ends it at the
			// coordinator, and the offsets with it.
			err = c.commitOffsets(ctx, cl.offsets)
		}
	case twophase.ActCommit:
		if p != c.txn || !cl.graph {
			err = p.Commit(ctx, a.Epoch)
			break
		}
		if c.beforeCommit != nil {
			c.beforeCommit(a.Epoch)
		}
		if err = c.faults.Hit(fault.BeforeCommit); err != nil {
			break // not attempted: recovery's fence aborts the epoch
		}
		if err = p.Commit(ctx, a.Epoch); err == nil {
			o.fault = c.faults.Hit(fault.AfterCommit)
		}
	case twophase.ActAbort:
		err = p.Abort(ctx, a.Epoch)
	}
	if o.msg.Type == 0 {
		o.msg = twophase.Outcome(a, err)
	}
	o.msg.Now = c.now()
	return o
}

// next is the call to hand to the goroutine now, if any: the oldest, once
// the one before it returned.
func (c *committer) next() (chan<- call, call) {
	if c.busy || len(c.queue) == 0 {
		return nil, call{}
	}
	return c.calls, c.queue[0]
}

// sent records that next's call went to the goroutine.
func (c *committer) sent() {
	c.queue = c.queue[1:]
	c.busy = true
}
