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
	"github.com/eoflow/pipeline/internal/kread"
	"github.com/eoflow/pipeline/internal/testkit/memkafka"
	"github.com/eoflow/pipeline/twophase"
)

// The real producers on the in-memory model of Kafka
// (internal/testkit/memkafka), which the conformance tests hold to the
// broker: the fast tests of what only Kafka's coordinators decide.

var (
	_ TxnClient   = (*memkafka.Client)(nil)
	_ PlainClient = (*memkafka.Client)(nil)
)

const modelJob = "job"

// newModel is a cluster with the job's checkpoint topic and an output
// topic "out".
func newModel(t *testing.T) *memkafka.Cluster {
	t.Helper()
	k := memkafka.New(time.Unix(1_800_000_000, 0))
	for _, topic := range []string{checkpoint.TopicName(modelJob), "out", "in"} {
		if err := k.CreateTopic(topic, 1); err != nil {
			t.Fatal(err)
		}
	}
	return k
}

// txnOn is the job's transactional producer on the model, as a new
// process of the job makes it.
func txnOn(k *memkafka.Cluster) *Txn {
	cl := memkafka.NewClient(k, memkafka.ClientConfig{TransactionalID: TransactionalID(modelJob), TransactionTimeout: time.Minute})
	return NewTxnOn(cl, k, modelJob, time.Minute)
}

// epochRecord is checkpoint e of job.
func epochRecord(job string, e twophase.Epoch) *checkpoint.Record {
	return &checkpoint.Record{
		ID: e, Job: job, ConfigFingerprint: "f", KeyGroups: 8, OperatorIDs: []string{"src"},
		Offsets:          []checkpoint.SourceOffset{{Topic: "in", Partition: 0, Offset: int64(e) * 10}},
		CreatedUnixMilli: 1, Guarantee: "exactly_once",
	}
}

// prepareEpoch begins epoch e, produces its output to out and, last, its
// checkpoint record, and prepares it: everything on the brokers, nothing
// committed.
func prepareEpoch(ctx context.Context, t *testing.T, txn *Txn, out string, e twophase.Epoch) {
	t.Helper()
	if err := txn.Begin(ctx, e); err != nil {
		t.Fatal(err)
	}
	txn.Produce(ctx, &kgo.Record{Topic: out, Value: fmt.Appendf(nil, "epoch %d", e)})
	rec, err := kstore.CheckpointRecord(epochRecord(txn.job, e))
	if err != nil {
		t.Fatal(err)
	}
	txn.Produce(ctx, rec)
	if err := txn.Prepare(ctx, e); err != nil {
		t.Fatal(err)
	}
}

// committed is the output topic as read_committed readers see it, once
// every marker is written, and the newest committed checkpoint.
func committed(ctx context.Context, t *testing.T, k *memkafka.Cluster) ([]string, twophase.Epoch) {
	t.Helper()
	for k.PendingMarkers() > 0 {
		k.DeliverMarker(0)
	}
	var out []string
	if err := kread.AllOn(ctx, k, "out", func(r *kgo.Record) error { out = append(out, string(r.Value)); return nil }); err != nil {
		t.Fatal(err)
	}
	rec, err := kstore.LatestKeyedOn(ctx, k, modelJob, modelJob)
	if err != nil {
		t.Fatal(err)
	}
	if rec == nil {
		return out, 0
	}
	return out, rec.ID
}

// Recover fences the job's transactional id before LastDecided reads the
// last checkpoint: a predecessor still running (a zombie) whose epoch is
// prepared, or already committed with its markers not yet written, must
// not be able to change the checkpoint its successor restores. Otherwise
// the successor restores checkpoint N-1 while the zombie's commit of N
// lands, and the successor replays epoch N: its outputs twice.
func TestRecoverFencesBeforeReadingTheLastCheckpoint(t *testing.T) {
	for _, tc := range []struct {
		name string
		// zombie leaves epoch 2 in doubt: prepared, or committed with
		// its markers pending.
		zombie func(ctx context.Context, t *testing.T, k *memkafka.Cluster, z *Txn)
		want   twophase.Epoch // the checkpoint the successor must restore
	}{
		{"prepared, not committed", func(ctx context.Context, t *testing.T, _ *memkafka.Cluster, z *Txn) {
			prepareEpoch(ctx, t, z, "out", 2)
		}, 1},
		{"committed, markers pending", func(ctx context.Context, t *testing.T, k *memkafka.Cluster, z *Txn) {
			k.SetMarkerLag(true)
			prepareEpoch(ctx, t, z, "out", 2)
			if err := z.Commit(ctx, 2); err != nil {
				t.Fatal(err)
			}
		}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			k := newModel(t)
			zombie := txnOn(k)
			if _, err := zombie.Recover(ctx); err != nil {
				t.Fatal(err)
			}
			prepareEpoch(ctx, t, zombie, "out", 1)
			if err := zombie.Commit(ctx, 1); err != nil {
				t.Fatal(err)
			}
			tc.zombie(ctx, t, k, zombie)

			successor := txnOn(k)
			if _, err := successor.Recover(ctx); err != nil {
				t.Fatal(err)
			}
			last, err := successor.LastDecided(ctx)
			if err != nil || last == nil {
				t.Fatalf("LastDecided = %v, %v", last, err)
			}
			// The zombie tries to commit what it holds; it must be fenced
			// by now, or its commit must have landed before the read.
			zerr := zombie.Commit(ctx, 2)
			_, newest := committed(ctx, t, k)
			if last.ID != newest || last.ID != tc.want {
				t.Fatalf("the successor restored checkpoint %d, but checkpoint %d is the newest committed (the zombie's commit: %v); want %d",
					last.ID, newest, zerr, tc.want)
			}
			if zerr != nil && !IsFenced(zerr) {
				t.Fatalf("the zombie's commit failed with %v, want a fencing", zerr)
			}

			// The successor goes on from there, and every epoch's output
			// is committed once.
			for e := last.ID + 1; e <= 3; e++ {
				prepareEpoch(ctx, t, successor, "out", e)
				if err := successor.Commit(ctx, e); err != nil {
					t.Fatal(err)
				}
			}
			out, newest := committed(ctx, t, k)
			if fmt.Sprint(out) != "[epoch 1 epoch 2 epoch 3]" || newest != 3 {
				t.Fatalf("committed %q up to checkpoint %d, want epochs 1, 2 and 3 once each", out, newest)
			}
		})
	}
}

// A group member's offsets go into its transaction on behalf of its
// member id and generation (KIP-447): after a rebalance the group
// coordinator refuses a member of the old generation, so a zombie cannot
// commit offsets the group's new owner of the partition also commits.
func TestCommitOffsetsAfterARebalanceIsRefused(t *testing.T) {
	ctx := context.Background()
	k := newModel(t)
	const group = modelJob
	a, err := k.JoinGroup(group, "a")
	if err != nil {
		t.Fatal(err)
	}
	cl := memkafka.NewClient(k, memkafka.ClientConfig{TransactionalID: MemberTransactionalID(modelJob, "a"), TransactionTimeout: time.Minute})
	txn := NewMemberTxnOn(cl, k, modelJob, "a", time.Minute)
	defer txn.Close()
	if _, err := txn.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	asA := GroupMember{Group: group, MemberID: a.MemberID, InstanceID: a.InstanceID, Generation: a.Generation}
	in := []checkpoint.SourceOffset{{Topic: "in", Partition: 0, Offset: 5}}
	epoch := func(e twophase.Epoch, offset int64) error {
		t.Helper()
		if err := txn.Begin(ctx, e); err != nil {
			t.Fatal(err)
		}
		txn.Produce(ctx, &kgo.Record{Topic: "out", Value: fmt.Appendf(nil, "epoch %d", e)})
		in[0].Offset = offset
		return txn.CommitOffsets(ctx, asA, in)
	}
	if err := epoch(1, 5); err != nil {
		t.Fatalf("offsets of the current generation: %v", err)
	}
	if err := txn.Commit(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if got := k.GroupOffsets(group)[memkafka.TP{Topic: "in"}]; got != 5 {
		t.Fatalf("group offset %d after the commit, want 5", got)
	}

	if _, err := k.JoinGroup(group, "b"); err != nil { // a rebalance
		t.Fatal(err)
	}
	err = epoch(2, 9)
	if !errors.Is(err, kerr.IllegalGeneration) {
		t.Fatalf("offsets of generation %d after the group moved to %d: %v, want ILLEGAL_GENERATION", a.Generation, k.Generation(group), err)
	}
	if err := txn.Abort(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if got := k.GroupOffsets(group)[memkafka.TP{Topic: "in"}]; got != 5 {
		t.Fatalf("group offset %d after the refused commit, want 5", got)
	}
}

// A zombie's transaction is told from a timed out one by asking the
// coordinator (probe): both meet the same epoch error on their next
// write.
func TestTxnTellsTimeoutFromTakeoverOnTheModel(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		// stale makes the producer's open transaction stale.
		stale func(k *memkafka.Cluster)
		want  Verdict
	}{
		{"taken over", func(k *memkafka.Cluster) {
			if err := txnOn(k).Fence(ctx); err != nil {
				t.Fatal(err)
			}
		}, TakenOver},
		{"timed out", func(k *memkafka.Cluster) { k.Advance(2 * time.Minute) }, TimedOut},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newModel(t)
			txn := txnOn(k)
			if _, err := txn.Recover(ctx); err != nil {
				t.Fatal(err)
			}
			// Begun long ago, as far as the age check is concerned.
			prepareEpoch(ctx, t, txn, "out", 1)
			txn.begun = time.Now().Add(-2 * time.Minute)
			tc.stale(k)
			txn.Produce(ctx, &kgo.Record{Topic: "out", Value: []byte("late")})
			err := txn.Commit(ctx, 1)
			if got := Classify(err); got != tc.want {
				t.Fatalf("Classify(%v) = %v, want %v", err, got, tc.want)
			}
		})
	}
}

// Plain writes outside any transaction: visible at once, and a failed
// write is the next Flush's error.
func TestPlainOnTheModel(t *testing.T) {
	ctx := context.Background()
	k := newModel(t)
	p := NewPlainOn(memkafka.NewClient(k, memkafka.ClientConfig{}))
	defer p.Close()
	p.Produce(ctx, &kgo.Record{Topic: "out", Value: []byte("a")})
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if out, _ := committed(ctx, t, k); fmt.Sprint(out) != "[a]" {
		t.Fatalf("read %q, want [a]", out)
	}
	p.Produce(ctx, &kgo.Record{Topic: "missing", Value: []byte("b")})
	if err := p.Flush(ctx); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("Flush after a write to a missing topic: %v", err)
	}
}

// A record that failed fails its transaction's commit, which aborts it:
// the epoch's other records never become visible without it.
func TestTxnCommitFailsAfterAFailedProduce(t *testing.T) {
	ctx := context.Background()
	k := newModel(t)
	txn := txnOn(k)
	if _, err := txn.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if err := txn.Begin(ctx, 1); err != nil {
		t.Fatal(err)
	}
	txn.Produce(ctx, &kgo.Record{Topic: "out", Value: []byte("landed")})
	txn.Produce(ctx, &kgo.Record{Topic: "missing", Value: []byte("failed")})
	err := txn.Commit(ctx, 1)
	if !errors.Is(err, kerr.UnknownTopicOrPartition) || Classify(err) != Retry {
		t.Fatalf("Commit after a failed record: %v (%v), want the record's error, to retry", err, Classify(err))
	}
	if out, _ := committed(ctx, t, k); len(out) != 0 {
		t.Fatalf("committed %q without the record that failed", out)
	}
	prepareEpoch(ctx, t, txn, "out", 1) // the next attempt goes on
	if err := txn.Commit(ctx, 1); err != nil {
		t.Fatal(err)
	}
}
