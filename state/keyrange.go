package state

import "fmt"

// Range is the half-open interval [Start, End) of key groups one worker
// owns. It may be empty when a job has more workers than key groups.
// Flink: KeyGroupRange (which is inclusive at both ends).
type Range struct {
	Start KeyGroup // first group owned
	End   KeyGroup // one past the last group owned
}

// Contains reports whether kg is in r.
func (r Range) Contains(kg KeyGroup) bool { return r.Start <= kg && kg < r.End }

// Len is the number of key groups in r.
func (r Range) Len() int { return int(r.End) - int(r.Start) }

func (r Range) String() string { return fmt.Sprintf("[%d,%d)", r.Start, r.End) }

// RangeFor returns the contiguous key groups that worker (0-based) of
// workers owns when the job has groups key groups: worker w gets
//
//	[ceil(w*groups/workers), ceil((w+1)*groups/workers))
//
// which is Flink's KeyGroupRangeAssignment. The ranges of workers 0..W-1
// are disjoint, ascending, and cover [0, groups); their sizes differ by at
// most one. WorkerOf is its inverse. Contiguous ranges keep a worker's
// groups adjacent, so a rescale moves whole runs of groups, not scattered
// ones.
//
// It panics on arguments out of range (a wiring bug, not an input error).
func RangeFor(worker, workers, groups int) Range {
	checkLayout(workers, groups)
	if worker < 0 || worker >= workers {
		panic(fmt.Sprintf("state: RangeFor worker %d of %d", worker, workers))
	}
	return Range{
		Start: firstGroupOf(worker, workers, groups),
		End:   firstGroupOf(worker+1, workers, groups),
	}
}

// WorkerOf returns the worker whose RangeFor contains kg:
// floor(kg*workers/groups). It panics if kg >= groups.
func WorkerOf(kg KeyGroup, workers, groups int) int {
	checkLayout(workers, groups)
	if int(kg) >= groups {
		panic(fmt.Sprintf("state: WorkerOf key group %d with %d key groups", kg, groups))
	}
	// uint64 so the product cannot overflow on any platform: groups <= 2^15.
	return int(uint64(kg) * uint64(workers) / uint64(groups))
}

// firstGroupOf is ceil(worker*groups/workers), computed in uint64 so that
// the answer is the same on 32-bit platforms.
func firstGroupOf(worker, workers, groups int) KeyGroup {
	return KeyGroup((uint64(worker)*uint64(groups) + uint64(workers) - 1) / uint64(workers))
}

func checkLayout(workers, groups int) {
	if err := CheckKeyGroups(groups); err != nil {
		panic(err.Error())
	}
	if workers < 1 {
		panic(fmt.Sprintf("state: %d workers, want at least 1", workers))
	}
}
