package fault

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// Point names a place a failure can be injected.
type Point string

// The points the runtime offers.
const (
	// AfterBarrier: a source injected a barrier and recorded its offsets.
	AfterBarrier Point = "after-barrier"
	// WhileWritingState: the sink handed some, not all, of an epoch's
	// state changes to the transaction.
	WhileWritingState Point = "while-writing-state"
	// BeforeCommit: every record of the epoch, the checkpoint record
	// included, is flushed to the brokers; the transaction is not yet
	// committed.
	BeforeCommit Point = "before-commit"
	// AfterCommit: the transaction committed; the next has not begun.
	AfterCommit Point = "after-commit"
	// DuringRestore: the state topic is partly read.
	DuringRestore Point = "during-restore"
)

// Points lists every point, for tests that visit each.
var Points = []Point{AfterBarrier, WhileWritingState, BeforeCommit, AfterCommit, DuringRestore}

// EnvVar arms points in a child process built with the faultpoints tag
// (see FromEnv).
const EnvVar = "PIPELINE_FAULTS"

// ErrInjected is returned by Hit for points armed to fail in-process.
var ErrInjected = errors.New("injected failure")

// Injector counts hits of armed points and fails on the chosen one.
type Injector struct {
	mu    sync.Mutex
	armed map[Point]int // hits left before the failure
	hits  map[Point]int // passes through each point, armed or not
	kill  bool
	// pause, if set, is what the armed hit does instead of failing.
	pause func()
}

// New returns an Injector that makes Hit return ErrInjected on the n-th hit
// of each armed point (n = the map value, from 1).
func New(armed map[Point]int) *Injector {
	return &Injector{armed: copyArmed(armed)}
}

// Hits returns how many times each point was passed so far, armed or not:
// a run with an injector that arms nothing (New(nil)) measures how far a
// schedule may reach (pipeline test draws its crash schedules so).
func (i *Injector) Hits() map[Point]int {
	if i == nil {
		return nil
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	return copyArmed(i.hits)
}

// Armed returns the points still armed, each with the hits left before it
// fails: empty once every armed point has failed.
func (i *Injector) Armed() map[Point]int {
	if i == nil {
		return nil
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	return copyArmed(i.armed)
}

// Disarm disarms every point that has not failed yet and returns them,
// each with the hits it still lacked, so a caller can stop a job without
// a failure in its final checkpoint and report what never fired.
func (i *Injector) Disarm() map[Point]int {
	if i == nil {
		return nil
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	left := i.armed
	i.armed = map[Point]int{}
	return left
}

// Pause returns an Injector that, on the n-th hit of p, calls wait and
// then lets the job carry on: the task is stalled there, as a process
// stopped (SIGSTOP) and continued would be, for as long as wait decides
// (until the broker did something, never a fixed time).
func Pause(p Point, n int, wait func()) *Injector {
	return &Injector{armed: map[Point]int{p: n}, pause: wait}
}

// Parse reads "point@n,point@n" (n defaults to 1).
func Parse(spec string) (map[Point]int, error) {
	armed := map[Point]int{}
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, count, hasCount := strings.Cut(item, "@")
		n := 1
		if hasCount {
			var err error
			if n, err = strconv.Atoi(count); err != nil || n < 1 {
				return nil, fmt.Errorf("%q: the count after @ must be a whole number from 1", item)
			}
		}
		p := Point(name)
		if !known(p) {
			return nil, fmt.Errorf("unknown fault point %q (known: %v)", name, Points)
		}
		armed[p] = n
	}
	return armed, nil
}

func known(p Point) bool {
	for _, q := range Points {
		if p == q {
			return true
		}
	}
	return false
}

func copyArmed(m map[Point]int) map[Point]int {
	c := make(map[Point]int, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// Hit marks one pass through p. On the armed hit it kills the process
// (armed from the environment) or returns ErrInjected (armed in-process);
// each point fails once.
func (i *Injector) Hit(p Point) error {
	if i == nil {
		return nil
	}
	i.mu.Lock()
	if i.hits == nil {
		i.hits = map[Point]int{}
	}
	i.hits[p]++
	left, ok := i.armed[p]
	if ok {
		left--
		i.armed[p] = left
		if left == 0 {
			delete(i.armed, p)
		}
	}
	i.mu.Unlock()
	if !ok || left > 0 {
		return nil
	}
	if i.pause != nil {
		i.pause()
		return nil
	}
	if i.kill {
		killProcess(p)
	}
	return fmt.Errorf("%w at %s", ErrInjected, p)
}
