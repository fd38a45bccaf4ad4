package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/internal/kread"
	"github.com/eoflow/pipeline/internal/mutant"
	"github.com/eoflow/pipeline/metrics"
	"github.com/eoflow/pipeline/operator"
	"github.com/eoflow/pipeline/source"
)

// Tables in the runtime. A table's state is its topic: the job keeps no
// copy of it (no changelog, no state records) and every attempt builds it
// anew, in two phases:
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
// GlobalKTable). Group mode refuses tables for now (config).

// tableCluster is what reading a table to its end needs of the cluster:
// every committed record of topic up to its last stable offset as of the
// call, and that offset for every partition of the topic.
type tableCluster interface {
	ReadTable(ctx context.Context, topic string, fn func(*kgo.Record) error) (map[int32]int64, error)
}

var _ tableCluster = kafkaCluster{}

// ReadTable reads a table's topic to its end (kread.AllTo). A topic that
// does not exist is an error that says so.
func (c kafkaCluster) ReadTable(ctx context.Context, topic string, fn func(*kgo.Record) error) (map[int32]int64, error) {
	md, err := c.adm.Metadata(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("metadata of topic %s: %w", topic, err)
	}
	if td, ok := md.Topics[topic]; !ok || td.Err != nil || len(td.Partitions) == 0 {
		return nil, fmt.Errorf("topic %s does not exist: create it (compacted: cleanup.policy=compact), or name another in tables[].topic", topic)
	}
	return kread.AllTo(ctx, c.conn, topic, fn)
}

// tableReader opens a reader of a table's partitions from the given
// offsets (source.NewReader, read_committed).
type tableReader func(offsets map[source.TopicPartition]int64) (recordReader, error)

// tableSet is an attempt's tables, each read to its end and with a task
// to keep it up to date.
type tableSet struct {
	tasks []*tableTask
}

// tableTask is one table of an attempt: its state, and the reader that
// applies its updates while the task graph runs.
type tableTask struct {
	cfg      config.Table
	table    *operator.Table
	reader   recordReader
	counters metrics.TableCounters
	metrics  *metrics.Metrics
	log      *slog.Logger
	// skips counts the records that could not be applied (the first few
	// are logged).
	skips int

	mu struct {
		sync.Mutex
		// next is the offset after the last record applied of each
		// partition: what a checkpoint records.
		next map[int32]int64
	}
}

// loggedSkips is how many unreadable records of a table an attempt logs;
// pipeline_table_skipped_records_total counts them all.
const loggedSkips = 5

// loadTables reads every table of the job to its end (phase 1), binds the
// join steps to them, and opens the readers that keep them up to date
// (open, or source.NewReader when nil). It must run before the task graph
// is built: no source record is joined before.
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
	for _, cfg := range j.cfg.Tables {
		tt := &tableTask{cfg: cfg, table: operator.NewTable(cfg), metrics: j.metrics, log: j.log.With("table", cfg.ID)}
		reasons := make([]string, 0, 3)
		for _, r := range operator.SkipReasons() {
			reasons = append(reasons, string(r))
		}
		tt.counters = j.metrics.Table(cfg.ID, reasons)
		start := j.now()
		ends, err := tc.ReadTable(ctx, cfg.Topic, func(r *kgo.Record) error {
			if mutant.On("table-not-read-before-join") {
				return nil // the bug: records are joined with what arrives from now on only
			}
			tt.apply(r)
			return nil
		})
		if err != nil {
			return fmt.Errorf("reading table %s (topic %s) to its end: %w", cfg.ID, cfg.Topic, err)
		}
		took := j.now().Sub(start)
		tt.mu.next = ends
		tt.checkAgainst(a.latest, a.tablesFrom)
		offsets := map[source.TopicPartition]int64{}
		for p, off := range ends {
			offsets[source.TopicPartition{Topic: cfg.Topic, Partition: p}] = off
		}
		r, err := open(offsets)
		if err != nil {
			return fmt.Errorf("table %s: %w", cfg.ID, err)
		}
		a.closers = append(a.closers, r.Close)
		tt.reader = r
		j.metrics.TableRestored(cfg.ID, took)
		j.metrics.SetTable(cfg.ID, tt.table.Len(), tt.table.Bytes(), 0)
		j.log.Info("table read to its end", "table", cfg.ID, "topic", cfg.Topic, "partitions", len(ends),
			"keys", tt.table.Len(), "bytes", tt.table.Bytes(), "took", took.Round(time.Millisecond))
		set.tasks = append(set.tasks, tt)
		byID[cfg.ID] = tt.table
	}
	if err := j.plan.graph.BindTables(byID, func(step string) operator.JoinCounter { return j.metrics.Join(step) }); err != nil {
		return err
	}
	a.tables = set
	return nil
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
			end, ok := tt.mu.next[o.Partition]
			if !ok || end < o.Offset {
				tt.log.Warn("the table's topic ends before where the job last read it: it was recreated or truncated since, or not copied whole to this cluster; the table holds what the topic holds now",
					"topic", tt.cfg.Topic, "partition", o.Partition, "read_at", from, "position", o.Offset, "end", end)
			}
		}
	}
}

// apply applies one record of the table's topic, counting it.
func (tt *tableTask) apply(r *kgo.Record) {
	skip, detail := tt.table.Apply(r.Key, r.Value)
	if skip == "" {
		tt.counters.Updates.Inc()
		return
	}
	tt.counters.Skipped(string(skip)).Inc()
	if tt.skips++; tt.skips <= loggedSkips {
		tt.log.Warn("a record of the table's topic could not be applied: skipped, the key keeps its value",
			"topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "reason", skip, "detail", detail,
			"note", fmt.Sprintf("only the first %d per attempt are logged; pipeline_table_skipped_records_total counts them all", loggedSkips))
	}
}

// run applies the table's updates as they come (phase 2) until ctx ends.
func (tt *tableTask) run(ctx context.Context) error {
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
	for _, r := range recs {
		tt.apply(r)
		tt.reader.Advance(r)
	}
	next := map[int32]int64{}
	for _, p := range tt.reader.Positions() {
		next[p.Partition] = p.Offset
	}
	tt.mu.Lock()
	tt.mu.next = next
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

// offsets are where every table stands, for a checkpoint record (nil
// without tables).
func (s *tableSet) offsets() []checkpoint.TableOffsets {
	if s == nil {
		return nil
	}
	out := make([]checkpoint.TableOffsets, 0, len(s.tasks))
	for _, tt := range s.tasks {
		tt.mu.Lock()
		next := maps.Clone(tt.mu.next)
		tt.mu.Unlock()
		t := checkpoint.TableOffsets{ID: tt.cfg.ID, Topic: tt.cfg.Topic}
		for _, p := range slices.Sorted(maps.Keys(next)) {
			t.Offsets = append(t.Offsets, checkpoint.PartitionOffset{Partition: p, Offset: next[p]})
		}
		out = append(out, t)
	}
	return out
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
