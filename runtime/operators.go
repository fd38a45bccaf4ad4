package runtime

import (
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/checkpoint/kstore"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/operator"
	"github.com/eoflow/pipeline/state"
)

// passThrough is the keyed operator of a job without an aggregate: each
// input that passed the steps becomes one output per sink.
type passThrough struct{ p *plan }

func (o *passThrough) process(m message) (out []*kgo.Record, deadLetters []message) {
	outs, rerr := o.p.outputs(m.rec, m.op, m.rec.Key, func(f config.Format) ([]byte, *operator.RecordError) {
		return m.op.AppendValue(nil, f)
	})
	if rerr != nil {
		return nil, o.p.deadLetters(m.rec, rerr)
	}
	return outs, nil
}

func (o *passThrough) snapshot() (outputs, changes []*kgo.Record, summary []checkpoint.StateSummary) {
	return nil, nil, nil
}

// aggregateOp is a running aggregate over the key groups of one worker.
type aggregateOp struct {
	p     *plan
	agg   *operator.Aggregator
	store *state.Store[*operator.AggregateState]
	// latest input timestamp per key changed in this epoch, for the
	// timestamps of on_checkpoint outputs.
	changedAt map[string]int64
}

func (o *aggregateOp) process(m message) (out []*kgo.Record, deadLetters []message) {
	key := []byte(m.op.GroupKey)
	st, ok := o.store.Get(key)
	if !ok {
		st = o.agg.NewState()
	}
	changed, rerr := o.agg.Add(st, m.op)
	if rerr != nil {
		return nil, o.p.deadLetters(m.rec, rerr)
	}
	if changed || !ok {
		o.store.Put(key, st)
	}
	if o.agg.Emit() == config.EmitOnCheckpoint {
		if o.changedAt == nil {
			o.changedAt = map[string]int64{}
		}
		o.changedAt[m.op.GroupKey] = m.rec.Timestamp.UnixMilli()
		return nil, nil
	}
	outs, rerr := o.output(m.rec, m.op.GroupKey, st)
	if rerr != nil {
		return nil, o.p.deadLetters(m.rec, rerr)
	}
	return outs, nil
}

// output is the result record of key for every sink.
func (o *aggregateOp) output(in *kgo.Record, groupKey string, st *operator.AggregateState) ([]*kgo.Record, *operator.RecordError) {
	value := st.Output(groupKey)
	var view *operator.Record
	for _, s := range o.p.sinks {
		if s.key != nil {
			// A sink key expression reads the output object.
			view = &operator.Record{Value: value, Timestamp: in.Timestamp, Format: config.FormatJSON}
			break
		}
	}
	return o.p.outputs(in, view, []byte(groupKey), func(config.Format) ([]byte, *operator.RecordError) {
		return value, nil
	})
}

func (o *aggregateOp) snapshot() (outputs, changes []*kgo.Record, summary []checkpoint.StateSummary) {
	delta := o.store.Snapshot()
	if o.agg.Emit() == config.EmitOnCheckpoint {
		for _, e := range delta.Entries {
			if e.Deleted {
				continue
			}
			st, ok := o.store.Get(e.Key)
			if !ok {
				continue
			}
			ts := kgo.Record{}
			if at, ok := o.changedAt[string(e.Key)]; ok {
				ts.Timestamp = time.UnixMilli(at)
			}
			outs, rerr := o.output(&ts, string(e.Key), st)
			if rerr == nil {
				outputs = append(outputs, outs...)
			}
		}
		clear(o.changedAt)
	}
	for _, r := range delta.Records() {
		changes = append(changes, &kgo.Record{Topic: kstore.StateTopic(o.p.cfg.Name), Key: r.Key, Value: r.Value})
	}
	summary = []checkpoint.StateSummary{{
		Operator: o.agg.ID(), Keys: uint64(o.store.Len()), Bytes: uint64(max(0, o.store.ApproxBytes())),
	}}
	return outputs, changes, summary
}
