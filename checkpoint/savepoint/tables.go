package savepoint

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/eoflow/pipeline/checkpoint"
)

// Tables in a savepoint. A table keeps no state of its own (its topic is
// its changelog), so all a savepoint holds of it is where it stood at the
// checkpoint: the next offset of every partition of its topic, after the
// updates the job had applied (checkpoint.Record.Tables). A job started
// from the savepoint reads the table's topic to its end, as every start
// does; the position is the floor that read must reach, and the check
// that says when it does not (the topic was recreated, truncated, or not
// yet copied to the cluster the job moved to).

// Table is one table of the manifest ("tables", sorted by id; omitted
// when the job has none, so a manifest without tables is byte for byte
// what it was before they existed).
type Table struct {
	ID    string `json:"id"`
	Topic string `json:"topic"`
	// Offsets are the next offset of each partition of Topic, sorted by
	// partition; at least one.
	Offsets []TableOffset `json:"offsets"`
}

// TableOffset is the next offset of one partition of a table's topic.
type TableOffset struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
}

// TableDesc is one table of a configuration (Descriptor.Tables).
type TableDesc struct {
	ID, Topic string
}

// TablesOf is the manifest's form of a checkpoint's tables.
func TablesOf(ts []checkpoint.TableOffsets) []Table {
	if len(ts) == 0 {
		return nil
	}
	out := make([]Table, 0, len(ts))
	for _, t := range ts {
		mt := Table{ID: t.ID, Topic: t.Topic, Offsets: make([]TableOffset, 0, len(t.Offsets))}
		for _, o := range t.Offsets {
			mt.Offsets = append(mt.Offsets, TableOffset{Partition: o.Partition, Offset: o.Offset})
		}
		out = append(out, mt)
	}
	slices.SortFunc(out, func(a, b Table) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// checkpointOffsets is t as a checkpoint record holds it, read from topic.
func (t Table) checkpointOffsets(topic string) checkpoint.TableOffsets {
	out := checkpoint.TableOffsets{ID: t.ID, Topic: topic}
	for _, o := range t.Offsets {
		out.Offsets = append(out.Offsets, checkpoint.PartitionOffset{Partition: o.Partition, Offset: o.Offset})
	}
	return out
}

// SetTables records where the job's tables stood at the savepoint's
// checkpoint (none: the job has no tables).
func (w *Writer) SetTables(ts []checkpoint.TableOffsets) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mu.tables = TablesOf(ts)
}

// validateTables checks the manifest's tables: sorted by id without
// duplicates, each with a topic and at least one partition, its
// partitions sorted without duplicates and its offsets not negative.
func validateTables(ts []Table) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for i, t := range ts {
		at := fmt.Sprintf("tables[%d] %q", i, t.ID)
		if t.ID == "" {
			fail("tables[%d]: empty id", i)
		}
		if i > 0 && ts[i-1].ID >= t.ID {
			fail("%s: not after %q (sorted by id, no duplicates)", at, ts[i-1].ID)
		}
		if t.Topic == "" {
			fail("%s: empty topic", at)
		}
		if len(t.Offsets) == 0 {
			fail("%s: no offsets (at least one partition)", at)
		}
		for j, o := range t.Offsets {
			if j > 0 && t.Offsets[j-1].Partition >= o.Partition {
				fail("%s: offsets[%d]: partition %d not after %d (sorted, no duplicates)", at, j, o.Partition, t.Offsets[j-1].Partition)
			}
			if o.Partition < 0 || o.Offset < 0 {
				fail("%s: offsets[%d]: partition %d, offset %d: negative", at, j, o.Partition, o.Offset)
			}
		}
	}
	return errs
}

// tables plans the tables of a restore from a savepoint (a plain restart
// compares tables in the runtime: a table whose topic changed is refused
// there). Nothing about a table stops a restore, since a table keeps no
// state: a table of the configuration whose id and topic (after
// RemapTopics) the savepoint has resumes from the savepoint's position
// (RestorePlan.Tables); every other difference is a note.
func (c *checker) tables() {
	if c.restart {
		return
	}
	saved := map[string]Table{}
	for _, t := range c.m.Tables {
		saved[t.ID] = t
	}
	cur := map[string]bool{}
	for _, t := range c.d.Tables {
		cur[t.ID] = true
		st, ok := saved[t.ID]
		switch {
		case !ok && len(c.m.Tables) > 0:
			c.plan.Notes = append(c.plan.Notes, fmt.Sprintf("table %q has no position in the savepoint: it is read from topic %q to its end", t.ID, t.Topic))
		case !ok:
			// A savepoint without tables (of a job without them, or of an
			// older build): every table is read to its end, as always.
		case c.rename(st.Topic) != t.Topic:
			c.plan.Notes = append(c.plan.Notes, fmt.Sprintf("table %q was read from topic %q at the savepoint; the configuration reads it from %q: that topic is read to its end, without the savepoint's position (map the old topic to the new with %s %s=%s to keep it)",
				t.ID, st.Topic, t.Topic, FlagRemapTopic, st.Topic, t.Topic))
		default:
			c.plan.Tables = append(c.plan.Tables, st.checkpointOffsets(t.Topic))
			if st.Topic != t.Topic {
				c.plan.Notes = append(c.plan.Notes, fmt.Sprintf("table %q resumes from topic %q's position as topic %q", t.ID, st.Topic, t.Topic))
			}
		}
	}
	for _, t := range c.m.Tables {
		if !cur[t.ID] {
			c.plan.Notes = append(c.plan.Notes, fmt.Sprintf("table %q (topic %q) of the savepoint is not in the configuration: its position is dropped (a table has no state to lose)", t.ID, t.Topic))
		}
	}
}

// tableTopics are the topics of the savepoint's tables.
func (m *Manifest) tableTopics() map[string]bool {
	out := map[string]bool{}
	for _, t := range m.Tables {
		out[t.Topic] = true
	}
	return out
}
