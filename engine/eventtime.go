package engine

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/operator"
	"github.com/eoflow/pipeline/operator/keyed"
	"github.com/eoflow/pipeline/window"
)

// Event time. Each source task keeps, per partition it reads, the largest
// event time seen (window.PartitionClock); a partition's watermark Wp is
// that minus max_out_of_orderness. Barrier N carries every partition's
// largest event time; each worker, once aligned, computes the job's
// watermark
//
//	W(N) = max(W(N-1), min over non-idle partitions p of Wp(N))
//
// from the same barriers, so every worker computes the same W(N), fires
// the windows whose end plus allowed_lateness L is at most W(N), and then
// snapshots. The checkpoint record stores W(N) and each partition's
// largest event time (not its watermark, so a changed
// max_out_of_orderness applies on restore), and a restore continues from
// exactly there.
//
// Lateness is judged per window (Flink's rule), at the source, against
// the record's own partition. With Wp the watermark of the record's
// partition just before the record (from the partition's earlier records
// alone; message.wm carries it to the window operator):
//
//	window w is closed for the record  ⇔  w.End + L <= Wp
//
// The record counts in each of its windows that is open for it; it is
// late (to the late topic, counted in no window) only when all of them
// are closed (window.Spec.Late): tumbling, its one window; hopping, a
// closed window is skipped silently and the record is late once it is
// skipped by every one, as Flink's WindowOperator skips a late window
// (isWindowLate) and side-outputs an element no window took; sessions,
// the window judged is [ts, ts+1), the earliest end of any session the
// record could join, not its proto-window [ts, ts+gap) (see below).
//
// The invariant: a window open for a record has not fired when the
// record reaches it, so which records a window holds depends on the
// input alone, not on barriers, crashes or the checkpoint interval. By
// induction W(N) <= Wp(N) <= Wp for a partition p that is not idle: W(N)
// is the greater of W(N-1) and a least that includes Wp(N), and Wp only
// grows. So a window with w.End + L > Wp has w.End + L > W at every
// barrier so far: it has not fired. A window closed for the record may
// not have fired yet either, but the record never goes into it, whatever
// the barriers did. The window operator only adds a record to the
// windows open for it, and sessions keep the invariant by their rule: a
// session S the record joins overlaps [ts, ts+gap), so S.End > ts, and
// S.End + L >= ts + 1 + L > Wp: open, not fired. Judging sessions by
// [ts, ts+gap) would let a record overlap a session with S.End + L <= Wp,
// which has fired or not depending on the barriers (merge into it, or
// start a second session over the same time?), and leaving such sessions
// out of the merge would make a session depend on how the partitions'
// records interleave, which a replay does not repeat.
//
// The one way around the invariant is a partition behind the job's
// watermark: one taken for idle (idle_timeout), one added to a topic
// while the job ran (it starts at NoWatermark, W does not wait for it),
// or a restore with a larger max_out_of_orderness. Its records may find
// windows already fired; the window operator (windowOp.process) judges
// them against W too and sends a record whose windows all fired to the
// late output, nondeterministically, as idle_timeout documents.

// timePlan is how a job with event time places records in it.
type timePlan struct {
	// byTopic is the event time of each source topic (sources without
	// event_time have none: a window needs every source it reads to have
	// it).
	byTopic map[string]*sourceTime
	// joins are the join repartition topics that carry event time
	// (jointime.go).
	joins joinTimes
}

// sourceTime is one source's event_time, compiled.
type sourceTime struct {
	expr       *operator.Expr // nil: the Kafka record timestamp
	outOfOrder int64          // max_out_of_orderness, ms
	idle       time.Duration  // idle_timeout; 0: off
	// maxFuture is max_future in ms (0: off), futureStep its config path.
	maxFuture  int64
	futureStep string
	// reported: a join's repartition topic, whose records carry their
	// times and whose partitions' times are reported (jointime.go).
	reported bool
}

// compileTime compiles the sources' event_time; nil when none has it.
func compileTime(cfg *config.Config) (*timePlan, config.Errors) {
	var problems config.Errors
	tp := &timePlan{byTopic: map[string]*sourceTime{}}
	for i, src := range cfg.Sources {
		et := src.EventTime
		if et == nil {
			continue
		}
		st := &sourceTime{outOfOrder: et.MaxOutOfOrderness.Milliseconds(), idle: et.IdleTimeout,
			maxFuture: et.MaxFuture.Milliseconds(), futureStep: fmt.Sprintf("sources[%d].event_time.max_future", i)}
		if et.Timestamp != "" {
			path := fmt.Sprintf("sources[%d].event_time.timestamp", i)
			e, err := operator.CompileExpr(path, et.Timestamp)
			if err != nil {
				problems = append(problems, compileProblems(cfg, err)...)
				continue
			}
			st.expr = e
		}
		for _, t := range src.Topics {
			tp.byTopic[t] = st
		}
	}
	if len(problems) > 0 {
		return nil, problems
	}
	if len(tp.byTopic) == 0 {
		return nil, nil
	}
	compileJoinTimes(cfg, tp)
	return tp, nil
}

// eventTime is where one partition stood in event time at a barrier.
type eventTime struct {
	checkpoint.PartitionTime
	// watermark is MaxEventTime minus the source's max_out_of_orderness.
	watermark int64
	// idle: no record for idle_timeout; the partition does not hold the
	// job's watermark back.
	idle bool
	// carried: a partition the task does not read, whose time a group
	// member carries forward in its checkpoint records (groupeventtime.go).
	carried bool
	// reports: a partition of a join's repartition topic, what it knows
	// of the stream's partitions (jointime.go).
	reports *shuffledTime
}

// clocks are the event-time clocks of the partitions one source task
// reads.
type clocks struct {
	plan *timePlan
	now  func() time.Time
	// started is when the task began: a partition that never delivered
	// counts as idle idle_timeout after it.
	started time.Time
	by      map[partitionKey]*clock
	// carry: at also reports the partitions restored but not read, as
	// carried (group mode).
	carry bool
	// partitions are the job's source partitions with event time (group
	// mode), of which a join's repartition topic reports some.
	partitions []partitionKey
	// joinTimeFromRecords: plantedJoinTimeFromRecords.
	joinTimeFromRecords bool
}

type clock struct {
	window.PartitionClock
	src      *sourceTime
	lastRead time.Time
	// reports: a partition of a join's repartition topic, whose time is
	// what the stream's partitions reported through it (jointime.go).
	reports *queueTime
}

// newClocks starts the clocks at the checkpoint's event time (nil: none).
func newClocks(tp *timePlan, restored *checkpoint.EventTime, now func() time.Time) *clocks {
	c := &clocks{plan: tp, now: now, started: now(), by: map[partitionKey]*clock{}}
	if restored != nil {
		for _, p := range restored.Partitions {
			if src := tp.byTopic[p.Topic]; src != nil {
				cl := &clock{PartitionClock: window.PartitionClock{Max: p.MaxEventTime}, src: src}
				if src.reported {
					cl.reports = newJoinClock(p.MaxEventTime)
				}
				c.by[partitionKey{p.Topic, p.Partition}] = cl
			}
		}
	}
	return c
}

// of is the clock of rec's partition (nil: its source has no event time).
func (c *clocks) of(topic string, partition int32) *clock {
	k := partitionKey{topic, partition}
	if cl := c.by[k]; cl != nil {
		return cl
	}
	src := c.plan.byTopic[topic]
	if src == nil {
		return nil
	}
	cl := &clock{PartitionClock: window.NewPartitionClock(), src: src}
	if src.reported {
		cl.reports = newJoinClock(window.NoWatermark)
	}
	c.by[k] = cl
	return cl
}

// at is where the partitions of positions stand, for barrier N.
func (c *clocks) at(positions []checkpoint.SourceOffset) []eventTime {
	now := c.now()
	out := make([]eventTime, 0, len(positions))
	for _, p := range positions {
		cl := c.of(p.Topic, p.Partition)
		if cl == nil {
			continue
		}
		if cl.reports != nil {
			out = append(out, c.atJoin(p, cl))
			continue
		}
		et := eventTime{
			PartitionTime: checkpoint.PartitionTime{Topic: p.Topic, Partition: p.Partition, MaxEventTime: cl.Max},
			watermark:     cl.Watermark(cl.src.outOfOrder),
		}
		if cl.src.idle > 0 {
			last := cl.lastRead
			if last.IsZero() {
				last = c.started
			}
			et.idle = now.Sub(last) >= cl.src.idle
		}
		out = append(out, et)
	}
	if c.carry {
		for k, cl := range c.by {
			if !slices.ContainsFunc(positions, func(p checkpoint.SourceOffset) bool { return p.Topic == k.topic && p.Partition == k.partition }) {
				out = append(out, eventTime{PartitionTime: checkpoint.PartitionTime{Topic: k.topic, Partition: k.partition, MaxEventTime: cl.Max}, carried: true})
			}
		}
	}
	return out
}

// future is the dead-letter error of an event time at that is further
// ahead of the processing time now than st's max_future, or nil. The
// decision reads the wall clock, so unlike the rest of event time it can
// differ on a replay: a record judged near the bound may be kept on
// one run and refused on the other (after a crash, its time may have
// come). Off by default, like idle_timeout.
func (st *sourceTime) future(at int64, now time.Time) *operator.RecordError {
	nowMs := now.UnixMilli()
	if at <= window.SatAdd(nowMs, st.maxFuture) {
		return nil
	}
	return &operator.RecordError{Step: st.futureStep, Code: operator.CodeFuture, Reason: fmt.Sprintf(
		"event time %s is %s ahead of the processing time %s, more than max_future %s; it would move the partition's watermark there and make every later record of the partition late",
		operator.AppendTime(nil, at), ahead(at-nowMs), operator.AppendTime(nil, nowMs), time.Duration(st.maxFuture)*time.Millisecond)}
}

// ahead is a gap of ms milliseconds, readable at any size.
func ahead(ms int64) string {
	if ms >= math.MaxInt64/int64(time.Millisecond) {
		return fmt.Sprintf("%d days", ms/(24*3600*1000))
	}
	return (time.Duration(ms) * time.Millisecond).String()
}

// jobWatermark is W(N) from W(N-1) and the partitions at barrier N.
func jobWatermark(prev int64, times []eventTime) int64 {
	wms := make([]int64, 0, len(times))
	for _, t := range times {
		if !t.idle && !t.carried {
			wms = append(wms, t.watermark)
		}
	}
	return window.JobWatermark(prev, wms)
}

// unionTimes adds b's partitions to have, once per partition: the time of
// the task that reads it, over one carried (group mode).
func unionTimes(have, add []eventTime) []eventTime {
	if len(have) == 0 {
		return append(have, add...)
	}
	for _, t := range add {
		i := slices.IndexFunc(have, func(h eventTime) bool { return h.Topic == t.Topic && h.Partition == t.Partition })
		switch {
		case i < 0:
			have = append(have, t)
		case have[i].carried && !t.carried:
			have[i] = t
		case have[i].carried && t.carried:
			have[i].MaxEventTime = max(have[i].MaxEventTime, t.MaxEventTime)
		}
	}
	return have
}

// recordEventTime is what a checkpoint record stores of event time.
func recordEventTime(watermark int64, times []eventTime) *checkpoint.EventTime {
	et := &checkpoint.EventTime{Watermark: watermark}
	for _, t := range times {
		et.Partitions = append(et.Partitions, t.PartitionTime)
	}
	slices.SortFunc(et.Partitions, func(a, b checkpoint.PartitionTime) int {
		return checkpoint.CompareOffsets(
			checkpoint.SourceOffset{Topic: a.Topic, Partition: a.Partition},
			checkpoint.SourceOffset{Topic: b.Topic, Partition: b.Partition})
	})
	return et
}

// Headers of a record in the late topic, besides the source's
// (keyed.HeaderLateWindowStart says what each holds).
const (
	HeaderLateWindowStart = keyed.HeaderLateWindowStart
	HeaderLateWindowEnd   = keyed.HeaderLateWindowEnd
	HeaderLateWindows     = keyed.HeaderLateWindows
	HeaderLateWatermark   = keyed.HeaderLateWatermark
)
