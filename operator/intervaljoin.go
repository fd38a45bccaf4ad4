package operator

import (
	"fmt"

	"github.com/expr-lang/expr/vm"

	"github.com/eoflow/pipeline/config"
)

// An interval join (a join step with stream:) pairs the records of two
// streams whose keys match and whose event times are within bounds of
// each other. In the graph it is a keyed target, as an aggregate is: each
// route to it ends in a key step (stepIntervalKey) that evaluates the
// join's key (routes from its left stream) or other_key (from its right
// stream, the node stream: names), sets the record's group key to its
// text, and marks the record's side. The runtime then sends both sides by
// that key to one keyed worker, whose operator (operator/keyed) buffers
// them and emits the pairs.

// JoinSide says which stream of an interval join a record came by.
type JoinSide uint8

const (
	// SideLeft is the join's own input (from:), SideRight the stream it
	// names (stream:).
	SideLeft JoinSide = 1 + iota
	SideRight
)

// IntervalJoin is an interval join step, compiled: what its keyed
// operator needs.
type IntervalJoin struct {
	// ID is the step's id (its state is stored under it), Path where it
	// is in the file (steps[i].join).
	ID, Path string
	// As is the name the right record's value is written under in the
	// left record's object.
	As string
	// Left: how: left (an unmatched left record is emitted, with null
	// under As, when its interval closes).
	Left bool
	// Before and After bound the right record's event time t' around the
	// left record's t, in milliseconds: t-Before <= t' <= t+After.
	Before, After int64
	// LateTopic receives late records ("" drops them).
	LateTopic string

	key, otherKey *Expr
}

// stepIntervalKey is the key step that ends a route to an interval join
// (not a kind a configuration can write).
const stepIntervalKey config.StepKind = "interval_key"

// intervalKey is a key step's own: the side it marks, and whether a nil
// key drops the record (every right record; a left one under inner).
type intervalKey struct {
	side    JoinSide
	dropNil bool
}

// compileIntervalJoin compiles interval join step i.
func compileIntervalJoin(cfg *config.Config, i int, s config.Step) (*IntervalJoin, []error) {
	path := fmt.Sprintf("steps[%d].join", i)
	j := s.Join
	ij := &IntervalJoin{ID: s.ID, Path: path, As: j.As, Left: j.How == config.JoinLeft}
	if j.Within != nil {
		ij.Before, ij.After = j.Within.Before.Milliseconds(), j.Within.After.Milliseconds()
	}
	if j.LateRecords != config.LateDrop {
		ij.LateTopic = j.LateTopic
		if ij.LateTopic == "" {
			ij.LateTopic = cfg.Name + "-late"
		}
	}
	var errs []error
	var ce *CompileError
	if ij.key, ce = compileExpr(path+".key", j.Key, exprAny); ce != nil {
		ce.Step, ce.Kind = i, config.StepJoin
		errs = append(errs, ce)
	}
	if ij.otherKey, ce = compileExpr(path+".other_key", j.OtherKey, exprAny); ce != nil {
		ce.Step, ce.Kind = i, config.StepJoin
		errs = append(errs, ce)
	}
	return ij, errs
}

// keyStep is the step that ends a route to the join from side.
func (ij *IntervalJoin) keyStep(side JoinSide) step {
	st := step{kind: stepIntervalKey, path: ij.Path + ".key", expr: ij.key, ikey: &intervalKey{side: side, dropNil: side == SideRight || !ij.Left}}
	if side == SideRight {
		st.path, st.expr = ij.Path+".other_key", ij.otherKey
	}
	return st
}

// applyIntervalKey evaluates the key step k of expression e on r: its
// group key and side; keep false: a nil key that matches nothing and
// would never be emitted.
func applyIntervalKey(m *vm.VM, k *intervalKey, path string, e *Expr, r *Record) (keep bool, err *RecordError) {
	v, err := e.run(m, r)
	if err != nil {
		return false, err
	}
	r.JoinSide, r.JoinNoKey = k.side, v == nil
	if v == nil {
		if k.dropNil {
			return false, nil
		}
		r.GroupKey, r.Keyed, r.keyKind = "", true, keyString
		return true, nil
	}
	key, kind, kerr := groupKey(v)
	if kerr != nil {
		return false, kerr.withStep(path)
	}
	r.GroupKey, r.Keyed, r.keyKind = key, true, kind
	return true, nil
}
