package operator

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/expr-lang/expr/vm"

	"github.com/eoflow/pipeline/config"
)

// Chain is a compiled list of steps: stateless filter, map and key_by
// steps, then at most one aggregate, which must be last.
//
// The runtime runs Process where records are read (it is stateless and
// needs no coordination), routes records by GroupKey to keyed workers, and
// runs the Aggregator there.
//
// A Chain is not safe for concurrent use (it reuses a VM and a decoder);
// Clone gives each goroutine its own, sharing the compiled programs.
type Chain struct {
	steps []step
	agg   *Aggregator
	// window is the window step's configuration when the chain ends in a
	// window (agg then holds its values), nil otherwise.
	window *config.Window
	keyed  bool
	// firstPath names the first step (the first to need the decoded
	// value) in decode errors; "steps" when there is none.
	firstPath string

	vm  vm.VM
	dec decoder
	// tables decodes the JSON values join steps look up (join.go): apart
	// from dec, whose settings and caches are the input's.
	tables decoder
	// maps are the recycled maps (Recycle), shared with the clones; dec
	// draws from them.
	maps *fieldMaps
	// need are the top-level fields of an input value that the chain's
	// expressions read (those of the steps up to the first map step, and
	// of the aggregate if there is no map step): Process builds only
	// these, the rest of the value is validated and skipped. nil when an
	// expression may read any field ($env): then all are built. Another
	// expression on the record (a sink key) gets the whole value decoded
	// if it reads more (Expr.run).
	need *fieldSet
	// mapped says a map step replaces the input value.
	mapped bool
	// ints is the chain's integer path (nil: the chain is not of its
	// shape): Process reads a record by it when it can (intpath.go).
	ints *intPath
	// inputs decode the topics read in a schema format, with a key
	// format or an envelope (SetInputs).
	inputs Inputs
	// tally counts how far Process let each record get (nil: not
	// counted); each clone counts its own (stepcount.go).
	tally *tally
}

type step struct {
	kind config.StepKind
	path string
	// index is the step's place in config.Steps.
	index int
	expr  *Expr // filter, key_by

	// map
	names  []string
	fields []*Expr

	// join (expr is its key)
	join *joinStep
	// the key step of a route to an interval join (expr is its key)
	ikey *intervalKey
}

// Compile builds a Chain from the job's steps. It reports every problem it
// finds, each a *CompileError, joined with errors.Join.
func Compile(steps []config.Step) (*Chain, error) {
	c := &Chain{maps: &fieldMaps{}}
	c.dec.maps = c.maps
	var errs []error
	fail := func(i int, kind config.StepKind, path, format string, args ...any) {
		errs = append(errs, &CompileError{Path: path, Step: i, Kind: kind, Message: fmt.Sprintf(format, args...)})
	}
	addExprErr := func(i int, kind config.StepKind, ce *CompileError) {
		ce.Step, ce.Kind = i, kind
		errs = append(errs, ce)
	}
	for i, s := range steps {
		base := fmt.Sprintf("steps[%d]", i)
		kind := s.Kind()
		before := len(c.steps)
		if n := kindsSet(s); n != 1 {
			if n == 0 {
				fail(i, "", base, "step has no kind: set one of filter, map, key_by, join, aggregate, window")
			} else {
				fail(i, kind, base, "step has %d kinds: set exactly one of filter, map, key_by, join, aggregate, window", n)
			}
			continue
		}
		path := base + "." + string(kind)
		if c.agg != nil {
			what := "aggregate"
			if c.window != nil {
				what = "window"
			}
			fail(i, kind, path, "no step may follow the %s (%s)", what, c.agg.path)
			continue
		}
		switch kind {
		case config.StepFilter:
			e, ce := compileExpr(path, s.Filter, exprBool)
			if ce != nil {
				addExprErr(i, kind, ce)
				continue
			}
			c.steps = append(c.steps, step{kind: kind, path: path, expr: e})
		case config.StepKeyBy:
			// Keyed even when its expression is wrong: an aggregate after
			// it does not lack a key_by.
			c.keyed = true
			e, ce := compileExpr(path, s.KeyBy, exprAny)
			if ce != nil {
				addExprErr(i, kind, ce)
				continue
			}
			c.steps = append(c.steps, step{kind: kind, path: path, expr: e})
		case config.StepJoin:
			st, jerrs := compileJoin(i, s)
			if len(jerrs) > 0 {
				errs = append(errs, jerrs...)
				continue
			}
			c.steps = append(c.steps, *st)
		case config.StepMap:
			st := step{kind: kind, path: path}
			if len(s.Map) == 0 {
				fail(i, kind, path, "map needs at least one field")
			}
			seen := map[string]bool{}
			for _, f := range s.Map {
				fpath := path + "." + f.Name
				switch {
				case f.Name == "":
					fail(i, kind, fpath, "field name is empty")
					continue
				case seen[f.Name]:
					fail(i, kind, fpath, "duplicate field %q", f.Name)
					continue
				case metaBit(f.Name) != 0:
					fail(i, kind, fpath, "%s is reserved for the record's metadata; choose another name", f.Name)
					continue
				}
				seen[f.Name] = true
				e, ce := compileExpr(fpath, f.Expr, exprAny)
				if ce != nil {
					addExprErr(i, kind, ce)
					continue
				}
				st.names = append(st.names, f.Name)
				st.fields = append(st.fields, e)
			}
			c.steps = append(c.steps, st)
		case config.StepAggregate, config.StepWindow:
			agg, aerrs := compileAggregate(i, path, s, c.keyed)
			if kind == config.StepWindow {
				c.window = s.Window
			}
			errs = append(errs, aerrs...)
			if agg == nil {
				// Still remember that an aggregate was here, so steps after
				// it are reported.
				agg = &Aggregator{path: path}
			}
			c.agg = agg
		}
		if len(c.steps) > before {
			c.steps[len(c.steps)-1].index = i
		}
	}
	if len(errs) == 0 {
		errs = checkJoinScope(c.steps, c.agg, joinNames(c.steps), "", map[string]bool{})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	c.need = c.inputFields()
	c.ints = compileIntPath(c.steps, c.agg, c.window)
	if c.agg != nil {
		c.agg.ints = c.ints
	}
	c.firstPath = "steps"
	if len(steps) > 0 {
		c.firstPath = fmt.Sprintf("steps[0].%s", steps[0].Kind())
	}
	return c, nil
}

// kindsSet counts the kinds a step sets (config.Step.Kind reports the
// first only).
func kindsSet(s config.Step) int {
	n := 0
	for _, set := range []bool{s.Filter != "", s.Map != nil, s.KeyBy != "", s.Join != nil, s.Aggregate != nil, s.Window != nil} {
		if set {
			n++
		}
	}
	return n
}

// compileAggregate compiles an aggregate step or the values of a window
// step: both fold named values per group key.
func compileAggregate(i int, path string, s config.Step, keyed bool) (*Aggregator, []error) {
	kind := s.Kind()
	var errs []error
	fail := func(p, format string, args ...any) {
		errs = append(errs, &CompileError{Path: p, Step: i, Kind: kind, Message: fmt.Sprintf(format, args...)})
	}
	if !keyed {
		// Without a key every record would share one group: possible, but
		// an aggregate without key_by is far more often a forgotten step.
		fail(path, `needs a key_by step before it (for one global group: key_by: '"all"')`)
	}
	var emit config.EmitMode
	var values []config.AggregateValue
	reserved := map[string]string{"key": "the output field of the group key"}
	if kind == config.StepWindow {
		values = s.Window.Values
		reserved["window_start"] = "the output field of the window's start"
		reserved["window_end"] = "the output field of the window's end"
	} else {
		a := s.Aggregate
		values, emit = a.Values, a.Emit
		switch emit {
		case "":
			emit = config.EmitEveryRecord
		case config.EmitEveryRecord, config.EmitOnCheckpoint:
		default:
			fail(path+".emit", "unknown emit mode %q: want every_record or on_checkpoint", emit)
		}
	}
	if len(values) == 0 {
		fail(path+".values", "at least one value is required, e.g. count: count()")
	}
	var names []string
	var funcs []config.AggregateFunc
	var args []*Expr
	seen := map[string]bool{}
	for _, v := range values {
		vpath := path + ".values." + v.Name
		switch {
		case v.Name == "":
			fail(vpath, "value name is empty")
			continue
		case reserved[v.Name] != "":
			fail(vpath, "%q is %s; choose another name", v.Name, reserved[v.Name])
			continue
		case seen[v.Name]:
			fail(vpath, "duplicate value %q", v.Name)
			continue
		}
		seen[v.Name] = true
		if _, ok := funcTag(v.Func); !ok {
			fail(vpath, "unknown aggregate function %q: want count, sum, min, max, avg, first or last", v.Func)
			continue
		}
		var e *Expr
		switch {
		case v.Func == config.AggCount && v.Arg != "":
			fail(vpath, "count() takes no argument")
			continue
		case v.Func != config.AggCount && v.Arg == "":
			fail(vpath, "%s() needs an argument, e.g. %s(amount)", v.Func, v.Func)
			continue
		case v.Func != config.AggCount:
			var ce *CompileError
			if e, ce = compileExpr(vpath, v.Arg, exprAny); ce != nil {
				ce.Step, ce.Kind = i, kind
				errs = append(errs, ce)
				continue
			}
		}
		names = append(names, v.Name)
		funcs = append(funcs, v.Func)
		args = append(args, e)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	id := s.ID
	if id == "" {
		id = fmt.Sprintf("%s-%d", kind, i)
	}
	var ttl time.Duration
	if kind == config.StepAggregate {
		ttl = s.Aggregate.TTL
	}
	l := newLayout(names, funcs, ttl > 0)
	return &Aggregator{layout: l, path: path, id: id, emit: emit, ttl: ttl, args: args, vals: make([]any, len(args))}, nil
}

// inputFields is need: the fields read by the expressions that see the
// input value. Each of them is marked as covered by it.
func (c *Chain) inputFields() *fieldSet {
	var exprs []*Expr
	for _, st := range c.steps {
		if st.expr != nil {
			exprs = append(exprs, st.expr)
		}
		exprs = append(exprs, st.fields...)
		if st.kind == config.StepMap {
			c.mapped = true
			break
		}
	}
	if !c.mapped && c.agg != nil {
		for _, e := range c.agg.args {
			if e != nil {
				exprs = append(exprs, e)
			}
		}
	}
	var names [][]string
	for _, e := range exprs {
		if e.env {
			return nil
		}
		names = append(names, e.reads)
	}
	need := newFieldSet(nil, names...)
	for _, e := range exprs {
		e.within = need
	}
	if !onlyFields(exprs) {
		need.slots = nil // the VM needs a map as its environment anyway
	}
	return need
}

// AlsoRead adds the fields that exprs read of the input value to those
// Process decodes, for expressions the runtime evaluates on records after
// the chain (a sink key of a job without an aggregate), so that these need
// not decode the value a second time.
func (c *Chain) AlsoRead(exprs ...*Expr) {
	if c.need == nil || c.mapped {
		return // everything is decoded, or they read the mapped value
	}
	var names [][]string
	for _, e := range exprs {
		if e.env {
			c.need = nil
			return
		}
		names = append(names, e.reads)
	}
	slots := c.need.slots != nil && onlyFields(exprs)
	c.need = newFieldSet(c.need, names...)
	if !slots {
		c.need.slots = nil
	}
}

// onlyFields reports whether every expression of exprs is a bare field
// (sum(amount), key_by: user), read without the VM.
func onlyFields(exprs []*Expr) bool {
	for _, e := range exprs {
		if e.field == "" {
			return false
		}
	}
	return true
}

// Clone returns a Chain sharing the compiled programs, for another
// goroutine.
func (c *Chain) Clone() *Chain {
	n := &Chain{steps: c.steps, window: c.window, keyed: c.keyed, firstPath: c.firstPath, maps: c.maps, need: c.need, mapped: c.mapped, ints: c.ints, inputs: c.inputs,
		tally: newTally(len(c.steps))}
	n.dec.maps, n.dec.inputs = c.maps, c.inputs
	if c.agg != nil {
		n.agg = c.agg.Clone()
	}
	return n
}

// Recycle gives the map holding r's decoded (or mapped) value back to the
// chain and its clones, which decode later records into it, and leaves r as
// if never decoded. Call it once nothing reads r any more (its outputs are
// encoded, its values added): the map is cleared and handed on. Values read
// from the record stay valid (they are never changed, only no longer
// referenced by the map); a map that Fields returned does not. Safe for
// concurrent use with the clones' Process, so the goroutine that finishes
// with a record may recycle it while another decodes.
func (c *Chain) Recycle(r *Record) { recycle(c.maps, r) }

// recycle is Chain.Recycle with the chain's maps.
func recycle(maps *fieldMaps, r *Record) {
	// A map a decoder made (not a map step's) goes back for a later
	// record: with the last hold on it, when branches share it.
	r.release(maps, r.order == nil || r.changed)
	r.fields, r.order, r.decoded, r.changed, r.metaSet, r.partial, r.compact = nil, nil, false, false, 0, nil, false
	r.intsRead, r.joined = false, nil
	r.key, r.keyDecoded, r.tombstone, r.skip, r.decimals = nil, false, false, false, false
	r.clearSlots()
}

// readInts reads r by the chain's integer path, if it has one and r is
// not decoded, and reports whether it could (intPath.read): r is then
// keyed and its integers read.
func (c *Chain) readInts(r *Record) bool {
	if c.ints == nil || r.decoded {
		return false
	}
	in := c.inputs[r.Topic]
	switch {
	case in == nil && isJSON(r.Format):
		return c.ints.read(&c.dec, r)
	case in != nil:
		if ir := in.intReader(); ir != nil {
			return c.ints.readSchema(ir, r)
		}
	}
	return false
}

// Keyed reports whether the chain has a key_by step, so records carry a
// GroupKey after Process.
func (c *Chain) Keyed() bool { return c.keyed }

// Aggregator is the chain's aggregate step, or the values of its window
// step; nil if it has neither.
func (c *Chain) Aggregator() *Aggregator { return c.agg }

// Window is the chain's window step, nil if it has none (Aggregator then
// folds its values).
func (c *Chain) Window() *config.Window { return c.window }

// Process runs the stateless steps on r: it decodes the value (every JSON
// record is decoded, even with no steps, so a non-JSON value on a JSON
// source is reported rather than passed on), then applies filter, map and
// key_by in order. keep is false when a filter dropped the record. A
// non-nil error means the record failed and goes to the dead-letter topic;
// it never panics on any input. A clone tallies the step each record
// stopped at (Branches.TakeStepCounts).
func (c *Chain) Process(r *Record) (keep bool, err *RecordError) {
	keep, at, err := c.process(r)
	c.tally.count(at, err != nil)
	return keep, err
}

// process is Process, uncounted: at is the index of the step the record
// stopped at (filtered, dropped or failed), len(c.steps) when it came
// through them all, and -1 when it never reached the first step (its
// decoding failed where no step is blamed for it, or it is skipped).
func (c *Chain) process(r *Record) (keep bool, at int, err *RecordError) {
	if c.readInts(r) {
		return true, len(c.steps), nil // keyed, its integers read: the one step is done
	}
	if err := r.decodeFields(&c.dec, c.firstPath, c.need); err != nil {
		if len(c.steps) > 0 && strings.HasPrefix(c.firstPath, "steps[") {
			return false, 0, err // a linear job's: its first step's dead letter
		}
		return false, -1, err
	}
	if r.skip {
		return false, -1, nil
	}
	for i := range c.steps {
		s := &c.steps[i]
		switch s.kind {
		case config.StepFilter:
			v, err := s.expr.run(&c.vm, r)
			if err != nil {
				return false, i, err
			}
			b, ok := v.(bool)
			if !ok {
				return false, i, &RecordError{Step: s.path, Code: CodeType, Reason: "filter must be true or false, got " + typeName(v)}
			}
			if !b {
				return false, i, nil
			}
		case config.StepMap:
			// Every field is computed from the input record, then the
			// new object replaces it.
			m := make(map[string]any, len(s.fields))
			for j, e := range s.fields {
				v, err := e.run(&c.vm, r)
				if err != nil {
					return false, i, err
				}
				nv, nerr := normalize(r.detach(v))
				if nerr != nil {
					return false, i, nerr.withStep(e.path)
				}
				m[s.names[j]] = nv
			}
			r.release(c.maps, true) // the input's map: this record reads it no more
			r.fields, r.order, r.changed, r.metaSet, r.partial = m, s.names, true, 0, nil
			r.clearSlots()
		case config.StepJoin:
			if keep, err := s.join.apply(&c.vm, &c.tables, s.expr, r); !keep || err != nil {
				return false, i, err
			}
		case stepIntervalKey:
			if keep, err := applyIntervalKey(&c.vm, s.ikey, s.path, s.expr, r); !keep || err != nil {
				return false, i, err
			}
		case config.StepKeyBy:
			v, err := s.expr.run(&c.vm, r)
			if err != nil {
				return false, i, err
			}
			k, kind, kerr := groupKey(v)
			if kerr != nil {
				return false, i, kerr.withStep(s.path)
			}
			r.GroupKey, r.Keyed, r.keyKind = k, true, kind
		}
	}
	return true, len(c.steps), nil
}
