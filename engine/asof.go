package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/metrics"
	"github.com/eoflow/pipeline/operator"
	"github.com/eoflow/pipeline/window"
)

// Joins as of event time in the runtime (docs/joins.md#joins-as-of-event-time),
// single mode. The pure pieces are the operator package's
// (VersionedTable, TableClock, Hold); this file places them:
//
//  1. The table task of a table joined as of event time applies each
//     record of its topic twice: to the latest-value table, as every
//     table, and to the versioned table at the record's timestamp
//     (asOfTable.apply). The table's clock notes the timestamp only
//     after the version is applied, so the table's event time T never
//     runs ahead of what a lookup can find.
//  2. A source task holds every record of a source whose routes go
//     through such a join (router.holdBack): its event time is placed
//     against its partition's clock as it is read, as for any record,
//     and the record waits, with the watermark of its partition before
//     it, in the task's operator.Hold. No step has run on it (the join
//     key is not known yet, so the HeldRecord's Key is empty: the Hold
//     orders by event time, then source position); every step runs at
//     its release, the steps before the join included, which are pure.
//  3. At barrier N, before the barrier is sent on (sourceTask.release),
//     the task releases the records whose event time is below T (the
//     least over the tables it joins), in the Hold's order, and routes
//     each as if it had just been read, with its event time and
//     watermark as placed then: every step runs, the join looks the key
//     up as of the record's event time. Then barrier N carries the
//     records still held (barrier.held), which the sink writes into
//     checkpoint record N (checkpoint.Record.Held, format v6): read
//     already, not yet joined, state of the checkpoint.
//  4. The barrier's partition watermarks are clamped to the least event
//     time held, so the job's watermark never passes a held record: a
//     window or interval join after the join fires as if the record had
//     been there all along.
//  5. Each task then reports its watermark and its least held event time
//     (asOfJoins.report); once every task has, each table's versions
//     older than min(W, T) − history (but not past any held record) are
//     dropped: VersionedTable.Expire.
//
// A restore gives each source task the held records of its partitions
// back (restoreHeld) and reads the tables' topics from their start, as
// every restore does; the horizon is then set from the checkpoint's
// watermark.

// asOfTable is the versioned side of one table joined as of event time,
// applied by the table's task (one goroutine) and read by the source
// tasks.
type asOfTable struct {
	id string
	// history is the largest history of the joins that read the table
	// (ms).
	history int64
	vt      *operator.VersionedTable
	// idle is the job's idle_timeout (0: off): a table partition that
	// gives no record for that long does not hold the table's event time
	// back.
	idle time.Duration
	now  func() time.Time

	// loading are the largest timestamps of the read to the end, by
	// partition, until begin knows every partition.
	loading map[int32]int64
	mu      struct {
		sync.Mutex
		clock    *operator.TableClock // nil until begin
		lastRead map[int32]time.Time
		started  time.Time
	}
}

// apply applies a record of the table's topic as a version at its
// timestamp, then notes the timestamp in the table's clock. late: the
// record is before the horizon and was not applied (VersionedTable rule
// 5).
func (t *asOfTable) apply(r *kgo.Record) (late bool) {
	at := r.Timestamp.UnixMilli()
	late, skip, _ := t.vt.ApplyAt(r.Key, r.Value, at)
	if skip != "" {
		return false // the latest-value table reported it
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.clock == nil {
		if m, ok := t.loading[r.Partition]; !ok || at > m {
			t.loading[r.Partition] = at
		}
		return late
	}
	t.mu.clock.Observe(r.Partition, at)
	t.mu.lastRead[r.Partition] = t.now()
	return late
}

// begin starts the table's clock once the read to the end says which
// partitions the topic has (ends).
func (t *asOfTable) begin(ends map[int32]int64) {
	ps := make([]int32, 0, len(ends))
	for p := range ends {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.mu.clock = operator.NewTableClock(ps)
	t.mu.lastRead = map[int32]time.Time{}
	t.mu.started = t.now()
	for p, at := range t.loading {
		t.mu.clock.Observe(p, at)
		t.mu.lastRead[p] = t.mu.started
	}
	t.loading = nil
}

// eventTime is the table's event time T (ok false: a partition that is
// not idle has given nothing yet).
func (t *asOfTable) eventTime() (int64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.clock == nil {
		return 0, false
	}
	now := t.now()
	idle := func(p int32) bool {
		if t.idle <= 0 {
			return false
		}
		last, ok := t.mu.lastRead[p]
		if !ok {
			last = t.mu.started
		}
		return now.Sub(last) >= t.idle
	}
	return t.mu.clock.Watermark(idle)
}

// asOfJoins is an attempt's joins as of event time: their tables, which
// sources' records are held, and what each source task reported at its
// last barrier (for the horizon).
type asOfJoins struct {
	tables []*asOfTable
	// sources says, by source index, whether its records are held.
	sources []bool
	metrics *metrics.Metrics

	mu struct {
		sync.Mutex
		// reports are by source task index (nil until the graph is
		// built).
		reports []asOfReport
	}
}

// asOfReport is what a source task said at its last barrier: its
// watermark (the least over its partitions that are not idle; MaxInt64:
// none holds it back) and the least event time it holds.
type asOfReport struct {
	done     bool
	wm       int64
	held     int64
	holdsAny bool
}

// newAsOfJoins is the joins as of event time of the plan (nil: none),
// with their tables; the table tasks apply to them.
func (j *Job) newAsOfJoins() *asOfJoins {
	var js *asOfJoins
	idle := time.Duration(0)
	for _, s := range j.cfg.Sources {
		if s.EventTime != nil {
			idle = max(idle, s.EventTime.IdleTimeout)
		}
	}
	for _, d := range j.plan.graph.Joins() {
		if !d.AsOf {
			continue
		}
		if js == nil {
			js = &asOfJoins{sources: j.plan.graph.AsOfSources(), metrics: j.metrics}
		}
		i := slices.IndexFunc(js.tables, func(t *asOfTable) bool { return t.id == d.Table })
		if i >= 0 {
			js.tables[i].history = max(js.tables[i].history, d.History)
			continue
		}
		js.tables = append(js.tables, &asOfTable{id: d.Table, history: d.History, idle: idle, now: j.now, loading: map[int32]int64{}})
	}
	return js
}

// table is the as-of side of table id (nil: no join reads it as of event
// time).
func (js *asOfJoins) table(id string) *asOfTable {
	if js == nil {
		return nil
	}
	for _, t := range js.tables {
		if t.id == id {
			return t
		}
	}
	return nil
}

// eventTime is the least event time of the tables (ok false: one has
// none yet): a record before it has met every version it needs.
func (js *asOfJoins) eventTime() (int64, bool) {
	tw := int64(math.MaxInt64)
	for _, t := range js.tables {
		et, ok := t.eventTime()
		if !ok {
			return 0, false
		}
		tw = min(tw, et)
	}
	return tw, true
}

// start makes room for the reports of n source tasks.
func (js *asOfJoins) start(n int) {
	js.mu.Lock()
	js.mu.reports = make([]asOfReport, n)
	js.mu.Unlock()
}

// report notes what source task task said at a barrier, and moves the
// tables' horizons once every task has said something.
func (js *asOfJoins) report(task int, r asOfReport) {
	js.mu.Lock()
	defer js.mu.Unlock()
	r.done = true
	js.mu.reports[task] = r
	wm, held, holds := int64(math.MaxInt64), int64(math.MaxInt64), false
	for _, rep := range js.mu.reports {
		if !rep.done {
			return
		}
		wm = min(wm, rep.wm)
		if rep.holdsAny {
			held, holds = min(held, rep.held), true
		}
	}
	js.expire(wm, held, holds)
}

// expire moves each table's horizon to min(W, T) − history, never past a
// held record (held, if holds). Called with js.mu held.
func (js *asOfJoins) expire(wm, held int64, holds bool) {
	if wm == window.NoWatermark {
		return
	}
	for _, t := range js.tables {
		tw, ok := t.eventTime()
		if !ok {
			continue
		}
		h := min(wm, tw)
		if h == math.MaxInt64 || h < math.MinInt64+t.history {
			continue
		}
		h -= t.history
		if holds {
			h = min(h, held)
		}
		t.vt.Expire(h)
	}
}

// sourceHold is the records one source task holds for joins as of event
// time.
type sourceHold struct {
	joins *asOfJoins
	task  int
	id    string // the task's id, the metric's label
	h     operator.Hold
	// passWatermark: the planted bug plantedCoHeldPassedByWatermark (a
	// co-partitioned group member's task, in a test): the barriers'
	// watermarks are not lowered to the records held.
	passWatermark bool
}

// holdBack places rec in event time, as route would, and holds it with
// its partition's watermark before it (format is its source's, src its
// index). A record whose event time fails goes to the dead letters now,
// as route would send it.
func (r *router) holdBack(src int, rec *kgo.Record, format config.Format, out [][]message) {
	op := &operator.Record{
		Key: rec.Key, Value: rec.Value, Timestamp: rec.Timestamp,
		Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset,
		Format: format,
	}
	at, wm, ok := r.placeInTime(src, rec, op, out)
	if !ok {
		return
	}
	r.branches.Recycle(op)
	r.hold.h.Add(operator.HeldRecord{At: at, Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset, Record: appendHeldInput(nil, rec, wm)})
}

// release routes the held records the tables' event time has passed, as
// if each had just been read (step 3 above), and sends them to the
// workers. It reports false when ctx ended.
func (s *sourceTask) release(ctx context.Context, out [][]message, to links) (bool, error) {
	h := s.router.hold
	if h == nil || h.h.Len() == 0 {
		return true, nil
	}
	if s.paused() && s.planted != plantedReleaseWhilePaused {
		// A group savepoint's pause, or a stop with a savepoint draining
		// the repartition topic: the held records stay as they are until
		// the savepoint is cut (groupsavepoint.go), as the positions do.
		return true, nil
	}
	tw, ok := h.joins.eventTime()
	if !ok {
		return true, nil
	}
	held := h.h.Release(tw)
	if len(held) == 0 {
		return true, nil
	}
	recs := make([]*kgo.Record, len(held))
	wms := make([]int64, len(held))
	for i, hr := range held {
		rec, wm, err := decodeHeldInput(hr)
		if err != nil {
			return true, fmt.Errorf("source %s: %w", s.id, err)
		}
		recs[i], wms[i] = rec, wm
	}
	if err := s.awaitSchemas(ctx, recs, to); err != nil {
		return true, err
	}
	makeRoom(out, len(recs))
	for i, rec := range recs {
		s.router.released = &heldAt{at: held[i].At, wm: wms[i]}
		s.router.route(rec, out)
	}
	s.router.released = nil
	s.router.flushSteps()
	return s.send(ctx, out, to), nil
}

// atBarrier puts what the task holds into barrier b (steps 3 to 5
// above): the held records, the partition watermarks clamped to the
// least held event time, and the report for the horizon.
func (h *sourceHold) atBarrier(b *barrier) {
	if h == nil {
		return
	}
	b.held = h.h.Records()
	least, holds := h.h.Min()
	in := map[partitionKey]bool{}
	for _, r := range b.held {
		in[partitionKey{r.Topic, r.Partition}] = true
	}
	wm := int64(math.MaxInt64)
	for i := range b.times {
		t := &b.times[i]
		if t.carried {
			continue
		}
		if holds && t.watermark > least && !h.passWatermark {
			t.watermark = least
		}
		if in[partitionKey{t.Topic, t.Partition}] {
			t.idle = false // its records wait here: it holds the watermark back
		}
		if !t.idle {
			wm = min(wm, t.watermark)
		}
	}
	h.joins.report(h.task, asOfReport{wm: wm, held: least, holdsAny: holds})
	h.joins.metrics.SetJoinHeld(h.id, len(b.held))
}

// restoreHeld gives the source tasks the records checkpoint latest holds
// (nil: none), each to the task that reads its partition, and sets the
// tables' horizon from the checkpoint's watermark. A held record of a
// partition no task reads (its source was removed from the
// configuration) is dropped, and the log says so.
func (js *asOfJoins) restoreHeld(latest *checkpoint.Record, sources []*sourceTask, log *slog.Logger) error {
	js.start(len(sources))
	for _, s := range sources {
		js.metrics.SetJoinHeld(s.router.hold.id, 0)
	}
	if latest == nil {
		return nil
	}
	least, holds := int64(math.MaxInt64), false
	if len(latest.Held) > 0 {
		h, err := operator.DecodeHold(latest.Held)
		if err != nil {
			return fmt.Errorf("checkpoint %d: %w", latest.ID, err)
		}
		owner := map[partitionKey]*sourceTask{}
		for _, s := range sources {
			for _, p := range s.reader.Positions() {
				owner[partitionKey{p.Topic, p.Partition}] = s
			}
		}
		dropped := 0
		for _, r := range h.Records() {
			s := owner[partitionKey{r.Topic, r.Partition}]
			if s == nil {
				dropped++
				continue
			}
			s.router.hold.h.Add(r)
			least, holds = min(least, r.At), true
		}
		if dropped > 0 {
			log.Warn("records held for a join as of event time at the checkpoint belong to partitions the job no longer reads: they are dropped", "checkpoint", latest.ID, "records", dropped)
		}
		for _, s := range sources {
			js.metrics.SetJoinHeld(s.router.hold.id, s.router.hold.h.Len())
		}
	}
	if et := latest.EventTime; et != nil {
		js.mu.Lock()
		js.expire(et.Watermark, least, holds)
		js.mu.Unlock()
	}
	return nil
}

// appendHeldInput appends what a held record keeps of its input record
// besides its place (topic, partition, offset: operator.HeldRecord's):
// a version byte, its partition's watermark before it, its timestamp
// (Unix ms), key, value (each: a byte 0 for nil, or 1 and the bytes) and
// headers.
func appendHeldInput(dst []byte, rec *kgo.Record, wm int64) []byte {
	dst = append(dst, heldInputVersion)
	dst = binary.AppendVarint(dst, wm)
	dst = binary.AppendVarint(dst, rec.Timestamp.UnixMilli())
	dst = appendHeldBytes(dst, rec.Key)
	dst = appendHeldBytes(dst, rec.Value)
	dst = binary.AppendUvarint(dst, uint64(len(rec.Headers)))
	for _, h := range rec.Headers {
		dst = appendHeldBytes(dst, []byte(h.Key))
		dst = appendHeldBytes(dst, h.Value)
	}
	return dst
}

const heldInputVersion = 1

// heldAt is where a held record was placed in event time when it was
// read: its event time and its partition's watermark before it. Its
// release routes it from there, not from the partition's clock now.
type heldAt struct{ at, wm int64 }

func appendHeldBytes(dst, b []byte) []byte {
	if b == nil {
		return append(dst, 0)
	}
	dst = append(dst, 1)
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

var errHeldInput = errors.New("a held join record: truncated or corrupt")

// decodeHeldInput rebuilds the input record and its partition's
// watermark from a held record.
func decodeHeldInput(hr operator.HeldRecord) (*kgo.Record, int64, error) {
	rd := bytes.NewReader(hr.Record)
	if v, err := rd.ReadByte(); err != nil || v != heldInputVersion {
		return nil, 0, fmt.Errorf("%w (version byte)", errHeldInput)
	}
	wm, err1 := binary.ReadVarint(rd)
	ts, err2 := binary.ReadVarint(rd)
	if err1 != nil || err2 != nil {
		return nil, 0, errHeldInput
	}
	rec := &kgo.Record{Topic: hr.Topic, Partition: hr.Partition, Offset: hr.Offset, Timestamp: time.UnixMilli(ts)}
	var err error
	if rec.Key, err = readHeldBytes(rd); err != nil {
		return nil, 0, err
	}
	if rec.Value, err = readHeldBytes(rd); err != nil {
		return nil, 0, err
	}
	n, err := binary.ReadUvarint(rd)
	if err != nil || n > uint64(rd.Len()) {
		return nil, 0, errHeldInput
	}
	for range n {
		k, err := readHeldBytes(rd)
		if err != nil {
			return nil, 0, err
		}
		v, err := readHeldBytes(rd)
		if err != nil {
			return nil, 0, err
		}
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: string(k), Value: v})
	}
	if rd.Len() != 0 {
		return nil, 0, errHeldInput
	}
	return rec, wm, nil
}

func readHeldBytes(rd *bytes.Reader) ([]byte, error) {
	set, err := rd.ReadByte()
	if err != nil || set > 1 {
		return nil, errHeldInput
	}
	if set == 0 {
		return nil, nil
	}
	n, err := binary.ReadUvarint(rd)
	if err != nil || n > uint64(rd.Len()) {
		return nil, errHeldInput
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(rd, b); err != nil {
		return nil, errHeldInput
	}
	return b, nil
}
