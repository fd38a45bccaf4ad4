package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

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
	_, err := j.restartCheck(ctx, adm)
	return err
}

// RestartCheck is what a restart from the job's own checkpoints would
// start from, as CheckRestart found it.
type RestartCheck struct {
	// Checkpoints are the newest checkpoint of the job (single mode) or
	// of each group member that wrote one (group mode); none for a job
	// that has not run.
	Checkpoints []CheckedCheckpoint
}

// CheckedCheckpoint is one checkpoint a restart would continue from.
type CheckedCheckpoint struct {
	// Member is the group member's instance id ("" in single mode).
	Member string
	ID     uint64
	// Notes say what changed that a restart allows (the log's
	// "restarting with a changed configuration").
	Notes []string
	// Undescribed: an older build wrote it without saying what its state
	// means, so only key groups and operator ids could be compared.
	Undescribed bool
}

// CheckRestart connects and runs the check a start of the job runs
// before it changes anything on the cluster (pipeline validate
// --against-checkpoint): whether the job's last checkpoint takes this
// configuration, and whether the internal topics agree. It changes
// nothing itself. The error is the refusal Run would return.
func (j *Job) CheckRestart(ctx context.Context) (RestartCheck, error) {
	cl, err := kgo.NewClient(j.conn...)
	if err != nil {
		return RestartCheck{}, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if j.shuffle != nil {
		return j.groupRestartCheck(ctx, adm)
	}
	return j.restartCheck(ctx, adm)
}

// restartCheck is checkBeforeRestart, saying what it checked against.
func (j *Job) restartCheck(ctx context.Context, adm *kadm.Client) (RestartCheck, error) {
	var out RestartCheck
	name := j.cfg.Name
	cpTopic, stateTopic := checkpoint.TopicName(name), kstore.StateTopic(name)
	topics, err := adm.ListTopics(ctx, cpTopic, stateTopic)
	if err != nil {
		return out, fmt.Errorf("listing the internal topics: %w", err)
	}
	var latest *checkpoint.Record
	if topics.Has(cpTopic) {
		recs, err := readJobRecords(ctx, j.conn, name)
		if err != nil {
			return out, err
		}
		if verdict, err := judgeMode(name, recs, j.cfg.Scale.Mode, false); verdict == modeRefuse {
			return out, err
		}
		latest = recs.single
	}
	if latest == nil {
		if !topics.Has(stateTopic) {
			return out, nil // a new job
		}
		live, err := liveStateKeys(ctx, kafkaCluster{conn: j.conn, job: name}.ReadState, func(key []byte) error {
			_, err := state.DecodeChangelogKey(key)
			return err
		})
		if err != nil {
			return out, err
		}
		return out, j.checkRestored(nil, nil, len(live))
	}
	plan, err := j.checkCheckpoint(latest, false)
	if err != nil {
		return out, err
	}
	out.Checkpoints = append(out.Checkpoints, checked("", latest, plan))
	if !topics.Has(stateTopic) {
		return out, j.checkRestored(latest, nil, 0)
	}
	return out, nil
}

// groupRestartCheck is CheckRestart in group mode: a job of the other
// mode refuses a group-mode start, and every member's newest checkpoint
// must take the configuration (checkMembers, which a start runs too).
func (j *Job) groupRestartCheck(ctx context.Context, adm *kadm.Client) (RestartCheck, error) {
	var out RestartCheck
	name := j.cfg.Name
	cpTopic := checkpoint.TopicName(name)
	topics, err := adm.ListTopics(ctx, cpTopic)
	if err != nil {
		return out, fmt.Errorf("listing the internal topics: %w", err)
	}
	if !topics.Has(cpTopic) {
		return out, nil // a new job
	}
	recs, err := readJobRecords(ctx, j.conn, name)
	if err != nil {
		return out, err
	}
	if verdict, err := judgeMode(name, recs, j.cfg.Scale.Mode, false); verdict == modeRefuse {
		return out, err
	}
	var refusals []error
	for _, key := range slices.Sorted(maps.Keys(recs.members)) {
		rec := recs.members[key]
		member := strings.TrimPrefix(key, name+"/")
		plan, err := j.checkCheckpoint(rec, false)
		if err != nil {
			refusals = append(refusals, fmt.Errorf("member %s: %w", member, err))
			continue
		}
		out.Checkpoints = append(out.Checkpoints, checked(member, rec, plan))
	}
	return out, errors.Join(refusals...)
}

func checked(member string, rec *checkpoint.Record, plan *savepoint.RestorePlan) CheckedCheckpoint {
	c := CheckedCheckpoint{Member: member, ID: uint64(rec.ID), Undescribed: plan == nil}
	if plan != nil {
		c.Notes = plan.Notes
	}
	return c
}

// checkCheckpoint applies the restore rules to the job's own checkpoint
// rec. A record of an older build does not describe its operators: it is
// checked as before (key groups and operator ids), and, if log, the log
// says that the rest could not be.
func (j *Job) checkCheckpoint(rec *checkpoint.Record, log bool) (*savepoint.RestorePlan, error) {
	if err := j.checkTables(rec); err != nil {
		return nil, err
	}
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
	for _, k := range slices.Sorted(maps.Keys(recs.members)) {
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

// checkRestored compares the keys restored of the job's keyed operators
// (keys, by operator id; total over all of them) with
// what checkpoint latest (nil: none) recorded: state without its
// checkpoint, or a checkpoint without its state, means an internal topic
// was deleted or damaged, and going on would silently count inputs twice
// or start sums over.
func (j *Job) checkRestored(latest *checkpoint.Record, keys map[string]int, total int) error {
	name := j.cfg.Name
	cpTopic, stateTopic := checkpoint.TopicName(name), kstore.StateTopic(name)
	if latest == nil {
		if total == 0 {
			return nil
		}
		return fmt.Errorf("%w: the state topic %s holds %d keys, but the checkpoint topic %s has no checkpoint (was it deleted?): "+
			"the state cannot be matched to input offsets, and the job would read its input again from the start on top of it. "+
			"To recover, start from a savepoint (run --from-savepoint DIR); to start over, delete %s too, or use a new job name",
			ErrDamaged, stateTopic, total, cpTopic, stateTopic)
	}
	for _, st := range latest.State {
		id := st.Operator
		if !slices.ContainsFunc(j.plan.keyedTargets(), func(t *target) bool { return t.id == id }) || st.Keys == uint64(keys[id]) {
			continue
		}
		holds := fmt.Sprintf("the state topic %s holds %d", stateTopic, keys[id])
		if keys[id] == 0 {
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
