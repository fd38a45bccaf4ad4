package engine

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/eoflow/pipeline/operator"
)

// recordChunk is how many operator.Records a slab holds: as many as fit
// in 32 KB, the largest object Go allocates from its per-thread caches.
const recordChunk = (32 << 10) / int(unsafe.Sizeof(operator.Record{}))

// recordSlab is a chunk of operator.Records that a router hands out one
// per input and the workers give back once they are done with them; the
// last one given back returns the slab to recordSlabs for the next
// router to fill. Records hold pointers, so a fresh chunk per 120 inputs
// was a quarter of the bytes the keyed sum allocated, each scanned by
// the collector while in flight and zeroed before use.
//
// pending is the number of records given back, negated, until the router
// leaves the slab and adds the number it sent on: it is zero exactly once,
// after both, whichever comes last. A slab whose records are never all
// given back (an attempt ended with records in flight) is simply
// collected.
type recordSlab struct {
	recs    []operator.Record
	pending atomic.Int64
}

var recordSlabs = sync.Pool{New: func() any { return &recordSlab{recs: make([]operator.Record, recordChunk)} }}

// giveBack returns n records of the slab, done with. It reports whether
// that returned the slab to recordSlabs.
func (s *recordSlab) giveBack(n int) bool { return s.settle(-int64(n)) }

// left: the router sent n of the slab's records on and hands out no more.
// It reports whether that returned the slab to recordSlabs.
func (s *recordSlab) left(sent int) bool { return s.settle(int64(sent)) }

func (s *recordSlab) settle(d int64) bool {
	if s.pending.Add(d) != 0 {
		return false
	}
	recordSlabs.Put(s)
	return true
}

// slabReturns batches a worker's give-backs: a worker's batch holds runs
// of records from the same slab, and one atomic add per run keeps the
// workers from contending for the slab's counter per record.
type slabReturns struct {
	slab *recordSlab
	n    int
}

func (r *slabReturns) add(s *recordSlab) {
	if s != r.slab {
		r.flush()
		r.slab = s
	}
	r.n++
}

func (r *slabReturns) flush() {
	if r.slab != nil {
		r.slab.giveBack(r.n)
	}
	r.slab, r.n = nil, 0
}
