package window

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

func TestAssign(t *testing.T) {
	for _, tc := range []struct {
		spec Spec
		ts   int64
		want []Window
	}{
		{Spec{Kind: Tumbling, Size: 10}, 0, []Window{{0, 10}}},
		{Spec{Kind: Tumbling, Size: 10}, 9, []Window{{0, 10}}},
		{Spec{Kind: Tumbling, Size: 10}, 10, []Window{{10, 20}}},
		{Spec{Kind: Tumbling, Size: 10}, -1, []Window{{-10, 0}}},
		{Spec{Kind: Tumbling, Size: 10}, -10, []Window{{-10, 0}}},
		{Spec{Kind: Hopping, Size: 10, Advance: 5}, 7, []Window{{0, 10}, {5, 15}}},
		{Spec{Kind: Hopping, Size: 10, Advance: 5}, 5, []Window{{0, 10}, {5, 15}}},
		{Spec{Kind: Hopping, Size: 10, Advance: 5}, 10, []Window{{5, 15}, {10, 20}}},
		{Spec{Kind: Hopping, Size: 10, Advance: 10}, 3, []Window{{0, 10}}},
		{Spec{Kind: Hopping, Size: 10, Advance: 4}, 9, []Window{{0, 10}, {4, 14}, {8, 18}}},
		{Spec{Kind: Hopping, Size: 10, Advance: 4}, 10, []Window{{4, 14}, {8, 18}}},
		{Spec{Kind: Hopping, Size: 10, Advance: 3}, -1, []Window{{-9, 1}, {-6, 4}, {-3, 7}}},
		{Spec{Kind: Session, Gap: 30}, 100, []Window{{100, 130}}},
		{Spec{Kind: Tumbling, Size: 10}, math.MaxInt64, []Window{{math.MaxInt64 - 7, math.MaxInt64}}},
		{Spec{Kind: Tumbling, Size: 10}, math.MinInt64, []Window{{math.MinInt64, math.MinInt64 + 8}}},
		{Spec{Kind: Session, Gap: 30}, math.MaxInt64 - 1, []Window{{math.MaxInt64 - 1, math.MaxInt64}}},
	} {
		if err := tc.spec.Validate(); err != nil {
			t.Fatalf("%+v: %v", tc.spec, err)
		}
		if got := tc.spec.Assign(nil, tc.ts); !slices.Equal(got, tc.want) {
			t.Errorf("%v %+v Assign(%d) = %v, want %v", tc.spec.Kind, tc.spec, tc.ts, got, tc.want)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, bad := range []Spec{
		{}, {Kind: Tumbling}, {Kind: Tumbling, Size: 10, Gap: 1}, {Kind: Hopping, Size: 10},
		{Kind: Hopping, Size: 10, Advance: 11}, {Kind: Hopping, Size: -1, Advance: -1}, {Kind: Session},
		{Kind: Session, Gap: 5, Size: 5}, {Kind: 9, Size: 1},
	} {
		if bad.Validate() == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

// naiveAssign enumerates every aligned start near ts.
func naiveAssign(s Spec, ts int64) []Window {
	step, size := s.Advance, s.Size
	if s.Kind == Tumbling {
		step = size
	}
	var out []Window
	k := ts/step - size/step - 2
	for start := k * step; start <= ts; start += step {
		if start <= ts && ts < start+size {
			out = append(out, Window{start, start + size})
		}
	}
	return out
}

func FuzzAssign(f *testing.F) {
	f.Add(int64(7), int64(10), int64(5), true)
	f.Add(int64(-1), int64(10), int64(3), true)
	f.Add(int64(123456), int64(1000), int64(0), false)
	f.Fuzz(func(t *testing.T, ts, size, advance int64, hopping bool) {
		ts %= 1 << 50
		size = 1 + abs(size)%100_000
		s := Spec{Kind: Tumbling, Size: size}
		if hopping {
			s = Spec{Kind: Hopping, Size: size, Advance: 1 + abs(advance)%size}
		}
		if err := s.Validate(); err != nil {
			t.Fatal(err)
		}
		got, want := s.Assign(nil, ts), naiveAssign(s, ts)
		if !slices.Equal(got, want) {
			t.Fatalf("%+v Assign(%d) = %v, naive %v", s, ts, got, want)
		}
	})
}

// Near the ends of int64 Assign never wraps: every window contains ts
// or was cut at an end of int64, and starts are in order.
func FuzzAssignExtremes(f *testing.F) {
	f.Add(int64(0), int64(10), int64(3), uint8(1))
	f.Fuzz(func(t *testing.T, off, size, advance int64, kind uint8) {
		for _, ts := range []int64{math.MaxInt64 - abs(off)%1000, math.MinInt64 + abs(off)%1000} {
			size := 1 + abs(size)%(1<<40)
			s := Spec{Kind: Kind(1 + kind%3), Size: size, Advance: 1 + abs(advance)%size, Gap: size}
			switch s.Kind {
			case Tumbling:
				s.Advance, s.Gap = 0, 0
			case Hopping:
				s.Gap = 0
				s.Advance = max(s.Advance, size/16) // bounded windows per record
			case Session:
				s.Size, s.Advance = 0, 0
			}
			ws := s.Assign(nil, ts)
			if len(ws) == 0 {
				t.Fatalf("%+v Assign(%d): no window", s, ts)
			}
			for i, w := range ws {
				if w.Start > w.End || (i > 0 && ws[i-1].Start >= w.Start) {
					t.Fatalf("%+v Assign(%d) = %v", s, ts, ws)
				}
				if !w.Contains(ts) && w.End != math.MaxInt64 && w.Start != math.MinInt64 {
					t.Fatalf("%+v Assign(%d): %v does not contain it", s, ts, w)
				}
			}
		}
	})
}

func abs(x int64) int64 {
	if x < 0 {
		if x == math.MinInt64 {
			return math.MaxInt64
		}
		return -x
	}
	return x
}

// sessionsFromScratch splits the sorted times where two are gap or more
// apart: the sessions of those records however they arrived.
func sessionsFromScratch(times []int64, gap int64) []Window {
	ts := slices.Clone(times)
	slices.Sort(ts)
	var out []Window
	for i, t := range ts {
		if i == 0 || t >= ts[i-1]+gap {
			out = append(out, Window{t, t + gap})
			continue
		}
		out[len(out)-1].End = t + gap
	}
	return out
}

func TestMergeSession(t *testing.T) {
	gap := int64(10)
	s := Spec{Kind: Session, Gap: gap}
	var sess []Window
	add := func(ts int64) (Window, []int) {
		var into Window
		var merged []int
		sess, into, merged = MergeSession(sess, s.Assign(nil, ts)[0])
		return into, merged
	}
	add(0)
	add(30)
	if want := []Window{{0, 10}, {30, 40}}; !slices.Equal(sess, want) {
		t.Fatalf("sessions %v, want %v", sess, want)
	}
	if _, merged := add(10); len(merged) != 0 || len(sess) != 3 {
		t.Fatalf("touching [0,10) and [10,20): merged %v, sessions %v", merged, sess)
	}
	into, merged := add(22) // [22,32) overlaps [10,20)? no: 20 <= 22; overlaps [30,40)
	if into != (Window{22, 40}) || !slices.Equal(merged, []int{2}) {
		t.Fatalf("into %v merged %v sessions %v", into, merged, sess)
	}
	into, merged = add(15) // [15,25) bridges [10,20) and [22,40)
	if into != (Window{10, 40}) || !slices.Equal(merged, []int{1, 2}) || !slices.Equal(sess, []Window{{0, 10}, {10, 40}}) {
		t.Fatalf("bridge: into %v merged %v sessions %v", into, merged, sess)
	}
	into, merged = add(5) // [5,15) bridges both remaining
	if into != (Window{0, 40}) || !slices.Equal(merged, []int{0, 1}) || !slices.Equal(sess, []Window{{0, 40}}) {
		t.Fatalf("bridge of three: into %v merged %v sessions %v", into, merged, sess)
	}
}

// Any insertion order of the same times gives the sessions computed from
// scratch.
func FuzzMergeSession(f *testing.F) {
	f.Add([]byte{3, 9, 1, 200, 14, 7}, uint8(5))
	f.Fuzz(func(t *testing.T, data []byte, g uint8) {
		gap := 1 + int64(g)%40
		var times []int64
		var sess []Window
		for i := 0; i+1 < len(data) && i < 400; i += 2 {
			ts := int64(data[i])<<4 | int64(data[i+1]&15)
			times = append(times, ts)
			before := slices.Clone(sess)
			var into Window
			var merged []int
			sess, into, merged = MergeSession(sess, Window{ts, ts + gap})
			if !into.Contains(ts) {
				t.Fatalf("into %v lacks %d", into, ts)
			}
			for _, j := range merged {
				if before[j].Start < into.Start || before[j].End > into.End {
					t.Fatalf("merged %v not inside %v", before[j], into)
				}
			}
			if want := sessionsFromScratch(times, gap); !slices.Equal(sess, want) {
				t.Fatalf("after %v: sessions %v, from scratch %v", times, sess, want)
			}
		}
	})
}

func TestPartitionClockAndWatermark(t *testing.T) {
	c := NewPartitionClock()
	if c.Watermark(5) != NoWatermark || c.Observe(-1e9, 5) != NoWatermark {
		t.Fatal("a new clock has no watermark")
	}
	c = NewPartitionClock()
	for _, ts := range []int64{100, 90, 120} {
		c.Observe(ts, 10)
	}
	// Max 120: the next record is judged at watermark 110, the one after
	// it too (109 does not move the clock), and 130 raises it.
	if wm := c.Observe(109, 10); wm != 110 || c.Max != 120 {
		t.Fatalf("watermark %d, max %d", wm, c.Max)
	}
	if wm := c.Observe(130, 10); wm != 110 || c.Watermark(10) != 120 {
		t.Fatalf("watermark before 130: %d; after: %d", wm, c.Watermark(10))
	}
	ext := PartitionClock{Max: math.MinInt64 + 3}
	if ext.Watermark(100) != math.MinInt64 || ext.Observe(math.MinInt64+1, 100) != math.MinInt64 {
		t.Fatal("saturation at the bottom of int64")
	}
	if got := JobWatermark(50, []int64{70, 60, 80}); got != 60 {
		t.Fatalf("JobWatermark = %d", got)
	}
	if got := JobWatermark(50, []int64{70, NoWatermark}); got != 50 {
		t.Fatalf("a silent partition moved it: %d", got)
	}
	if got := JobWatermark(50, []int64{40}); got != 50 {
		t.Fatalf("went back: %d", got)
	}
	if got := JobWatermark(NoWatermark, nil); got != NoWatermark {
		t.Fatalf("no partitions: %d", got)
	}
	if Fires(Window{0, 10}, 5, 14) || !Fires(Window{0, 10}, 5, 15) || Fires(Window{0, 10}, 0, NoWatermark) {
		t.Fatal("Fires")
	}
	if Fires(Window{0, math.MaxInt64}, 10, math.MaxInt64-1) {
		t.Fatal("Fires overflowed")
	}
}

// Late is per window: a record is late only when every window it belongs
// to has closed at its partition's watermark (end + lateness <= wm), not
// when it is merely behind the watermark.
func TestLate(t *testing.T) {
	tumbling := Spec{Kind: Tumbling, Size: 10}
	hopping := Spec{Kind: Hopping, Size: 10, Advance: 5}
	session := Spec{Kind: Session, Gap: 10}
	for _, c := range []struct {
		spec             Spec
		ts, lateness, wm int64
		want             bool
	}{
		{tumbling, 3, 0, 9, false},           // far behind the watermark, but [0,10) is open
		{tumbling, 3, 0, 10, true},           // [0,10) closed at 10
		{tumbling, 3, 2, 11, false},          // with lateness 2 it closes at 12
		{tumbling, 3, 2, 12, true},           //
		{tumbling, -3, 0, 0, true},           // [-10,0)
		{tumbling, 3, 0, NoWatermark, false}, // nothing is late before the first record
		{hopping, 7, 0, 10, false},           // [0,10) closed, [5,15) open: counted in [5,15)
		{hopping, 7, 0, 15, true},            // both closed
		{hopping, 4, 0, 9, false},            // [-5,5) closed, [0,10) open
		{session, 3, 0, 3, false},            // at the watermark: a session holding 3 ends after it
		{session, 3, 0, 4, true},             // behind it: a session [s, 4) may have fired
		{session, 3, 1, 4, false},
		{tumbling, math.MaxInt64 - 2, 0, math.MaxInt64 - 1, false}, // its window is cut at the top of int64
	} {
		if got := c.spec.Late(c.ts, c.lateness, c.wm); got != c.want {
			t.Errorf("%v: Late(%d, lateness %d, watermark %d) = %v, want %v", c.spec.Kind, c.ts, c.lateness, c.wm, got, c.want)
		}
	}
}

// FuzzLate: a tumbling or hopping record is late exactly when every
// window Assign gives it is closed.
func FuzzLate(f *testing.F) {
	f.Add(int64(7), int64(10), int64(5), int64(0), int64(15))
	f.Add(int64(-1), int64(3), int64(3), int64(2), int64(1))
	f.Fuzz(func(t *testing.T, ts, size, advance, lateness, wm int64) {
		size, advance = 1+abs(size)%1000, 1+abs(advance)%1000
		lateness = abs(lateness) % 1000
		for _, s := range []Spec{{Kind: Tumbling, Size: size}, {Kind: Hopping, Size: max(size, advance), Advance: min(size, advance)}} {
			all := true
			for _, w := range s.Assign(nil, ts) {
				all = all && Fires(w, lateness, wm)
			}
			if got := s.Late(ts, lateness, wm); got != all {
				t.Fatalf("%+v: Late(%d, %d, %d) = %v; every window closed: %v (%v)", s, ts, lateness, wm, got, all, s.Assign(nil, ts))
			}
		}
	})
}

func TestTimers(t *testing.T) {
	var tm Timers
	tm.Add(20, "b")
	tm.Add(10, "c")
	tm.Add(10, "a")
	tm.Add(10, "a")
	tm.Add(30, "a")
	if tm.Len() != 4 {
		t.Fatalf("Len %d", tm.Len())
	}
	if got := tm.PopUntil(9, nil); len(got) != 0 {
		t.Fatalf("nothing due at 9: %v", got)
	}
	if got := tm.PopUntil(20, nil); !slices.Equal(got, []string{"a", "c", "b"}) {
		t.Fatalf("due at 20: %v", got)
	}
	if next, ok := tm.Next(); !ok || next != 30 || tm.Len() != 1 {
		t.Fatalf("next %d %v len %d", next, ok, tm.Len())
	}
	tm.Add(25, "a")
	if got := tm.PopUntil(100, nil); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("a key due twice comes once: %v", got)
	}
}

// Timers against a naive list, under random adds and pops.
func FuzzTimers(f *testing.F) {
	f.Add([]byte{1, 2, 3, 200, 4, 5, 250, 9})
	f.Fuzz(func(t *testing.T, ops []byte) {
		var tm Timers
		naive := map[[2]int64]bool{} // (time, key) armed
		for i := 0; i+1 < len(ops); i += 2 {
			at, key := int64(ops[i]%64), int64(ops[i+1]%8)
			if ops[i] >= 200 { // pop
				got := tm.PopUntil(at, nil)
				var want []string
				type pair struct {
					at  int64
					key string
				}
				var due []pair
				for p := range naive {
					if p[0] <= at {
						due = append(due, pair{p[0], string(rune('a' + p[1]))})
						delete(naive, p)
					}
				}
				sort.Slice(due, func(a, b int) bool {
					if due[a].at != due[b].at {
						return due[a].at < due[b].at
					}
					return due[a].key < due[b].key
				})
				seen := map[string]bool{}
				for _, d := range due {
					if !seen[d.key] {
						seen[d.key] = true
						want = append(want, d.key)
					}
				}
				if !slices.Equal(got, want) {
					t.Fatalf("PopUntil(%d) = %v, want %v", at, got, want)
				}
				continue
			}
			tm.Add(at, string(rune('a'+key)))
			naive[[2]int64{at, key}] = true
			if tm.Len() != len(naive) {
				t.Fatalf("Len %d, want %d", tm.Len(), len(naive))
			}
		}
	})
}

func BenchmarkAssignHopping(b *testing.B) {
	s := Spec{Kind: Hopping, Size: 60_000, Advance: 10_000}
	var dst []Window
	for i := range b.N {
		dst = s.Assign(dst[:0], int64(i)*7)
	}
}

// A million keys whose windows end at 100 instants, armed and fired.
func BenchmarkTimers(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	keys := make([]string, 1_000_000)
	for i := range keys {
		keys[i] = "k" + string(rune('0'+i%10)) + string(rune(i))
	}
	b.ResetTimer()
	for range b.N {
		var tm Timers
		for _, k := range keys {
			tm.Add(int64(rng.IntN(100))*1000, k)
		}
		var dst []string
		for at := int64(0); at < 100_000; at += 1000 {
			dst = tm.PopUntil(at, dst[:0])
		}
	}
}
