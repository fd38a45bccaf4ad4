package engine

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/state"
)

// A read of the state topic that panics (the simulations crash a process
// inside its calls) leaves no restorer goroutine behind: each waits on
// its feed until the read closes it.
func TestReadStateIntoLeavesNoGoroutineWhenTheReadPanics(t *testing.T) {
	cfg := &config.Config{Checkpoint: config.Checkpoint{KeyGroups: 16}}
	j := &Job{cfg: cfg}
	before := runtime.NumGoroutine()
	for range 20 {
		restorers := make([]*state.Restorer, 4)
		for w := range restorers {
			r, err := state.NewRestorer(16, state.RangeFor(w, len(restorers), 16))
			if err != nil {
				t.Fatal(err)
			}
			restorers[w] = r
		}
		func() {
			defer func() { _ = recover() }()
			_ = j.readStateInto(context.Background(), func(context.Context, func(key, value []byte) error) error {
				panic("crash")
			}, restorers)
		}()
	}
	// The goroutines end once their feeds are closed; they are not
	// waited for, so give them a moment (a leak leaves 80 forever).
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines left, %d before the reads", runtime.NumGoroutine(), before)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
