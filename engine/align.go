package engine

import (
	"fmt"

	"github.com/eoflow/pipeline/window"
)

// aligner aligns checkpoint barriers over a task's inputs. Once an input
// has delivered barrier N, its later messages are held back until every
// input has delivered N: only then is the task's state exactly that of the
// input before barrier N on every input. The task then snapshots, and the
// held messages are replayed in the order they arrived. Workers align over
// the source tasks, the sink over the workers.
type aligner struct {
	inputs   int
	blocked  []bool
	arrived  int
	held     []batch  // messages of blocked inputs, in arrival order
	heldMsgs int      // how many messages held holds
	aligning *barrier // merged so far; nil when no barrier is pending
}

func newAligner(inputs int) aligner {
	return aligner{inputs: inputs, blocked: make([]bool, inputs)}
}

// each calls fn for every message of b that may be processed now, in
// order, and holds back the rest of the batch as soon as b's input is
// blocked (fn may block it, by delivering a barrier to arrive). A batch
// handled to the end goes back for reuse (recycleBatch): nothing keeps a
// part of its slice then, where a held rest is a subslice of it.
func (a *aligner) each(b batch, fn func(m message) error) error {
	for i, m := range b.msgs {
		if a.blocked[b.from] {
			a.held = append(a.held, batch{from: b.from, msgs: b.msgs[i:]})
			a.heldMsgs += len(b.msgs) - i
			return nil
		}
		if err := fn(m); err != nil {
			return err
		}
	}
	recycleBatch(b.msgs)
	return nil
}

// pending reports whether a barrier has arrived from some inputs only.
func (a *aligner) pending() bool { return a.aligning != nil }

// arrive records barrier b from input from and blocks that input. When
// every input has delivered it, it returns the merged barrier: the union
// of the inputs' source offsets and all their state summaries.
func (a *aligner) arrive(from int, b *barrier) (*barrier, error) {
	if a.aligning == nil {
		a.aligning = &barrier{id: b.id, watermark: window.NoWatermark}
	} else if a.aligning.id != b.id {
		return nil, fmt.Errorf("barrier %d from input %d while aligning barrier %d", b.id, from, a.aligning.id)
	}
	if a.blocked[from] {
		return nil, fmt.Errorf("barrier %d arrived twice from input %d", b.id, from)
	}
	if a.arrived == 0 {
		a.aligning.pausedFor = b.pausedFor
	} else if a.aligning.pausedFor != b.pausedFor {
		a.aligning.pausedFor = "" // paused only when every input was
	}
	a.aligning.unionPartitions(b)
	a.aligning.times = unionTimes(a.aligning.times, b.times)
	a.aligning.shuffled = unionShuffled(a.aligning.shuffled, b.shuffled)
	a.aligning.watermark = max(a.aligning.watermark, b.watermark) // the same from every worker
	a.aligning.state = append(a.aligning.state, b.state...)
	a.blocked[from] = true
	a.arrived++
	if a.arrived < a.inputs {
		return nil, nil
	}
	done := a.aligning
	a.aligning, a.arrived = nil, 0
	return done, nil
}

// release unblocks every input and hands back what was held meanwhile, in
// arrival order, for the task to process now.
func (a *aligner) release() []batch {
	clear(a.blocked)
	held := a.held
	a.held, a.heldMsgs = nil, 0
	return held
}

// unionPartitions adds b's source offsets and held records (asof.go) to
// the union so far, once per partition: a source's barrier carries its
// own partitions', and the workers' barriers reaching the sink each carry
// every source's.
func (u *barrier) unionPartitions(b *barrier) {
	if len(u.offsets) == 0 {
		u.offsets = append(u.offsets, b.offsets...)
		u.held = append(u.held, b.held...)
		return
	}
	seen := make(map[partitionKey]bool, len(u.offsets))
	for _, o := range u.offsets {
		seen[partitionKey{o.Topic, o.Partition}] = true
	}
	for _, o := range b.offsets {
		if !seen[partitionKey{o.Topic, o.Partition}] {
			u.offsets = append(u.offsets, o)
		}
	}
	for _, r := range b.held {
		if !seen[partitionKey{r.Topic, r.Partition}] {
			u.held = append(u.held, r)
		}
	}
}

type partitionKey struct {
	topic     string
	partition int32
}
