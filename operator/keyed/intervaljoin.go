package keyed

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/internal/mutant"
	"github.com/eoflow/pipeline/operator"
	"github.com/eoflow/pipeline/sink"
	"github.com/eoflow/pipeline/state"
	"github.com/eoflow/pipeline/window"
)

// HeaderLateJoinSide names, on a late record of an interval join, the
// stream it came by: "left" (the join's from:) or "right" (its stream:).
const HeaderLateJoinSide = "pipeline.late.join_side"

// IntervalJoin is an interval join over the key groups of one worker: the
// records of both streams, buffered per join key, and the pairs whose
// event times are within the bounds, emitted in event time.
//
// For a left record at event time t and a right record at t' of one key,
// the pair matches when t-before <= t' <= t+after (Flink's
// between(-before, after), both inclusive). Its result is the left
// record's object with the right record's value under the join's name,
// at time max(t, t'), Flink's timestamp of a joined pair.
//
// Everything is decided by event time, so a replay gives the same output,
// in the same order, whatever the interleaving of the inputs and wherever
// the checkpoints fall:
//
//  1. A record is late when its event time is below its partition's
//     watermark just before it (or the job's, if that is higher: a
//     partition behind it); it goes to the late output and joins nothing.
//     Flink drops a record below its operator's watermark.
//  2. Any other record is buffered under its key and matched against the
//     other side's buffer: a left record remembers that it matched.
//  3. At barrier N, with the job's watermark W(N), the operator emits every
//     pair of a key whose time max(t, t') is in [F, W(N)), F the
//     watermark the key last fired at (W(N-1) in single mode; in group
//     mode the key group's previous owner may have fired it at another
//     watermark than this process resumes from), then, under how:
//     left, every left record that never matched and whose interval closed
//     (t+after < W(N)), at time t; all sorted by (the time the result
//     closed, the key, the left record's time and place, the right
//     record's). It then drops a left record once t+after < W(N) and a
//     right one once t'+before < W(N): any record still to come is at or
//     above W(N) (else it is late), so it can match neither.
//
// Every pair of non-late records is found, whatever arrived first: the
// first stays buffered until the watermark passes every time a partner
// could have, and a partner arriving later is at or above that watermark.
// And a pair's time is at most both records' expiry, so it is emitted
// before either is dropped. The buffers, with each key's F, are the state:
// checkpointed as the other keyed operators' are, and restored exactly;
// the output of an epoch depends on each key's F and W(N) only, which the
// checkpoint holds.
type IntervalJoin struct {
	env   *Env
	sinks Sinks
	spec  *operator.IntervalJoin
	store *state.Store[*JoinBuffers]
	// timers say which keys may have something due at a watermark (lazy,
	// as the window's): rebuilt from the store after a restore.
	timers      window.Timers
	timersBuilt bool
	// watermark is the job's watermark at the last barrier: results that
	// close before it were emitted.
	watermark int64
	buf       Buf

	keys []string       // scratch of PopUntil
	due  []joinedResult // scratch of Barrier
}

var _ Stateful = (*IntervalJoin)(nil)

// NewIntervalJoin is the interval join spec on the key groups rng of
// groups, with an empty store, writing to sinks.
func NewIntervalJoin(env *Env, sinks Sinks, spec *operator.IntervalJoin, groups int, rng state.Range) (*IntervalJoin, error) {
	store, err := state.New[*JoinBuffers](spec.ID, groups, rng, joinCodec{})
	if err != nil {
		return nil, err
	}
	return &IntervalJoin{env: env, sinks: sinks, spec: spec, store: store, watermark: window.NoWatermark}, nil
}

// Resume sets what has been emitted before the operator starts: the
// watermark of the checkpoint it continues from.
func (o *IntervalJoin) Resume(watermark int64) { o.watermark = watermark }

// ID is the join's operator id.
func (o *IntervalJoin) ID() string { return o.spec.ID }

// Retain is Stateful.Retain: the timers are rebuilt from the store on
// first use.
func (o *IntervalJoin) Retain(keep func(kg state.KeyGroup, key []byte) bool) (int, error) {
	n, err := o.store.Retain(keep)
	if err == nil {
		o.timers, o.timersBuilt = window.Timers{}, false
	}
	return n, err
}

// Store is the join's keyed state.
func (o *IntervalJoin) Store() Store { return o.store }

// Summary is the size of the join's state, for checkpoint records.
func (o *IntervalJoin) Summary() checkpoint.StateSummary {
	return checkpoint.StateSummary{Operator: o.spec.ID, Keys: uint64(o.store.Len()), Bytes: uint64(max(0, o.store.ApproxBytes()))}
}

// JoinBuffers are one key's buffered records, each side in arrival order,
// and the watermark its results were emitted below.
type JoinBuffers struct {
	Left, Right []JoinEntry
	// Fired is the watermark of the last barrier that fired the key:
	// its results that close below it were emitted (window.NoWatermark:
	// none yet). It is the key's own, not the operator's: in group mode
	// a key group's results were fired at the watermark of the process
	// that owned it, which may be below or above the watermark this one
	// resumes from (the least of its repartition partitions').
	Fired int64
	// firedAtResume: state of the first format, which had no Fired; the
	// operator's resumed watermark stands for it (single mode, where one
	// watermark fires every key).
	firedAtResume bool
}

// JoinEntry is one buffered record.
type JoinEntry struct {
	// At is its event time (ms); Topic, Partition and Offset where it was
	// read (the order of results that tie on time).
	At        int64
	Topic     string
	Partition int32
	Offset    int64
	// Matched: a left record some right record matched. NoKey: a left
	// record (of a left join) whose key was nil, which matches nothing.
	Matched, NoKey bool
	// Value is the record's JSON value: a left record's object without
	// the join's name, a right record's value as it is.
	Value []byte
}

func (o *IntervalJoin) Process(in *Input) Result {
	defer o.env.recycle(in.Op)
	o.buildTimers()
	op := in.Op
	if wm := max(in.Wm, o.watermark); in.At < wm && wm != window.NoWatermark {
		return Result{Late: o.late(in, wm)}
	}
	value, rerr := op.AppendValue(nil, config.FormatJSON)
	if rerr == nil && len(value) == 0 {
		// A delete (a Debezium envelope's): there is no value to write
		// the match into, nor under the join's name.
		rerr = &operator.RecordError{Step: o.spec.Path, Code: operator.CodeType, Reason: "an interval join's record must have a value: a delete (tombstone) has none to join"}
	}
	if rerr != nil {
		return Result{DeadLetters: o.env.deadLetters(in.Rec, rerr)}
	}
	e := JoinEntry{At: in.At, NoKey: op.JoinNoKey, Value: value}
	if r := in.Rec; r != nil {
		e.Topic, e.Partition, e.Offset = r.Topic, r.Partition, r.Offset
	}
	left := op.JoinSide != operator.SideRight
	if left {
		obj, err := withoutField(value, o.spec.As)
		if err != nil {
			return Result{DeadLetters: o.env.deadLetters(in.Rec, &operator.RecordError{Step: o.spec.Path, Code: operator.CodeType, Reason: err.Error()})}
		}
		e.Value = obj
	}
	key := []byte(op.GroupKey)
	slot := o.store.Slot(key)
	b, ok := slot.Get()
	if !ok {
		b = &JoinBuffers{Fired: window.NoWatermark}
	}
	if left {
		for _, r := range b.Right {
			if !e.NoKey && o.matches(e.At, r.At) {
				e.Matched = true
				break
			}
		}
		b.Left = append(b.Left, e)
	} else {
		for i := range b.Left {
			if l := &b.Left[i]; !l.NoKey && o.matches(l.At, e.At) {
				l.Matched = true
			}
		}
		b.Right = append(b.Right, e)
	}
	slot.Put(key, b)
	// The earliest a result of this record can close: its own time.
	o.timers.Add(e.At, op.GroupKey)
	return Result{}
}

// matches reports whether a right record at r pairs with a left one at l.
func (o *IntervalJoin) matches(l, r int64) bool {
	return window.SatAdd(l, -o.spec.Before) <= r && r <= window.SatAdd(l, o.spec.After)
}

// leftExpiry and rightExpiry are the last watermark a record is kept at:
// one above it, no record still to come can match it.
func (o *IntervalJoin) leftExpiry(e *JoinEntry) int64  { return window.SatAdd(e.At, o.spec.After) }
func (o *IntervalJoin) rightExpiry(e *JoinEntry) int64 { return window.SatAdd(e.At, o.spec.Before) }

// late is the late output of in, judged at watermark wm, or nothing when
// late records are dropped.
func (o *IntervalJoin) late(in *Input, wm int64) []*kgo.Record {
	result := config.LateSideOutput
	if o.spec.LateTopic == "" {
		result = config.LateDrop
	}
	if m := o.env.Metrics; m != nil {
		m.LateRecord(o.spec.ID, string(result))
	}
	if o.spec.LateTopic == "" || in.Rec == nil {
		return nil
	}
	side := "left"
	if in.Op.JoinSide == operator.SideRight {
		side = "right"
	}
	rec := in.Rec
	hdr := func(k string, v []byte) kgo.RecordHeader { return kgo.RecordHeader{Key: k, Value: v} }
	return []*kgo.Record{{
		Topic: o.spec.LateTopic, Key: rec.Key, Value: rec.Value, Timestamp: rec.Timestamp,
		Headers: []kgo.RecordHeader{
			hdr(sink.HeaderTopic, []byte(rec.Topic)),
			hdr(sink.HeaderPartition, strconv.AppendInt(nil, int64(rec.Partition), 10)),
			hdr(sink.HeaderOffset, strconv.AppendInt(nil, rec.Offset, 10)),
			hdr(HeaderLateJoinSide, []byte(side)),
			hdr(HeaderLateWatermark, operator.AppendTime(nil, wm)),
		},
	}}
}

// joinedResult is one result due at a barrier: a pair, or a left record
// alone (right nil).
type joinedResult struct {
	closes      int64
	key         string
	left, right *JoinEntry
}

func compareEntries(a, b *JoinEntry) int {
	if a == nil || b == nil {
		switch {
		case a == nil && b == nil:
			return 0
		case a == nil:
			return 1 // a left record alone after its pairs (it has none)
		}
		return -1
	}
	return cmp.Or(cmp.Compare(a.At, b.At), cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition),
		cmp.Compare(a.Offset, b.Offset), bytes.Compare(a.Value, b.Value))
}

func compareResults(a, b joinedResult) int {
	return cmp.Or(cmp.Compare(a.closes, b.closes), cmp.Compare(a.key, b.key),
		compareEntries(a.left, b.left), compareEntries(a.right, b.right))
}

// Barrier emits the results that close below watermark, sorted, drops the
// records no later record can match, and snapshots the state.
func (o *IntervalJoin) Barrier(watermark int64) (Result, []state.ChangelogRecord, []checkpoint.StateSummary) {
	o.buildTimers()
	prev := o.watermark
	var res Result
	// Not only when the watermark moves: a key may have fired below it
	// (group mode: its key group's previous owner fired at a lower
	// watermark), and its timer says so.
	if watermark != window.NoWatermark {
		o.watermark = max(prev, watermark)
		o.due = o.due[:0]
		o.keys = o.timers.PopUntil(watermark-1, o.keys[:0])
		for _, key := range o.keys {
			o.fire(key, prev, watermark)
		}
		if !mutant.On("interval-join-arrival-order") {
			// (The mutant's bug: results in the order the records
			// arrived, which a replay after a crash may change.)
			slices.SortFunc(o.due, compareResults)
		}
		for _, r := range o.due {
			outs, rerr := o.output(r)
			if rerr != nil {
				src := &kgo.Record{Topic: r.left.Topic, Partition: r.left.Partition, Offset: r.left.Offset, Key: []byte(r.key), Value: r.left.Value}
				res.DeadLetters = append(res.DeadLetters, o.env.deadLetters(src, rerr)...)
				continue
			}
			res.Outputs = append(res.Outputs, outs...)
		}
		clear(o.due) // holds no entries past the barrier
	}
	return res, o.store.Snapshot().Records(), []checkpoint.StateSummary{o.Summary()}
}

// fire collects key's results that close in [the key's Fired, wm), drops
// what wm expires, and re-arms the key's timer. prev is the operator's
// watermark before this barrier.
func (o *IntervalJoin) fire(key string, prev, wm int64) {
	kb := []byte(key)
	b, ok := o.store.Get(kb)
	if !ok {
		return
	}
	prev = o.fired(b, prev)
	for i := range b.Left {
		l := &b.Left[i]
		if l.NoKey {
			continue
		}
		for j := range b.Right {
			r := &b.Right[j]
			if c := max(l.At, r.At); c >= prev && c < wm && o.matches(l.At, r.At) {
				o.due = append(o.due, joinedResult{closes: c, key: key, left: l, right: r})
			}
		}
	}
	// The results point into b's arrays: what is kept goes to new ones,
	// and b's are left as they are until the results are written.
	kept := JoinBuffers{Fired: max(prev, wm)}
	for i := range b.Left {
		l := &b.Left[i]
		if o.leftExpiry(l) >= wm {
			kept.Left = append(kept.Left, *l)
			continue
		}
		if o.spec.Left && !l.Matched {
			o.due = append(o.due, joinedResult{closes: o.leftExpiry(l), key: key, left: l})
		}
	}
	for i := range b.Right {
		if o.rightExpiry(&b.Right[i]) >= wm {
			kept.Right = append(kept.Right, b.Right[i])
		}
	}
	changed := len(kept.Left) != len(b.Left) || len(kept.Right) != len(b.Right) || kept.Fired != b.Fired || b.firedAtResume
	b = &kept
	if len(b.Left) == 0 && len(b.Right) == 0 {
		o.store.Delete(kb)
		return
	}
	if changed {
		o.store.Put(kb, b)
	}
	if next, ok := o.next(b, kept.Fired); ok {
		o.timers.Add(next, key)
	}
}

// fired is the watermark b's results were emitted below; watermark stands
// for it in state of the first format.
func (o *IntervalJoin) fired(b *JoinBuffers, watermark int64) int64 {
	if b.firedAtResume {
		return watermark
	}
	return b.Fired
}

// next is the earliest time something of b is due after watermark wm: a
// pair that closes, or a record that expires (at or above wm).
func (o *IntervalJoin) next(b *JoinBuffers, wm int64) (int64, bool) {
	next, ok := int64(0), false
	at := func(t int64) {
		if t >= wm && (!ok || t < next) {
			next, ok = t, true
		}
	}
	for i := range b.Left {
		at(o.leftExpiry(&b.Left[i]))
		if b.Left[i].NoKey {
			continue
		}
		for j := range b.Right {
			if o.matches(b.Left[i].At, b.Right[j].At) {
				at(max(b.Left[i].At, b.Right[j].At))
			}
		}
	}
	for i := range b.Right {
		at(o.rightExpiry(&b.Right[i]))
	}
	return next, ok
}

// buildTimers arms a timer for every restored key (the store is filled
// by a restore before the first record).
func (o *IntervalJoin) buildTimers() {
	if o.timersBuilt {
		return
	}
	o.timersBuilt = true
	for e := range o.store.All() {
		b, ok := o.store.Get(e.Key)
		if !ok {
			continue
		}
		// From the key's own watermark: a result of a key group that
		// its previous owner fired below this one's watermark is due at
		// the first barrier.
		if next, ok := o.next(b, o.fired(b, o.watermark)); ok {
			o.timers.Add(next, string(e.Key))
		}
	}
}

// output is result r for every sink: the left object with the right
// value (null: none) under the join's name, keyed by the join key.
func (o *IntervalJoin) output(r joinedResult) ([]*kgo.Record, *operator.RecordError) {
	v := o.buf.start()
	l := r.left.Value
	v = append(v, l[:len(l)-1]...)
	if len(l) > 2 {
		v = append(v, ',')
	}
	v = strconv.AppendQuote(v, o.spec.As)
	v = append(v, ':')
	ts := r.left.At
	if r.right != nil {
		v = append(v, r.right.Value...)
		ts = max(ts, r.right.At)
	} else {
		v = append(v, "null"...)
	}
	v = append(v, '}')
	value := o.buf.cut(v)
	return o.sinks.Keyed(&o.buf, time.UnixMilli(ts), r.key, value)
}

// withoutField is the JSON object obj, compacted, without its top-level
// field name (the join's name hides a field of the record's): an error
// when obj is not an object.
func withoutField(obj []byte, name string) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("an interval join's left record must be a JSON object, to write the match under its name, got %.40s", obj)
	}
	out := []byte{'{'}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, _ := t.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		if k == name {
			continue
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		kb, _ := json.Marshal(k)
		out = append(out, kb...)
		out = append(out, ':')
		var c bytes.Buffer
		if err := json.Compact(&c, raw); err != nil {
			return nil, err
		}
		out = append(out, c.Bytes()...)
	}
	return append(out, '}'), nil
}
