package jobtest

import (
	"slices"
	"testing"

	"github.com/eoflow/pipeline/internal/fault"
)

// A schedule is the seed's: one to three points the job passes, at least
// one that every checkpoint passes, each failing early.
func TestNewSchedule(t *testing.T) {
	stateful := map[fault.Point]int{fault.AfterBarrier: 3, fault.WhileWritingState: 2, fault.BeforeCommit: 3, fault.AfterCommit: 3, fault.DuringRestore: 1}
	distinct := map[string]bool{}
	sizes := map[int]int{}
	for seed := range uint64(500) {
		s := newSchedule(seed, stateful)
		if again := newSchedule(seed, stateful); again.String() != s.String() {
			t.Fatalf("seed %d: %s, then %s", seed, s, again)
		}
		distinct[s.String()] = true
		sizes[len(s)]++
		if !slices.ContainsFunc(periodic, func(p fault.Point) bool { _, ok := s[p]; return ok }) {
			t.Errorf("seed %d: %s arms no point every checkpoint passes", seed, s)
		}
		for p, n := range s {
			limit := 2
			if p == fault.WhileWritingState {
				limit = stateful[p]
			}
			if n < 1 || n > limit {
				t.Errorf("seed %d: %s@%d, want 1 to %d", seed, p, n, limit)
			}
		}
	}
	if sizes[1] == 0 || sizes[2] == 0 || sizes[3] == 0 || len(sizes) != 3 {
		t.Errorf("schedule sizes %v, want 1, 2 and 3 points", sizes)
	}
	if len(distinct) < 50 {
		t.Errorf("only %d distinct schedules from 500 seeds", len(distinct))
	}

	// A job without state passes neither while-writing-state nor
	// during-restore.
	stateless := map[fault.Point]int{fault.AfterBarrier: 2, fault.BeforeCommit: 2, fault.AfterCommit: 2}
	for seed := range uint64(100) {
		for p := range newSchedule(seed, stateless) {
			if !slices.Contains(periodic, p) {
				t.Fatalf("seed %d arms %s, which the job never passed", seed, p)
			}
		}
	}
	if s := newSchedule(1, nil); s != nil {
		t.Errorf("a job that passes no point: %s", s)
	}
	if got := (Schedule{fault.AfterCommit: 2, fault.AfterBarrier: 1}).String(); got != "after-barrier@1, after-commit@2" {
		t.Errorf("String = %q", got)
	}
}
