package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/checkpoint/savepoint"
	"github.com/eoflow/pipeline/internal/kread"
	"github.com/eoflow/pipeline/source"
)

// A savepoint of a group-mode job while several processes run it. It
// must hold the state of every record read from the sources, including
// the records still in the repartition topic, so every process pauses its
// sources, the keyed sides read the repartition topic to its end, and the
// process that was asked exports the group's committed offsets and state
// from Kafka in today's format. The processes learn of the pause through
// the job's checkpoint topic, which every member reads anyway:
//
//  1. The asking process writes the pause record (key "<job>#pause":
//     an id and a deadline).
//  2. Every member that sees it stops reading its source partitions
//     (their positions stay, so nothing is lost) and, in the transaction
//     of the first checkpoint whose barriers all came after the pause,
//     writes an ack ("<job>#paused/<instance>": the id). Everything it
//     shuffled before is committed with that checkpoint.
//  3. Once every member of the group has acked and the repartition topic
//     holds no record after the group's committed offsets (no
//     transaction open there), the group's offsets and its state topic
//     are a consistent cut: the asking process reads them and writes the
//     savepoint.
//  4. It deletes the pause record; the members read on. A pause whose
//     asker died ends at its deadline.
//
// A member that joins or restarts meanwhile starts paused. The '#' in the
// keys cannot be in a job name or an instance id, so these records never
// mix with checkpoint records.

func pauseKey(job string) string            { return job + "#pause" }
func pausedKey(job, instance string) string { return job + "#paused/" + instance }
func pausedPrefix(job string) string        { return job + "#paused/" }

// pauseDeadline is how long a pause lasts at most: a savepoint not
// written by then fails, and the members read on.
func pauseDeadline(job *Job) time.Duration { return 2 * job.cfg.Checkpoint.Timeout }

// pause is a pause record's value.
type pause struct {
	ID    string `json:"id"`
	Until int64  `json:"until_unix_ms"`
}

// pauseWatch keeps the job's current pause, read from the checkpoint
// topic.
type pauseWatch struct {
	job     string
	current atomic.Pointer[pause]
	now     func() time.Time
}

// pausedFor is the id of the pause in force, or "".
func (w *pauseWatch) pausedFor() string {
	if w == nil {
		return ""
	}
	p := w.current.Load()
	if p == nil || w.now().UnixMilli() > p.Until {
		return ""
	}
	return p.ID
}

func (w *pauseWatch) add(r *kgo.Record) {
	if string(r.Key) != pauseKey(w.job) {
		return
	}
	if r.Value == nil {
		w.current.Store(nil)
		return
	}
	var p pause
	if json.Unmarshal(r.Value, &p) == nil {
		w.current.Store(&p)
	}
}

// watchPauses reads the checkpoint topic from its start and then follows
// it, until ctx ends.
func (w *pauseWatch) run(ctx context.Context, conn []kgo.Opt, topic string) {
	for ctx.Err() == nil {
		cl, err := kgo.NewClient(append(append([]kgo.Opt{}, conn...),
			kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
		if err != nil {
			return
		}
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			if fs.IsClientClosed() {
				break
			}
			fs.EachRecord(w.add)
		}
		cl.Close()
	}
}

// groupSavepoint takes a savepoint of the running group-mode job into dir
// (steps 1 to 4 above).
func (j *Job) groupSavepoint(ctx context.Context, dir string) (savepoint.Summary, error) {
	fail := func(err error) (savepoint.Summary, error) {
		j.metrics.SavepointFailed()
		return savepoint.Summary{}, fmt.Errorf("%w: %w", ErrSavepoint, err)
	}
	if err := savepoint.CheckTarget(dir); err != nil {
		return fail(err)
	}
	cl, err := kgo.NewClient(j.conn...)
	if err != nil {
		return fail(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	started := j.now()
	id := fmt.Sprintf("%s-%d", j.instance, started.UnixNano())
	deadline := started.Add(pauseDeadline(j))
	topic := checkpoint.TopicName(j.cfg.Name)
	write := func(value []byte) error {
		return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(pauseKey(j.cfg.Name)), Value: value}).FirstErr()
	}
	value, _ := json.Marshal(pause{ID: id, Until: deadline.UnixMilli()})
	if err := write(value); err != nil {
		return fail(fmt.Errorf("asking the members to pause: %w", err))
	}
	j.log.Info("taking a savepoint of the group: every member pauses its sources", "dir", dir, "pause", id)
	defer func() {
		// Resume, whatever happened: the members read on.
		rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := cl.ProduceSync(rctx, &kgo.Record{Topic: topic, Key: []byte(pauseKey(j.cfg.Name))}).FirstErr(); err != nil {
			j.log.Warn("resuming the members after the savepoint; they resume at the pause's deadline", "err", err, "deadline", deadline)
		}
	}()
	for {
		ready, why, err := j.pausedAndDrained(ctx, adm, id)
		if err != nil {
			return fail(err)
		}
		if ready {
			break
		}
		if j.now().After(deadline.Add(-pauseDeadline(j) / 4)) {
			return fail(fmt.Errorf("the group did not pause and drain in time: %s", why))
		}
		select {
		case <-ctx.Done():
			return fail(ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	sum, err := j.exportGroup(ctx, adm, dir, started)
	if err != nil {
		return fail(err)
	}
	keys := uint64(0)
	for _, op := range sum.Operators {
		keys += op.Keys
	}
	took := j.now().Sub(started)
	j.log.Info("savepoint written", "dir", sum.Dir, "id", sum.ID, "keys", keys, "took", took.Round(time.Millisecond))
	j.metrics.SavepointCompleted(took)
	j.status.savepoint(sum)
	return sum, nil
}

// errCutMoved fails a group savepoint whose members read on before its
// export was done.
var errCutMoved = errors.New("the group read on before the savepoint was written (its pause ran out: a larger checkpoint.timeout gives a large state more time)")

// pausedAndDrained reports whether every member of the group acked pause
// id and no record is left in the repartition topic after the group's
// committed offsets; why says what is missing.
func (j *Job) pausedAndDrained(ctx context.Context, adm *kadm.Client, id string) (bool, string, error) {
	described, err := adm.DescribeGroups(ctx, j.cfg.Name)
	if err != nil {
		return false, "", fmt.Errorf("describing the group: %w", err)
	}
	var members []string
	for _, g := range described {
		for _, m := range g.Members {
			if m.InstanceID != nil {
				members = append(members, *m.InstanceID)
			}
		}
	}
	acked := map[string]string{}
	prefix := pausedPrefix(j.cfg.Name)
	err = kread.All(ctx, j.conn, checkpoint.TopicName(j.cfg.Name), func(r *kgo.Record) error {
		if inst, ok := strings.CutPrefix(string(r.Key), prefix); ok {
			acked[inst] = string(r.Value)
		}
		return nil
	})
	if err != nil {
		return false, "", err
	}
	var waiting []string
	for _, m := range members {
		if acked[m] != id {
			waiting = append(waiting, m)
		}
	}
	if len(members) == 0 || len(waiting) > 0 {
		return false, fmt.Sprintf("members %v have not paused", waiting), nil
	}
	if !j.plan.keyed {
		return true, "", nil
	}
	return j.repartitionDrainedForGroup(ctx, adm)
}

// repartitionDrainedForGroup reports whether no record of the repartition
// topic is left after the group's committed offsets.
func (j *Job) repartitionDrainedForGroup(ctx context.Context, adm *kadm.Client) (bool, string, error) {
	committed, err := adm.FetchOffsets(ctx, j.cfg.Name)
	if err != nil {
		return false, "", err
	}
	return repartitionDrained(ctx, adm, j.conn, j.shuffle.repartition, func(p int32) (int64, bool) {
		c, _ := committed.Lookup(j.shuffle.repartition, p)
		return max(c.At, 0), true
	})
}

// exportGroup writes the group's committed source offsets and its whole
// state topic into a savepoint at dir.
func (j *Job) exportGroup(ctx context.Context, adm *kadm.Client, dir string, now time.Time) (savepoint.Summary, error) {
	var tps []source.TopicPartition
	for _, src := range j.cfg.Sources {
		got, err := source.Discover(ctx, adm, src.Topics)
		if err != nil {
			return savepoint.Summary{}, err
		}
		tps = append(tps, got...)
	}
	committed, err := fetchStableOffsets(ctx, adm, j.cfg.Name, tps, j.cfg.Kafka.TransactionTimeout)
	if err != nil {
		return savepoint.Summary{}, err
	}
	// The cut holds only while the members stay paused, and a pause ends
	// at its deadline (pauseDeadline) even while the export runs: then the
	// members read on, and the state read below could hold inputs after
	// these offsets. So the repartition topic must be drained after these
	// offsets were fetched, and they must not have moved once the state
	// is read: a source offset and the records shuffled from its inputs
	// commit together, so while no source offset moves, no input reaches
	// the state.
	if j.plan.keyed {
		drained, why, err := j.repartitionDrainedForGroup(ctx, adm)
		if err != nil {
			return savepoint.Summary{}, err
		}
		if !drained {
			return savepoint.Summary{}, fmt.Errorf("%w (%s)", errCutMoved, why)
		}
	}
	if j.beforeExportState != nil {
		j.beforeExportState()
	}
	var offsets []checkpoint.SourceOffset
	for _, tp := range tps {
		off, ok := committed[tp]
		if !ok {
			return savepoint.Summary{}, fmt.Errorf("partition %s has no committed offset in the group yet: take the savepoint once every partition was read", tp)
		}
		offsets = append(offsets, checkpoint.SourceOffset{Topic: tp.Topic, Partition: tp.Partition, Offset: off})
	}
	all, restorers, err := j.restoringOperators(nil)
	if err != nil {
		return savepoint.Summary{}, err
	}
	if restorers != nil {
		// The offsets are stable once the last epochs' markers reached the
		// offsets topic; their markers on the state partitions may still
		// be on their way, and a read before them would miss the state of
		// inputs the offsets cover (restoreMember waits the same way).
		all := make([]int32, j.shuffle.partitions)
		for p := range all {
			all[p] = int32(p)
		}
		if err := awaitSettled(ctx, adm, j.shuffle.state, all, j.cfg.Kafka.TransactionTimeout); err != nil {
			return savepoint.Summary{}, err
		}
		read := func(ctx context.Context, fn func(key, value []byte) error) error {
			return kread.All(ctx, j.conn, j.shuffle.state, func(r *kgo.Record) error { return fn(r.Key, r.Value) })
		}
		if err := j.readStateInto(ctx, read, restorers); err != nil {
			return savepoint.Summary{}, fmt.Errorf("reading the state: %w", err)
		}
		again, err := fetchStableOffsets(ctx, adm, j.cfg.Name, tps, j.cfg.Kafka.TransactionTimeout)
		if err != nil {
			return savepoint.Summary{}, err
		}
		if !maps.Equal(committed, again) {
			return savepoint.Summary{}, fmt.Errorf("%w (the source offsets moved while the state was read)", errCutMoved)
		}
	}
	// The manifest names a checkpoint: this member's newest (the cut is
	// the group's, later than it).
	id := checkpoint.ID(max(1, j.status.snapshot().Checkpoint.LastCompleted))
	d := savepoint.DescribeConfig(j.cfg)
	w, err := savepoint.Create(dir, d.Meta(id, now), savepoint.Options{})
	if err != nil {
		return savepoint.Summary{}, err
	}
	abort := func(err error) (savepoint.Summary, error) {
		_ = w.Abort()
		return savepoint.Summary{}, err
	}
	writers := map[string]*savepoint.OperatorWriter{}
	for _, agg := range d.Aggregates() {
		ow, err := w.Aggregate(agg.ID, *agg.Aggregate)
		if err != nil {
			return abort(err)
		}
		writers[agg.ID] = ow
	}
	for _, ops := range all {
		if err := exportOps(writers, ops); err != nil {
			return abort(err)
		}
	}
	bySource, err := d.SourceOffsets(offsets)
	if err != nil {
		return abort(err)
	}
	for _, id := range slices.Sorted(maps.Keys(bySource)) {
		if err := w.Source(id, bySource[id]); err != nil {
			return abort(err)
		}
	}
	if _, err := w.Commit(); err != nil {
		return abort(err)
	}
	return savepoint.Inspect(w.Dir())
}
