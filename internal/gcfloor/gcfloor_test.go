package gcfloor

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live, floor uint64
		base, want  int
	}{
		{0, 256 * mib, 100, 100},         // no collection yet
		{64 * mib, 256 * mib, 100, 300},  // 64 × 4 = 256
		{60 * mib, 256 * mib, 100, 327},  // rounded up: 60 × 4.27 ≥ 256
		{128 * mib, 256 * mib, 100, 100}, // twice the live heap is the floor
		{200 * mib, 256 * mib, 100, 100}, // the default goal is above it
		{300 * mib, 256 * mib, 100, 100}, // live above the floor
		{64 * mib, 256 * mib, 400, 400},  // never below the base
		{4 * mib, 256 * mib, 100, 6300},  // a small live heap: 4 × 64 = 256
		{1, 256 * mib, 100, 10_000},      // a tiny one: bounded (GOGC is an int32)
	} {
		got := Percent(c.live, c.floor, c.base)
		if got != c.want {
			t.Errorf("Percent(%d, %d, %d) = %d, want %d", c.live, c.floor, c.base, got, c.want)
		}
		if c.live >= mib && c.live < c.floor && c.live*uint64(100+got)/100 < c.floor {
			t.Errorf("Percent(%d, %d, %d) = %d: goal %d below the floor", c.live, c.floor, c.base, got, c.live*uint64(100+got)/100)
		}
	}
}

// Run raises GOGC after a collection of a small heap until the goal
// reaches the floor, and sets the default back when it ends.
func TestRunRaisesTheGoalAndRestores(t *testing.T) {
	if !Wanted() {
		t.Skip("GOGC or GOMEMLIMIT is set: this process's collector is not the package's to tune")
	}
	const floor = 64 << 20 // far above this test's live heap of a few MB
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		Run(ctx, floor, time.Millisecond)
	}()
	goal := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}}
	deadline := time.Now().Add(30 * time.Second)
	for {
		runtime.GC()
		time.Sleep(5 * time.Millisecond) // the next poll sees the cycle
		metrics.Read(goal)
		if goal[0].Value.Uint64() >= floor {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("heap goal %d, want at least %d", goal[0].Value.Uint64(), floor)
		}
	}
	cancel()
	wg.Wait()
	if p := debug.SetGCPercent(100); p != 100 {
		t.Errorf("GOGC %d after Run, want the default back", p)
	}
}
