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
	return LatestKeyed(ctx, conn, job, job)
}

// LatestKeyed returns the newest committed checkpoint record of job's
// checkpoint topic with the given key: a group-mode member keeps its own
// records there under a key of its own (sink.MemberRecordKey).
func LatestKeyed(ctx context.Context, conn []kgo.Opt, job, key string) (*checkpoint.Record, error) {
	n := Newest{Job: key, Member: key != job}
	if err := kread.All(ctx, conn, checkpoint.TopicName(job), n.Add); err != nil {
		return nil, err
	}
	return n.Record, nil
}

// SavepointImported reports whether a group member of job committed a
// checkpoint record that names savepoint id: the savepoint was imported
// (a group-mode job imports it once, whichever member did).
func SavepointImported(ctx context.Context, conn []kgo.Opt, job, id string) (bool, error) {
	latest := map[string]string{} // member key -> its newest record's savepoint
	prefix := job + "/"
	err := kread.All(ctx, conn, checkpoint.TopicName(job), func(r *kgo.Record) error {
		if !strings.HasPrefix(string(r.Key), prefix) {
			return nil
		}
		if r.Value == nil {
			delete(latest, string(r.Key))
			return nil
		}
		rec, err := checkpoint.DecodeRecord(r.Value)
		if err != nil {
			return fmt.Errorf("checkpoint record at %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
		}
		latest[string(r.Key)] = rec.Savepoint
		return nil
	})
	if err != nil {
		return false, err
	}
	for _, sp := range latest {
		if sp == id {
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
	seen := map[string]bool{}
	prefix := job + "/"
	err := kread.All(ctx, conn, checkpoint.TopicName(job), func(r *kgo.Record) error {
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
	// tombstone: the job's checkpoints were reset).
	Record *checkpoint.Record
}

// Add takes the next record of the topic.
func (n *Newest) Add(r *kgo.Record) error {
	if string(r.Key) != n.Job {
		return nil // another job sharing the topic by mistake: not ours
	}
	if r.Value == nil {
		n.Record = nil // a tombstone: the job's checkpoints were reset
		return nil
	}
	rec, err := checkpoint.DecodeRecord(r.Value)
	if err != nil {
		return fmt.Errorf("checkpoint record at %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
	}
	if n.Member && n.Record != nil && rec.ID <= n.Record.ID {
		return nil
	}
	if n.Record != nil && rec.ID <= n.Record.ID {
		return fmt.Errorf("checkpoint %d at offset %d follows checkpoint %d: ids must increase", rec.ID, r.Offset, n.Record.ID)
	}
	n.Record = rec
	return nil
}

// ReadState calls fn with every committed changelog record of job's state
// topic in topic order (later records override earlier ones; a nil value is
// a delete).
func ReadState(ctx context.Context, conn []kgo.Opt, job string, fn func(key, value []byte) error) error {
	return kread.All(ctx, conn, StateTopic(job), func(r *kgo.Record) error {
		return fn(r.Key, r.Value)
	})
}

// CheckpointRecord builds the Kafka record that makes checkpoint rec
// durable, for the transaction that commits it.
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
