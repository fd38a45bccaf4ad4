package runtime

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/checkpoint/kstore"
	"github.com/eoflow/pipeline/checkpoint/savepoint"
	"github.com/eoflow/pipeline/state"
)

// This file decides whether a plain restart may restore the job's own
// last checkpoint: the configuration must still mean the same state (the
// rules of savepoint restores, savepoint.CheckRestart), and the two
// internal topics must agree with each other. Both are checked before
// anything changes on the cluster, and the state again once restored.

// ErrDamaged wraps internal topics that contradict each other: a state
// topic without a checkpoint, or a checkpoint whose state is missing.
// Restarting cannot repair them, so the job stops.
var ErrDamaged = errors.New("the job's internal topics are damaged")

// incompatibleError marks a refusal that already says everything as
// ErrIncompatible, without repeating its first words.
type incompatibleError struct{ err error }

func (e incompatibleError) Error() string   { return e.err.Error() }
func (e incompatibleError) Unwrap() []error { return []error{ErrIncompatible, e.err} }

// permanent reports whether err is a configuration (or a cluster) the job
// cannot run with: restarting would fail the same way forever, so Run
// returns it and the process exits non-zero.
func permanent(err error) bool {
	return errors.Is(err, ErrIncompatible) || errors.Is(err, ErrUnfit) || errors.Is(err, ErrDamaged) ||
		errors.Is(err, savepoint.ErrIncompatible) || errors.Is(err, ErrOtherMode)
}

// checkBeforeRestart refuses, before the job creates a topic, fences an
// instance or writes anything, a restart that cannot be right: the last
// checkpoint does not fit the configuration, or the internal topics
// contradict each other. It reads the checkpoint topic up to its last
// stable offset, so a predecessor's open transaction does not hold it up;
// the restore after fencing checks again what it then reads.
func (j *Job) checkBeforeRestart(ctx context.Context, adm *kadm.Client) error {
	name := j.cfg.Name
	cpTopic, stateTopic := checkpoint.TopicName(name), kstore.StateTopic(name)
	topics, err := adm.ListTopics(ctx, cpTopic, stateTopic)
	if err != nil {
		return fmt.Errorf("listing the internal topics: %w", err)
	}
	var latest *checkpoint.Record
	if topics.Has(cpTopic) {
		recs, err := readJobRecords(ctx, j.conn, name)
		if err != nil {
			return err
		}
		if verdict, err := judgeMode(name, recs, j.cfg.Scale.Mode, false); verdict == modeRefuse {
			return err
		}
		latest = recs.single
	}
	if latest == nil {
		if !topics.Has(stateTopic) {
			return nil // a new job
		}
		live, err := liveStateKeys(ctx, kafkaCluster{conn: j.conn, job: name}.ReadState, func(key []byte) error {
			_, err := state.DecodeChangelogKey(key)
			return err
		})
		if err != nil {
			return err
		}
		return j.checkRestored(nil, len(live))
	}
	if _, err := j.checkCheckpoint(latest, false); err != nil {
		return err
	}
	if !topics.Has(stateTopic) {
		return j.checkRestored(latest, 0)
	}
	return nil
}

// checkCheckpoint applies the restore rules to the job's own checkpoint
// rec. A record of an older build does not describe its operators: it is
// checked as before (key groups and operator ids), and, if log, the log
// says that the rest could not be.
func (j *Job) checkCheckpoint(rec *checkpoint.Record, log bool) (*savepoint.RestorePlan, error) {
	plan, err := savepoint.CheckRestart(rec, savepoint.DescribeConfig(j.cfg))
	if errors.Is(err, savepoint.ErrUndescribed) {
		if err := checkpoint.Compatible(rec, j.cfg.Fingerprint(), j.cfg.Checkpoint.KeyGroups, j.plan.operatorIDs()); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrIncompatible, err)
		}
		if log {
			j.log.Warn("the last checkpoint was written by an older build and does not say what its state means: "+
				"whether the aggregates' key_by and values changed could not be checked (the next checkpoint carries it)",
				"checkpoint", rec.ID)
		}
		return nil, nil
	}
	if err != nil {
		return nil, incompatibleError{err}
	}
	if log {
		for _, note := range plan.Notes {
			j.log.Info("restarting with a changed configuration", "checkpoint", rec.ID, "note", note)
		}
	}
	return plan, nil
}

// checkMembers applies the restore rules to the newest checkpoint of
// every member of a group-mode job, not only to this process's own: state
// partitions move between processes, so a process restores what others
// wrote, and one that joins under a new instance id has no checkpoint of
// its own. A configuration that does not fit the checkpoint of any
// member (a changed key_by or aggregate) is refused as single mode
// refuses it. After a savepoint's import only the importer's record is
// left (importMember deletes the others').
func (j *Job) checkMembers(recs *jobRecords) error {
	keys := make([]string, 0, len(recs.members))
	for k := range recs.members {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if _, err := j.checkCheckpoint(recs.members[k], false); err != nil {
			return err
		}
	}
	return nil
}

// checkGroupStart refuses, before the process joins the group (which
// would move every member's partitions) or changes anything on the
// cluster, a group-mode start that cannot be right: the job is another
// mode's, or the configuration does not fit its members' checkpoints.
// Every attempt checks again (prepareGroup, restoreMember).
func (j *Job) checkGroupStart(ctx context.Context) error {
	cl, err := kgo.NewClient(j.conn...)
	if err != nil {
		return err
	}
	defer cl.Close()
	name := j.cfg.Name
	topics, err := kadm.NewClient(cl).ListTopics(ctx, checkpoint.TopicName(name))
	if err != nil {
		return fmt.Errorf("listing the internal topics: %w", err)
	}
	if !topics.Has(checkpoint.TopicName(name)) {
		return nil // a new job
	}
	recs, err := readJobRecords(ctx, j.conn, name)
	if err != nil {
		return err
	}
	if verdict, err := judgeMode(name, recs, j.cfg.Scale.Mode, j.from != nil); verdict == modeRefuse {
		return err
	}
	if j.from != nil {
		return nil // the savepoint is checked instead (checkSavepoint)
	}
	return j.checkMembers(recs)
}

// checkRestored compares the keys restored of the job's aggregate with
// what checkpoint latest (nil: none) recorded: state without its
// checkpoint, or a checkpoint without its state, means an internal topic
// was deleted or damaged, and going on would silently count inputs twice
// or start sums over.
func (j *Job) checkRestored(latest *checkpoint.Record, keys int) error {
	name := j.cfg.Name
	cpTopic, stateTopic := checkpoint.TopicName(name), kstore.StateTopic(name)
	if latest == nil {
		if keys == 0 {
			return nil
		}
		return fmt.Errorf("%w: the state topic %s holds %d keys, but the checkpoint topic %s has no checkpoint (was it deleted?): "+
			"the state cannot be matched to input offsets, and the job would read its input again from the start on top of it. "+
			"To recover, start from a savepoint (run --from-savepoint DIR); to start over, delete %s too, or use a new job name",
			ErrDamaged, stateTopic, keys, cpTopic, stateTopic)
	}
	if j.plan.agg == nil {
		return nil
	}
	id := j.plan.agg.ID()
	for _, st := range latest.State {
		if st.Operator != id || st.Keys == uint64(keys) {
			continue
		}
		holds := fmt.Sprintf("the state topic %s holds %d", stateTopic, keys)
		if keys == 0 {
			holds = fmt.Sprintf("the state topic %s holds none (was it deleted?)", stateTopic)
		}
		return fmt.Errorf("%w: checkpoint %d recorded %d keys of aggregate %q, but %s: "+
			"restoring it would continue the aggregate from the wrong state. "+
			"To recover, start from a savepoint (run --from-savepoint DIR); to start over, delete %s and %s, or use a new job name",
			ErrDamaged, latest.ID, st.Keys, id, holds, cpTopic, stateTopic)
	}
	return nil
}

// liveStateKeys reads the job's state topic whole and returns the keys it
// holds a value for (their last record is not a tombstone). check, if set,
// vets every key read.
func liveStateKeys(ctx context.Context, read stateReader, check func(key []byte) error) (map[string]struct{}, error) {
	live := map[string]struct{}{}
	err := read(ctx, func(key, value []byte) error {
		if check != nil {
			if err := check(key); err != nil {
				return fmt.Errorf("state topic: %w", err)
			}
		}
		if value == nil {
			delete(live, string(key))
		} else {
			live[string(key)] = struct{}{}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the state topic: %w", err)
	}
	return live, nil
}
