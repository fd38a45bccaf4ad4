package keyed

import (
	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/operator"
	"github.com/eoflow/pipeline/state"
)

// PassThrough is the operator of an output: a source or stateless step
// that sinks read. Each input that reaches it becomes one output per sink.
// It holds no state.
type PassThrough struct {
	env   *Env
	sinks Sinks
	buf   Buf
	// chain and in serve the inputs of a bare job (a linear job with no
	// steps, no event time and no sink keys: the engine sends its records
	// without an operator.Record): each is decoded here, into in, reused,
	// instead of into a new Record per input on the source side. format
	// is the value format of each source topic.
	chain  *operator.Chain
	format map[string]config.Format
	in     operator.Record
}

var _ Operator = (*PassThrough)(nil)

// NewPassThrough writes what reaches it to sinks. chain (nil unless the
// job is linear) decodes the inputs that come without an operator.Record,
// their formats by topic.
func NewPassThrough(env *Env, sinks Sinks, chain *operator.Chain, format map[string]config.Format) *PassThrough {
	o := &PassThrough{env: env, sinks: sinks, format: format}
	if chain != nil {
		o.chain = chain.Clone()
	}
	return o
}

func (o *PassThrough) Process(in *Input) Result {
	m := in.Rec
	op := in.Op
	if op == nil { // a bare job's input: the steps (none) run here
		o.in = operator.Record{
			Key: m.Key, Value: m.Value, Timestamp: m.Timestamp,
			Topic: m.Topic, Partition: m.Partition, Offset: m.Offset,
			Format: o.format[m.Topic],
		}
		op = &o.in
		if _, rerr := o.chain.Process(op); rerr != nil {
			o.chain.Recycle(op)
			return Result{DeadLetters: o.env.deadLetters(m, rerr)}
		}
	}
	// Nothing reads the input after this: its decoded map goes back to
	// the chain for a later input, and with one sink the input's
	// kgo.Record becomes the output record (Buf.reuse).
	defer o.env.recycle(op)
	if len(o.sinks) == 1 {
		o.buf.reuse = m
		defer func() { o.buf.reuse = nil }()
	}
	// The timestamp is read before m may become the output record.
	key := m.Key
	outs, rerr := o.sinks.Outputs(&o.buf, op.Timestamp, op, key, nil, in.At, in.Wm)
	if rerr != nil {
		return Result{DeadLetters: o.env.deadLetters(m, rerr)}
	}
	return Result{Outputs: outs}
}

func (o *PassThrough) Barrier(int64) (Result, []state.ChangelogRecord, []checkpoint.StateSummary) {
	return Result{}, nil, nil
}
