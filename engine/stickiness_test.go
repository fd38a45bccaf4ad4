package engine

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupOfBalancers plays the group's rounds the way franz-go's eager
// client does: each member joins passing no current assignment (it
// revoked everything first), the leader balances, and each member is
// told its share.
type groupOfBalancers struct {
	t       *testing.T
	make    func() kgo.GroupBalancer
	members map[string]kgo.GroupBalancer
	owned   map[string]map[string][]int32
	gen     int32
	// gens are the generation each member last took part in (a
	// member's own, which its client passes when it joins).
	gens map[string]int32
}

// round runs one generation with the given members and returns how many
// partitions changed owner (a partition owned by no one before counts).
func (g *groupOfBalancers) round(ids ...string) (moved int) {
	g.t.Helper()
	g.gen++
	topics := map[string]int32{"in": 8, "job-repartition": 8}
	interests := []string{"in", "job-repartition"}
	var joins []kmsg.JoinGroupResponseMember
	if g.gens == nil {
		g.gens = map[string]int32{}
	}
	for _, id := range ids {
		if g.members[id] == nil {
			g.members[id] = g.make()
			g.gens[id] = -1
		}
		inst := id
		joins = append(joins, kmsg.JoinGroupResponseMember{
			MemberID: "member-" + id, InstanceID: &inst,
			ProtocolMetadata: g.members[id].JoinGroupMetadata(interests, nil, g.gens[id]),
		})
	}
	mb, _, err := g.members[ids[0]].MemberBalancer(joins)
	if err != nil {
		g.t.Fatal(err)
	}
	plan, err := mb.(kgo.GroupMemberBalancerOrError).BalanceOrError(topics)
	if err != nil {
		g.t.Fatal(err)
	}
	before := g.owned
	g.owned = map[string]map[string][]int32{}
	for _, sa := range plan.IntoSyncAssignment() {
		id := sa.MemberID[len("member-"):]
		share, err := g.members[id].ParseSyncAssignment(sa.MemberAssignment)
		if err != nil {
			g.t.Fatal(err)
		}
		g.owned[id] = share
		g.gens[id] = g.gen
		if r, ok := g.members[id].(*rememberingSticky); ok {
			kept, here := r.assigned(g.gen, share)
			n := 0
			for topic, ps := range share {
				for _, p := range ps {
					if slices.Contains(before[id][topic], p) {
						n++
					}
				}
			}
			if kept != n || kept+here != g.share(id) {
				g.t.Errorf("member %s: assigned says kept %d, moved here %d; it kept %d of %d", id, kept, here, n, g.share(id))
			}
		}
		for topic, ps := range share {
			for _, p := range ps {
				if !slices.Contains(before[id][topic], p) {
					moved++
				}
			}
		}
	}
	return moved
}

// share is how many partitions member id owns.
func (g *groupOfBalancers) share(id string) (n int) {
	for _, ps := range g.owned[id] {
		n += len(ps)
	}
	return n
}

// A rebalance moves only what balance needs, however many times the
// group changes: a member joining takes its share and nothing else moves;
// a member leaving hands on its share and nothing else moves. franz-go's
// sticky balancer alone, as its eager client drives it, moves more.
func TestRebalancesMoveOnlyWhatBalanceNeeds(t *testing.T) {
	g := &groupOfBalancers{t: t, members: map[string]kgo.GroupBalancer{},
		make: func() kgo.GroupBalancer { return newRememberingSticky() }}
	if moved := g.round("a", "b"); moved != 16 {
		t.Fatalf("first generation dealt %d partitions, want all 16", moved)
	}
	for i, step := range []struct {
		members       []string
		joins, leaves string
	}{
		{members: []string{"a", "b", "c"}, joins: "c"},
		{members: []string{"a", "b"}, leaves: "c"},
		{members: []string{"a", "b", "c"}, joins: "c"},
		{members: []string{"b", "c"}, leaves: "a"},
		{members: []string{"a", "b", "c"}, joins: "a"},
		{members: []string{"a", "b", "c", "d"}, joins: "d"},
		{members: []string{"a", "c", "d"}, leaves: "b"},
	} {
		want := g.share(step.leaves) // before the round
		moved := g.round(step.members...)
		if step.joins != "" {
			want = g.share(step.joins)
		}
		if moved != want {
			t.Errorf("round %d (%v): %d partitions moved, want %d (the share of the member that joined or left); shares %v", i+2, step.members, moved, want, g.owned)
		}
		lo, hi := 16, 0
		for _, id := range step.members {
			lo, hi = min(lo, g.share(id)), max(hi, g.share(id))
		}
		if hi-lo > 1 {
			t.Errorf("round %d (%v): shares from %d to %d partitions: not balanced; %v", i+2, step.members, lo, hi, g.owned)
		}
	}

	plain := &groupOfBalancers{t: t, members: map[string]kgo.GroupBalancer{}, make: kgo.StickyBalancer}
	plain.round("a", "b")
	moved := plain.round("a", "b", "c")
	t.Logf("franz-go's sticky balancer alone, a third member joining two: %d of 16 partitions moved, the newcomer's share %d", moved, plain.share("c"))
	if moved <= plain.share("c") {
		t.Fatalf("the plain balancer moved only the newcomer's share: the client may remember assignments itself now, and rememberingSticky is not needed")
	}
}
