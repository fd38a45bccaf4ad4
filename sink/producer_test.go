package sink

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
	"github.com/eoflow/pipeline/twophase"
)

func TestMain(m *testing.M) { kafkatest.Main(m) }

func TestTxnCommitAndAbort(t *testing.T) {
	k := kafkatest.Broker(t)
	topic := kafkatest.Topic(t, "out")
	kafkatest.CreateTopic(t, k.Bootstrap(), topic, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	txn, err := NewTxn([]kgo.Opt{kgo.SeedBrokers(k.Bootstrap()...)}, topic, time.Minute, kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Close()
	if err := txn.Fence(ctx); err != nil {
		t.Fatal(err)
	}
	epoch := func(end func(context.Context, twophase.Epoch) error, values ...string) {
		t.Helper()
		if err := txn.Begin(ctx, 1); err != nil {
			t.Fatal(err)
		}
		for _, v := range values {
			txn.Produce(ctx, kgo.StringRecord(v))
		}
		if err := end(ctx, 1); err != nil {
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
	if err := old.Begin(ctx, 1); err != nil {
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
	if err := successor.Begin(ctx, 1); err != nil {
		t.Fatal(err)
	}
	successor.Produce(ctx, kgo.StringRecord("successor"))
	if err := successor.Commit(ctx, 1); err != nil {
		t.Fatal(err)
	}
	readCtx, readCancel := context.WithTimeout(ctx, 30*time.Second)
	defer readCancel()
	if got := fmt.Sprint(kafkatest.ReadUntil(readCtx, t, k.Bootstrap(), topic, kgo.ReadCommitted(), "successor")); got != "[successor]" {
		t.Fatalf("read_committed saw %s, want only the successor's record", got)
	}

	old.Produce(ctx, kgo.StringRecord("too-late"))
	err = old.Commit(ctx, 1)
	if !errors.Is(err, ErrFenced) {
		t.Fatalf("the fenced producer's commit returned %v, want ErrFenced", err)
	}
}

// Classify reads the sentinels the producer marks its errors with, and
// reads an epoch error nobody put to the coordinator as a takeover.
func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want Verdict
	}{
		{ErrFenced, TakenOver},
		{fmt.Errorf("prepare: %w", twophase.ErrFenced), TakenOver},
		{kerr.ProducerFenced, TakenOver},
		{kerr.InvalidProducerEpoch, TakenOver},
		{fmt.Errorf("committing transaction: %w", kerr.InvalidTxnState), TakenOver},
		{fmt.Errorf("%w: %w", ErrTransactionTimedOut, kerr.InvalidProducerEpoch), TimedOut},
		{kerr.TransactionalIDAuthorizationFailed, Unauthorized},
		{fmt.Errorf("creating sink topic: %w", kerr.TopicAuthorizationFailed), Unauthorized},
		{nil, Retry},
		{errors.New("producing in transaction: i/o timeout"), Retry},
		{kerr.CoordinatorNotAvailable, Retry},
		{kerr.ConcurrentTransactions, Retry},
		{fmt.Errorf("flush: %w", kerr.NotLeaderForPartition), Retry},
	} {
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("Classify(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	if !errors.Is(ErrFenced, twophase.ErrFenced) {
		t.Error("sink.ErrFenced is not a twophase.ErrFenced")
	}
	err := WithMissingACL(fmt.Errorf("initializing: %w", kerr.TransactionalIDAuthorizationFailed))
	if !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), "TransactionalId") {
		t.Errorf("WithMissingACL: %v", err)
	}
}

// What the coordinator answers a producer whose transaction it aborted
// for its age, and one another instance took over, measured on the real
// broker: the first is ErrTransactionTimedOut (restart), the second
// ErrFenced (stop), whether the producer next flushes new records or
// commits.
func TestTxnTellsTimeoutFromTakeover(t *testing.T) {
	k := kafkatest.Broker(t)
	topic := kafkatest.Topic(t, "out")
	kafkatest.CreateTopic(t, k.Bootstrap(), topic, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	conn := []kgo.Opt{kgo.SeedBrokers(k.Bootstrap()...), kgo.DefaultProduceTopic(topic)}
	adm := kadm.NewClient(kafkatest.Client(t, k.Bootstrap()))
	open := func(id string, timeout time.Duration) *Txn {
		t.Helper()
		txn, err := NewTxn(conn, id, timeout)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(txn.Close)
		if err := txn.Fence(ctx); err != nil {
			t.Fatal(err)
		}
		if err := txn.Begin(ctx, 1); err != nil {
			t.Fatal(err)
		}
		txn.Produce(ctx, kgo.StringRecord("open"))
		if err := txn.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		return txn
	}
	next := map[string]func(*Txn) error{
		"flush": func(txn *Txn) error {
			txn.Produce(ctx, kgo.StringRecord("more"))
			return txn.Flush(ctx)
		},
		"commit": func(txn *Txn) error { return txn.Commit(ctx, 1) },
	}
	for name, step := range next {
		t.Run("timed out then "+name, func(t *testing.T) {
			id := topic + "-timeout-" + name
			txn := open(id, time.Second)
			awaitAbortedByCoordinator(ctx, t, adm, id+"-txn")
			err := step(txn)
			if Classify(err) != TimedOut || !errors.Is(err, ErrTransactionTimedOut) {
				t.Fatalf("%s after the timeout: %v (%v), want ErrTransactionTimedOut", name, err, Classify(err))
			}
			// The restart takes the id back and carries on.
			again, err := NewTxn(conn, id, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			defer again.Close()
			if err := again.Fence(ctx); err != nil {
				t.Fatal(err)
			}
		})
		t.Run("taken over then "+name, func(t *testing.T) {
			id := topic + "-takeover-" + name
			txn := open(id, time.Minute)
			successor := open(id, time.Minute)
			err := step(txn)
			if Classify(err) != TakenOver || !errors.Is(err, ErrFenced) {
				t.Fatalf("%s after a takeover: %v (%v), want ErrFenced", name, err, Classify(err))
			}
			if err := successor.Commit(ctx, 1); err != nil {
				t.Fatalf("the successor: %v", err)
			}
		})
	}
}

// awaitAbortedByCoordinator waits until the transaction coordinator has
// aborted txnID's open transaction for outliving its timeout (it checks
// every transaction.abort.timed.out.transaction.cleanup.interval.ms).
func awaitAbortedByCoordinator(ctx context.Context, t *testing.T, adm *kadm.Client, txnID string) {
	t.Helper()
	for {
		described, err := adm.DescribeTransactions(ctx, txnID)
		if err != nil {
			t.Fatal(err)
		}
		if d, err := described.On(txnID, nil); err == nil && d.State == "CompleteAbort" {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the coordinator never aborted transaction %s", txnID)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// A probe's "timed out" is believed only for a transaction at least as
// old as its timeout: a younger one was fenced by an instance whose
// InitProducerId had not finished when the probe asked.
func TestBelieveTimedOutOnlyPastTheTimeout(t *testing.T) {
	for _, c := range []struct {
		probed       Verdict
		age, timeout time.Duration
		want         Verdict
	}{
		{TimedOut, 61 * time.Second, time.Minute, TimedOut},
		{TimedOut, time.Minute, time.Minute, TimedOut},
		{TimedOut, 300 * time.Millisecond, time.Minute, TakenOver},
		{TakenOver, 2 * time.Minute, time.Minute, TakenOver},
		{TakenOver, time.Second, time.Minute, TakenOver},
	} {
		if got := believe(c.probed, c.age, c.timeout); got != c.want {
			t.Errorf("believe(%v, age %v, timeout %v) = %v, want %v", c.probed, c.age, c.timeout, got, c.want)
		}
	}
}
