package operator

import (
	"fmt"
	"maps"
	"slices"

	"github.com/expr-lang/expr/vm"

	"github.com/eoflow/pipeline/config"
)

// A join step looks each record up in a table (table.go) by the text of
// its key expression, as a group key's text (3, 3.0 and "3" are one key).
// The value found is shown to the expressions of every later step of the
// record's route under the join's name (`as`), as if it were a top-level
// field, hiding a field of that name; the record's own value is not
// changed, so a sink writes it as it was read. A key nil (a missing
// optional field) matches nothing. No match: under inner the record is
// dropped, under left it goes on with the name reading nil.
//
// A join's name is visible only after it: an expression that reads the
// name of a join that is not before it on every path from a source is a
// compile error, since it would otherwise read a field of the record by
// that name on one path and the table's value on another.

// joinStep is a compiled join step. It is shared by the clones of every
// chain that has it: BindTables sets its table and counter once.
type joinStep struct {
	id    string // the step's id
	path  string // steps[i].join
	table string // the table's id
	as    string
	inner bool
	t     *Table
	count JoinCounter
	// asOf: the join is as of event time (time: event_time): it looks a
	// record up as of Record.AsOf in vt, versioned, instead of in t;
	// history is how far behind the watermark its versions are kept (ms).
	asOf    bool
	history int64
	vt      *VersionedTable
}

// JoinCounter counts the records one join step looked up.
type JoinCounter interface {
	// Joined counts a record: matched says the table held its key.
	Joined(matched bool)
}

// joinedValue is a table value a join shows the later steps of a record
// (found false: none, a left join's nil).
type joinedValue struct {
	name  string
	value any
	found bool
}

// compileJoin compiles join step i.
func compileJoin(i int, s config.Step) (*step, []error) {
	path := fmt.Sprintf("steps[%d].join", i)
	j := s.Join
	if j == nil {
		return nil, []error{&CompileError{Path: path, Step: i, Kind: config.StepJoin, Message: "a join needs table, key and as"}}
	}
	e, ce := compileExpr(path+".key", j.Key, exprAny)
	if ce != nil {
		ce.Step, ce.Kind = i, config.StepJoin
		return nil, []error{ce}
	}
	id := s.ID
	if id == "" {
		id = fmt.Sprintf("join-%d", i)
	}
	js := &joinStep{id: id, path: path, table: j.Table, as: j.As, inner: j.How != config.JoinLeft,
		asOf: j.Time == config.JoinEventTime, history: j.History.Milliseconds()}
	return &step{kind: config.StepJoin, path: path, index: i, expr: e, join: js}, nil
}

// apply looks r up by key, the step's key expression, and shows the value
// to r's later steps; keep false: an inner join found no value. dec
// decodes a JSON table's value.
func (j *joinStep) apply(m *vm.VM, dec *decoder, key *Expr, r *Record) (keep bool, err *RecordError) {
	v, err := key.run(m, r)
	if err != nil {
		return false, err
	}
	var found any
	ok := false
	if v != nil {
		k, kerr := KeyString(v)
		if kerr != nil {
			return false, kerr.withStep(key.path)
		}
		switch {
		case j.asOf && j.vt != nil:
			// As of the record's event time (a late record, before the
			// table's horizon, finds nothing: VersionedTable rule 4).
			found, _, ok, _ = j.vt.LookupAsOf(k, r.AsOf)
		case j.asOf || j.t == nil:
			// Unreachable: the runtime binds every join before it runs.
			return false, &RecordError{Step: j.path, Code: CodeEval, Reason: "table " + j.table + " is not loaded"}
		default:
			var lerr *RecordError
			if found, ok, lerr = j.t.lookup(dec, k); lerr != nil {
				return false, lerr.withStep(j.path)
			}
		}
	}
	if j.count != nil {
		j.count.Joined(ok)
	}
	if !ok && j.inner {
		return false, nil
	}
	if ok && j.t != nil && j.t.decimals {
		r.decimals = true // a schema format's value may hold Decimals
	}
	r.joined = append(r.joined, joinedValue{name: j.as, value: found, found: ok})
	return true, nil
}

// joinedField returns the value a join showed r under name.
func (r *Record) joinedField(name string) (any, bool) {
	for i := range r.joined {
		if r.joined[i].name == name {
			return r.joined[i].value, true
		}
	}
	return nil, false
}

// readsJoined reports whether e may read a value a join showed r.
func (e *Expr) readsJoined(r *Record) bool {
	if e.env {
		return true
	}
	for i := range r.joined {
		if _, ok := slices.BinarySearch(e.reads, r.joined[i].name); ok {
			return true
		}
	}
	return false
}

// hidden is what overlayJoined replaced in a record's map.
type hidden struct {
	name string
	old  any
	had  bool
}

// overlayJoined writes the values joins showed r into its map, for one
// evaluation, and returns what they hid (restoreJoined puts it back): the
// map is what the record's value is written from, which a join does not
// change.
func (r *Record) overlayJoined() (map[string]any, []hidden) {
	if r.fields == nil {
		r.fields = make(map[string]any, len(r.joined))
	}
	if r.share != nil {
		// Other branches' copies read this map: write to one of its own.
		m := maps.Clone(r.fields)
		r.release(nil, false)
		r.fields = m
	}
	hid := make([]hidden, len(r.joined))
	for i, jv := range r.joined {
		old, had := r.fields[jv.name]
		hid[i] = hidden{name: jv.name, old: old, had: had}
		r.fields[jv.name] = jv.value
	}
	return r.fields, hid
}

// restoreJoined undoes overlayJoined.
func (r *Record) restoreJoined(hid []hidden) {
	for i := len(hid) - 1; i >= 0; i-- {
		if h := hid[i]; h.had {
			r.fields[h.name] = h.old
		} else {
			delete(r.fields, h.name)
		}
	}
}

// Joins lists the graph's join steps, each as the table it looks up.
func (g *Graph) Joins() []JoinDesc {
	var out []JoinDesc
	for _, j := range g.joins {
		out = append(out, JoinDesc{Step: j.id, Table: j.table, AsOf: j.asOf, History: j.history})
	}
	return out
}

// JoinDesc names one join step and its table. AsOf: the join is as of
// event time, keeping History (ms) of versions behind the watermark.
type JoinDesc struct {
	Step, Table string
	AsOf        bool
	History     int64
}

// BindVersioned gives every join as of event time the versioned table it
// looks records up in, by table id. Call it once, before the first
// NewBranches.
func (g *Graph) BindVersioned(tables map[string]*VersionedTable) error {
	for _, j := range g.joins {
		if !j.asOf {
			continue
		}
		vt, ok := tables[j.table]
		if !ok {
			return fmt.Errorf("%s: no versioned table %q", j.path, j.table)
		}
		j.vt = vt
	}
	return nil
}

// AsOfSources reports, by source index, whether some route of the
// source's records goes through a join as of event time: the runtime
// holds those records until the tables' event time has passed theirs.
func (g *Graph) AsOfSources() []bool {
	out := make([]bool, len(g.routes))
	for src, rs := range g.routes {
		for _, r := range rs {
			for i := range r.chain.steps {
				if j := r.chain.steps[i].join; j != nil && j.asOf {
					out[src] = true
				}
			}
		}
	}
	return out
}

// BindTables gives every join step the table it looks records up in, by
// id, and counter(step id), if counter is set, to count its lookups. Call
// it once, before the first NewBranches.
func (g *Graph) BindTables(tables map[string]*Table, counter func(step string) JoinCounter) error {
	for _, j := range g.joins {
		t, ok := tables[j.table]
		if !ok {
			return fmt.Errorf("%s: no table %q", j.path, j.table)
		}
		j.t = t
		if counter != nil {
			j.count = counter(j.id)
		}
	}
	return nil
}

// checkJoinScope checks one route's steps (and the aggregate it ends in,
// if any): an expression may read a join's name only after that join.
// names maps every join's name to the join's path; from, if set, names
// the route's source. Each problem is reported once per expression path
// (seen holds those reported).
func checkJoinScope(steps []step, agg *Aggregator, names map[string]string, from string, seen map[string]bool) []error {
	if len(names) == 0 {
		return nil
	}
	var errs []error
	joined := map[string]bool{}
	check := func(e *Expr) {
		if e == nil || seen[e.path] {
			return
		}
		for _, name := range e.reads {
			at, ok := names[name]
			if !ok || joined[name] {
				continue
			}
			seen[e.path] = true
			where := "after it"
			if from != "" {
				where = fmt.Sprintf("after it on the way from %s", from)
			}
			errs = append(errs, &CompileError{Path: e.path, Step: -1,
				Message: fmt.Sprintf("%s is the table value the join %s shows (as: %s), and this expression does not come %s: move it after the join (or, to read a field of the record by that name, give the join another as:)", name, at, name, where)})
			return
		}
	}
	for i := range steps {
		s := &steps[i]
		check(s.expr)
		for _, e := range s.fields {
			check(e)
		}
		if s.join != nil {
			joined[s.join.as] = true
		}
	}
	if agg != nil {
		for _, e := range agg.args {
			check(e)
		}
	}
	return errs
}

// joinNames maps the name of every join of steps to the join's path.
func joinNames(steps []step) map[string]string {
	names := map[string]string{}
	for i := range steps {
		if j := steps[i].join; j != nil {
			names[j.as] = j.path
		}
	}
	return names
}

// joinSteps are the graph's join steps as steps, for joinNames.
func (g *Graph) joinSteps() []step {
	out := make([]step, len(g.joins))
	for i, j := range g.joins {
		out[i] = step{kind: config.StepJoin, path: j.path, join: j}
	}
	return out
}
