package jobtest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/eoflow/pipeline/internal/fault"
)

// Schedule is a crash schedule: each armed point fails on its n-th hit,
// once, and the job restarts from its last completed checkpoint.
type Schedule map[fault.Point]int

func (s Schedule) String() string {
	var parts []string
	for _, p := range fault.Points {
		if n, ok := s[p]; ok {
			parts = append(parts, fmt.Sprintf("%s@%d", p, n))
		}
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

// periodic are the points every checkpoint passes, input or not: armed
// there, a failure always comes, so a run waits for it.
var periodic = []fault.Point{fault.AfterBarrier, fault.BeforeCommit, fault.AfterCommit}

// mustFire reports whether a run waits for point p to fail before it
// stops the job. The periodic points fail at a later checkpoint, and
// during-restore at the restart after any failure (every schedule has a
// periodic point); while-writing-state needs state to change, which
// stops with the input, so a run does not wait for it.
func mustFire(p fault.Point) bool { return p != fault.WhileWritingState }

// newSchedule draws the schedule of seed: one to three points the
// crash-free run passed (hits), at least one of them periodic, each
// failing early, on its first or second hit (a test's input fits in an
// epoch or two, and a failure after the last is a restart with nothing to
// replay); while-writing-state on one of its first five hits that the
// crash-free run had. The schedule depends on the seed and on which
// points the job passes at all, and for while-writing-state on whether
// the crash-free run wrote fewer than five state records.
func newSchedule(seed uint64, hits map[fault.Point]int) Schedule {
	rng := rand.New(rand.NewPCG(seed, 0x5eed_c0de_5eed_c0de))
	var first, others []fault.Point
	for _, p := range fault.Points {
		switch {
		case hits[p] == 0:
		case slices.Contains(periodic, p):
			first = append(first, p)
		default:
			others = append(others, p)
		}
	}
	if len(first) == 0 {
		return nil // a job without checkpoints: nothing to crash
	}
	s := Schedule{}
	p := first[rng.IntN(len(first))]
	s[p] = 1 + rng.IntN(2)
	rest := slices.Concat(slices.DeleteFunc(slices.Clone(first), func(q fault.Point) bool { return q == p }), others)
	rng.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
	for _, q := range rest[:min(rng.IntN(3), len(rest))] {
		if q == fault.WhileWritingState {
			s[q] = 1 + rng.IntN(min(hits[q], 5))
		} else {
			s[q] = 1 + rng.IntN(2)
		}
	}
	return s
}
