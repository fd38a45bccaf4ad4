package kstore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
)

func TestMain(m *testing.M) { kafkatest.Main(m) }

func record(job string, id checkpoint.ID, offset int64) *checkpoint.Record {
	return &checkpoint.Record{
		ID: id, Job: job, ConfigFingerprint: "f", KeyGroups: 8,
		OperatorIDs:      []string{"agg", "src"},
		Offsets:          []checkpoint.SourceOffset{{Topic: "in", Partition: 0, Offset: offset}},
		CreatedUnixMilli: 1, Guarantee: "exactly_once",
	}
}

func TestCheckpointsRoundTripThroughKafka(t *testing.T) {
	k := kafkatest.Broker(t)
	job := kafkatest.Topic(t, "job")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn := []kgo.Opt{kgo.SeedBrokers(k.Bootstrap()...)}
	adm := kadm.NewClient(kafkatest.Client(t, k.Bootstrap()))

	if err := Ensure(ctx, adm, job, -1); err != nil {
		t.Fatal(err)
	}
	if err := Ensure(ctx, adm, job, -1); err != nil {
		t.Fatalf("Ensure must be idempotent: %v", err)
	}
	if rec, err := Latest(ctx, conn, job); err != nil || rec != nil {
		t.Fatalf("a new job has no checkpoint; got %v, %v", rec, err)
	}

	txn := kafkatest.Client(t, k.Bootstrap(), kgo.TransactionalID(job+"-txn"))
	commit := func(ctx context.Context) error {
		if err := txn.Flush(ctx); err != nil {
			return err
		}
		return txn.EndTransaction(ctx, kgo.TryCommit)
	}
	abort := func(ctx context.Context) error {
		if err := txn.AbortBufferedRecords(ctx); err != nil {
			return err
		}
		return txn.EndTransaction(ctx, kgo.TryAbort)
	}
	epoch := func(end func(context.Context) error, id checkpoint.ID, offset int64, state map[string]string) {
		t.Helper()
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for k, v := range state {
			var value []byte
			if v != "" {
				value = []byte(v)
			}
			txn.Produce(ctx, StateRecord(job, []byte(k), value), nil)
		}
		r, err := CheckpointRecord(record(job, id, offset))
		if err != nil {
			t.Fatal(err)
		}
		txn.Produce(ctx, r, nil)
		if err := end(ctx); err != nil {
			t.Fatal(err)
		}
	}
	epoch(commit, 1, 10, map[string]string{"a": "1", "b": "1"})
	epoch(commit, 2, 20, map[string]string{"a": "2", "b": ""}) // b deleted
	epoch(abort, 3, 30, map[string]string{"a": "never"})

	rec, err := Latest(ctx, conn, job)
	if err != nil {
		t.Fatal(err)
	}
	if rec == nil || rec.ID != 2 || rec.Offsets[0].Offset != 20 {
		t.Fatalf("Latest = %+v, want checkpoint 2 at offset 20 (3 was aborted)", rec)
	}
	var changes int
	final := map[string]string{}
	if err := ReadState(ctx, conn, job, func(k, v []byte) error {
		changes++
		if v == nil {
			delete(final, string(k))
		} else {
			final[string(k)] = string(v)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if changes != 4 || fmt.Sprint(final) != "map[a:2]" {
		t.Fatalf("replayed %d changes to %v; want the 4 committed changes giving map[a:2]", changes, final)
	}
}

func TestEnsureRefusesDeletingTopic(t *testing.T) {
	k := kafkatest.Broker(t)
	job := kafkatest.Topic(t, "job")
	kafkatest.CreateTopic(t, k.Bootstrap(), StateTopic(job), 1, nil) // cleanup.policy=delete
	adm := kadm.NewClient(kafkatest.Client(t, k.Bootstrap()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := Ensure(ctx, adm, job, -1)
	if err == nil || !strings.Contains(err.Error(), "cleanup.policy=delete") {
		t.Fatalf("got %v, want a refusal naming cleanup.policy", err)
	}
}

// TestMemberInstances: the instance ids of a group-mode job's committed
// member records, without the single-mode record, members deleted by a
// tombstone, records of aborted transactions, or another job whose name
// starts with this one's.
func TestMemberInstances(t *testing.T) {
	k := kafkatest.Broker(t)
	job := kafkatest.Topic(t, "job")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn := []kgo.Opt{kgo.SeedBrokers(k.Bootstrap()...)}
	if err := Ensure(ctx, kadm.NewClient(kafkatest.Client(t, k.Bootstrap())), job, -1); err != nil {
		t.Fatal(err)
	}
	topic := checkpoint.TopicName(job)
	rec := func(key, value string) *kgo.Record {
		r := &kgo.Record{Topic: topic, Key: []byte(key)}
		if value != "" {
			r.Value = []byte(value)
		}
		return r
	}
	cl := kafkatest.Client(t, k.Bootstrap())
	if err := cl.ProduceSync(ctx, rec(job+"/b", "x"), rec(job+"/a", "x"), rec(job, "x"), rec(job+"/gone", "x"), rec(job+"/gone", ""), rec(job+"x/other", "x")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	txn := kafkatest.Client(t, k.Bootstrap(), kgo.TransactionalID(job+"-aborted"))
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txn.ProduceSync(ctx, rec(job+"/aborted", "x")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := txn.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	got, err := MemberInstances(ctx, conn, job)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[a b]" {
		t.Fatalf("MemberInstances = %v, want [a b]", got)
	}
}
