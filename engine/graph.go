package engine

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/metrics"
	"github.com/eoflow/pipeline/source"
	"github.com/eoflow/pipeline/twophase"
	"github.com/eoflow/pipeline/window"
)

// Channel capacities, in batches. Small: they only smooth hand-overs; a
// full channel is how backpressure reaches the sources.
const (
	workerQueue = 8
	sinkQueue   = 16
)

// graph is one attempt's task graph: every goroutine, channel and client.
type graph struct {
	job     *Job
	sources []*sourceTask
	workers []*workerTask
	sink    *sinkTask
	loop    *coordinatorLoop
	readers []recordReader
	offsets *groupOffsets // nil without checkpoints
	// watch looks for partitions added to the source topics (nil without
	// checkpoints: under at_most_once the consumer group assigns them).
	watch *partitionWatch
	// tables keep the job's tables up to date (nil without tables).
	tables    *tableSet
	completed atomic.Int64
}

// recordReader is where a source task reads: a source.Reader (offsets
// are checkpointed state) or, under at_most_once, a source.GroupReader.
type recordReader interface {
	Poll(ctx context.Context, max int) ([]*kgo.Record, error)
	Advance(*kgo.Record)
	Positions() []source.Position
	Close()
}

var (
	_ recordReader = (*source.Reader)(nil)
	_ recordReader = (*source.GroupReader)(nil)
)

// assignPartitions deals partitions round-robin over at most one reader per
// core: the stateless steps run in the source tasks, and that is where
// decoding CPU goes.
func assignPartitions(offsets map[source.TopicPartition]int64) []map[source.TopicPartition]int64 {
	tps := make([]source.TopicPartition, 0, len(offsets))
	for tp := range offsets {
		tps = append(tps, tp)
	}
	sort.Slice(tps, func(a, b int) bool {
		if tps[a].Topic != tps[b].Topic {
			return tps[a].Topic < tps[b].Topic
		}
		return tps[a].Partition < tps[b].Partition
	})
	n := max(1, min(len(tps), runtime.GOMAXPROCS(0)))
	assigned := make([]map[source.TopicPartition]int64, n)
	for i := range assigned {
		assigned[i] = map[source.TopicPartition]int64{}
	}
	for i, tp := range tps {
		assigned[i%n][tp] = offsets[tp]
	}
	return assigned
}

// newGraph wires the tasks every mode has; the mode adds its own
// (mode.wire). With a nil txn there are no checkpoints (the at_most_once
// job): no coordinator, no barriers. It takes ownership of the readers.
func newGraph(a *attempt, readers []recordReader) (*graph, error) {
	j, cfg := a.j, a.j.cfg
	txn, plain, ops := a.txn, a.plain, a.ops
	g := &graph{job: j, readers: readers, tables: a.tables}
	timed := j.plan.time != nil && len(j.plan.time.byTopic) > 0
	var restoredTime *checkpoint.EventTime
	if a.latest != nil {
		restoredTime = a.latest.EventTime
	}
	watermark := int64(window.NoWatermark)
	if restoredTime != nil {
		watermark = restoredTime.Watermark
	}
	gt := a.groupTime
	// shuffledTime: the keyed side learns the watermark from the
	// repartition topic; a co-partitioned job's keyed operator fires at
	// the least watermark of the source partitions its process reads,
	// as single mode does over all of them (groupeventtime.go).
	shuffledTime := gt != nil && j.shuffle.repartitions(j.plan.keyed)
	if gt != nil {
		// Each member's record holds only what it read; the partitions'
		// times are every record's, and the windows' watermark is that
		// of the repartition partitions owned (groupeventtime.go).
		if j.plantedBug != plantedOwnClocksOnly {
			restoredTime = gt.sources
		}
		switch {
		case shuffledTime:
			watermark = gt.watermark(j.shuffle.repartition, a.offsets)
		case j.plantedBug == plantedResumeOwnWatermark && a.latest != nil && a.latest.EventTime != nil:
			watermark = a.latest.EventTime.Watermark
		default:
			// Every attempt starts over: the watermark of the member's
			// record covered the partitions it owned then.
			watermark = window.NoWatermark
		}
	}
	nSources := len(readers)

	reports := make(chan taskReport, 1024)
	opened := make(chan checkpoint.ID, 1)
	sinkIn := make(chan batch, sinkQueue)
	workerIns := make([]chan batch, len(ops))
	workerOuts := make([]chan<- batch, len(ops))
	var tasks []checkpoint.TaskID
	exports := &exportRegistry{}
	exportReports := make(chan exportReport, 2*len(ops))

	j.limitState(ops, a.limits)
	for w, op := range ops {
		for _, o := range op {
			if t, ok := o.(*targetOp); ok {
				if r, ok := t.op.(interface{ Resume(int64) }); ok {
					r.Resume(watermark) // what has fired (windows, joins) before this attempt
				}
			}
		}
		workerIns[w] = make(chan batch, workerQueue)
		workerOuts[w] = workerIns[w]
		wt := &workerTask{
			id: checkpoint.TaskID(fmt.Sprintf("worker-%d", w)), index: w, ops: op,
			inputs: workerIns[w], nInputs: nSources, sink: sinkIn, reports: reports,
			exports: exports, exportReports: exportReports, align: newAligner(nSources),
			timed: timed, shuffled: shuffledTime && j.plantedBug != plantedWatermarkOfOwnSources, watermark: watermark, metrics: j.metrics,
			handled: newTargetCounts(j.metrics, j.plan), blocked: taskBlocked(j.metrics, fmt.Sprintf("worker-%d", w)),
		}
		g.workers = append(g.workers, wt)
		tasks = append(tasks, wt.id)
	}
	// The records held for joins as of event time come back from the
	// checkpoint record (single mode) or per source partition (group
	// mode, groupheld.go).
	held := a.latest
	if a.groupHeld != nil {
		held = a.groupHeld
	}
	for i, r := range readers {
		st := &sourceTask{
			index: i, id: checkpoint.TaskID(fmt.Sprintf("source-%d", i)), reader: r,
			router: j.plan.newRouter(len(ops)), workers: workerOuts, reports: reports, faults: j.faults, metrics: j.metrics,
			planted: j.plantedBug,
			blocked: taskBlocked(j.metrics, fmt.Sprintf("source-%d", i)),
		}
		st.router.steps = newStepCounts(j.metrics, j.plan)
		st.router.local = a.localShuffle
		if timed {
			st.router.clocks = newClocks(j.plan.time, restoredTime, j.now)
			if gt != nil {
				st.router.clocks.carry = true
				st.router.clocks.partitions = gt.partitions
				st.router.clocks.joinTimeFromRecords = j.plantedBug == plantedJoinTimeFromRecords
				if j.plantedBug != plantedJoinTimeNotKept {
					if err := st.router.clocks.restoreJoins(gt.joins, a.offsets); err != nil {
						return nil, err
					}
				}
				if shuffledTime {
					st.router.shuffled = gt.clocks(j.plan.time)
				}
			}
		}
		if a.asOf == nil && held != nil && len(held.Held) > 0 {
			// The checkpoint holds records for a join as of event time
			// that the configuration no longer has: they are released at
			// the first barrier, joined as the join now says.
			a.asOf = &asOfJoins{sources: make([]bool, len(cfg.Sources)), metrics: j.metrics}
		}
		if a.asOf != nil {
			st.router.hold = &sourceHold{joins: a.asOf, task: i, id: string(st.id),
				passWatermark: gt != nil && !shuffledTime && j.plantedBug == plantedCoHeldPassedByWatermark}
		}
		g.sources = append(g.sources, st)
		tasks = append(tasks, st.id)
	}
	if a.asOf != nil {
		if err := a.asOf.restoreHeld(held, g.sources, j.log); err != nil {
			return nil, err
		}
	}
	outputs := producer(plain)
	if cfg.Guarantee.TransactionalOutputs() {
		outputs = txn
	}
	g.sink = &sinkTask{
		id: "sink", txn: txn, outputs: outputs, own: singleRecords{}, planted: j.plantedBug,
		inputs: sinkIn, nInputs: len(ops), reports: reports, opened: opened,
		newRecord: a.newRecord, tables: a.tables.cut, now: j.now, log: j.log, faults: j.faults, metrics: j.metrics,
		limits: a.limits, deadLetterTopic: deadLetterTopics(cfg.Sinks), deadLetterLog: j.plan.deadLetterLog,
		align: newAligner(len(ops)), timed: timed,
	}
	tasks = append(tasks, g.sink.id)
	if txn == nil {
		return g, nil
	}
	l := a.loop
	l.reports, l.opened, l.stop = reports, opened, j.stopping
	l.stopSavepoint = func() string { return j.stopSavepoint }
	l.savepointReqs, l.exportReports = j.savepoints, exportReports
	l.sp = &savepoints{job: j, registry: exports, workers: len(ops)}
	l.trigger = func(id checkpoint.ID, final bool) {
		for _, s := range g.sources {
			s.trigger(id, final)
		}
	}
	l.tick = max(time.Millisecond, min(cfg.Checkpoint.Interval/10, 100*time.Millisecond))
	l.onCompleted = func(res commitResult, triggered time.Time) {
		g.completed.Add(1)
		j.metrics.CheckpointCompleted(metrics.Checkpoint{
			ID: uint64(res.id), Duration: res.at.Sub(triggered), Alignment: res.alignment, Bytes: res.stateBytes,
		})
		j.status.completed(CheckpointInfo{
			ID: uint64(res.id), CompletedAt: res.at, DurationMs: ms(res.at.Sub(triggered)),
			AlignmentMs: ms(res.alignment), CommitMs: ms(res.commit), StateBytes: res.stateBytes, Outputs: res.outputs,
		})
	}
	l.onAborted = func(id checkpoint.ID, r twophase.AbortReason, err error) {
		j.metrics.CheckpointFailed(r.String())
		j.status.checkpointFailed(id, r.String(), err)
	}
	if err := l.start(scheduleStart(j.now(), cfg.Checkpoint.Interval), tasks); err != nil {
		g.close()
		return nil, err
	}
	g.loop = l
	return g, nil
}

// firstCheckpointAfter is when an attempt's first checkpoint is due,
// instead of a whole interval after it starts: under exactly_once nothing
// a restarted job writes is visible before its first commit, and with 1 s
// checkpoints that wait was most of the time from a SIGKILL to new output
// (bench/results/2026-12-02-recovery.md). The epoch is small; later
// checkpoints keep the configured interval.
const firstCheckpointAfter = 100 * time.Millisecond

// scheduleStart is the start of the coordinator's schedule (its first
// checkpoint is due one interval later) that makes the first checkpoint
// due firstCheckpointAfter from now.
func scheduleStart(now time.Time, interval time.Duration) time.Time {
	if interval <= firstCheckpointAfter {
		return now
	}
	return now.Add(firstCheckpointAfter - interval)
}

// start runs every task of the graph in eg; the first to fail ends all.
func (g *graph) start(ctx context.Context, eg *errgroup.Group) {
	if g.loop != nil {
		eg.Go(func() error { return g.loop.run(ctx) })
	}
	if g.offsets != nil {
		eg.Go(func() error { return g.offsets.run(ctx) })
	}
	if g.watch != nil {
		eg.Go(func() error { return g.watch.run(ctx) })
	}
	g.tables.start(ctx, eg)
	eg.Go(func() error { return g.sink.run(ctx) })
	for _, w := range g.workers {
		eg.Go(func() error { return w.run(ctx) })
	}
	for _, s := range g.sources {
		eg.Go(func() error { return s.run(ctx) })
	}
}

func (g *graph) close() { closeReaders(g.readers) }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
