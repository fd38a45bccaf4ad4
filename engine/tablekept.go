package engine

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/config"
)

// Tables kept across a rebalance. A table is its topic read to its end
// (table.go): it holds nothing of the group, only of where its task had
// read to. So when a member keeps its operators' state from one
// generation to the next (keptstate.go), it keeps its tables too, and
// the next attempt, instead of reading each from the start:
//
//  1. takes the table over once the previous attempt's task has ended
//     (the attempt's task graph, the table tasks with it, is waited for
//     before the attempt finishes and leaves its state: keep refuses a
//     table whose task still runs);
//  2. reads on from the positions the table stood at (tableTask.mu.next)
//     to the topic's last stable offset as of now, before the task graph
//     starts: a table is read to its end at every attempt start, whatever
//     it kept (a partition added to the topic since, from its start);
//  3. writes the dead letters this attempt is on duty for exactly as a
//     read from the start would: those of the records from the group's
//     committed position (the floor, tableduty.go) on. What the table
//     applied before the floor was committed by whoever was on duty;
//     what it applied after it, while another member (or this one, after
//     its final checkpoint) was on duty, is read again, checked
//     (operator.Table.Check) and dead-lettered without being applied a
//     second time. The previous attempt's dead letters that no checkpoint
//     took are dropped: this attempt writes them again.
//
// Only broadcast tables are kept. Read from the start as before: a
// partitioned table (tables[].mode: partitioned: its partitions move with
// the stream's, and the keys of one that moved away cannot be told apart
// from the others' in operator.Table; not done yet), a table a join reads
// as of event time (its versioned history, asof.go, belongs to the
// attempt's joins and is rebuilt with them), and a table whose topic now
// ends before where the kept table stood (recreated or truncated).

// keptTables are the tables attempt a leaves the next, by id: those whose
// task has ended and that hold no versioned history.
func keptTables(s *tableSet) map[string]*tableTask {
	if s == nil {
		return nil
	}
	out := map[string]*tableTask{}
	for _, tt := range s.tasks {
		if tt.asOf == nil && tt.running.Load() == 0 {
			out[tt.cfg.ID] = tt
		}
	}
	return out
}

// keptTable is the table of cfg (tables[i]) the previous generation's
// attempt left this one (nil: none, or one this attempt may not continue
// from), made this attempt's: its duties and floor, its count of skips
// logged, no reader yet and no dead letters waiting.
func (a *attempt) keptTable(i int, cfg config.Table) *tableTask {
	old := a.keptTables[cfg.ID]
	if old == nil || old.cfg != cfg || cfg.Mode != config.TableBroadcast || a.asOf.table(cfg.ID) != nil {
		return nil
	}
	tt := a.newTableTask(i, cfg, old.table)
	tt.mu.next = old.mu.next
	return tt
}

// readOn reads kept table tt (nil: none) on to its topic's end. It
// returns nil (and no error) when the table cannot be kept after all:
// the caller reads it from the start.
func (a *attempt) readOn(ctx context.Context, tc tableCluster, tt *tableTask) (*tableTask, error) {
	if tt == nil {
		return nil, nil
	}
	j, cfg := a.j, tt.cfg
	start, keys := j.now(), tt.table.Len()
	at := tt.mu.next
	tt.mu.next = nil
	read := func(p int32) (int64, bool) {
		pos, ok := at[p]
		if !ok {
			return 0, true // a partition added to the topic: from the start
		}
		if j.plantedBug == plantedTableNotReadOn {
			return pos, false
		}
		if tt.duty != nil && tt.duty(p) {
			// From the floor: the dead letters of this member's duty.
			if floor, ok := tt.floor[p]; !ok {
				return 0, true
			} else if floor < pos {
				return floor, true
			}
		}
		return pos, true
	}
	var dls []*kgo.Record
	var again, applied int
	ends, err := tc.ReadTable(ctx, cfg.Topic, read, func(r *kgo.Record) error {
		if err := tt.prefetch(ctx, []*kgo.Record{r}); err != nil {
			return err
		}
		if pos, ok := at[r.Partition]; ok && r.Offset < pos {
			// Applied already: only its dead letters, if any are due.
			again++
			if skip, rerr := tt.table.Check(r.Key, r.Value); skip != "" {
				dls = tt.deadLetter(r, rerr, dls)
			}
			return nil
		}
		applied++
		dls = tt.apply(r, dls)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading table %s (topic %s) on to its end: %w", cfg.ID, cfg.Topic, err)
	}
	if j.plantedBug == plantedTableNotReadOn {
		maps.Copy(ends, at)
	}
	for p, pos := range at {
		if end, ok := ends[p]; ok && end < pos {
			j.log.Warn("reading a table from the start: its topic ends before where the kept table stood (recreated or truncated)",
				"table", cfg.ID, "topic", cfg.Topic, "partition", p, "position", pos, "end", end)
			return nil, nil
		}
	}
	took := j.now().Sub(start)
	tt.mu.next, tt.mu.deadLetters = ends, dls
	j.metrics.TableRestored(cfg.ID, took)
	j.log.Info("table kept from the last generation and read on to its end", "table", cfg.ID, "topic", cfg.Topic,
		"kept_keys", keys, "read_records", applied, "dead_letter_records_checked", again,
		"added_partitions", len(slices.DeleteFunc(slices.Collect(maps.Keys(ends)), func(p int32) bool { _, ok := at[p]; return ok })),
		"keys", tt.table.Len(), "took", took.Round(time.Millisecond))
	return tt, nil
}
