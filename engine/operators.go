package engine

import (
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/checkpoint/kstore"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/operator"
	"github.com/eoflow/pipeline/state"
)

// passThrough is the operator of an output target (a source or stateless
// step that sinks read): each input that reached it becomes one output
// per sink that reads it.
type passThrough struct {
	p   *plan
	t   *target
	buf outBuf
	// chain and in serve the inputs of a bare job (router.bare), which
	// come without an operator.Record: each is decoded here, into in,
	// reused, instead of into a new Record per input on the source side.
	chain *operator.Chain
	in    operator.Record
}

func newPassThrough(p *plan, t *target) *passThrough {
	o := &passThrough{p: p, t: t}
	if c := p.graph.Linear(); c != nil {
		o.chain = c.Clone()
	}
	return o
}

func (o *passThrough) process(m message) (out []*kgo.Record, deadLetters []message) {
	op := m.op
	if op == nil { // a bare job's input: the steps (none) run here
		o.in = operator.Record{
			Key: m.rec.Key, Value: m.rec.Value, Timestamp: m.rec.Timestamp,
			Topic: m.rec.Topic, Partition: m.rec.Partition, Offset: m.rec.Offset,
			Format: o.p.format[m.rec.Topic],
		}
		op = &o.in
		if _, rerr := o.chain.Process(op); rerr != nil {
			o.chain.Recycle(op)
			return nil, o.p.deadLetters(m.rec, rerr)
		}
	}
	// Nothing reads the input after this: its decoded map goes back to
	// the chain for a later input, and with one sink the input's
	// kgo.Record becomes the output record (outBuf.reuse).
	defer o.p.recycle(op)
	if len(o.t.sinks) == 1 {
		o.buf.reuse = m.rec
		defer func() { o.buf.reuse = nil }()
	}
	// The timestamp is read before m.rec may become the output record.
	outs, rerr := o.t.outputs(&o.buf, op.Timestamp, op, m.rec.Key, nil)
	if rerr != nil {
		return nil, o.p.deadLetters(m.rec, rerr)
	}
	return outs, nil
}

func (o *passThrough) snapshot(int64) (outputs []*kgo.Record, changes stateChanges, summary []checkpoint.StateSummary) {
	return nil, stateChanges{}, nil
}

// aggregateOp is a running aggregate over the key groups of one worker.
// Its states are kept encoded, outside the Go heap (state.Compact): a
// record decodes its key's state into st, adds to it, and encodes it back.
type aggregateOp struct {
	p     *plan
	t     *target
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
	buf       outBuf
	// expiry deletes keys not updated for aggregate.ttl (nil: no TTL).
	expiry *expiry
}

func (o *aggregateOp) process(m message) (out []*kgo.Record, deadLetters []message) {
	// Nothing reads the input after this (the state keeps copies of what
	// it needs): its decoded map goes back to the chain for a later input.
	defer o.p.recycle(m.op)
	key := []byte(m.op.GroupKey)
	slot := o.store.SlotHashed(m.hash, key) // one lookup for Get and Put
	if o.ints != nil {
		if out, deadLetters, done := o.processInts(m, key, slot); done {
			return out, deadLetters
		}
	}
	st, ok := o.load(slot)
	changed, rerr := o.agg.Add(st, m.op)
	if rerr != nil {
		return nil, o.p.deadLetters(m.rec, rerr)
	}
	if o.expiry != nil {
		changed = o.expiry.touch(st, m.at, !ok, m.op.GroupKey) || changed
	}
	if changed || !ok {
		o.put(slot, key, st)
	}
	if o.agg.Emit() == config.EmitOnCheckpoint {
		o.changed(m)
		return nil, nil
	}
	// The input's timestamp, as the router copied it into the
	// operator.Record (no step changes it).
	outs, rerr := o.output(m.op.Timestamp, m.op.GroupKey, st)
	if rerr != nil {
		return nil, o.p.deadLetters(m.rec, rerr)
	}
	return outs, nil
}

// processInts is process by the integer path (operator/intpath.go), for
// a record the chain read by it and a state in the form it holds: the
// same output, without an AggregateState, and the state stored in the
// path's native form (the store encodes it for the changelog). done false
// declines (the record was not read by that path, its key's state is a
// decimal one, a sum would overflow), having changed nothing: process
// then takes the general path with the same slot.
func (o *aggregateOp) processInts(m message, key []byte, slot state.CompactSlot) (out []*kgo.Record, deadLetters []message, done bool) {
	enc, found := slot.Value()
	if !found {
		o.ints.Reset()
	} else if !o.ints.Decode(enc) {
		return nil, nil, false
	}
	changed, ok := o.agg.AddInts(o.ints, m.op)
	if !ok {
		return nil, nil, false
	}
	if changed || !found {
		o.enc = o.ints.AppendNative(o.enc[:0])
		slot.Put(key, o.enc)
	}
	if o.agg.Emit() == config.EmitOnCheckpoint {
		o.changed(m)
		return nil, nil, true
	}
	outs, rerr := o.t.keyedOutputs(&o.buf, m.op.Timestamp, m.op.GroupKey, o.buf.cut(o.ints.AppendOutput(o.buf.start(), m.op.GroupKey)))
	if rerr != nil {
		return nil, o.p.deadLetters(m.rec, rerr), true
	}
	return outs, nil, true
}

// changed notes that m's key changed in this epoch, with m's input
// timestamp, for its on_checkpoint output.
func (o *aggregateOp) changed(m message) {
	if o.changedAt == nil {
		o.changedAt = map[string]int64{}
	}
	k := m.op.GroupKey
	if _, ok := o.changedAt[k]; !ok {
		k = strings.Clone(k) // it may alias the input's value
	}
	o.changedAt[k] = m.rec.Timestamp.UnixMilli()
}

// prefetch readies the states of a batch's records before process takes
// them one by one: with many keys each lookup is a cache miss on the
// table and one on the record, and prefetching overlaps those of the
// whole batch (state.Compact.PrefetchHashed). It reads the keys' hashes
// from the messages, not the keys: those are in the router's core's
// cache, and reading each would be a miss of its own before the slot's.
func (o *aggregateOp) prefetch(msgs []message) {
	o.store.PrefetchHashed(len(msgs), func(i int) (state.Hash, bool) {
		m := &msgs[i]
		return m.hash, m.kind == msgRecord && m.op != nil && int(m.target) == o.t.index
	})
}

// load decodes the state of slot's key into o.st, or makes o.st the empty
// state of a new key (ok false).
func (o *aggregateOp) load(slot state.CompactSlot) (st *operator.AggregateState, ok bool) {
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
func (o *aggregateOp) decode(enc []byte) {
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
func (o *aggregateOp) put(slot state.CompactSlot, key []byte, st *operator.AggregateState) {
	o.enc = o.encode(st)
	slot.Put(key, o.enc)
}

func (o *aggregateOp) encode(st *operator.AggregateState) []byte {
	enc, err := st.AppendBinary(o.enc[:0])
	if err != nil {
		// Only a state of another Aggregator fails to encode.
		panic(fmt.Sprintf("encoding aggregate state: %v", err))
	}
	return enc
}

// output is the result record of key for every sink. The value is
// encoded once, straight into the output buffer, and shared by the sinks.
func (o *aggregateOp) output(ts time.Time, groupKey string, st *operator.AggregateState) ([]*kgo.Record, *operator.RecordError) {
	return o.t.keyedOutputs(&o.buf, ts, groupKey, o.buf.cut(st.AppendOutput(o.buf.start(), groupKey)))
}

// stateChanges are a snapshot's changelog records for the job's state
// topic, as keys and values: the sink makes each one its kgo.Record only as
// it produces it. A checkpoint changes up to one key per input of its
// epoch, and as kgo.Records (160 bytes each, alive until produced) an
// epoch's changes were most of the heap at millions of keys.
type stateChanges struct {
	topic string
	recs  []state.ChangelogRecord
}

func (c stateChanges) len() int { return len(c.recs) }

// record is change i as a record to produce.
func (c stateChanges) record(i int) *kgo.Record {
	return &kgo.Record{Topic: c.topic, Key: c.recs[i].Key, Value: c.recs[i].Value}
}

// changelog is a snapshot's delta as changes for the job's state topic.
func (p *plan) changelog(delta state.Delta) stateChanges { return p.changes(delta.Records()) }

// changes are changelog records as changes for the job's state topic.
func (p *plan) changes(recs []state.ChangelogRecord) stateChanges {
	return stateChanges{topic: kstore.StateTopic(p.cfg.Name), recs: recs}
}

func (o *aggregateOp) snapshot(watermark int64) (outputs []*kgo.Record, changes stateChanges, summary []checkpoint.StateSummary) {
	if o.expiry != nil {
		if n := o.expiry.expire(o, watermark); n > 0 && o.p.metrics != nil {
			o.p.metrics.KeysExpired(o.agg.ID(), n)
		}
	}
	if o.agg.Emit() != config.EmitOnCheckpoint {
		// Only the changelog: no Entries to build.
		return nil, o.p.changes(o.store.SnapshotRecords()), []checkpoint.StateSummary{o.summary()}
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
	changes = o.p.changelog(delta)
	return outputs, changes, []checkpoint.StateSummary{o.summary()}
}

// summary is the size of the operator's state, for checkpoint records.
func (o *aggregateOp) summary() checkpoint.StateSummary {
	return checkpoint.StateSummary{Operator: o.agg.ID(), Keys: uint64(o.store.Len()), Bytes: uint64(max(0, o.store.ApproxBytes()))}
}
