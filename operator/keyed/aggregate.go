package keyed

import (
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/operator"
	"github.com/eoflow/pipeline/state"
	"github.com/eoflow/pipeline/window"
)

// Aggregate is a running aggregate over the key groups of one worker.
// Its states are kept encoded, outside the Go heap (state.Compact): a
// record decodes its key's state into st, adds to it, and encodes it back.
type Aggregate struct {
	env   *Env
	sinks Sinks
	agg   *operator.Aggregator
	store *state.Compact
	// st is the state being updated, enc its encoding: one of each,
	// reused by every record.
	st  *operator.AggregateState
	enc []byte
	// ints is the state the integer path updates (nil: the aggregate has
	// none), reused by every record the chain read by that path; conv
	// holds a stored state of that path's native form as its encoding,
	// for the general path (decode).
	ints *operator.IntState
	conv []byte
	// latest input timestamp per key changed in this epoch, for the
	// timestamps of on_checkpoint outputs.
	changedAt map[string]int64
	buf       Buf
	// expiry deletes keys not updated for aggregate.ttl (nil: no TTL).
	expiry *expiry
}

var (
	_ Stateful   = (*Aggregate)(nil)
	_ Prefetcher = (*Aggregate)(nil)
)

// NewAggregate is agg (a clone of its own: it keeps a VM) over the key
// groups rng of groups, with an empty store, writing to sinks. ttl, when
// above 0, deletes a key not updated for that long (aggregate.ttl): in
// event time when eventTime, else by env.Now.
func NewAggregate(env *Env, sinks Sinks, agg *operator.Aggregator, groups int, rng state.Range, eventTime bool) (*Aggregate, error) {
	agg = agg.Clone()
	// A restore checks every state it reads by decoding it into a state of
	// its own (the restore runs before the operator's first record).
	checked := agg.NewState()
	store, err := state.NewCompact(agg.ID(), groups, rng, func(enc []byte) error {
		return agg.DecodeInto(checked, enc)
	})
	if err != nil {
		return nil, err
	}
	op := &Aggregate{env: env, sinks: sinks, agg: agg, store: store, st: agg.NewState(), ints: agg.NewIntState()}
	if op.ints != nil {
		// The integer path stores its states in a native form; the
		// changelog and savepoints get their encoding (through a state
		// of its own: Snapshot and All may run between two records'
		// uses of op.ints).
		store.SetEncoding(agg.NewIntState().AppendChangelog)
	}
	if ttl := agg.TTL(); ttl > 0 {
		op.expiry = &expiry{ttl: ttl.Milliseconds(), eventTime: eventTime, now: env.Now}
	}
	return op, nil
}

// ID is the aggregate's operator id.
func (o *Aggregate) ID() string { return o.agg.ID() }

// Retain is Stateful.Retain: the TTL's timers are armed again from the
// store at the next barrier.
func (o *Aggregate) Retain(keep func(kg state.KeyGroup, key []byte) bool) (int, error) {
	n, err := o.store.Retain(keep)
	if err == nil && o.expiry != nil {
		o.expiry.timers, o.expiry.built = window.Timers{}, false
	}
	return n, err
}

// Store is the aggregate's keyed state.
func (o *Aggregate) Store() Store { return o.store }

func (o *Aggregate) Process(m *Input) Result {
	// Nothing reads the input after this (the state keeps copies of what
	// it needs): its decoded map goes back to the chain for a later input.
	defer o.env.recycle(m.Op)
	key := []byte(m.Op.GroupKey)
	slot := o.store.SlotHashed(m.Hash, key) // one lookup for Get and Put
	if o.ints != nil {
		if res, done := o.processInts(m, key, slot); done {
			return res
		}
	}
	st, ok := o.load(slot)
	changed, rerr := o.agg.Add(st, m.Op)
	if rerr != nil {
		return Result{DeadLetters: o.env.deadLetters(m.Rec, rerr)}
	}
	if o.expiry != nil {
		changed = o.expiry.touch(st, m.At, !ok, m.Op.GroupKey) || changed
	}
	if changed || !ok {
		o.put(slot, key, st)
	}
	if o.agg.Emit() == config.EmitOnCheckpoint {
		o.changed(m)
		return Result{}
	}
	// The input's timestamp, as the router copied it into the
	// operator.Record (no step changes it).
	outs, rerr := o.output(m.Op.Timestamp, m.Op.GroupKey, st)
	if rerr != nil {
		return Result{DeadLetters: o.env.deadLetters(m.Rec, rerr)}
	}
	return Result{Outputs: outs}
}

// processInts is process by the integer path (operator/intpath.go), for
// a record the chain read by it and a state in the form it holds: the
// same output, without an AggregateState, and the state stored in the
// path's native form (the store encodes it for the changelog). done false
// declines (the record was not read by that path, its key's state is a
// decimal one, a sum would overflow), having changed nothing: process
// then takes the general path with the same slot.
func (o *Aggregate) processInts(m *Input, key []byte, slot state.CompactSlot) (res Result, done bool) {
	enc, found := slot.Value()
	if !found {
		o.ints.Reset()
	} else if !o.ints.Decode(enc) {
		return Result{}, false
	}
	changed, ok := o.agg.AddInts(o.ints, m.Op)
	if !ok {
		return Result{}, false
	}
	if changed || !found {
		o.enc = o.ints.AppendNative(o.enc[:0])
		slot.Put(key, o.enc)
	}
	if o.agg.Emit() == config.EmitOnCheckpoint {
		o.changed(m)
		return Result{}, true
	}
	outs, rerr := o.sinks.Keyed(&o.buf, m.Op.Timestamp, m.Op.GroupKey, o.buf.cut(o.ints.AppendOutput(o.buf.start(), m.Op.GroupKey)))
	if rerr != nil {
		return Result{DeadLetters: o.env.deadLetters(m.Rec, rerr)}, true
	}
	return Result{Outputs: outs}, true
}

// changed notes that m's key changed in this epoch, with m's input
// timestamp, for its on_checkpoint output.
func (o *Aggregate) changed(m *Input) {
	if o.changedAt == nil {
		o.changedAt = map[string]int64{}
	}
	k := m.Op.GroupKey
	if _, ok := o.changedAt[k]; !ok {
		k = strings.Clone(k) // it may alias the input's value
	}
	o.changedAt[k] = m.Rec.Timestamp.UnixMilli()
}

// Prefetch readies the states of a batch's records before Process takes
// them one by one: with many keys each lookup is a cache miss on the
// table and one on the record, and prefetching overlaps those of the
// whole batch (state.Compact.PrefetchHashed). It reads the keys' hashes,
// not the keys: those are in the router's core's cache, and reading each
// would be a miss of its own before the slot's.
func (o *Aggregate) Prefetch(n int, hash func(i int) (state.Hash, bool)) {
	o.store.PrefetchHashed(n, hash)
}

// load decodes the state of slot's key into o.st, or makes o.st the empty
// state of a new key (ok false).
func (o *Aggregate) load(slot state.CompactSlot) (st *operator.AggregateState, ok bool) {
	enc, ok := slot.Value()
	if !ok {
		o.agg.ResetState(o.st)
		return o.st, false
	}
	o.decode(enc)
	return o.st, true
}

// decode decodes enc, a state this operator wrote or a restore checked,
// into o.st.
func (o *Aggregate) decode(enc []byte) {
	if o.ints != nil && operator.NativeState(enc) { // the integer path's: as its encoding
		o.conv = o.ints.AppendChangelog(o.conv[:0], enc)
		enc = o.conv
	}
	if err := o.agg.DecodeInto(o.st, enc); err != nil {
		// Every stored state was encoded here or checked by the restore.
		panic(fmt.Sprintf("decoding the stored state of aggregate %s: %v", o.agg.ID(), err))
	}
}

// put stores st as the state of slot's key.
func (o *Aggregate) put(slot state.CompactSlot, key []byte, st *operator.AggregateState) {
	o.enc = o.encode(st)
	slot.Put(key, o.enc)
}

func (o *Aggregate) encode(st *operator.AggregateState) []byte {
	enc, err := st.AppendBinary(o.enc[:0])
	if err != nil {
		// Only a state of another Aggregator fails to encode.
		panic(fmt.Sprintf("encoding aggregate state: %v", err))
	}
	return enc
}

// output is the result record of key for every sink. The value is
// encoded once, straight into the output buffer, and shared by the sinks.
func (o *Aggregate) output(ts time.Time, groupKey string, st *operator.AggregateState) ([]*kgo.Record, *operator.RecordError) {
	return o.sinks.Keyed(&o.buf, ts, groupKey, o.buf.cut(st.AppendOutput(o.buf.start(), groupKey)))
}

func (o *Aggregate) Barrier(watermark int64) (Result, []state.ChangelogRecord, []checkpoint.StateSummary) {
	var outputs []*kgo.Record
	if o.expiry != nil {
		deleted, at := o.expiry.expire(o, watermark)
		if len(deleted) > 0 && o.env.Metrics != nil {
			o.env.Metrics.KeysExpired(o.agg.ID(), len(deleted))
		}
		// An upsert sink's tombstones, in this checkpoint's epoch with
		// the state's.
		outputs = o.sinks.Tombstones(&o.buf, time.UnixMilli(at), deleted)
	}
	if o.agg.Emit() != config.EmitOnCheckpoint {
		// Only the changelog: no Entries to build.
		return Result{Outputs: outputs}, o.store.SnapshotRecords(), []checkpoint.StateSummary{o.Summary()}
	}
	delta := o.store.Snapshot()
	for _, e := range delta.Entries {
		if e.Deleted {
			continue
		}
		o.decode(e.Value)
		var ts time.Time
		if at, ok := o.changedAt[string(e.Key)]; ok {
			ts = time.UnixMilli(at)
		}
		outs, rerr := o.output(ts, string(e.Key), o.st)
		if rerr == nil {
			outputs = append(outputs, outs...)
		}
	}
	clear(o.changedAt)
	return Result{Outputs: outputs}, delta.Records(), []checkpoint.StateSummary{o.Summary()}
}

// Summary is the size of the operator's state, for checkpoint records.
func (o *Aggregate) Summary() checkpoint.StateSummary {
	return checkpoint.StateSummary{Operator: o.agg.ID(), Keys: uint64(o.store.Len()), Bytes: uint64(max(0, o.store.ApproxBytes()))}
}
