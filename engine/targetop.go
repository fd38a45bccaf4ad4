package engine

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/checkpoint/kstore"
	"github.com/eoflow/pipeline/operator/keyed"
	"github.com/eoflow/pipeline/state"
)

// keyedOperator is one target's operator as one worker runs it, on the
// key groups the worker owns.
type keyedOperator interface {
	// process applies one input and returns the output records to send on
	// (none when the operator emits only at checkpoints), and dead
	// letters and late records as messages.
	process(m message) (out []*kgo.Record, side []message)
	// snapshot is called at barrier N, with the job's watermark W(N)
	// (window.NoWatermark without event time): the outputs to emit for
	// the epoch (on_checkpoint mode, windows that fire), the changelog
	// records of the keys changed since the previous snapshot, and the
	// size of the state.
	snapshot(watermark int64) (outputs []*kgo.Record, changes stateChanges, summary []checkpoint.StateSummary)
}

// prefetcher is a keyedOperator that can ready the state of a batch's
// records before it processes them one by one.
type prefetcher interface {
	prefetch(msgs []message)
}

// targetOp is target index's keyed.Operator as a worker runs it: messages
// in, messages and changelog records out.
type targetOp struct {
	op    keyed.Operator
	index int
	// changelog is the job's state topic.
	changelog string
	in        keyed.Input
}

func newTargetOp(op keyed.Operator, index int, job string) *targetOp {
	return &targetOp{op: op, index: index, changelog: kstore.StateTopic(job)}
}

func (o *targetOp) process(m message) ([]*kgo.Record, []message) {
	o.in = keyed.Input{Rec: m.rec, Op: m.op, Hash: m.hash, At: m.at, Wm: m.wm}
	res := o.op.Process(&o.in)
	o.in = keyed.Input{} // holds no input past its processing
	return res.Outputs, sideMessages(res)
}

func (o *targetOp) snapshot(watermark int64) ([]*kgo.Record, stateChanges, []checkpoint.StateSummary) {
	res, recs, summary := o.op.Barrier(watermark)
	outputs := res.Outputs
	// Dead letters and late records at a barrier go with the outputs:
	// the worker sends them on the same way.
	outputs = append(outputs, res.DeadLetters...)
	outputs = append(outputs, res.Late...)
	return outputs, stateChanges{topic: o.changelog, recs: recs}, summary
}

func (o *targetOp) prefetch(msgs []message) {
	p, ok := o.op.(keyed.Prefetcher)
	if !ok {
		return
	}
	p.Prefetch(len(msgs), func(i int) (state.Hash, bool) {
		m := &msgs[i]
		return m.hash, m.kind == msgRecord && m.op != nil && int(m.target) == o.index
	})
}

// stateful is the operator's keyed state side, if it has one.
func (o *targetOp) stateful() (keyed.Stateful, bool) {
	s, ok := o.op.(keyed.Stateful)
	return s, ok
}

// sideMessages are res's dead letters and late records as messages.
func sideMessages(res keyed.Result) []message {
	if len(res.DeadLetters) == 0 && len(res.Late) == 0 {
		return nil
	}
	out := make([]message, 0, len(res.DeadLetters)+len(res.Late))
	for _, r := range res.DeadLetters {
		out = append(out, message{kind: msgDeadLetter, rec: r})
	}
	for _, r := range res.Late {
		out = append(out, message{kind: msgLate, rec: r})
	}
	return out
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
