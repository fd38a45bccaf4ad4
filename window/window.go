package window

import (
	"errors"
	"fmt"
	"math"
)

// NoWatermark is the time of nothing yet: a partition that has not
// delivered a record, a job whose watermark has not started.
const NoWatermark = math.MinInt64

// Kind is the shape of a window.
type Kind uint8

const (
	Tumbling Kind = 1 + iota // fixed windows of Size
	Hopping                  // windows of Size starting every Advance
	Session                  // per key, records less than Gap apart
)

func (k Kind) String() string {
	switch k {
	case Tumbling:
		return "tumbling"
	case Hopping:
		return "hopping"
	case Session:
		return "session"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Spec is a window shape, in milliseconds. Tumbling uses Size; Hopping
// Size and Advance (0 < Advance <= Size); Session Gap.
type Spec struct {
	Kind               Kind
	Size, Advance, Gap int64
}

// Validate reports what is wrong with s, or nil.
func (s Spec) Validate() error {
	switch s.Kind {
	case Tumbling:
		if s.Size <= 0 {
			return fmt.Errorf("tumbling window: size %d ms must be positive", s.Size)
		}
		if s.Advance != 0 || s.Gap != 0 {
			return errors.New("tumbling window: only size is used")
		}
	case Hopping:
		if s.Size <= 0 || s.Advance <= 0 {
			return fmt.Errorf("hopping window: size %d ms and advance %d ms must be positive", s.Size, s.Advance)
		}
		if s.Advance > s.Size {
			return fmt.Errorf("hopping window: advance %d ms is more than size %d ms (records between windows would be in none)", s.Advance, s.Size)
		}
		if s.Gap != 0 {
			return errors.New("hopping window: gap is not used")
		}
	case Session:
		if s.Gap <= 0 {
			return fmt.Errorf("session window: gap %d ms must be positive", s.Gap)
		}
		if s.Size != 0 || s.Advance != 0 {
			return errors.New("session window: only gap is used")
		}
	default:
		return fmt.Errorf("unknown window kind %d", s.Kind)
	}
	return nil
}

// Window is the half-open interval [Start, End) of epoch milliseconds.
type Window struct{ Start, End int64 }

// Contains reports whether ts is in w.
func (w Window) Contains(ts int64) bool { return w.Start <= ts && ts < w.End }

// Overlaps reports whether w and o share a millisecond.
func (w Window) Overlaps(o Window) bool { return w.Start < o.End && o.Start < w.End }

// Assign appends the windows ts belongs to, by Start: one for tumbling,
// up to ceil(Size/Advance) for hopping, and for a session the proto-window
// [ts, ts+Gap) that MergeSession merges. s must be valid. Windows that
// would reach beyond int64 are cut at its ends.
func (s Spec) Assign(dst []Window, ts int64) []Window {
	switch s.Kind {
	case Tumbling:
		r := offset(ts, s.Size)
		return append(dst, Window{SatAdd(ts, -r), SatAdd(ts, s.Size-r)})
	case Hopping:
		// The latest window containing ts starts at the multiple of
		// Advance at or below it; the k-th before it, Advance*k earlier,
		// still contains ts while its end is after ts: for k up to
		// (last - ts + Size - 1) / Advance (last - ts is in (-Advance, 0]).
		r := offset(ts, s.Advance)
		for k := (s.Size - r - 1) / s.Advance; k >= 0; k-- {
			back := r + k*s.Advance // ts minus the k-th window's start
			if k > 0 && SatAdd(ts, s.Advance-back) == math.MinInt64 {
				continue // starts below int64 and the next starts at its bottom: keep that one
			}
			dst = append(dst, Window{SatAdd(ts, -back), SatAdd(ts, s.Size-back)})
		}
		return dst
	case Session:
		return append(dst, Window{ts, SatAdd(ts, s.Gap)})
	}
	return dst
}

// alignDown is the largest multiple of size at or below ts (floor, for
// negative ts too), saturating at math.MinInt64.
func alignDown(ts, size int64) int64 { return SatAdd(ts, -offset(ts, size)) }

// offset is ts minus the multiple of size at or below it: 0 <= r < size.
func offset(ts, size int64) int64 {
	r := ts % size
	if r < 0 {
		r += size
	}
	return r
}

// SatAdd is a+b, saturating at the ends of int64 instead of wrapping.
func SatAdd(a, b int64) int64 {
	s := a + b
	switch {
	case b > 0 && s < a:
		return math.MaxInt64
	case b < 0 && s > a:
		return math.MinInt64
	}
	return s
}

// MergeSession adds the proto-window w (Assign of a session Spec) to a
// key's sessions, which are sorted by Start and do not overlap. It returns
// the new sessions (sorted, not overlapping; sessions is not modified),
// the session w became (into: w widened over every session it bridges),
// and the indices into sessions of those merged into it, ascending.
// Merging is transitive: a record that overlaps two sessions joins them.
func MergeSession(sessions []Window, w Window) (out []Window, into Window, merged []int) {
	into = w
	for i, s := range sessions {
		if s.Overlaps(into) {
			merged = append(merged, i)
			into.Start, into.End = min(into.Start, s.Start), max(into.End, s.End)
		}
	}
	// Sorted and disjoint sessions: those overlapping w are consecutive,
	// and widening into can only reach ones already adjacent to them
	// that overlap the widened interval.
	for changed := len(merged) > 0; changed; {
		changed = false
		lo, hi := merged[0], merged[len(merged)-1]
		if lo > 0 && sessions[lo-1].Overlaps(into) {
			merged = append([]int{lo - 1}, merged...)
			into.Start = min(into.Start, sessions[lo-1].Start)
			changed = true
		}
		if hi+1 < len(sessions) && sessions[hi+1].Overlaps(into) {
			merged = append(merged, hi+1)
			into.End = max(into.End, sessions[hi+1].End)
			changed = true
		}
	}
	out = make([]Window, 0, len(sessions)+1-len(merged))
	placed := false
	for i, s := range sessions {
		if len(merged) > 0 && i >= merged[0] && i <= merged[len(merged)-1] {
			continue
		}
		if !placed && s.Start > into.Start {
			out = append(out, into)
			placed = true
		}
		out = append(out, s)
	}
	if !placed {
		out = append(out, into)
	}
	return out, into, merged
}

// Fires reports whether window w is complete at watermark wm, with
// allowed lateness: End + lateness <= wm. Nothing fires before the
// watermark starts (NoWatermark). At the job's watermark it says the
// window fires; at a record's partition watermark, that the window is
// closed for the record.
func Fires(w Window, lateness, wm int64) bool {
	if wm == NoWatermark {
		return false
	}
	return SatAdd(w.End, lateness) <= wm
}

// Late reports whether a record at event time ts is late at watermark wm
// (its partition's, just before it) with allowed lateness: every window
// it belongs to is closed (Fires). For tumbling and hopping windows that
// is the window of ts that ends last. For sessions it is [ts, ts+1): a
// session holding ts ends after ts, so one the record could join is
// still open, whereas judging the proto-window [ts, ts+Gap) would let the
// record reach sessions that may have fired (the runtime's eventtime.go
// says why that matters). s must be valid; nothing is late before the
// watermark starts.
func (s Spec) Late(ts, lateness, wm int64) bool {
	var end int64
	switch s.Kind {
	case Tumbling:
		end = SatAdd(ts, s.Size-offset(ts, s.Size))
	case Hopping:
		end = SatAdd(ts, s.Size-offset(ts, s.Advance)) // the window starting at or below ts
	case Session:
		end = SatAdd(ts, 1)
	}
	return Fires(Window{End: end}, lateness, wm)
}

// PartitionClock is one source partition's largest event time
// (NoWatermark before its first record).
type PartitionClock struct{ Max int64 }

// NewPartitionClock is the clock of a partition that has delivered
// nothing.
func NewPartitionClock() PartitionClock { return PartitionClock{Max: NoWatermark} }

// Observe takes the event time ts of the partition's next record: it
// returns the partition's watermark before the record (Max minus
// maxOutOfOrderness, NoWatermark before the first record), the one the
// record's lateness is judged against (Spec.Late), and raises Max to ts
// if ts is greater. A late record never raises it: its windows end at or
// before the watermark, which is at most Max.
func (c *PartitionClock) Observe(ts, maxOutOfOrderness int64) (watermark int64) {
	watermark = c.Watermark(maxOutOfOrderness)
	c.Max = max(c.Max, ts)
	return watermark
}

// Watermark is Max minus maxOutOfOrderness (NoWatermark before the first
// record).
func (c PartitionClock) Watermark(maxOutOfOrderness int64) int64 {
	if c.Max == NoWatermark {
		return NoWatermark
	}
	return SatAdd(c.Max, -maxOutOfOrderness)
}

// JobWatermark is the job's watermark after prev, given the watermarks of
// the partitions that hold it back: the greater of prev and their least.
// A partition at NoWatermark holds it at prev; with no partitions it is
// prev. It never goes back.
func JobWatermark(prev int64, partitionWatermarks []int64) int64 {
	if len(partitionWatermarks) == 0 {
		return prev
	}
	least := partitionWatermarks[0]
	for _, w := range partitionWatermarks[1:] {
		least = min(least, w)
	}
	return max(prev, least)
}
