package savepoint

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/eoflow/pipeline/checkpoint"
)

// Summary is what `pipeline savepoint inspect PATH` prints. It has JSON
// tags for a machine-readable variant.
type Summary struct {
	Dir               string            `json:"dir"`
	ID                string            `json:"id"` // Reader.ID
	Version           int               `json:"version"`
	Job               string            `json:"job"`
	Created           time.Time         `json:"created"`
	CheckpointID      checkpoint.ID     `json:"checkpoint_id"`
	ConfigFingerprint string            `json:"config_fingerprint"`
	KeyGroups         int               `json:"key_groups"`
	Guarantee         string            `json:"guarantee"`
	Sources           []SourceSummary   `json:"sources"`
	Operators         []OperatorSummary `json:"operators"`
	// EventTime (jobs with event time) is where the watermarks resume.
	EventTime *EventTime `json:"event_time,omitempty"`
	// Tables (jobs with tables) are where each table stood.
	Tables []Table `json:"tables,omitempty"`
	// Held (version 2) is how many records joins as of event time held,
	// by source partition.
	Held *HeldSummary `json:"held,omitempty"`
}

// HeldSummary is the held records of a savepoint.
type HeldSummary struct {
	Records    uint64          `json:"records"`
	Bytes      uint64          `json:"bytes"`
	FileBytes  int64           `json:"file_bytes"`
	Partitions []HeldPartition `json:"partitions"`
}

// SourceSummary is one source and where its partitions resume.
type SourceSummary struct {
	ID      string   `json:"id"`
	Offsets []Offset `json:"offsets"`
}

// OperatorSummary is one aggregate and the size of its state.
type OperatorSummary struct {
	ID        string        `json:"id"`
	Kind      Kind          `json:"kind"`
	Aggregate AggregateDesc `json:"aggregate"`
	Keys      uint64        `json:"keys"`
	Bytes     uint64        `json:"bytes"`
	Files     int           `json:"files"`
	FileBytes int64         `json:"file_bytes"` // on disk, framing included
}

// Inspect opens the savepoint at dir and summarises it. It verifies the
// manifest and that the data files are there with their sizes, but does
// not read them: Reader.Verify does (`inspect --verify`).
func Inspect(dir string) (Summary, error) {
	r, err := Open(dir)
	if err != nil {
		return Summary{}, err
	}
	return r.Summary(), nil
}

// Summary summarises the savepoint.
func (r *Reader) Summary() Summary {
	m := r.m
	s := Summary{
		Dir: r.dir, ID: r.id, Version: m.Version, Job: m.Job, Created: m.Created,
		CheckpointID: m.CheckpointID, ConfigFingerprint: m.ConfigFingerprint,
		KeyGroups: m.KeyGroups, Guarantee: m.Guarantee,
		Sources: []SourceSummary{}, Operators: []OperatorSummary{}, EventTime: m.EventTime, Tables: m.Tables,
	}
	if h := m.Held; h != nil {
		s.Held = &HeldSummary{Records: h.Records, Bytes: h.Bytes, FileBytes: h.Size, Partitions: h.Partitions}
	}
	for _, op := range m.Operators {
		switch op.Kind {
		case KindSource:
			s.Sources = append(s.Sources, SourceSummary{ID: op.ID, Offsets: op.Offsets})
		case KindAggregate, KindWindow:
			o := OperatorSummary{ID: op.ID, Kind: op.Kind, Aggregate: *op.Aggregate, Keys: op.Keys, Bytes: op.Bytes, Files: len(op.Files)}
			for _, f := range op.Files {
				o.FileBytes += f.Size
			}
			s.Operators = append(s.Operators, o)
		}
	}
	return s
}

// String is WriteText's output.
func (s Summary) String() string {
	var b strings.Builder
	s.WriteText(&b)
	return b.String()
}

// WriteText writes the summary for people:
//
//	savepoint /var/lib/pipeline/sp-42
//	  job          parity-sum
//	  created      2026-12-02T10:00:00.123Z
//	  checkpoint   42
//	  format       version 1, id 5d41402abc4b…
//	  fingerprint  9c1f3a2b…
//	  key groups   128
//	  guarantee    exactly_once
//	sources
//	  numbers
//	    numbers/0: 1234
//	operators
//	  sums (aggregate): 2 keys, 40 B in 2 files (450 B on disk)
//	    key_by  n % 2 == 0 ? "even" : "odd"
//	    values  count: count(), sum: sum(n)
//	tables
//	  customers
//	    customers/0: 17
//	held for joins as of event time: 3 records, 120 B (180 B on disk)
//	    orders/0: 2
//	    orders/1: 1
func (s Summary) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "savepoint %s\n", s.Dir)
	row := func(k string, v any) { fmt.Fprintf(&b, "  %-12s %v\n", k, v) }
	row("job", s.Job)
	row("created", s.Created.Format("2006-01-02T15:04:05.000Z07:00"))
	row("checkpoint", s.CheckpointID)
	row("format", fmt.Sprintf("version %d, id %s", s.Version, s.ID))
	row("fingerprint", s.ConfigFingerprint)
	row("key groups", s.KeyGroups)
	row("guarantee", s.Guarantee)
	b.WriteString("sources\n")
	if len(s.Sources) == 0 {
		b.WriteString("  (none)\n")
	}
	for _, src := range s.Sources {
		fmt.Fprintf(&b, "  %s\n", src.ID)
		for _, o := range src.Offsets {
			fmt.Fprintf(&b, "    %s/%d: %d\n", o.Topic, o.Partition, o.Offset)
		}
	}
	b.WriteString("operators\n")
	if len(s.Operators) == 0 {
		b.WriteString("  (none)\n")
	}
	for _, op := range s.Operators {
		files := "1 file"
		if op.Files != 1 {
			files = fmt.Sprintf("%d files", op.Files)
		}
		keys := "1 key"
		if op.Keys != 1 {
			keys = fmt.Sprintf("%d keys", op.Keys)
		}
		fmt.Fprintf(&b, "  %s (%s): %s, %s in %s (%s on disk)\n", op.ID, op.Kind, keys, humanBytes(int64(op.Bytes)), files, humanBytes(op.FileBytes))
		if op.Aggregate.Window != nil {
			fmt.Fprintf(&b, "    window  %s\n", op.Aggregate.Window)
		}
		fmt.Fprintf(&b, "    key_by  %s\n", op.Aggregate.KeyBy)
		fmt.Fprintf(&b, "    values  %s\n", renderValues(op.Aggregate.Values))
	}
	if et := s.EventTime; et != nil {
		b.WriteString("event time\n")
		fmt.Fprintf(&b, "  watermark    %s\n", watermarkText(et.Watermark))
		for _, p := range et.Partitions {
			fmt.Fprintf(&b, "    %s/%d: largest event time %s\n", p.Topic, p.Partition, watermarkText(p.MaxEventTime))
		}
	}
	if len(s.Tables) > 0 {
		b.WriteString("tables\n")
	}
	for _, t := range s.Tables {
		fmt.Fprintf(&b, "  %s\n", t.ID)
		for _, o := range t.Offsets {
			fmt.Fprintf(&b, "    %s/%d: %d\n", t.Topic, o.Partition, o.Offset)
		}
	}
	if h := s.Held; h != nil {
		recs := "1 record"
		if h.Records != 1 {
			recs = fmt.Sprintf("%d records", h.Records)
		}
		fmt.Fprintf(&b, "held for joins as of event time: %s, %s (%s on disk)\n", recs, humanBytes(int64(h.Bytes)), humanBytes(h.FileBytes))
		for _, p := range h.Partitions {
			fmt.Fprintf(&b, "    %s/%d: %d\n", p.Topic, p.Partition, p.Records)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
