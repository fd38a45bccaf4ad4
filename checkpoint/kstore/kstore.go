package kstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/internal/kread"
)

// StateTopic returns the name of job's compacted state changelog topic.
func StateTopic(job string) string { return job + "-state" }

// TopicConfigs are the configs of a compacted internal topic (checkpoints
// and state): compacted, with segments that roll so compaction actually
// runs on a busy job.
func TopicConfigs() map[string]*string {
	s := func(v string) *string { return &v }
	return map[string]*string{
		"cleanup.policy":            s("compact"),
		"segment.ms":                s("3600000"),
		"min.cleanable.dirty.ratio": s("0.5"),
		"min.compaction.lag.ms":     s("0"),
	}
}

// Ensure creates the job's checkpoint and state topics if they are missing
// (replication -1 means the brokers' default), and refuses existing ones
// that are not compacted: a deleting topic would lose state silently.
func Ensure(ctx context.Context, adm *kadm.Client, job string, replication int) error {
	topics := []string{checkpoint.TopicName(job), StateTopic(job)}
	for _, topic := range topics {
		resp, err := adm.CreateTopic(ctx, 1, int16(replication), TopicConfigs(), topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("creating internal topic %s: %w", topic, err)
		}
	}
	described, err := describeCreated(ctx, adm, topics)
	if err != nil {
		return err
	}
	for _, rc := range described {
		for _, c := range rc.Configs {
			if c.Key == "cleanup.policy" && c.MaybeValue() != "compact" {
				return fmt.Errorf("internal topic %s has cleanup.policy=%s; it must be compact (or the job loses state as it ages): fix the topic or use another job name", rc.Name, c.MaybeValue())
			}
		}
	}
	return nil
}

// describeCreated describes the configs of topics that were just created.
// A new topic reaches every broker's metadata a moment after CreateTopics
// returns; until then it is unknown, so that answer is retried briefly.
func describeCreated(ctx context.Context, adm *kadm.Client, topics []string) (kadm.ResourceConfigs, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		described, err := adm.DescribeTopicConfigs(ctx, topics...)
		if err == nil {
			for _, rc := range described {
				if rc.Err != nil {
					err = fmt.Errorf("describing internal topic %s: %w", rc.Name, rc.Err)
					break
				}
			}
		}
		if err == nil {
			return described, nil
		}
		if !errors.Is(err, kerr.UnknownTopicOrPartition) || time.Now().After(deadline) {
			return nil, fmt.Errorf("describing internal topics: %w", err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Latest returns the newest committed checkpoint of job, or nil when the
// job has none. conn are the connection options (kclient.Options).
func Latest(ctx context.Context, conn []kgo.Opt, job string) (*checkpoint.Record, error) {
	return LatestKeyedOn(ctx, kread.Dial(conn), job, job)
}

// LatestKeyed returns the newest committed checkpoint record of job's
// checkpoint topic with the given key: a group-mode member keeps its own
// records there under a key of its own (sink.MemberRecordKey).
func LatestKeyed(ctx context.Context, conn []kgo.Opt, job, key string) (*checkpoint.Record, error) {
	return LatestKeyedOn(ctx, kread.Dial(conn), job, key)
}

// LatestKeyedOn is LatestKeyed on cl.
func LatestKeyedOn(ctx context.Context, cl kread.Cluster, job, key string) (*checkpoint.Record, error) {
	n := Newest{Job: key, Member: key != job}
	if err := kread.AllOn(ctx, cl, checkpoint.TopicName(job), n.Add); err != nil {
		return nil, err
	}
	return n.Record, n.Err()
}

// SavepointImported reports whether a group member of job committed a
// checkpoint record that names savepoint id: the savepoint was imported
// (a group-mode job imports it once, whichever member did).
func SavepointImported(ctx context.Context, conn []kgo.Opt, job, id string) (bool, error) {
	return SavepointImportedOn(ctx, kread.Dial(conn), job, id)
}

// SavepointImportedOn is SavepointImported on cl.
func SavepointImportedOn(ctx context.Context, cl kread.Cluster, job, id string) (bool, error) {
	return SavepointImportedIn(func(fn func(*kgo.Record) error) error {
		return kread.AllOn(ctx, cl, checkpoint.TopicName(job), fn)
	}, job, id)
}

// SavepointImportedIn is SavepointImported over read, which calls fn with
// every committed record of job's checkpoint topic.
func SavepointImportedIn(read func(fn func(*kgo.Record) error) error, job, id string) (bool, error) {
	latest := map[string]*Newest{} // by member key
	prefix := job + "/"
	err := read(func(r *kgo.Record) error {
		key := string(r.Key)
		if k, _, ok := parsePieceKey(r.Key); ok {
			key = k // a piece of the record keyed k
		}
		if !strings.HasPrefix(key, prefix) {
			return nil
		}
		n := latest[key]
		if n == nil {
			n = &Newest{Job: key, Member: true}
			latest[key] = n
		}
		return n.Add(r)
	})
	if err != nil {
		return false, err
	}
	for _, n := range latest {
		if err := n.Err(); err != nil {
			return false, err
		}
		if n.Record != nil && n.Record.Savepoint == id {
			return true, nil
		}
	}
	return false, nil
}

// MemberInstances returns the instance ids of job's group members that
// have committed checkpoint records (sink.MemberRecordKey:
// "<job>/<instance>"), sorted: every process that ever committed an epoch
// of the group-mode job, as far as compaction and tombstones left it.
func MemberInstances(ctx context.Context, conn []kgo.Opt, job string) ([]string, error) {
	return MemberInstancesOn(ctx, kread.Dial(conn), job)
}

// MemberInstancesOn is MemberInstances on cl.
func MemberInstancesOn(ctx context.Context, cl kread.Cluster, job string) ([]string, error) {
	seen := map[string]bool{}
	prefix := job + "/"
	err := kread.AllOn(ctx, cl, checkpoint.TopicName(job), func(r *kgo.Record) error {
		instance, ok := strings.CutPrefix(string(r.Key), prefix)
		if ok {
			seen[instance] = r.Value != nil
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var ids []string
	for id, live := range seen {
		if live {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// Newest folds a checkpoint topic, read in offset order with
// read_committed, into the newest checkpoint of Job: Latest reads the
// topic from Kafka, the broker-free simulation from its model, and both
// decide alike.
type Newest struct {
	// Job is the key of the records folded: the job's name, or a group
	// member's own key (sink.MemberRecordKey); others are skipped.
	Job string
	// Member folds a group member's records: the one with the highest
	// id wins, whatever their order. A member reads the shared topic up
	// to its last stable offset, which another member's open transaction
	// may hold below the member's own newest records: it then continues
	// from an older id and writes ids it had written before. Its records
	// are informative (the group's offsets are the progress), so a repeat
	// is no error there.
	Member bool
	// Record is the newest checkpoint so far; nil for none (or after a
	// tombstone: the job's checkpoints were reset), and nil while Err is
	// not.
	Record *checkpoint.Record

	// id is the newest checkpoint's id, and has whether there is one:
	// Record's, or that of a head whose pieces did not join.
	id  checkpoint.ID
	has bool
	// pieces holds the latest value of each piece of Job's records, by
	// index (see pieces.go).
	pieces map[int][]byte
	// err is why the newest checkpoint so far, written in pieces, could
	// not be joined.
	err error
}

// Add takes the next record of the topic. It keeps the values of the
// pieces of Job's records.
func (n *Newest) Add(r *kgo.Record) error {
	if key, i, ok := parsePieceKey(r.Key); ok {
		if key != n.Job {
			return nil
		}
		if r.Value == nil {
			delete(n.pieces, i)
			return nil
		}
		if n.pieces == nil {
			n.pieces = map[int][]byte{}
		}
		n.pieces[i] = r.Value
		return nil
	}
	if string(r.Key) != n.Job {
		return nil // another job sharing the topic by mistake: not ours
	}
	if r.Value == nil {
		// A tombstone: the job's checkpoints were reset.
		n.Record, n.has, n.err = nil, false, nil
		return nil
	}
	var rec *checkpoint.Record
	var head checkpoint.Pieces
	var err error
	if checkpoint.IsPieces(r.Value) {
		head, err = checkpoint.DecodePieces(r.Value)
	} else {
		rec, err = checkpoint.DecodeRecord(r.Value)
		if rec != nil {
			head.ID = rec.ID
		}
	}
	if err != nil {
		return fmt.Errorf("checkpoint record at %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
	}
	if n.Member && n.has && head.ID <= n.id {
		return nil
	}
	if n.has && head.ID <= n.id {
		return fmt.Errorf("checkpoint %d at offset %d follows checkpoint %d: ids must increase", head.ID, r.Offset, n.id)
	}
	n.id, n.has, n.err = head.ID, true, nil
	if rec == nil {
		// Its pieces came before it: join them now, but fail only if no
		// newer checkpoint follows (an older head's pieces may have been
		// compacted away).
		if rec, err = join(head, n.pieces); err != nil {
			n.err = fmt.Errorf("checkpoint record at %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
		}
	}
	n.Record = rec
	return nil
}

// Err reports that the newest checkpoint so far was written in pieces
// that do not join into it: the checkpoint topic is damaged.
func (n *Newest) Err() error { return n.err }

// ReadState calls fn with every committed changelog record of job's state
// topic in topic order (later records override earlier ones; a nil value is
// a delete).
func ReadState(ctx context.Context, conn []kgo.Opt, job string, fn func(key, value []byte) error) error {
	return ReadStateOn(ctx, kread.Dial(conn), job, fn)
}

// ReadStateOn is ReadState on cl.
func ReadStateOn(ctx context.Context, cl kread.Cluster, job string, fn func(key, value []byte) error) error {
	return kread.AllOn(ctx, cl, StateTopic(job), func(r *kgo.Record) error {
		return fn(r.Key, r.Value)
	})
}

// CheckpointRecord builds the Kafka record that makes checkpoint rec
// durable, for the transaction that commits it, whatever its size (see
// CheckpointRecords).
func CheckpointRecord(rec *checkpoint.Record) (*kgo.Record, error) {
	value, err := checkpoint.EncodeRecord(rec)
	if err != nil {
		return nil, err
	}
	return &kgo.Record{Topic: checkpoint.TopicName(rec.Job), Key: []byte(rec.Job), Value: value}, nil
}

// CheckpointRecordKeyed is CheckpointRecord under another key: a group
// member's (sink.MemberRecordKey), which single-mode readers skip.
func CheckpointRecordKeyed(rec *checkpoint.Record, key string) (*kgo.Record, error) {
	r, err := CheckpointRecord(rec)
	if err == nil {
		r.Key = []byte(key)
	}
	return r, err
}

// StateRecord builds the Kafka record of one changelog entry.
func StateRecord(job string, key, value []byte) *kgo.Record {
	return &kgo.Record{Topic: StateTopic(job), Key: key, Value: value}
}
