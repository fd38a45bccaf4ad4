package keyed

import (
	"iter"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/operator"
	"github.com/eoflow/pipeline/state"
)

// Operator is one keyed operator (or pass-through) as one worker runs it;
// see the package documentation for the contract.
type Operator interface {
	Process(in *Input) Result
	Barrier(watermark int64) (Result, []state.ChangelogRecord, []checkpoint.StateSummary)
}

// Stateful is an operator with keyed state: the aggregate and the window.
type Stateful interface {
	Operator
	ID() string
	Store() Store
	Summary() checkpoint.StateSummary
	// Retain lets go of the keys keep refuses, right after a barrier
	// (state.Store.Retain: no tombstones), and forgets what it derived
	// from them (timers are rebuilt from the store, as after a restore):
	// a group-mode worker keeps its state across a rebalance, minus the
	// key groups that moved away. It returns how many keys it dropped.
	Retain(keep func(kg state.KeyGroup, key []byte) bool) (int, error)
}

// Prefetcher is an operator that can ready the state of a batch of inputs
// before it processes them one by one: hash says input i's key hash, and
// whether input i is the operator's at all.
type Prefetcher interface {
	Prefetch(n int, hash func(i int) (state.Hash, bool))
}

// Store is what a restore, a savepoint and the state summary need of an
// operator's store, whatever its value type.
type Store interface {
	state.Restorable
	All() iter.Seq[state.Entry]
	Grow(keys int)
	ApproxBytes() int64
	// SetRecordLimit, KeysInPieces and EntryRecords: a value larger than
	// a record of the state topic goes there in pieces (state/pieces.go).
	SetRecordLimit(n int)
	KeysInPieces() int
	EntryRecords(e state.Entry) []state.ChangelogRecord
}

// Input is one input record for an operator.
type Input struct {
	// Rec is the record as read (dead letters carry it); Op is it after
	// the stateless steps: its group key and decoded value.
	Rec *kgo.Record
	Op  *operator.Record
	// Hash is the hash of Op.GroupKey (keyed operators).
	Hash state.Hash
	// At is the input's event time and Wm its partition's watermark just
	// before it, epoch milliseconds (jobs with event time).
	At, Wm int64
}

// Result is what an operator produced for one input or at a barrier.
type Result struct {
	// Outputs go to the sinks, DeadLetters to the dead-letter topics,
	// Late to the late topic; each slice is the engine's to keep.
	Outputs, DeadLetters, Late []*kgo.Record
}

// Env is what operators need of the job around them.
type Env struct {
	// DeadLetters are the dead-letter records of src failing with err
	// (one per dead-letter topic), counted and logged.
	DeadLetters func(src *kgo.Record, err *operator.RecordError) []*kgo.Record
	// Recycle gives an input's decoded value back once nothing reads it
	// (operator.Graph.Recycle).
	Recycle func(*operator.Record)
	// Metrics counts what operators do; nil counts nothing.
	Metrics Metrics
	// Now is the processing time (a TTL without event time).
	Now func() time.Time
}

// Metrics is what operators report.
type Metrics interface {
	LateRecord(operator, result string)
	WindowsFired(operator string, n int)
	SetOpenWindows(operator string, n int64)
	KeysExpired(operator string, n int)
}

func (e *Env) recycle(op *operator.Record) {
	if e.Recycle != nil && op != nil {
		e.Recycle(op)
	}
}

func (e *Env) deadLetters(src *kgo.Record, err *operator.RecordError) []*kgo.Record {
	if e.DeadLetters == nil {
		return nil
	}
	return e.DeadLetters(src, err)
}
