package window

import (
	"container/heap"
	"slices"
)

// Timers is a set of (time, key) pairs ordered by time: when the
// watermark advances, PopUntil gives the keys due. Keys sharing a time
// (every key's tumbling window ends at the same instants) share one heap
// entry, so the heap holds distinct times, not keys.
//
// Timers do not know the keys' state: the caller arms a timer when a key
// may come due and, on PopUntil, looks at the key and re-arms it if it is
// not due after all (lazy deletion). A key may so have several timers.
// The zero value is an empty set. Not safe for concurrent use.
type Timers struct {
	times timeHeap
	keys  map[int64]map[string]struct{}
	n     int
}

// Add arms a timer for key at time at; a pair already armed is kept once.
func (t *Timers) Add(at int64, key string) {
	if t.keys == nil {
		t.keys = map[int64]map[string]struct{}{}
	}
	ks, ok := t.keys[at]
	if !ok {
		ks = map[string]struct{}{}
		t.keys[at] = ks
		heap.Push(&t.times, at)
	}
	if _, ok := ks[key]; !ok {
		ks[key] = struct{}{}
		t.n++
	}
}

// PopUntil removes every timer at or before at and appends their keys to
// dst: by time, the keys of one time sorted, each key once per call.
func (t *Timers) PopUntil(at int64, dst []string) []string {
	from := len(dst)
	var seen map[string]struct{}
	for len(t.times) > 0 && t.times[0] <= at {
		tm := heap.Pop(&t.times).(int64)
		ks := t.keys[tm]
		delete(t.keys, tm)
		t.n -= len(ks)
		start := len(dst)
		for k := range ks {
			dst = append(dst, k)
		}
		slices.Sort(dst[start:])
		if len(t.times) > 0 && t.times[0] <= at || seen != nil {
			// More than one time is due: a key may repeat.
			if seen == nil {
				seen = make(map[string]struct{}, len(dst)-from)
				for _, k := range dst[from:start] {
					seen[k] = struct{}{}
				}
			}
			kept := dst[:start]
			for _, k := range dst[start:] {
				if _, dup := seen[k]; !dup {
					seen[k] = struct{}{}
					kept = append(kept, k)
				}
			}
			dst = kept
		}
	}
	return dst
}

// Len is the number of (time, key) pairs armed.
func (t *Timers) Len() int { return t.n }

// Next is the earliest time armed, and false when none is.
func (t *Timers) Next() (int64, bool) {
	if len(t.times) == 0 {
		return 0, false
	}
	return t.times[0], true
}

type timeHeap []int64

func (h timeHeap) Len() int           { return len(h) }
func (h timeHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h timeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timeHeap) Push(x any)        { *h = append(*h, x.(int64)) }
func (h *timeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
