package runtime

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
	"github.com/eoflow/pipeline/internal/kread"
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
		errors.Is(err, savepoint.ErrIncompatible)
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
		var members bool
		if latest, members, err = kstore.Modes(ctx, j.conn, name); err != nil {
			return out, fmt.Errorf("reading the latest checkpoint: %w", err)
		}
		if members && latest == nil {
			return out, fmt.Errorf("%w: job %s ran in group mode (scale.mode: group; its members' checkpoint records are in %s): run it in group mode, or under a new name (a job moves between modes only through a savepoint)",
				ErrIncompatible, name, cpTopic)
		}
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
		return out, j.checkRestored(nil, len(live))
	}
	plan, err := j.checkCheckpoint(latest, false)
	if err != nil {
		return out, err
	}
	out.Checkpoints = append(out.Checkpoints, checked("", latest, plan))
	if !topics.Has(stateTopic) {
		return out, j.checkRestored(latest, 0)
	}
	return out, nil
}

// groupRestartCheck is CheckRestart in group mode: a single-mode job's
// checkpoints refuse a group-mode start, and every member's newest
// checkpoint must take the configuration (each member checks its own
// when it starts).
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
	single := kstore.Newest{Job: name}
	members := map[string]*kstore.Newest{}
	prefix := name + "/"
	err = kread.All(ctx, j.conn, cpTopic, func(r *kgo.Record) error {
		key := string(r.Key)
		if member, ok := strings.CutPrefix(key, prefix); ok {
			if members[member] == nil {
				members[member] = &kstore.Newest{Job: key, Member: true}
			}
			return members[member].Add(r)
		}
		return single.Add(r)
	})
	if err != nil {
		return out, fmt.Errorf("reading the checkpoints: %w", err)
	}
	if single.Record != nil {
		return out, fmt.Errorf("%w: job %s ran in single mode (its last checkpoint is %d): run it with scale.mode: single, or under a new name (a job moves between modes only through a savepoint, run --from-savepoint)",
			ErrIncompatible, name, single.Record.ID)
	}
	var refusals []error
	for _, member := range slices.Sorted(maps.Keys(members)) {
		rec := members[member].Record
		if rec == nil {
			continue
		}
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
