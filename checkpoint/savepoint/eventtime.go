package savepoint

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/eoflow/pipeline/checkpoint"
)

// KindWindow: a windowed aggregate. Its state is one encoded
// operator.WindowState per group key (the key's open windows), split into
// key groups and exported like an aggregate's; its AggregateDesc has a
// Window.
const KindWindow Kind = "window"

// stateful reports whether operators of kind k have keyed state.
func stateful(k Kind) bool { return k == KindAggregate || k == KindWindow }

// WindowDesc is the shape of a window operator's windows, in
// milliseconds, as savepoint.json holds it:
// {"kind":"tumbling","size_ms":10000}, {"kind":"hopping","size_ms":10000,"advance_ms":5000}
// or {"kind":"session","gap_ms":30000}.
type WindowDesc struct {
	Kind      string `json:"kind"`
	SizeMs    int64  `json:"size_ms,omitempty"`
	AdvanceMs int64  `json:"advance_ms,omitempty"`
	GapMs     int64  `json:"gap_ms,omitempty"`
}

// String renders w as the configuration writes it: "tumbling 10s",
// "hopping 10s every 5s", "session gap 30m0s".
func (w WindowDesc) String() string {
	d := func(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }
	switch w.Kind {
	case "tumbling":
		return "tumbling " + d(w.SizeMs).String()
	case "hopping":
		return fmt.Sprintf("hopping %v every %v", d(w.SizeMs), d(w.AdvanceMs))
	case "session":
		return "session gap " + d(w.GapMs).String()
	}
	return w.Kind
}

// windowDescOf converts a checkpoint record's window shape.
func windowDescOf(w checkpoint.WindowDesc) *WindowDesc {
	switch w.Kind {
	case checkpoint.WindowTumbling:
		return &WindowDesc{Kind: "tumbling", SizeMs: w.Size}
	case checkpoint.WindowHopping:
		return &WindowDesc{Kind: "hopping", SizeMs: w.Size, AdvanceMs: w.Advance}
	case checkpoint.WindowSession:
		return &WindowDesc{Kind: "session", GapMs: w.Gap}
	}
	return nil
}

// checkpointDesc is w as a checkpoint record holds it.
func (w *WindowDesc) checkpointDesc() checkpoint.WindowDesc {
	switch w.Kind {
	case "tumbling":
		return checkpoint.WindowDesc{Kind: checkpoint.WindowTumbling, Size: w.SizeMs}
	case "hopping":
		return checkpoint.WindowDesc{Kind: checkpoint.WindowHopping, Size: w.SizeMs, Advance: w.AdvanceMs}
	case "session":
		return checkpoint.WindowDesc{Kind: checkpoint.WindowSession, Gap: w.GapMs}
	}
	return checkpoint.WindowDesc{}
}

// validateWindow checks that w is one well-formed shape, saying which
// rule it breaks; the shape is shown as savepoint.json holds it.
func validateWindow(at string, w *WindowDesc) []error {
	if w == nil {
		return []error{fmt.Errorf("%s: a window needs its shape (aggregate.window)", at)}
	}
	var rule string
	switch w.Kind {
	case "tumbling":
		if w.SizeMs <= 0 || w.AdvanceMs != 0 || w.GapMs != 0 {
			rule = "a tumbling window has a size_ms above 0 and no advance_ms or gap_ms"
		}
	case "hopping":
		if w.SizeMs <= 0 || w.AdvanceMs <= 0 || w.AdvanceMs > w.SizeMs || w.GapMs != 0 {
			rule = "a hopping window has a size_ms above 0, an advance_ms above 0 and at most size_ms, and no gap_ms"
		}
	case "session":
		if w.GapMs <= 0 || w.SizeMs != 0 || w.AdvanceMs != 0 {
			rule = "a session window has a gap_ms above 0 and no size_ms or advance_ms"
		}
	default:
		rule = "kind must be tumbling, hopping or session"
	}
	if rule == "" {
		return nil
	}
	b, _ := json.Marshal(w)
	return []error{fmt.Errorf("%s: aggregate.window %s: %s", at, b, rule)}
}

// EventTime is where event time stood at the savepoint's checkpoint, for
// a job with event time: the job's watermark and each partition's largest
// event time, in epoch milliseconds; null where there is none yet (a
// partition that has not delivered a record holds the watermark back, and
// must again after the restore).
type EventTime struct {
	Watermark  *int64          `json:"watermark"`
	Partitions []PartitionTime `json:"partitions"`
}

// PartitionTime is one partition's largest event time (null: none yet).
type PartitionTime struct {
	Topic        string `json:"topic"`
	Partition    int32  `json:"partition"`
	MaxEventTime *int64 `json:"max_event_time"`
}

func msOrNull(ms int64) *int64 {
	if ms == checkpoint.NoEventTime {
		return nil
	}
	return &ms
}

func nullAsNone(p *int64) int64 {
	if p == nil {
		return checkpoint.NoEventTime
	}
	return *p
}

// EventTimeOf is a checkpoint's event time as a savepoint holds it (nil
// for nil).
func EventTimeOf(et *checkpoint.EventTime) *EventTime {
	if et == nil {
		return nil
	}
	out := &EventTime{Watermark: msOrNull(et.Watermark), Partitions: []PartitionTime{}}
	for _, p := range et.Partitions {
		out.Partitions = append(out.Partitions, PartitionTime{Topic: p.Topic, Partition: p.Partition, MaxEventTime: msOrNull(p.MaxEventTime)})
	}
	return out
}

// Checkpoint is e as a checkpoint record holds it (nil for nil).
func (e *EventTime) Checkpoint() *checkpoint.EventTime {
	if e == nil {
		return nil
	}
	out := &checkpoint.EventTime{Watermark: nullAsNone(e.Watermark)}
	for _, p := range e.Partitions {
		out.Partitions = append(out.Partitions, checkpoint.PartitionTime{Topic: p.Topic, Partition: p.Partition, MaxEventTime: nullAsNone(p.MaxEventTime)})
	}
	return out
}

// validateEventTime checks e against the manifest's offsets: sorted,
// once per partition, and only partitions a source holds offsets of.
func validateEventTime(e *EventTime, offsets []checkpoint.SourceOffset) []error {
	if e == nil {
		return nil
	}
	type tp struct {
		topic     string
		partition int32
	}
	read := make(map[tp]bool, len(offsets))
	for _, o := range offsets {
		read[tp{o.Topic, o.Partition}] = true
	}
	var errs []error
	for i, p := range e.Partitions {
		at := fmt.Sprintf("event_time.partitions[%d] %s/%d", i, p.Topic, p.Partition)
		if i > 0 {
			prev := e.Partitions[i-1]
			if c := checkpoint.CompareOffsets(checkpoint.SourceOffset{Topic: prev.Topic, Partition: prev.Partition}, checkpoint.SourceOffset{Topic: p.Topic, Partition: p.Partition}); c >= 0 {
				errs = append(errs, fmt.Errorf("%s: not after %s/%d (sorted by topic, then partition, once each)", at, prev.Topic, prev.Partition))
			}
		}
		if !read[tp{p.Topic, p.Partition}] {
			errs = append(errs, fmt.Errorf("%s: no source holds this partition's offset", at))
		}
	}
	return errs
}

// SetEventTime records the event time of the savepoint's checkpoint (nil:
// the job has none).
func (w *Writer) SetEventTime(et *checkpoint.EventTime) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mu.eventTime = EventTimeOf(et)
}
