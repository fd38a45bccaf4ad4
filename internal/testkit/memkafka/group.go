package memkafka

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// The group coordinator, as far as exactly-once across processes needs it
// (KIP-447): who is a member of a consumer group, in which generation,
// and whether a transactional offset commit made on a member's behalf is
// still its to make. Assignment is the members' business (the leader
// computes it from the sorted member list, as a classic group's leader
// does); rebalances complete at once.
//
//   - A member without an instance id that joins starts a new generation.
//   - A static member (KIP-345) that joins with the instance id of a
//     current member replaces it without a rebalance: the generation stays,
//     and the replaced member id is fenced.
//   - A member that leaves starts a new generation.
//   - TxnCommitOffsetsAs is refused with kerr.FencedInstanceID when the
//     instance id now belongs to another member id, kerr.UnknownMemberID
//     for a member not in the group, kerr.IllegalGeneration for a
//     generation that is not the group's: a zombie of an old generation
//     cannot commit offsets, whatever its transaction does.

// GroupMember is one consumer as the group coordinator knows it, and as
// it names itself in a commit.
type GroupMember struct {
	MemberID, InstanceID string
	Generation           int32
}

// anonymous reports whether m names no member: generation -1, no member
// id, no instance id, as a commit may that comes from no group member.
func (m GroupMember) anonymous() bool {
	return m.Generation < 0 && m.MemberID == "" && m.InstanceID == ""
}

type group struct {
	generation int32
	members    map[string]string // member id -> instance id ("" when dynamic)
	instances  map[string]string // instance id -> member id
	nextMember int
}

// JoinGroup adds a member to group (created empty if new) and returns it
// in the generation it is in after joining.
func (c *Cluster) JoinGroup(groupName, instanceID string) (GroupMember, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.group(groupName)
	g.nextMember++
	name := instanceID
	if name == "" {
		name = "consumer"
	}
	id := fmt.Sprintf("%s-%d", name, g.nextMember)
	defer c.notify()
	if old, ok := g.instances[instanceID]; ok && instanceID != "" {
		delete(g.members, old)
		g.members[id], g.instances[instanceID] = instanceID, id
		return GroupMember{MemberID: id, InstanceID: instanceID, Generation: g.generation}, nil
	}
	g.members[id] = instanceID
	if instanceID != "" {
		g.instances[instanceID] = id
	}
	g.generation++
	return GroupMember{MemberID: id, InstanceID: instanceID, Generation: g.generation}, nil
}

// LeaveGroup removes a member: the others rebalance into a new generation.
func (c *Cluster) LeaveGroup(groupName string, m GroupMember) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.group(groupName)
	if err := g.check(m, false); err != nil {
		return err
	}
	delete(g.members, m.MemberID)
	if m.InstanceID != "" {
		delete(g.instances, m.InstanceID)
	}
	g.generation++
	c.notify()
	return nil
}

// Generation is group's current generation (0 before any member joined).
func (c *Cluster) Generation(groupName string) int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.group(groupName).generation
}

// group returns the coordinator's state of a group; c.mu is held.
func (c *Cluster) group(name string) *group {
	if c.members == nil {
		c.members = map[string]*group{}
	}
	g := c.members[name]
	if g == nil {
		g = &group{members: map[string]string{}, instances: map[string]string{}}
		c.members[name] = g
	}
	return g
}

// check validates m as the coordinator validates the member fields of an
// offset commit; with generation false only its membership.
func (g *group) check(m GroupMember, generation bool) error {
	if m.InstanceID != "" {
		if cur, ok := g.instances[m.InstanceID]; ok && cur != m.MemberID {
			return fmt.Errorf("instance %s is member %s now, not %s: %w", m.InstanceID, cur, m.MemberID, kerr.FencedInstanceID)
		}
	}
	if _, ok := g.members[m.MemberID]; !ok {
		return fmt.Errorf("member %s: %w", m.MemberID, kerr.UnknownMemberID)
	}
	if generation && m.Generation != g.generation {
		return fmt.Errorf("member %s in generation %d, the group is in %d: %w", m.MemberID, m.Generation, g.generation, kerr.IllegalGeneration)
	}
	return nil
}

// CommitOffsetsAs commits offsets to group outside any transaction on
// behalf of member m (a consumer's OffsetCommit): the coordinator refuses
// it as it refuses TxnCommitOffsetsAs, and a commit that names no member
// (generation -1, no member id, no instance id) from anyone while the
// group has members (kerr.UnknownMemberID): only a transactional commit
// may name no one.
func (c *Cluster) CommitOffsetsAs(groupName string, m GroupMember, offsets map[TP]int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for tp := range offsets {
		if _, err := c.partition(tp); err != nil {
			return err
		}
	}
	g := c.group(groupName)
	switch {
	case m.anonymous() && len(g.members) > 0:
		return fmt.Errorf("a commit naming no member to group %s of %d members: %w", groupName, len(g.members), kerr.UnknownMemberID)
	case !m.anonymous():
		if err := g.check(m, true); err != nil {
			return err
		}
	}
	applied := c.groups[groupName]
	if applied == nil {
		applied = map[TP]int64{}
		c.groups[groupName] = applied
	}
	for tp, o := range offsets {
		applied[tp] = o
	}
	return nil
}

// TxnCommitOffsetsAs is TxnCommitOffsets on behalf of group member m
// (KIP-447): the coordinator checks m's membership and generation when
// the commit is made, and refuses it for a member fenced, gone or of
// another generation.
func (p *Producer) TxnCommitOffsetsAs(groupName string, m GroupMember, offsets map[TP]int64) error {
	return p.txnCommitOffsets(groupName, &m, offsets)
}

// UnstableOffsets returns the transactional ids whose open transactions
// hold offsets for any of tps in group, sorted (none: the offsets are
// stable). While there is one, an OffsetFetch with require_stable answers
// UNSTABLE_OFFSET_COMMIT (KIP-447).
func (c *Cluster) UnstableOffsets(groupName string, tps []TP) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var holders []string
	for name, id := range c.ids {
		if id.open == nil {
			continue
		}
		for tp := range id.open.offsets[groupName] {
			if containsTP(tps, tp) {
				holders = append(holders, name)
				break
			}
		}
	}
	slices.Sort(holders)
	return holders
}

// PendingOffsets reports whether a decided transaction's offsets for one
// of tps in group wait for their marker (marker lag): a stable offset
// fetch is still refused with UNSTABLE_OFFSET_COMMIT, though no
// transaction holding them is open any more.
func (c *Cluster) PendingOffsets(groupName string, tps []TP) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.pending {
		if m.group != groupName {
			continue
		}
		for tp := range m.t.offsets[groupName] {
			if containsTP(tps, tp) {
				return true
			}
		}
	}
	return false
}
