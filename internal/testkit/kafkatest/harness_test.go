package kafkatest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestMain(m *testing.M) { Main(m) }

// TestTransactionsAreReal proves the harness talks to a real transaction
// coordinator: a read_committed consumer sees only the committed
// transaction, a read_uncommitted one sees the aborted records too.
func TestTransactionsAreReal(t *testing.T) {
	k := Broker(t)
	t.Logf("broker from %s at %v", k.Source, k.Bootstrap())
	topic := Topic(t, "txn")
	CreateTopic(t, k.Bootstrap(), topic, 1, nil)

	producer := Client(t, k.Bootstrap(),
		kgo.TransactionalID(topic+"-producer"),
		kgo.DefaultProduceTopic(topic),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	transact(ctx, t, producer, kgo.TryCommit, "committed-1", "committed-2")
	transact(ctx, t, producer, kgo.TryAbort, "aborted-1", "aborted-2")
	// A last committed record marks the end, so a reader knows it has seen
	// everything before it.
	transact(ctx, t, producer, kgo.TryCommit, "end")

	committed := ReadUntil(ctx, t, k.Bootstrap(), topic, kgo.ReadCommitted(), "end")
	if want := []string{"committed-1", "committed-2", "end"}; fmt.Sprint(committed) != fmt.Sprint(want) {
		t.Errorf("read_committed saw %v, want %v", committed, want)
	}
	uncommitted := ReadUntil(ctx, t, k.Bootstrap(), topic, kgo.ReadUncommitted(), "end")
	if want := []string{"committed-1", "committed-2", "aborted-1", "aborted-2", "end"}; fmt.Sprint(uncommitted) != fmt.Sprint(want) {
		t.Errorf("read_uncommitted saw %v, want %v", uncommitted, want)
	}
}

func transact(ctx context.Context, t *testing.T, cl *kgo.Client, end kgo.TransactionEndTry, values ...string) {
	t.Helper()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, v := range values {
		if err := cl.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err != nil {
			t.Fatalf("produce %q: %v", v, err)
		}
	}
	if err := cl.EndTransaction(ctx, end); err != nil {
		t.Fatalf("end transaction (commit=%v): %v", end, err)
	}
}

// TestClusterSurvivesBrokerRestart proves the 3-node helper: with one
// broker killed, transactions still commit (replication 3, min ISR 2), and
// the broker comes back into the cluster.
func TestClusterSurvivesBrokerRestart(t *testing.T) {
	c := StartCluster(t, 3)
	topic := Topic(t, "rf3")
	CreateTopic(t, c.Bootstrap(), topic, 1, nil)
	adm := kadm.NewClient(Client(t, c.Bootstrap()))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	p := md.Topics[topic].Partitions[0]
	if len(p.Replicas) != 3 {
		t.Fatalf("want 3 replicas by default, got %v", p.Replicas)
	}
	leader := p.Leader
	if err := c.KillBroker(leader); err != nil {
		t.Fatal(err)
	}
	if pid := c.PIDs()[leader]; pid != 0 {
		t.Fatalf("broker %d still has pid %d after kill", leader, pid)
	}

	producer := Client(t, c.Bootstrap(), kgo.TransactionalID(topic+"-p"), kgo.DefaultProduceTopic(topic))
	transact(ctx, t, producer, kgo.TryCommit, "while-one-is-down")

	if err := c.StartBroker(ctx, leader); err != nil {
		t.Fatal(err)
	}
	// The restarted broker catches up and rejoins the ISR.
	for {
		md, err := adm.Metadata(ctx, topic)
		if err == nil && len(md.Topics[topic].Partitions[0].ISR) == 3 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("broker %d did not rejoin the ISR of %s", leader, topic)
		case <-time.After(200 * time.Millisecond):
		}
	}
	got := ReadUntil(ctx, t, c.Bootstrap(), topic, kgo.ReadCommitted(), "while-one-is-down")
	if len(got) != 1 {
		t.Errorf("read %v, want the one committed record", got)
	}
}
