package sink

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/checkpoint/kstore"
	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
)

// The zombies of model_test.go against Kafka's own coordinators: what
// the model's tests catch in milliseconds, a real broker proves in
// seconds.

// A zombie holds epoch 2 prepared (its transaction open, its checkpoint
// record flushed) while its successor recovers: the successor's fence
// aborts it before the successor reads, so the zombie's commit fails and
// the checkpoint the successor restores is the newest there will be.
func TestRecoverFencesBeforeReadingTheLastCheckpointOnKafka(t *testing.T) {
	k := kafkatest.Broker(t)
	job := kafkatest.Topic(t, "job")
	out := job + "-out"
	kafkatest.CreateTopic(t, k.Bootstrap(), checkpoint.TopicName(job), 1, nil)
	kafkatest.CreateTopic(t, k.Bootstrap(), out, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := []kgo.Opt{kgo.SeedBrokers(k.Bootstrap()...)}

	zombie, err := NewTxn(conn, job, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer zombie.Close()
	if _, err := zombie.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	prepareEpoch(ctx, t, zombie, out, 1)
	if err := zombie.Commit(ctx, 1); err != nil {
		t.Fatal(err)
	}
	prepareEpoch(ctx, t, zombie, out, 2)

	successor, err := NewTxn(conn, job, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer successor.Close()
	if _, err := successor.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	last, err := successor.LastDecided(ctx)
	if err != nil || last == nil {
		t.Fatalf("LastDecided = %v, %v", last, err)
	}
	zerr := zombie.Commit(ctx, 2)
	kafkatest.AwaitSettled(ctx, t, k.Bootstrap(), checkpoint.TopicName(job))
	newest, err := kstore.Latest(ctx, conn, job)
	if err != nil {
		t.Fatal(err)
	}
	if newest.ID != last.ID || last.ID != 1 {
		t.Fatalf("the successor restored checkpoint %d, but checkpoint %d is the newest committed (the zombie's commit: %v); want 1", last.ID, newest.ID, zerr)
	}
	if !IsFenced(zerr) {
		t.Fatalf("the zombie's commit returned %v, want a fencing", zerr)
	}
}

// A group member's offsets after a rebalance, through Txn.CommitOffsets:
// the group coordinator refuses the generation the member joined in.
func TestCommitOffsetsAfterARebalanceOnKafka(t *testing.T) {
	k := kafkatest.Broker(t)
	job := kafkatest.Topic(t, "job")
	in, out := job+"-in", job+"-out"
	kafkatest.CreateTopic(t, k.Bootstrap(), in, 2, nil)
	kafkatest.CreateTopic(t, k.Bootstrap(), out, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := []kgo.Opt{kgo.SeedBrokers(k.Bootstrap()...)}

	a := joinGroup(ctx, t, k.Bootstrap(), job, in, "a", 1)
	memberA, genA := a.GroupMetadata()
	txn, err := NewMemberTxn(conn, job, "a", nil, nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Close()
	if _, err := txn.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	asA := GroupMember{Group: job, MemberID: memberA, InstanceID: "a", Generation: genA}
	epoch := func(e int) error {
		t.Helper()
		if err := txn.Begin(ctx, 1); err != nil {
			t.Fatal(err)
		}
		txn.Produce(ctx, &kgo.Record{Topic: out, Value: fmt.Appendf(nil, "epoch %d", e)})
		return txn.CommitOffsets(ctx, asA, []checkpoint.SourceOffset{{Topic: in, Partition: 0, Offset: int64(e)}})
	}
	if err := epoch(1); err != nil {
		t.Fatalf("offsets of the current generation: %v", err)
	}
	if err := txn.Commit(ctx, 1); err != nil {
		t.Fatal(err)
	}

	joinGroup(ctx, t, k.Bootstrap(), job, in, "b", genA+1, a)
	err = epoch(2)
	if !errors.Is(err, kerr.IllegalGeneration) {
		t.Fatalf("offsets of generation %d after a rebalance: %v, want ILLEGAL_GENERATION", genA, err)
	}
	if err := txn.Abort(ctx, 1); err != nil {
		t.Fatal(err)
	}
}

// joinGroup starts a static member of group consuming topic and polls it
// (and the members already there) until all are in generation gen or
// later.
func joinGroup(ctx context.Context, t *testing.T, brokers []string, group, topic, instance string, gen int32, others ...*kgo.Client) *kgo.Client {
	t.Helper()
	cl := kafkatest.Client(t, brokers, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.InstanceID(instance),
		kgo.DisableAutoCommit(), kgo.Balancers(kgo.RangeBalancer()))
	members := append([]*kgo.Client{cl}, others...)
	for {
		joined := true
		for _, m := range members {
			pollCtx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			m.PollFetches(pollCtx)
			cancel()
			if _, g := m.GroupMetadata(); g < gen {
				joined = false
			}
		}
		if joined {
			return cl
		}
		if ctx.Err() != nil {
			t.Fatalf("the group never reached generation %d: %v", gen, ctx.Err())
		}
	}
}
