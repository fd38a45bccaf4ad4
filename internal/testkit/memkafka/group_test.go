package memkafka

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// groupSide is what the group script needs besides side: members joining
// a consumer group, and commits made on a member's behalf.
type groupSide interface {
	side
	// join adds a consumer to group reading topic (with a static
	// instance id, or none) and waits until the group is stable with it;
	// it returns the member as it then is.
	join(group, topic, instanceID string) (GroupMember, error)
	// generation waits until every live member is in the group's newest
	// generation and returns that generation.
	generation(group string) (int32, error)
	txnCommitOffsetsAs(p int, group string, m GroupMember, tp TP, offset int64) error
}

// groupScript is KIP-447's promise: offsets a zombie commits on behalf of
// an old generation, or of a member replaced by another process with its
// instance id, are refused, whatever its transaction does. Every
// transaction writes a record: one that wrote nothing, franz-go ends
// without asking the coordinator (the raw offset commits here would stay
// pending). A transactional commit on behalf of no one is taken, members
// or not: only the member's name keeps a zombie out.
func groupScript(s groupSide, topic, group string) string {
	var out strings.Builder
	say := func(step string, err error) { fmt.Fprintf(&out, "%s: %s\n", step, errName(err)) }
	p0 := TP{topic, 0}
	say("create", s.createTopic(topic, 2))
	x, err := s.initProducer(topic + "-x")
	say("init X", err)
	a, err := s.join(group, topic, "a")
	say("A joins", err)
	g1, err := s.generation(group)
	fmt.Fprintf(&out, "generation after A: %d (%s); A is in %d\n", g1, errName(err), a.Generation)
	a.Generation = g1

	say("X begin", s.begin(x))
	say("X produce", s.produce(x, p0, "x1"))
	say("X offsets as A", s.txnCommitOffsetsAs(x, group, a, p0, 5))
	say("X commit", s.end(x, true))
	o, err := s.groupOffset(group, p0)
	fmt.Fprintf(&out, "group offset: %d (%s)\n", o, errName(err))

	_, err = s.join(group, topic, "b")
	say("B joins", err)
	g2, err := s.generation(group)
	fmt.Fprintf(&out, "generation after B: +%d (%s)\n", g2-g1, errName(err))
	say("X begin", s.begin(x))
	say("X produce", s.produce(x, p0, "x2"))
	say("X offsets as A of the old generation", s.txnCommitOffsetsAs(x, group, a, p0, 6))
	say("X abort", s.end(x, false))
	say("plain offsets as A of the old generation", s.commitOffsetsAs(group, a, p0, 6))
	say("plain offsets as no member", s.commitOffsetsAs(group, GroupMember{Generation: -1}, p0, 6))
	say("X begin", s.begin(x))
	say("X produce", s.produce(x, p0, "x3"))
	cur := a
	cur.Generation = g2
	say("X offsets as A of the new generation", s.txnCommitOffsetsAs(x, group, cur, p0, 7))
	say("X commit", s.end(x, true))

	// B's process is replaced by another with its instance id: the old
	// member id is fenced, without a rebalance.
	b2, err := s.join(group, topic, "b")
	say("B' joins as instance b", err)
	gb, err := s.generation(group)
	fmt.Fprintf(&out, "generation after B': +%d (%s)\n", gb-g2, errName(err))
	_ = b2
	g2 = gb

	// A's process, the group's leader's, is replaced the same way.
	a2, err := s.join(group, topic, "a")
	say("A' joins as instance a", err)
	g3, err := s.generation(group)
	fmt.Fprintf(&out, "generation after A': +%d (%s)\n", g3-g2, errName(err))
	say("X begin", s.begin(x))
	say("X produce", s.produce(x, p0, "x4"))
	say("X offsets as the replaced A", s.txnCommitOffsetsAs(x, group, cur, p0, 8))
	say("X abort", s.end(x, false))
	say("plain offsets as the replaced A", s.commitOffsetsAs(group, cur, p0, 8))
	say("X begin", s.begin(x))
	say("X produce", s.produce(x, p0, "x5"))
	a2.Generation = g3
	say("X offsets as A'", s.txnCommitOffsetsAs(x, group, a2, p0, 9))
	say("X commit", s.end(x, true))
	o, err = s.groupOffset(group, p0)
	fmt.Fprintf(&out, "group offset: %d (%s)\n", o, errName(err))
	say("X begin", s.begin(x))
	say("X produce", s.produce(x, p0, "x6"))
	say("X offsets as a stranger", s.txnCommitOffsetsAs(x, group, GroupMember{MemberID: "nobody", Generation: g3}, p0, 10))
	say("X abort", s.end(x, false))
	say("X begin", s.begin(x))
	say("X produce", s.produce(x, p0, "x7"))
	say("X offsets as no member", s.txnCommitOffsetsAs(x, group, GroupMember{Generation: -1}, p0, 11))
	say("X commit", s.end(x, true))
	o, err = s.groupOffset(group, p0)
	fmt.Fprintf(&out, "group offset: %d (%s)\n", o, errName(err))
	say("plain offsets as A'", s.commitOffsetsAs(group, a2, p0, 12))
	o, err = s.groupOffset(group, p0)
	fmt.Fprintf(&out, "group offset: %d (%s)\n", o, errName(err))
	return out.String()
}

func TestGroupModelMatchesTheRealBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a Kafka broker")
	}
	real, client, model := sides(t)
	run := func(s side, topic string) string { return groupScript(s.(groupSide), topic, topic+"-group") }
	conform(t, "groups", run, real(), client(), &modelGroupSide{model().(*modelSide)})
}

// modelGroupSide is modelSide with the group coordinator's own API.
type modelGroupSide struct{ *modelSide }

func (m *modelGroupSide) join(group, _, instanceID string) (GroupMember, error) {
	return m.c.JoinGroup(group, instanceID)
}

func (m *modelGroupSide) generation(group string) (int32, error) { return m.c.Generation(group), nil }

func (m *modelGroupSide) txnCommitOffsetsAs(p int, group string, gm GroupMember, tp TP, offset int64) error {
	return m.producers[p].TxnCommitOffsetsAs(group, gm, map[TP]int64{tp: offset})
}

// join makes a group consumer (static with an instance id) and polls
// until it is in the group. A member with the instance id of an earlier
// one replaces it: the earlier process is gone without leaving (a static
// member does not leave on close).
func (s *clientSide) join(group, topic, instanceID string) (GroupMember, error) {
	if old := s.consumers[instanceID]; old != nil {
		old.Close()
	}
	cl := s.b.client(ClientConfig{Group: group, Topics: []string{topic}, InstanceID: instanceID})
	s.consumers[instanceID] = cl
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		cl.PollFetches(ctx)
		cancel()
		if id, gen := cl.GroupMetadata(); gen > 0 {
			return GroupMember{MemberID: id, InstanceID: instanceID, Generation: gen}, nil
		}
		if time.Now().After(deadline) {
			return GroupMember{}, fmt.Errorf("instance %s never joined", instanceID)
		}
	}
}

// generation polls every member until all have been in one generation
// for a while (a second on a broker, whose rebalances take their time;
// no time on the model, whose rebalances complete at once).
func (s *clientSide) generation(group string) (int32, error) {
	settled := time.Second
	if _, ok := s.b.(*modelBackend); ok {
		settled = 0
	}
	deadline := time.Now().Add(30 * time.Second)
	var stable int32 // the generation every member has been in since since
	var since time.Time
	for {
		gens := map[int32]bool{}
		var newest int32
		for _, cl := range s.consumers {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			cl.PollFetches(ctx)
			cancel()
			_, gen := cl.GroupMetadata()
			gens[gen] = true
			newest = max(newest, gen)
		}
		if len(gens) == 1 && newest > 0 {
			if stable == newest && time.Since(since) >= settled {
				return newest, nil
			}
			if stable != newest {
				stable, since = newest, time.Now()
			}
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("the group never settled: generations %v", gens)
		}
	}
}

// A member that leaves starts a new generation, and can commit no more;
// generations only grow.
func TestGroupLeave(t *testing.T) {
	c := New(time.Unix(0, 0))
	if err := c.CreateTopic("in", 1); err != nil {
		t.Fatal(err)
	}
	a, _ := c.JoinGroup("g", "")
	b, _ := c.JoinGroup("g", "b")
	if a.Generation != 1 || b.Generation != 2 || c.Generation("g") != 2 {
		t.Fatalf("generations %d %d %d", a.Generation, b.Generation, c.Generation("g"))
	}
	if err := c.LeaveGroup("g", b); err != nil || c.Generation("g") != 3 {
		t.Fatalf("leave: %v, generation %d", err, c.Generation("g"))
	}
	if err := c.LeaveGroup("g", b); !errors.Is(err, kerr.UnknownMemberID) {
		t.Fatalf("leaving twice: %v", err)
	}
	p, err := c.InitProducer("x", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	p.Begin()
	b.Generation = 3
	if err := p.TxnCommitOffsetsAs("g", b, map[TP]int64{{"in", 0}: 1}); !errors.Is(err, kerr.UnknownMemberID) {
		t.Fatalf("a member that left committed: %v", err)
	}
	a.Generation = 3
	if err := p.TxnCommitOffsetsAs("g", a, map[TP]int64{{"in", 0}: 1}); err != nil {
		t.Fatalf("the member that stayed: %v", err)
	}
}
