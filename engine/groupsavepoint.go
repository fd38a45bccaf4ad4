package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/checkpoint/savepoint"
	"github.com/eoflow/pipeline/internal/mutant"
	"github.com/eoflow/pipeline/source"
	"github.com/eoflow/pipeline/window"
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
//     are a consistent cut: the asking process reads them, and the
//     records joins as of event time hold at those offsets
//     (groupheld.go), and writes the savepoint. A paused member releases
//     no held record.
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
	gp, err := j.pauseGroup(ctx, newKafkaCluster(cl, j.conn, j.cfg.Name), dir)
	if err != nil {
		return fail(err)
	}
	defer gp.resume()
	for {
		ready, err := gp.ready(ctx)
		if err != nil {
			return fail(err)
		}
		if ready {
			break
		}
		select {
		case <-ctx.Done():
			return fail(ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	sum, err := gp.export(ctx)
	if err != nil {
		return fail(err)
	}
	return sum, nil
}

// groupPause is a savepoint of the running group from its pause record
// (step 1) to the resume (step 4). groupSavepoint takes its steps in
// order, looking whether the group is ready every 100 ms; the group-mode
// simulation takes them between the members' steps.
type groupPause struct {
	j   *Job
	c   cluster
	dir string
	// id is the pause's, started when it was asked for, and deadline when
	// the members read on whatever happens.
	id                string
	started, deadline time.Time
}

// pauseGroup asks every member to pause (step 1).
func (j *Job) pauseGroup(ctx context.Context, c cluster, dir string) (*groupPause, error) {
	started := j.now()
	gp := &groupPause{j: j, c: c, dir: dir, id: fmt.Sprintf("%s-%d", j.instance, started.UnixNano()),
		started: started, deadline: started.Add(pauseDeadline(j))}
	value, _ := json.Marshal(pause{ID: gp.id, Until: gp.deadline.UnixMilli()})
	if err := c.Write(ctx, &kgo.Record{Topic: checkpoint.TopicName(j.cfg.Name), Key: []byte(pauseKey(j.cfg.Name)), Value: value}); err != nil {
		return nil, fmt.Errorf("asking the members to pause: %w", err)
	}
	j.log.Info("taking a savepoint of the group: every member pauses its sources", "dir", dir, "pause", gp.id)
	return gp, nil
}

// ready reports whether every member acked the pause and the repartition
// topic is drained (steps 2 and 3): the export may begin. It fails once
// three quarters of the pause went by without that.
func (gp *groupPause) ready(ctx context.Context) (bool, error) {
	j := gp.j
	ready, why, err := j.pausedAndDrained(ctx, gp.c, gp.id)
	if err != nil || ready {
		return ready, err
	}
	if j.now().After(gp.deadline.Add(-pauseDeadline(j) / 4)) {
		return false, fmt.Errorf("the group did not pause and drain in time: %s", why)
	}
	return false, nil
}

// export writes the savepoint from the group's offsets and state (step 3).
func (gp *groupPause) export(ctx context.Context) (savepoint.Summary, error) {
	j := gp.j
	sum, err := j.exportGroup(ctx, gp.c, gp.dir, gp.started)
	if err != nil {
		return savepoint.Summary{}, err
	}
	keys := uint64(0)
	for _, op := range sum.Operators {
		keys += op.Keys
	}
	took := j.now().Sub(gp.started)
	j.log.Info("savepoint written", "dir", sum.Dir, "id", sum.ID, "keys", keys, "took", took.Round(time.Millisecond))
	j.metrics.SavepointCompleted(took)
	j.status.savepoint(sum)
	return sum, nil
}

// resume deletes the pause record, whatever happened (step 4): the
// members read on.
func (gp *groupPause) resume() {
	j := gp.j
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := gp.c.Write(ctx, &kgo.Record{Topic: checkpoint.TopicName(j.cfg.Name), Key: []byte(pauseKey(j.cfg.Name))}); err != nil {
		j.log.Warn("resuming the members after the savepoint; they resume at the pause's deadline", "err", err, "deadline", gp.deadline)
	}
}

// errCutMoved fails a group savepoint whose members read on before its
// export was done.
var errCutMoved = errors.New("the group read on before the savepoint was written (its pause ran out: a larger checkpoint.timeout gives a large state more time)")

// pausedAndDrained reports whether every member of the group acked pause
// id and no record is left in the repartition topic after the group's
// committed offsets; why says what is missing.
func (j *Job) pausedAndDrained(ctx context.Context, c cluster, id string) (bool, string, error) {
	members, err := c.Members(ctx, j.cfg.Name)
	if err != nil {
		return false, "", err
	}
	acked := map[string]string{}
	prefix := pausedPrefix(j.cfg.Name)
	err = c.Read(ctx, checkpoint.TopicName(j.cfg.Name), func(r *kgo.Record) error {
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
	if !j.shuffle.repartitions(j.plan.keyed) {
		return true, "", nil
	}
	return j.repartitionDrainedForGroup(ctx, c)
}

// repartitionDrainedForGroup reports whether no record of the repartition
// topic is left after the group's committed offsets.
func (j *Job) repartitionDrainedForGroup(ctx context.Context, c cluster) (bool, string, error) {
	committed, err := c.FetchOffsets(ctx, j.cfg.Name)
	if err != nil {
		return false, "", err
	}
	return c.RepartitionDrained(ctx, j.shuffle.repartition, func(p int32) (int64, bool) {
		return committed[source.TopicPartition{Topic: j.shuffle.repartition, Partition: p}], true
	})
}

// exportGroup writes the group's committed source offsets and its whole
// state topic into a savepoint at dir.
func (j *Job) exportGroup(ctx context.Context, c cluster, dir string, now time.Time) (savepoint.Summary, error) {
	var tps []source.TopicPartition
	for _, src := range j.cfg.Sources {
		got, err := c.Partitions(ctx, src.Topics)
		if err != nil {
			return savepoint.Summary{}, err
		}
		tps = append(tps, got...)
	}
	committed, err := c.FetchStableOffsets(ctx, j.cfg.Name, tps, j.cfg.Kafka.TransactionTimeout)
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
	recheck := j.plantedBug != plantedExportWithoutRecheck
	if j.shuffle.repartitions(j.plan.keyed) && recheck {
		drained, why, err := j.repartitionDrainedForGroup(ctx, c)
		if err != nil {
			return savepoint.Summary{}, err
		}
		if !drained {
			return savepoint.Summary{}, fmt.Errorf("%w (%s)", errCutMoved, why)
		}
	}
	// The records joins as of event time hold at these offsets, by source
	// partition (groupheld.go): read before the state and again after it,
	// when the offsets are fetched again. A member that releases records
	// commits their results and the partition's held records in one
	// transaction, often without moving its offset: unchanged held
	// records say that no release happened in between, so the state and
	// the outputs are of the same releases as the held records.
	held := j.holdsGroupRecords()
	var heldBefore map[partitionKey][]byte
	if held {
		if heldBefore, err = j.readGroupHeld(ctx, c); err != nil {
			return savepoint.Summary{}, err
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
	// queues are the repartition partitions' event times, by partition:
	// the newest groupTimeKey record of each group-state partition.
	queues := map[int32][]byte{}
	if restorers != nil {
		// The offsets are stable once the last epochs' markers reached the
		// offsets topic; their markers on the state partitions may still
		// be on their way, and a read before them would miss the state of
		// inputs the offsets cover (restoreMember waits the same way).
		all := make([]int32, j.shuffle.partitions)
		for p := range all {
			all[p] = int32(p)
		}
		if err := c.AwaitSettled(ctx, j.shuffle.state, all, j.cfg.Kafka.TransactionTimeout); err != nil {
			return savepoint.Summary{}, err
		}
		read := func(ctx context.Context, fn func(key, value []byte) error) error {
			return c.Read(ctx, j.shuffle.state, func(r *kgo.Record) error {
				if isGroupTime(r.Key) {
					queues[r.Partition] = r.Value // the keyed side's event time, not an operator's state
					return nil
				}
				return fn(r.Key, r.Value)
			})
		}
		if err := j.readStateInto(ctx, read, restorers); err != nil {
			return savepoint.Summary{}, fmt.Errorf("reading the state: %w", err)
		}
	}
	// The tables' positions: the group's committed ones, which the
	// members on duty commit with their epochs (tableduty.go).
	tables, err := j.groupTablePositions(ctx, c)
	if err != nil {
		return savepoint.Summary{}, err
	}
	et, err := j.groupEventTime(ctx, c, queues)
	if err != nil {
		return savepoint.Summary{}, err
	}
	// The rechecks read last: nothing the savepoint holds was read after
	// them.
	if restorers != nil || held {
		again, err := c.FetchStableOffsets(ctx, j.cfg.Name, tps, j.cfg.Kafka.TransactionTimeout)
		if err != nil {
			return savepoint.Summary{}, err
		}
		if recheck && !maps.Equal(committed, again) {
			return savepoint.Summary{}, fmt.Errorf("%w (the source offsets moved while the savepoint was read)", errCutMoved)
		}
	}
	var heldRecs []savepoint.HeldRecord
	if held {
		heldAfter, err := j.readGroupHeld(ctx, c)
		if err != nil {
			return savepoint.Summary{}, err
		}
		if recheck && !maps.EqualFunc(heldBefore, heldAfter, bytes.Equal) {
			return savepoint.Summary{}, fmt.Errorf("%w (a member released records a join as of event time held while the savepoint was read)", errCutMoved)
		}
		h, err := j.heldAt(heldBefore, tps, committed)
		if err != nil {
			return savepoint.Summary{}, err
		}
		heldRecs = savepointHeld(h.Records())
		if j.plantedBug == plantedGroupSavepointDropsHeld {
			heldRecs = nil
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
	w.SetTables(tables)
	if err := w.SetHeld(heldRecs); err != nil {
		return abort(err)
	}
	w.SetEventTime(et)
	if _, err := w.Commit(); err != nil {
		return abort(err)
	}
	return savepoint.Inspect(w.Dir())
}

// groupEventTime is the event time of a savepoint of the paused group
// (nil: the job has none). Each source partition's largest event time is
// the largest over the members' newest checkpoint records, which hold
// every partition's time at the group's committed offsets
// (mergedSourceTimes, as a member's restore reads it). The watermark is
// the job's: the least of the repartition partitions' watermarks, each in
// the newest event-time record of its group-state partition (queues); a
// partition without one holds it back. Every window that fired anywhere
// ended at or before its partition's watermark, so a window of the
// savepoint's state fires, after a restore, no earlier than it would have.
func (j *Job) groupEventTime(ctx context.Context, c cluster, queues map[int32][]byte) (*checkpoint.EventTime, error) {
	if j.plan.time == nil || len(j.plan.time.byTopic) == 0 {
		return nil, nil
	}
	recs := &jobRecords{}
	if err := c.Read(ctx, checkpoint.TopicName(j.cfg.Name), foldJobRecords(j.cfg.Name, recs)); err != nil {
		return nil, fmt.Errorf("reading the members' checkpoint records: %w", err)
	}
	members := recs.members
	if mutant.On("group-savepoint-no-partition-times") {
		members = nil // the bug: the watermark alone, each partition's clock starting over
	}
	et := mergedSourceTimes(members)
	if et == nil {
		et = &checkpoint.EventTime{Watermark: window.NoWatermark}
	}
	watermark := int64(math.MaxInt64)
	for q := range j.shuffle.partitions {
		v := queues[int32(q)]
		if v == nil {
			watermark = window.NoWatermark
			break
		}
		t, err := decodeQueueTime(v)
		if err != nil {
			return nil, fmt.Errorf("the event time of group-state partition %d: %w", q, err)
		}
		watermark = min(watermark, t.watermark)
	}
	et.Watermark = watermark
	return et, nil
}
