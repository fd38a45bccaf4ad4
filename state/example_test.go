package state_test

import (
	"fmt"

	"github.com/eoflow/pipeline/state"
)

// A keyed operator's state across one checkpoint and a restart on a
// different number of workers.
func Example() {
	const groups = 128 // checkpoint.key_groups, fixed for the job's life
	const workers = 2

	// Before the job runs: one store per keyed operator and worker.
	stores := make([]*state.Store[[]byte], workers)
	for w := range stores {
		s, err := state.New[[]byte]("aggregate-3", groups, state.RangeFor(w, workers, groups), state.BytesCodec{})
		if err != nil {
			panic(err)
		}
		stores[w] = s
	}
	// The key_by shuffle sends each key to the worker that owns its group.
	storeOf := func(key []byte) *state.Store[[]byte] {
		return stores[state.WorkerOf(state.KeyGroupOf(key, groups), workers, groups)]
	}
	storeOf([]byte("alice")).Put([]byte("alice"), []byte("3"))
	storeOf([]byte("bob")).Put([]byte("bob"), []byte("5"))

	// Barrier N: every store's delta goes into transaction N as records
	// of the <job>-state topic.
	var topic []state.ChangelogRecord
	for _, s := range stores {
		topic = append(topic, s.Snapshot().Records()...)
	}

	// Restart with one worker: read the topic (read_committed) into it.
	r := state.RangeFor(0, 1, groups)
	restored, _ := state.New[[]byte]("aggregate-3", groups, r, state.BytesCodec{})
	rs, _ := state.NewRestorer(groups, r)
	if err := rs.Register(restored); err != nil {
		panic(err)
	}
	for _, rec := range topic {
		if err := rs.Add(rec); err != nil {
			panic(err)
		}
	}
	for e := range restored.All() {
		fmt.Printf("group %d: %s = %s\n", e.Group, e.Key, e.Value)
	}
	// Output:
	// group 93: alice = 3
	// group 114: bob = 5
}
