package engine

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/operator"
	"github.com/eoflow/pipeline/state"
)

// msgKind says what a message carries. The zero value is invalid.
type msgKind uint8

const (
	// msgRecord: an input record that passed the stateless steps, on its
	// way to a worker (source → worker), or an output record on its way to
	// the sink (worker → sink).
	msgRecord msgKind = 1 + iota
	// msgDeadLetter: a record that failed decoding or evaluation, already
	// built for the dead-letter topic. It travels the same path as records
	// so that it lands in the epoch of the input that caused it.
	msgDeadLetter
	// msgState: a snapshot's state changelog records of the epoch
	// (worker → sink), in changes.
	msgState
	// msgBarrier: checkpoint barrier N.
	msgBarrier
	// msgLate: an input record whose every window had closed at its
	// partition's watermark (eventtime.go), already built for the late
	// topic. Like a dead letter it travels the records' path, so that it
	// lands in the epoch of its input.
	msgLate
	// msgShuffle: an input record on its way to the repartition topic
	// (group mode, source side), already built. It goes into the
	// epoch's transaction under every guarantee, as state does.
	msgShuffle
)

// message is the unit on the task graph's channels, sent in batches.
type message struct {
	kind msgKind
	// target is the index of the target (plan.targets) an input record
	// goes to (source → worker).
	target uint16
	// hash is the hash of op's GroupKey (keyed jobs): the router computes
	// it for the key group, and the worker's store places the key by it.
	hash state.Hash
	// rec is the Kafka record: the input record for source → worker
	// messages, the record to produce for worker → sink messages.
	rec *kgo.Record
	// op is the input after the stateless steps (source → worker): its
	// decoded, possibly mapped, value and its group key.
	op *operator.Record
	// slab is where op came from, to give it back to once the worker is
	// done with it (nil: op is not the worker's to give back).
	slab *recordSlab
	// at is the input's event time in epoch milliseconds (source →
	// worker, jobs with event time only).
	at int64
	// wm is the watermark of the input's partition just before it
	// (source → worker, jobs with event time only): its windows that
	// end, plus allowed_lateness, at or before it are closed for it
	// (eventtime.go).
	wm      int64
	barrier *barrier
	// changes are a msgState's changelog records.
	changes *stateChanges
}

// batchPool holds the message slices of batches their receivers handled
// to the end: a source's batch for a worker and a worker's for the sink
// are one slice per batch, pointerful, and were ~30% of what a
// pass-through job allocated.
var batchPool sync.Pool // of *[]message

// newBatch is an empty message slice with room for n, from batchPool when
// it has one that large.
func newBatch(n int) []message {
	if p, _ := batchPool.Get().(*[]message); p != nil && cap(*p) >= n {
		return (*p)[:0]
	}
	return make([]message, 0, n)
}

// recycleBatch gives msgs back to batchPool; aligner.each calls it once
// its receiver (a worker, the sink) has handled every message of it and
// kept none in place (a held rest is a subslice). It clears the messages,
// so the pool pins no record.
func recycleBatch(msgs []message) {
	clear(msgs)
	msgs = msgs[:0]
	batchPool.Put(&msgs)
}

// batchRoom is the capacity to give a batch expected to hold about n
// messages: a little more, since keys and outputs do not spread evenly,
// so that it is not grown from nothing by doubling (a copy each time).
func batchRoom(n int) int { return n + n/4 + 4 }

// barrier is checkpoint N flowing through the graph. Sources fill offsets;
// workers add their state summary.
type barrier struct {
	id      checkpoint.ID
	offsets []checkpoint.SourceOffset
	state   []checkpoint.StateSummary
	// times are the partitions' event times (jobs with event time only),
	// filled by the sources like offsets; watermark is the job's
	// watermark W(N) that the workers computed from them.
	times     []eventTime
	watermark int64
	// shuffled are the times of the repartition partitions the sources
	// read (group mode's keyed side with event time); the workers'
	// watermark is the least of them.
	shuffled []shuffledTime
	// pausedFor is the group savepoint pause every source was in when it
	// sent the barrier ("" when any was not): the epoch's commit then
	// acks the pause (groupsavepoint.go).
	pausedFor string
	// held are the records the sources hold for joins as of event time
	// (asof.go), in release order per source: checkpoint state.
	held []operator.HeldRecord
}

// batch is what goes over a channel: the messages of one input, in order.
type batch struct {
	from int // index of the sending task among the receiver's inputs
	msgs []message
}
