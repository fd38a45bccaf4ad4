package sink

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/internal/kafkatest"
)

func TestMain(m *testing.M) { kafkatest.Main(m) }

func TestTxnCommitAndAbort(t *testing.T) {
	k := kafkatest.Broker(t)
	topic := kafkatest.Topic(t, "out")
	kafkatest.CreateTopic(t, k.Bootstrap(), topic, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	txn, err := NewTxn([]kgo.Opt{kgo.SeedBrokers(k.Bootstrap()...)}, topic+"-txn", time.Minute, kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Close()
	if err := txn.Fence(ctx); err != nil {
		t.Fatal(err)
	}
	epoch := func(end func(context.Context) error, values ...string) {
		t.Helper()
		if err := txn.Begin(); err != nil {
			t.Fatal(err)
		}
		for _, v := range values {
			txn.Produce(ctx, kgo.StringRecord(v))
		}
		if err := end(ctx); err != nil {
			t.Fatal(err)
		}
	}
	epoch(txn.Commit, "a", "b")
	epoch(txn.Abort, "never")
	epoch(txn.Commit, "c")
	if got := fmt.Sprint(kafkatest.ReadUntil(ctx, t, k.Bootstrap(), topic, kgo.ReadCommitted(), "c")); got != "[a b c]" {
		t.Fatalf("read_committed saw %s, want [a b c]", got)
	}
}

// A second instance with the same transactional id aborts the first one's
// open transaction at once (no waiting for the timeout) and fences it: the
// first can never commit again.
func TestFenceAbortsPredecessorAtOnce(t *testing.T) {
	k := kafkatest.Broker(t)
	topic := kafkatest.Topic(t, "out")
	kafkatest.CreateTopic(t, k.Bootstrap(), topic, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn := []kgo.Opt{kgo.SeedBrokers(k.Bootstrap()...), kgo.DefaultProduceTopic(topic)}
	id := topic + "-txn"

	// The transaction timeout is long: if fencing waited for it, the read
	// below would time out.
	old, err := NewTxn(conn, id, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if err := old.Fence(ctx); err != nil {
		t.Fatal(err)
	}
	if err := old.Begin(); err != nil {
		t.Fatal(err)
	}
	old.Produce(ctx, kgo.StringRecord("left-open"))
	if err := old.Client().Flush(ctx); err != nil {
		t.Fatal(err)
	}

	successor, err := NewTxn(conn, id, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer successor.Close()
	if err := successor.Fence(ctx); err != nil {
		t.Fatal(err)
	}
	if err := successor.Begin(); err != nil {
		t.Fatal(err)
	}
	successor.Produce(ctx, kgo.StringRecord("successor"))
	if err := successor.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	readCtx, readCancel := context.WithTimeout(ctx, 30*time.Second)
	defer readCancel()
	if got := fmt.Sprint(kafkatest.ReadUntil(readCtx, t, k.Bootstrap(), topic, kgo.ReadCommitted(), "successor")); got != "[successor]" {
		t.Fatalf("read_committed saw %s, want only the successor's record", got)
	}

	old.Produce(ctx, kgo.StringRecord("too-late"))
	err = old.Commit(ctx)
	if !errors.Is(err, ErrFenced) {
		t.Fatalf("the fenced producer's commit returned %v, want ErrFenced", err)
	}
}

// The broker answers a fenced producer with one of several codes,
// depending on where its request met the fence; each one stops the job.
func TestIsFenced(t *testing.T) {
	for _, err := range []error{
		ErrFenced,
		kerr.ProducerFenced,
		kerr.InvalidProducerEpoch,
		kerr.InvalidTxnState,
		kerr.TransactionalIDAuthorizationFailed,
		fmt.Errorf("committing transaction: %w", kerr.InvalidTxnState),
	} {
		if !IsFenced(err) {
			t.Errorf("IsFenced(%v) = false", err)
		}
	}
	for _, err := range []error{
		nil,
		errors.New("producing in transaction: i/o timeout"),
		kerr.CoordinatorNotAvailable,
		kerr.ConcurrentTransactions,
		fmt.Errorf("flush: %w", kerr.NotLeaderForPartition),
	} {
		if IsFenced(err) {
			t.Errorf("IsFenced(%v) = true: a retryable failure would stop the job", err)
		}
	}
}
