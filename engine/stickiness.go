package engine

import (
	"maps"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/internal/mutant"
)

// rememberingSticky is franz-go's sticky balancer given back the memory
// that the eager protocol takes from it.
//
// The sticky assignor (KIP-54) keeps partitions where they were by having
// each member say, when it joins, what it owned in the last generation;
// the leader moves only what balance needs. franz-go's eager client
// forgets its assignment when it revokes it, which under the eager
// protocol is before every join: each member then joins owning nothing,
// and the leader deals every partition afresh (two members and a third
// joining: 11 of 16 partitions moved, where 5 are enough). This balancer
// remembers the member's last assignment itself and says it in the join.
// A member that lost its generation (session timeout) says it too, with
// that older generation: the sticky assignor gives a partition claimed
// twice to the newer generation's owner.
//
// Stickiness costs nothing in correctness (each generation still fences,
// commits and restores what it owns), and is what lets a rebalance move
// only what moves: fewer partitions restored elsewhere, fewer tables and
// caches rebuilt.
type rememberingSticky struct {
	kgo.GroupBalancer

	mu      sync.Mutex
	last    map[string][]int32
	lastGen int32
}

func newRememberingSticky() *rememberingSticky {
	return &rememberingSticky{GroupBalancer: kgo.StickyBalancer()}
}

// assigned records generation gen's assignment (the eager protocol
// assigns the whole of it at once), and says how many of its partitions
// the member owned in the generation before (kept) and how many it did
// not (moved here). A member that was out of the group for a generation
// or more kept nothing: others may have owned its old partitions.
func (b *rememberingSticky) assigned(gen int32, a map[string][]int32) (kept, moved int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	last := b.last
	if b.lastGen != gen-1 {
		last = nil
	}
	b.last, b.lastGen = make(map[string][]int32, len(a)), gen
	for t, ps := range a {
		b.last[t] = slices.Sorted(slices.Values(ps))
		for _, p := range ps {
			if slices.Contains(last[t], p) {
				kept++
			} else {
				moved++
			}
		}
	}
	return kept, moved
}

// JoinGroupMetadata says the last assignment when the client passes
// none (it always passes none under the eager protocol).
func (b *rememberingSticky) JoinGroupMetadata(interests []string, current map[string][]int32, generation int32) []byte {
	if len(current) == 0 && !mutant.On("balancer-forgets-assignment") {
		b.mu.Lock()
		current = maps.Clone(b.last)
		b.mu.Unlock()
		for t, ps := range current {
			// Only topics the member still reads: the assignor
			// ignores the others, but a stale topic says nothing.
			if !slices.Contains(interests, t) {
				delete(current, t)
				continue
			}
			current[t] = slices.Clone(ps)
		}
	}
	return b.GroupBalancer.JoinGroupMetadata(interests, current, generation)
}
