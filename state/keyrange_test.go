package state

import "testing"

func TestRangeForTable(t *testing.T) {
	tests := []struct {
		worker, workers, groups int
		want                    Range
	}{
		{0, 1, 128, Range{0, 128}},
		{0, 2, 128, Range{0, 64}},
		{1, 2, 128, Range{64, 128}},
		{0, 3, 10, Range{0, 4}}, // Flink: [0,3], [4,6], [7,9] for max parallelism 10
		{1, 3, 10, Range{4, 7}},
		{2, 3, 10, Range{7, 10}},
		{0, 4, 2, Range{0, 1}}, // more workers than groups: some own nothing
		{1, 4, 2, Range{1, 1}},
		{2, 4, 2, Range{1, 2}},
		{3, 4, 2, Range{2, 2}},
		{4, 5, MaxKeyGroups, Range{26215, 32768}},
	}
	for _, tt := range tests {
		if got := RangeFor(tt.worker, tt.workers, tt.groups); got != tt.want {
			t.Errorf("RangeFor(%d, %d, %d) = %v, want %v", tt.worker, tt.workers, tt.groups, got, tt.want)
		}
	}
}

// For every small layout, the ranges partition [0, G) in order, their sizes
// differ by at most one, and WorkerOf agrees with RangeFor for every group.
func TestRangeForAndWorkerOfAgree(t *testing.T) {
	for groups := 1; groups <= 70; groups++ {
		for workers := 1; workers <= 80; workers++ {
			next := KeyGroup(0)
			minLen, maxLen := groups, 0
			for w := range workers {
				r := RangeFor(w, workers, groups)
				if r.Start != next || r.End < r.Start {
					t.Fatalf("G=%d W=%d: worker %d range %v, want start %d", groups, workers, w, r, next)
				}
				next = r.End
				minLen, maxLen = min(minLen, r.Len()), max(maxLen, r.Len())
				for kg := r.Start; kg < r.End; kg++ {
					if got := WorkerOf(kg, workers, groups); got != w {
						t.Fatalf("G=%d W=%d: WorkerOf(%d) = %d, RangeFor(%d) = %v", groups, workers, kg, got, w, r)
					}
				}
			}
			if int(next) != groups {
				t.Fatalf("G=%d W=%d: ranges end at %d", groups, workers, next)
			}
			if maxLen-minLen > 1 {
				t.Fatalf("G=%d W=%d: range sizes from %d to %d", groups, workers, minLen, maxLen)
			}
		}
	}
}

func TestRangeContainsAndString(t *testing.T) {
	r := Range{3, 5}
	for kg, want := range map[KeyGroup]bool{2: false, 3: true, 4: true, 5: false} {
		if r.Contains(kg) != want {
			t.Errorf("%v.Contains(%d) = %v", r, kg, !want)
		}
	}
	if r.String() != "[3,5)" || r.Len() != 2 {
		t.Errorf("String %q, Len %d", r.String(), r.Len())
	}
}

func TestRangeForPanicsOnBadArguments(t *testing.T) {
	bad := []func(){
		func() { RangeFor(0, 0, 8) },
		func() { RangeFor(2, 2, 8) },
		func() { RangeFor(-1, 2, 8) },
		func() { RangeFor(0, 1, 0) },
		func() { WorkerOf(8, 2, 8) },
		func() { WorkerOf(0, 0, 8) },
	}
	for i, f := range bad {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("case %d did not panic", i)
				}
			}()
			f()
		}()
	}
}
