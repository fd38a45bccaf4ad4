package engine

import (
	"sync"
	"sync/atomic"
	"testing"
)

// newSlab is a slab as the pool makes them: one the test returns goes
// into the pool the runtime's tests take theirs from.
func newSlab() *recordSlab { return recordSlabs.New().(*recordSlab) }

// TestSlabReturnsOnceAfterRouterAndWorkers: a slab goes back to the pool
// exactly once, when the router has left it and every record it sent on
// was given back, in whichever order they come, and never before.
func TestSlabReturnsOnceAfterRouterAndWorkers(t *testing.T) {
	t.Run("workers first", func(t *testing.T) {
		s := newSlab()
		if s.giveBack(2) || s.giveBack(1) {
			t.Fatal("returned while the router still hands out its records")
		}
		if !s.left(3) {
			t.Fatal("not returned when the router left it, all its records given back")
		}
	})
	t.Run("router first", func(t *testing.T) {
		s := newSlab()
		if s.left(3) {
			t.Fatal("returned with three records in flight")
		}
		if s.giveBack(2) {
			t.Fatal("returned with one record in flight")
		}
		if !s.giveBack(1) {
			t.Fatal("not returned after the last record came back")
		}
	})
	t.Run("nothing sent", func(t *testing.T) {
		if !(newSlab()).left(0) {
			t.Fatal("a slab none of whose records were sent on was not returned")
		}
	})
	t.Run("concurrent workers", func(t *testing.T) {
		for range 100 {
			s := newSlab()
			var wg sync.WaitGroup
			var returned atomic.Int32
			for range 8 {
				wg.Go(func() {
					for range 10 {
						if s.giveBack(1) {
							returned.Add(1)
						}
					}
				})
			}
			if s.left(80) {
				returned.Add(1)
			}
			wg.Wait()
			n := returned.Load()
			if n != 1 {
				t.Fatalf("returned %d times", n)
			}
		}
	})
}

// TestWorkerGivesBackRunsOfASlab: a worker's give-backs of consecutive
// records of one slab are one settle per run.
func TestWorkerGivesBackRunsOfASlab(t *testing.T) {
	a, b := newSlab(), newSlab()
	a.left(3)
	b.left(1)
	var r slabReturns
	r.add(a)
	r.add(a)
	if a.pending.Load() != 3 {
		t.Fatalf("gave back before the run ended: pending %d", a.pending.Load())
	}
	r.add(b)
	if a.pending.Load() != 1 {
		t.Fatalf("the run of two was not given back when the slab changed: pending %d", a.pending.Load())
	}
	r.add(a)
	r.flush()
	if a.pending.Load() != 0 || b.pending.Load() != 0 {
		t.Fatalf("after the flush: pending %d and %d, want 0 and 0", a.pending.Load(), b.pending.Load())
	}
}
