// Package window: placeholder until the full package lands (same API).
package window

import (
	"container/heap"
	"errors"
	"math"
	"sort"
)

type Kind uint8

const (
	Tumbling Kind = 1 + iota
	Hopping
	Session
)

type Spec struct {
	Kind                Kind
	Size, Advance, Gap int64
}

func (s Spec) Validate() error {
	switch s.Kind {
	case Tumbling:
		if s.Size <= 0 {
			return errors.New("size must be positive")
		}
	case Hopping:
		if s.Size <= 0 || s.Advance <= 0 || s.Advance > s.Size {
			return errors.New("bad hopping window")
		}
	case Session:
		if s.Gap <= 0 {
			return errors.New("gap must be positive")
		}
	default:
		return errors.New("unknown kind")
	}
	return nil
}

type Window struct{ Start, End int64 }

func (w Window) Contains(ts int64) bool { return w.Start <= ts && ts < w.End }

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func (s Spec) Assign(dst []Window, ts int64) []Window {
	switch s.Kind {
	case Tumbling:
		start := floorDiv(ts, s.Size) * s.Size
		return append(dst, Window{start, start + s.Size})
	case Hopping:
		last := floorDiv(ts, s.Advance) * s.Advance
		first := last
		for first-s.Advance > ts-s.Size {
			first -= s.Advance
		}
		for st := first; st <= last; st += s.Advance {
			if ts < st+s.Size {
				dst = append(dst, Window{st, st + s.Size})
			}
		}
		return dst
	case Session:
		return append(dst, Window{ts, ts + s.Gap})
	}
	return dst
}

func MergeSession(sessions []Window, w Window) (out []Window, into Window, merged []int) {
	into = w
	for i, s := range sessions {
		if s.Start < into.End && into.Start < s.End {
			merged = append(merged, i)
			into.Start, into.End = min(into.Start, s.Start), max(into.End, s.End)
		}
	}
	// a widened window may now overlap more: repeat until stable
	for changed := true; changed; {
		changed = false
		for i, s := range sessions {
			in := false
			for _, m := range merged {
				if m == i {
					in = true
				}
			}
			if !in && s.Start < into.End && into.Start < s.End {
				merged = append(merged, i)
				into.Start, into.End = min(into.Start, s.Start), max(into.End, s.End)
				changed = true
			}
		}
	}
	sort.Ints(merged)
	for i, s := range sessions {
		keep := true
		for _, m := range merged {
			if m == i {
				keep = false
			}
		}
		if keep {
			out = append(out, s)
		}
	}
	out = append(out, into)
	sort.Slice(out, func(a, b int) bool { return out[a].Start < out[b].Start })
	return out, into, merged
}

const NoWatermark = math.MinInt64

func Fires(w Window, lateness, wm int64) bool {
	if wm == NoWatermark {
		return false
	}
	return w.End <= wm-lateness
}

type PartitionClock struct{ Max int64 }

func NewPartitionClock() PartitionClock { return PartitionClock{Max: NoWatermark} }

func (c *PartitionClock) Observe(ts, ooo, lateness int64) bool {
	if c.Max != NoWatermark && ts < c.Max-ooo-lateness {
		return true
	}
	c.Max = max(c.Max, ts)
	return false
}

func (c PartitionClock) Watermark(ooo int64) int64 {
	if c.Max == NoWatermark {
		return NoWatermark
	}
	return c.Max - ooo
}

func JobWatermark(prev int64, wms []int64) int64 {
	if len(wms) == 0 {
		return prev
	}
	m := wms[0]
	for _, w := range wms[1:] {
		m = min(m, w)
	}
	return max(prev, m)
}

type Timers struct {
	times timeHeap
	keys  map[int64]map[string]struct{}
}

type timeHeap []int64

func (h timeHeap) Len() int           { return len(h) }
func (h timeHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h timeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timeHeap) Push(x any)        { *h = append(*h, x.(int64)) }
func (h *timeHeap) Pop() any          { o := *h; x := o[len(o)-1]; *h = o[:len(o)-1]; return x }

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
	ks[key] = struct{}{}
}

func (t *Timers) PopUntil(at int64, dst []string) []string {
	seen := map[string]bool{}
	for len(t.times) > 0 && t.times[0] <= at {
		tm := heap.Pop(&t.times).(int64)
		ks := make([]string, 0, len(t.keys[tm]))
		for k := range t.keys[tm] {
			ks = append(ks, k)
		}
		delete(t.keys, tm)
		sort.Strings(ks)
		for _, k := range ks {
			if !seen[k] {
				seen[k] = true
				dst = append(dst, k)
			}
		}
	}
	return dst
}

func (t *Timers) Len() int {
	n := 0
	for _, ks := range t.keys {
		n += len(ks)
	}
	return n
}
