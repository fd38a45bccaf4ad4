package checkpoint

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// Record is checkpoint N as written into transaction N: the value of the
// job's compacted checkpoint topic (TopicName), keyed by the job name, so
// compaction keeps the newest committed one. Together with the state topic
// it is everything a restart needs. Encode it with EncodeRecord.
//
// A Record is canonical: its lists are sorted and free of duplicates (call
// Normalize), so one Record has exactly one encoding.
type Record struct {
	ID  ID
	Job string
	// ConfigFingerprint identifies the job's configuration (a hash chosen
	// by the caller); a change is allowed but reported by Compatible.
	ConfigFingerprint string
	// KeyGroups is the job's fixed key-group count (hash(key) mod KeyGroups).
	KeyGroups int
	// OperatorIDs are the stateful operators (sources included: offsets are
	// their state) whose state this checkpoint holds, sorted.
	OperatorIDs []string
	// Offsets are the next offsets to read, sorted by topic then partition.
	Offsets []SourceOffset
	// CreatedUnixMilli is the wall-clock creation time given by the caller,
	// in Unix milliseconds. Informational: never used to order checkpoints.
	CreatedUnixMilli int64
	// Guarantee is the job's delivery guarantee (e.g. "exactly_once").
	Guarantee string
	// State summarises each operator's state, sorted by operator, for
	// metrics and the checkpoints CLI.
	State []StateSummary
	// Savepoint is the id (savepoint.Reader.ID) of the savepoint the job's
	// state was last imported from, carried by every later checkpoint; empty
	// if it never was. A start with --from-savepoint compares it to tell
	// "import this savepoint" from "already imported, continue": without
	// it, restarting with the same command line would rewind the job to
	// the savepoint and repeat every output since.
	Savepoint string
	// Operators describe the operators of OperatorIDs, in the same order:
	// what each one's state means, so that a restart can refuse a
	// configuration that would read the state as something else (the rules
	// of savepoint.CheckRestore, shared by restarts). Empty in records of
	// builds before format v3: a restart from one cannot check.
	Operators []OperatorDesc
	// EventTime is the event-time progress at the checkpoint, for a job
	// whose sources have event time (format v4); nil for any other job, so
	// its records keep their older encoding.
	EventTime *EventTime
	// Tables are where the job's tables stood at the checkpoint (format
	// v5), sorted by id; empty for a job without tables, so its records
	// keep their older encoding.
	Tables []TableOffsets
	// Held are the stream records that joins as of event time hold at
	// the checkpoint (format v6): read already (Offsets are past them),
	// not yet joined, so state of the checkpoint, restored with it. The
	// runtime's encoding (operator.AppendHold), opaque here; empty for
	// any other job, so its records keep their older encoding.
	Held []byte
}

// TableOffsets is where one table stood at a checkpoint: the next offset
// of every partition of its topic, after the records it had applied.
// A table's state is its topic (no changelog of its own), so this is all
// a checkpoint holds of it: a restore reads the topic again, at least to
// here.
type TableOffsets struct {
	ID    string
	Topic string
	// Offsets are by partition, sorted, without duplicates; at least one.
	Offsets []PartitionOffset
}

// PartitionOffset is the next offset of one partition of a topic named
// elsewhere.
type PartitionOffset struct {
	Partition int32
	Offset    int64
}

// NoEventTime is the event time of a partition that has not read a
// record yet, and the watermark that no record has moved: minus infinity,
// which holds every watermark computed from it back.
const NoEventTime = math.MinInt64

// EventTime is where event time stood at a checkpoint's barrier. A restore
// continues from exactly it, so lateness and window firing decide the same
// way after a crash as without one.
type EventTime struct {
	// Watermark is the job's watermark W(N), in Unix milliseconds
	// (NoEventTime: none yet). Every window ending at or before it minus
	// its allowed lateness has fired.
	Watermark int64
	// Partitions are the largest event time each source partition had read
	// before the barrier (NoEventTime: none yet), sorted by topic then
	// partition. The largest time, not the partition's watermark, is kept:
	// a restart with another max_out_of_orderness derives its watermark
	// from it.
	Partitions []PartitionTime
}

// PartitionTime is the largest event time read from one partition.
type PartitionTime struct {
	Topic        string
	Partition    int32
	MaxEventTime int64
}

// OperatorDesc is what one stateful operator's state means.
type OperatorDesc struct {
	ID   string
	Kind OperatorKind
	// Topics (sources) are the topics it reads, sorted: which source held
	// which offsets.
	Topics []string
	// KeyBy (aggregates) is the text of the key_by expression that made
	// the group keys; Values are its values in configured order.
	KeyBy  string
	Values []AggregateValue
	// Window (windows) is the window of a KindWindow operator, which also
	// has KeyBy and Values.
	Window WindowDesc
}

// WindowDesc is the shape of a windowed aggregate's windows, in
// milliseconds: what its state's window starts mean.
type WindowDesc struct {
	Kind               WindowKind
	Size, Advance, Gap int64
}

// WindowKind is tumbling, hopping or session. The zero value is none.
type WindowKind byte

const (
	WindowTumbling WindowKind = 1 + iota // Size
	WindowHopping                        // Size, Advance
	WindowSession                        // Gap
)

// validate checks w as the window of an operator that has one (windowed)
// or none.
func (w WindowDesc) validate(windowed bool) error {
	if !windowed {
		if w != (WindowDesc{}) {
			return errors.New("an aggregate has no window")
		}
		return nil
	}
	var ok bool
	switch w.Kind {
	case WindowTumbling:
		ok = w.Size > 0 && w.Advance == 0 && w.Gap == 0
	case WindowHopping:
		ok = w.Size > 0 && w.Advance > 0 && w.Advance <= w.Size && w.Gap == 0
	case WindowSession:
		ok = w.Gap > 0 && w.Size == 0 && w.Advance == 0
	}
	if !ok {
		return fmt.Errorf("window %v (size %d ms, advance %d ms, gap %d ms): not a valid window", w.Kind, w.Size, w.Advance, w.Gap)
	}
	return nil
}

func (k WindowKind) String() string {
	switch k {
	case WindowTumbling:
		return "tumbling"
	case WindowHopping:
		return "hopping"
	case WindowSession:
		return "session"
	}
	return fmt.Sprintf("WindowKind(%d)", byte(k))
}

// OperatorKind is what a stateful operator is. The zero value is invalid.
type OperatorKind byte

const (
	// KindSource: its state is the next offset of each partition it reads.
	KindSource OperatorKind = 1 + iota
	// KindAggregate: its state is one accumulator per value per group key.
	KindAggregate
	// KindWindow: its state is one accumulator per value per group key and
	// window (format v4).
	KindWindow
)

func (k OperatorKind) String() string {
	switch k {
	case KindSource:
		return "source"
	case KindAggregate:
		return "aggregate"
	case KindWindow:
		return "window"
	}
	return fmt.Sprintf("OperatorKind(%d)", byte(k))
}

// AggregateValue is one named value of an aggregate, e.g. sum: sum(n).
type AggregateValue struct {
	Name string
	Func string
	Arg  string // empty for count()
}

// SourceOffset is the next offset to read from one partition: the one
// (topic, partition, offset) type of the project. A checkpoint record
// holds it in binary, a savepoint manifest as JSON (the tags), a source
// reports its position with it.
type SourceOffset struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

// CompareOffsets orders offsets by topic, then partition: the canonical
// order of every list of them.
func CompareOffsets(a, b SourceOffset) int {
	return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
}

// StateSummary is the size of one operator's state at the checkpoint.
type StateSummary struct {
	Operator string
	Keys     uint64
	Bytes    uint64
}

// ErrInvalidRecord: EncodeRecord was given a Record that is not canonical or
// misses a required field.
var ErrInvalidRecord = errors.New("invalid checkpoint record")

// TopicName returns the name of job's compacted checkpoint topic.
func TopicName(job string) string { return job + "-checkpoints" }

// Created returns CreatedUnixMilli as a UTC time.
func (r *Record) Created() time.Time { return time.UnixMilli(r.CreatedUnixMilli).UTC() }

// Normalize sorts r's lists into canonical order. It does not remove
// duplicates: two offsets for one partition are a caller's bug that Validate
// reports rather than hides.
func (r *Record) Normalize() {
	slices.Sort(r.OperatorIDs)
	slices.SortFunc(r.Offsets, CompareOffsets)
	slices.SortFunc(r.State, func(a, b StateSummary) int { return cmp.Compare(a.Operator, b.Operator) })
	slices.SortFunc(r.Tables, func(a, b TableOffsets) int { return cmp.Compare(a.ID, b.ID) })
	for i := range r.Tables {
		slices.SortFunc(r.Tables[i].Offsets, func(a, b PartitionOffset) int { return cmp.Compare(a.Partition, b.Partition) })
	}
}

// Validate reports every way r is not a canonical, complete record. The
// decoder applies the same rules, so a decoded record always re-encodes to
// the same bytes.
func (r *Record) Validate() error {
	var errs []error
	if r.ID == 0 {
		errs = append(errs, errors.New("id: must not be 0"))
	}
	if r.Job == "" {
		errs = append(errs, errors.New("job: required"))
	}
	if r.KeyGroups < 1 || r.KeyGroups > math.MaxInt32 {
		errs = append(errs, fmt.Errorf("key groups %d: must be in 1..%d", r.KeyGroups, math.MaxInt32))
	}
	for i, op := range r.OperatorIDs {
		if op == "" {
			errs = append(errs, fmt.Errorf("operator_ids[%d]: empty", i))
		}
		if i > 0 && r.OperatorIDs[i-1] >= op {
			errs = append(errs, fmt.Errorf("operator_ids[%d] %q: not after %q (sorted, no duplicates)", i, op, r.OperatorIDs[i-1]))
		}
	}
	for i, o := range r.Offsets {
		if o.Topic == "" {
			errs = append(errs, fmt.Errorf("offsets[%d]: empty topic", i))
		}
		if o.Partition < 0 {
			errs = append(errs, fmt.Errorf("offsets[%d] %s/%d: negative partition", i, o.Topic, o.Partition))
		}
		if i > 0 && CompareOffsets(r.Offsets[i-1], o) >= 0 {
			p := r.Offsets[i-1]
			errs = append(errs, fmt.Errorf("offsets[%d] %s/%d: not after %s/%d (sorted by topic, partition; no duplicates)", i, o.Topic, o.Partition, p.Topic, p.Partition))
		}
	}
	errs = append(errs, r.validateOperators()...)
	errs = append(errs, r.validateEventTime()...)
	errs = append(errs, r.validateTables()...)
	for i, s := range r.State {
		if s.Operator == "" {
			errs = append(errs, fmt.Errorf("state[%d]: empty operator", i))
		}
		if i > 0 && r.State[i-1].Operator >= s.Operator {
			errs = append(errs, fmt.Errorf("state[%d] %q: not after %q (sorted, no duplicates)", i, s.Operator, r.State[i-1].Operator))
		}
	}
	return errors.Join(errs...)
}

// validateEventTime checks EventTime's partitions: sorted, without
// duplicates. The watermark is not compared with them: it never moves
// back, so it may stay ahead of a partition added later.
func (r *Record) validateEventTime() []error {
	if r.EventTime == nil {
		return nil
	}
	var errs []error
	if len(r.OperatorIDs) > 0 && len(r.Operators) == 0 {
		errs = append(errs, errors.New("event_time: the operators must be described too (format v4 describes every operator)"))
	}
	ps := r.EventTime.Partitions
	for i, p := range ps {
		if p.Topic == "" {
			errs = append(errs, fmt.Errorf("event_time.partitions[%d]: empty topic", i))
		}
		if p.Partition < 0 {
			errs = append(errs, fmt.Errorf("event_time.partitions[%d] %s/%d: negative partition", i, p.Topic, p.Partition))
		}
		if i > 0 && cmp.Or(cmp.Compare(ps[i-1].Topic, p.Topic), cmp.Compare(ps[i-1].Partition, p.Partition)) >= 0 {
			errs = append(errs, fmt.Errorf("event_time.partitions[%d] %s/%d: not after %s/%d (sorted by topic, partition; no duplicates)", i, p.Topic, p.Partition, ps[i-1].Topic, ps[i-1].Partition))
		}
	}
	return errs
}

// validateTables checks Tables: sorted by id without duplicates, each
// with a topic and its partitions sorted, at least one.
func (r *Record) validateTables() []error {
	var errs []error
	if len(r.Tables) > 0 && len(r.OperatorIDs) > 0 && len(r.Operators) == 0 {
		errs = append(errs, errors.New("tables: the operators must be described too (format v5 describes every operator)"))
	}
	for i, t := range r.Tables {
		at := fmt.Sprintf("tables[%d] %q", i, t.ID)
		if t.ID == "" {
			errs = append(errs, fmt.Errorf("%s: empty id", at))
		}
		if i > 0 && r.Tables[i-1].ID >= t.ID {
			errs = append(errs, fmt.Errorf("%s: not after %q (sorted, no duplicates)", at, r.Tables[i-1].ID))
		}
		if t.Topic == "" {
			errs = append(errs, fmt.Errorf("%s: empty topic", at))
		}
		if len(t.Offsets) == 0 {
			errs = append(errs, fmt.Errorf("%s: no partitions", at))
		}
		for j, o := range t.Offsets {
			if o.Partition < 0 || (j > 0 && t.Offsets[j-1].Partition >= o.Partition) {
				errs = append(errs, fmt.Errorf("%s: partition %d: negative, or not after %d (sorted, no duplicates)", at, o.Partition, t.Offsets[max(j-1, 0)].Partition))
			}
			if o.Offset < 0 {
				errs = append(errs, fmt.Errorf("%s: partition %d: negative offset %d", at, o.Partition, o.Offset))
			}
		}
	}
	return errs
}

// validateOperators checks Operators against OperatorIDs: absent, or one
// description per id, in order.
func (r *Record) validateOperators() []error {
	if len(r.Operators) == 0 {
		return nil
	}
	if len(r.Operators) != len(r.OperatorIDs) {
		return []error{fmt.Errorf("operators: %d descriptions for %d operator ids", len(r.Operators), len(r.OperatorIDs))}
	}
	var errs []error
	for i, op := range r.Operators {
		at := fmt.Sprintf("operators[%d] %q", i, op.ID)
		if op.ID != r.OperatorIDs[i] {
			errs = append(errs, fmt.Errorf("%s: operator_ids[%d] is %q (one description per id, in order)", at, i, r.OperatorIDs[i]))
		}
		switch op.Kind {
		case KindSource:
			if op.KeyBy != "" || len(op.Values) > 0 || op.Window != (WindowDesc{}) {
				errs = append(errs, fmt.Errorf("%s: a source has topics only", at))
			}
			for j, t := range op.Topics {
				if t == "" || (j > 0 && op.Topics[j-1] >= t) {
					errs = append(errs, fmt.Errorf("%s: topics[%d] %q: empty, or not after %q (sorted, no duplicates)", at, j, t, op.Topics[max(j-1, 0)]))
				}
			}
		case KindAggregate, KindWindow:
			if len(op.Topics) > 0 {
				errs = append(errs, fmt.Errorf("%s: an aggregate has no topics", at))
			}
			if err := op.Window.validate(op.Kind == KindWindow); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", at, err))
			}
			if len(op.Values) == 0 {
				errs = append(errs, fmt.Errorf("%s: an aggregate has at least one value", at))
			}
			for j, v := range op.Values {
				if v.Name == "" || v.Func == "" {
					errs = append(errs, fmt.Errorf("%s: values[%d]: name and func are required", at, j))
				}
			}
		default:
			errs = append(errs, fmt.Errorf("%s: unknown kind %d", at, op.Kind))
		}
	}
	return errs
}
