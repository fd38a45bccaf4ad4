package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/internal/kread"
	"github.com/eoflow/pipeline/internal/mutant"
	"github.com/eoflow/pipeline/metrics"
	"github.com/eoflow/pipeline/operator"
	"github.com/eoflow/pipeline/schema"
	"github.com/eoflow/pipeline/source"
)

// Tables in the runtime. A table's state is its topic: the job keeps no
// copy of it (no changelog, no state records) and every attempt builds it
// anew (or, in group mode across consecutive generations, reads on the
// one the last attempt left: tablekept.go), in two phases:
//
//  1. Before the task graph starts (loadTables, after the restore): each
//     table's topic is read with read_committed from its start to its
//     last stable offset as of then, every partition. No record of a
//     source is joined before every table is read to its end.
//  2. While the graph runs: one task per table (tableTask.run) reads on
//     from those offsets and applies each update as it comes, while the
//     source tasks' join steps look keys up in it (operator.Table: one
//     writer, any number of readers).
//
// So a join is in processing time: a record meets the table as it is
// when its source task processes it. Each checkpoint records the offsets
// of the updates applied by the time its record is written
// (checkpoint.Record.Tables): a restore reads the topic to its end, which
// is at or past them unless the topic was recreated or truncated (then the
// log says so). The offsets are a floor, not the exact state the epoch's
// records met: a restore replays the records after the checkpoint against
// the table as it is by then, which a run without the crash could have
// met too, had the updates come sooner (docs/joins.md).
//
// Which process holds a table: in single mode, the one process holds every
// table whole, shared read-only by all its source tasks, so a record is
// looked up wherever it is read, whatever its key (Kafka Streams'
// GlobalKTable). In group mode every member does the same
// (tables[].mode: broadcast), or reads only the partitions of its stream
// partitions (partitioned); the dead letters of the tables' bad records
// are each member's only for the partitions it is on duty for, and a
// record's join result travels with it to its key group's owner
// (tableduty.go, router.shuffleOut).

// tableCluster is what reading a table to its end needs of the cluster:
// every committed record of topic up to its last stable offset as of the
// call, and that offset for every partition of the topic.
type tableCluster interface {
	// ReadTable reads each partition from where from says (and only
	// those it says to read), and returns their ends.
	ReadTable(ctx context.Context, topic string, from func(partition int32) (int64, bool), fn func(*kgo.Record) error) (map[int32]int64, error)
}

var _ tableCluster = kafkaCluster{}

// ReadTable reads a table's topic to its end (kread.FromTo). A topic that
// does not exist is an error that says so.
func (c kafkaCluster) ReadTable(ctx context.Context, topic string, from func(int32) (int64, bool), fn func(*kgo.Record) error) (map[int32]int64, error) {
	md, err := c.adm.Metadata(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("metadata of topic %s: %w", topic, err)
	}
	if td, ok := md.Topics[topic]; !ok || td.Err != nil || len(td.Partitions) == 0 {
		return nil, fmt.Errorf("topic %s does not exist: create it (compacted: cleanup.policy=compact), or name another in tables[].topic", topic)
	}
	return kread.FromTo(ctx, c.conn, topic, from, fn)
}

// tableReader opens a reader of a table's partitions from the given
// offsets (source.NewReader, read_committed).
type tableReader func(offsets map[source.TopicPartition]int64) (recordReader, error)

// tableSet is an attempt's tables, each read to its end and with a task
// to keep it up to date.
type tableSet struct {
	tasks []*tableTask
	// kept counts the tables read on from where the previous
	// generation's attempt left them (tablekept.go).
	kept int
}

// tableTask is one table of an attempt: its state, and the reader that
// applies its updates while the task graph runs.
type tableTask struct {
	cfg config.Table
	// path is the table's place in the configuration (tables[i]), the
	// step of its dead letters.
	path     string
	table    *operator.Table
	reader   recordReader
	counters metrics.TableCounters
	metrics  *metrics.Metrics
	log      *slog.Logger
	plan     *plan
	// skips counts the records that could not be applied (the first few
	// are logged).
	skips int
	// floor is where the checkpoint the attempt continues from says the
	// table stood, by partition: the dead letters of the records before
	// it were committed with that checkpoint or an earlier one, so the
	// read to the end does not write them again.
	floor map[int32]int64
	// duty says whether this process writes the dead letters of a
	// partition's records (group mode: one member per partition; nil: all).
	duty func(partition int32) bool
	// asOf is the table's versioned side, when a join reads it as of
	// event time (asof.go; nil otherwise).
	asOf *asOfTable
	// running counts the goroutines in run: a table is kept for the next
	// attempt only once its task ended (tablekept.go).
	running atomic.Int32

	mu struct {
		sync.Mutex
		// next is the offset after the last record applied of each
		// partition: what a checkpoint records.
		next map[int32]int64
		// deadLetters are those of the records before next that no
		// checkpoint has taken yet (cut).
		deadLetters []*kgo.Record
	}
}

// loggedSkips is how many unreadable records of a table an attempt logs;
// pipeline_table_skipped_records_total counts them all.
const loggedSkips = 5

// loadTables reads every table of the job to its end (phase 1), binds the
// join steps to them, and opens the readers that keep them up to date
// (open, or source.NewReader when nil). It must run before the task graph
// is built: no source record is joined before. A table the previous
// generation's attempt kept (a.keptTables, tablekept.go) is read on from
// where it stood instead of from the start.
func (a *attempt) loadTables(ctx context.Context, open tableReader) error {
	j := a.j
	if len(j.cfg.Tables) == 0 {
		return nil
	}
	tc, ok := a.cluster.(tableCluster)
	if !ok {
		return errors.New("this cluster cannot read tables") // unreachable: kafkaCluster and the simulation's can
	}
	if open == nil {
		open = func(offsets map[source.TopicPartition]int64) (recordReader, error) {
			return source.NewReader(j.conn, offsets, j.metrics.KafkaHooks("table"))
		}
	}
	set := &tableSet{}
	byID := map[string]*operator.Table{}
	versioned := map[string]*operator.VersionedTable{}
	a.asOf = j.newAsOfJoins()
	for i, cfg := range j.cfg.Tables {
		tt, err := a.readOn(ctx, tc, a.keptTable(i, cfg))
		if err != nil {
			return err
		}
		if tt != nil {
			set.kept++
		} else if tt, err = a.readTable(ctx, tc, i, cfg, versioned); err != nil {
			return err
		}
		tt.checkAgainst(a.latest, a.tablesFrom)
		offsets := map[source.TopicPartition]int64{}
		for p, off := range tt.mu.next {
			offsets[source.TopicPartition{Topic: cfg.Topic, Partition: p}] = off
		}
		r, err := open(offsets)
		if err != nil {
			return fmt.Errorf("table %s: %w", cfg.ID, err)
		}
		a.closers = append(a.closers, r.Close)
		tt.reader = r
		j.metrics.SetTable(cfg.ID, tt.table.Len(), tt.table.Bytes(), 0)
		set.tasks = append(set.tasks, tt)
		byID[cfg.ID] = tt.table
	}
	if err := j.plan.graph.BindTables(byID, func(step string) operator.JoinCounter { return j.metrics.Join(step) }); err != nil {
		return err
	}
	if err := j.plan.graph.BindVersioned(versioned); err != nil {
		return err
	}
	a.tables = set
	return nil
}

// newTableTask is the task of table cfg (tables[i]) for attempt a, with
// its duties and floor in this attempt, before it reads anything.
func (a *attempt) newTableTask(i int, cfg config.Table, table *operator.Table) *tableTask {
	j := a.j
	tt := &tableTask{cfg: cfg, path: fmt.Sprintf("tables[%d]", i), table: table, metrics: j.metrics, log: j.log.With("table", cfg.ID), plan: j.plan}
	tt.floor, tt.duty = floorOf(a.latest, cfg), a.tableDuty
	if a.tableFloors != nil {
		tt.floor = a.tableFloors[cfg.Topic]
	}
	reasons := make([]string, 0, 4)
	for _, r := range operator.SkipReasons() {
		reasons = append(reasons, string(r))
	}
	tt.counters = j.metrics.Table(cfg.ID, reasons)
	return tt
}

// readTable reads table cfg (tables[i]) from the start of its topic to
// its end, its versioned side (a join as of event time) into versioned.
func (a *attempt) readTable(ctx context.Context, tc tableCluster, i int, cfg config.Table, versioned map[string]*operator.VersionedTable) (*tableTask, error) {
	j := a.j
	tt := a.newTableTask(i, cfg, operator.NewTable(cfg))
	tt.table.SetDecoders(j.plan.schemas.Table(cfg.ID))
	if tt.asOf = a.asOf.table(cfg.ID); tt.asOf != nil {
		tt.asOf.vt = operator.NewVersionedTable(tt.table)
		versioned[cfg.ID] = tt.asOf.vt
	}
	start := j.now()
	var dls []*kgo.Record
	// A partitioned table (group mode): only the partitions of this
	// member's stream partitions, which are its duties too.
	read := func(int32) (int64, bool) { return 0, true }
	if cfg.Mode == config.TablePartitioned {
		read = func(p int32) (int64, bool) { return 0, a.tableDuty(p) }
	}
	ends, err := tc.ReadTable(ctx, cfg.Topic, read, func(r *kgo.Record) error {
		if mutant.On("table-not-read-before-join") {
			return nil // the bug: records are joined with what arrives from now on only
		}
		if err := tt.prefetch(ctx, []*kgo.Record{r}); err != nil {
			return err
		}
		dls = tt.apply(r, dls)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading table %s (topic %s) to its end: %w", cfg.ID, cfg.Topic, err)
	}
	took := j.now().Sub(start)
	if tt.asOf != nil {
		tt.asOf.begin(ends)
	}
	tt.mu.next, tt.mu.deadLetters = ends, dls
	// Reading the table to its end fetched every record of its topic
	// through the heap, while the table keeps its values off it
	// (operator.Table): what the read used is garbage now. Handed back to
	// the system at once rather than over the next minutes: at 1M keys,
	// ~260 of ~300 resident bytes per key
	// (bench/results/2026-12-06-join.md).
	debug.FreeOSMemory()
	j.metrics.TableRestored(cfg.ID, took)
	j.log.Info("table read to its end", "table", cfg.ID, "topic", cfg.Topic, "partitions", len(ends),
		"keys", tt.table.Len(), "bytes", tt.table.Bytes(), "took", took.Round(time.Millisecond))
	return tt, nil
}

// checkAgainst compares where the table's topic ends now with where
// checkpoint latest (nil: none) says it stood: an end before it means the
// topic was recreated or truncated since (or, after a move to another
// cluster, not copied there whole), which the log says (the table holds
// what the topic holds now). from names where latest's positions came
// from when not from the job's own checkpoint: the savepoint imported.
func (tt *tableTask) checkAgainst(latest *checkpoint.Record, from string) {
	if latest == nil {
		return
	}
	if from == "" {
		from = fmt.Sprintf("checkpoint %d", latest.ID)
	}
	for _, t := range latest.Tables {
		if t.ID != tt.cfg.ID || t.Topic != tt.cfg.Topic {
			continue
		}
		for _, o := range t.Offsets {
			if tt.cfg.Mode == config.TablePartitioned && tt.duty != nil && !tt.duty(o.Partition) {
				continue // another member's partition
			}
			end, ok := tt.mu.next[o.Partition]
			if !ok || end < o.Offset {
				tt.log.Warn("the table's topic ends before where the job last read it: it was recreated or truncated since, or not copied whole to this cluster; the table holds what the topic holds now",
					"topic", tt.cfg.Topic, "partition", o.Partition, "read_at", from, "position", o.Offset, "end", end)
			}
		}
	}
}

// floorOf is where checkpoint latest (nil: none) says table cfg stood,
// by partition; empty when it has no position of the table on its topic.
func floorOf(latest *checkpoint.Record, cfg config.Table) map[int32]int64 {
	floor := map[int32]int64{}
	if latest == nil {
		return floor
	}
	for _, t := range latest.Tables {
		if t.ID == cfg.ID && t.Topic == cfg.Topic {
			for _, o := range t.Offsets {
				floor[o.Partition] = o.Offset
			}
		}
	}
	return floor
}

// prefetch fetches the schemas that recs name (a table in a schema
// format), waiting while the registry gives no answer: the table's
// updates wait, unapplied, as a source's records do.
func (tt *tableTask) prefetch(ctx context.Context, recs []*kgo.Record) error {
	set := tt.plan.schemas
	if set == nil {
		return nil
	}
	backoff := 100 * time.Millisecond
	for {
		err := set.Prefetch(ctx, recs)
		if err == nil || !schema.Unavailable(err) {
			return err
		}
		tt.log.Warn("the schema registry gives no answer: the table's updates wait", "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// apply applies one record of the table's topic, counting it. A record
// that cannot be applied becomes dead letters, appended to dls, unless it
// is before the floor (its dead letters are committed already).
func (tt *tableTask) apply(r *kgo.Record, dls []*kgo.Record) []*kgo.Record {
	skip, rerr := tt.table.Apply(r.Key, r.Value)
	if skip == "" {
		tt.counters.Updates.Inc()
		if tt.asOf != nil {
			tt.asOf.apply(r)
		}
		return dls
	}
	tt.counters.Skipped(string(skip)).Inc()
	if tt.skips++; tt.skips <= loggedSkips {
		tt.log.Warn("a record of the table's topic could not be applied: it goes to the dead-letter topic, and the key keeps its value",
			"topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "reason", skip, "code", rerr.Code, "detail", rerr.Reason,
			"note", fmt.Sprintf("only the first %d per attempt are logged; pipeline_table_skipped_records_total counts them all", loggedSkips))
	}
	return tt.deadLetter(r, rerr, dls)
}

// deadLetter appends the dead letters of r, a record the table could not
// apply (rerr says why), to dls, unless they are before the floor
// (committed already) or another member's.
func (tt *tableTask) deadLetter(r *kgo.Record, rerr *operator.RecordError, dls []*kgo.Record) []*kgo.Record {
	rerr.Step = tt.path
	if floor, ok := tt.floor[r.Partition]; ok && r.Offset < floor {
		return dls
	}
	if tt.duty != nil && !tt.duty(r.Partition) {
		return dls // another member's
	}
	return append(dls, tt.plan.deadLetterRecords(r, rerr)...)
}

// run applies the table's updates as they come (phase 2) until ctx ends.
func (tt *tableTask) run(ctx context.Context) error {
	tt.running.Add(1)
	defer tt.running.Add(-1)
	for {
		if err := tt.poll(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// poll applies what one poll of the table's topic returns.
func (tt *tableTask) poll(ctx context.Context) error {
	recs, err := tt.reader.Poll(ctx, pollBatch)
	if err != nil {
		return fmt.Errorf("table %s: %w", tt.cfg.ID, err)
	}
	if err := tt.prefetch(ctx, recs); err != nil {
		return fmt.Errorf("table %s: %w", tt.cfg.ID, err)
	}
	var dls []*kgo.Record
	for _, r := range recs {
		dls = tt.apply(r, dls)
		tt.reader.Advance(r)
	}
	next := map[int32]int64{}
	for _, p := range tt.reader.Positions() {
		next[p.Partition] = p.Offset
	}
	// The position and the dead letters before it move together: a
	// checkpoint (cut) takes both or neither.
	tt.mu.Lock()
	tt.mu.next = next
	tt.mu.deadLetters = append(tt.mu.deadLetters, dls...)
	tt.mu.Unlock()
	var lag int64
	if lr, ok := tt.reader.(interface{ Lags() []source.Lag }); ok {
		for _, l := range lr.Lags() {
			lag += l.Records
		}
	}
	tt.metrics.SetTable(tt.cfg.ID, tt.table.Len(), tt.table.Bytes(), lag)
	return nil
}

// start runs every table's task in eg.
func (s *tableSet) start(ctx context.Context, eg *errgroup.Group) {
	if s == nil {
		return
	}
	for _, tt := range s.tasks {
		eg.Go(func() error { return tt.run(ctx) })
	}
}

// cut is what checkpoint records of the tables at the sink's seal: where
// every table stands (nil without tables), sorted by id, and the dead
// letters of the records before that which no earlier cut took. The sink
// writes them into the epoch whose checkpoint record holds the positions,
// so each is committed once: a restore from that checkpoint reads the
// records before the positions again without dead-lettering them (floor),
// and one from an earlier checkpoint writes them again in a later epoch.
//
// In group mode commits are the positions of the partitions whose dead
// letters this member writes, which the epoch's transaction commits to
// the group beside its source offsets: the next member to write them
// continues from there (tableduty.go).
func (s *tableSet) cut() (positions []checkpoint.TableOffsets, dls []*kgo.Record, commits []checkpoint.SourceOffset) {
	if s == nil {
		return nil, nil, nil
	}
	out := make([]checkpoint.TableOffsets, 0, len(s.tasks))
	for _, tt := range s.tasks {
		tt.mu.Lock()
		next := maps.Clone(tt.mu.next)
		dls = append(dls, tt.mu.deadLetters...)
		tt.mu.deadLetters = nil
		tt.mu.Unlock()
		t := checkpoint.TableOffsets{ID: tt.cfg.ID, Topic: tt.cfg.Topic}
		for _, p := range slices.Sorted(maps.Keys(next)) {
			t.Offsets = append(t.Offsets, checkpoint.PartitionOffset{Partition: p, Offset: next[p]})
			if tt.duty != nil && tt.duty(p) {
				commits = append(commits, checkpoint.SourceOffset{Topic: tt.cfg.Topic, Partition: p, Offset: next[p]})
			}
		}
		if len(t.Offsets) == 0 {
			// A partitioned table of which this member reads no
			// partition (it owns none of the partitions that carry
			// them): it has no position to record.
			continue
		}
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b checkpoint.TableOffsets) int { return cmp.Compare(a.ID, b.ID) })
	return out, dls, commits
}

// checkTables refuses a restart from checkpoint rec whose configuration
// reads one of its tables from another topic: the results committed so far
// were joined with the old topic's values, and the restored aggregates
// would go on from them with the new one's. A table the configuration no
// longer has, or a new one, is fine: a table keeps no state of its own.
func (j *Job) checkTables(rec *checkpoint.Record) error {
	var errs []error
	for _, t := range rec.Tables {
		cur, ok := j.cfg.Table(t.ID)
		if !ok || cur.Topic == t.Topic {
			continue
		}
		errs = append(errs, fmt.Errorf("table %q was read from topic %q at checkpoint %d, and the configuration reads it from %q: the results so far were joined with the old topic's values. "+
			"Put tables[].topic back; or stop the job with a savepoint and start the changed job from it (add --remap-topic %s=%s if the new topic is a copy of the old: the table's position then carries over); or start the changed job under a new name",
			t.ID, t.Topic, rec.ID, cur.Topic, t.Topic, cur.Topic))
	}
	if len(errs) == 0 {
		return nil
	}
	return incompatibleError{errors.Join(errs...)}
}
