package operator

import (
	"errors"
	"fmt"

	"github.com/eoflow/pipeline/config"
)

// Graph is a job's steps compiled as its job graph (config.Graph): the
// targets records are delivered to, and for each source the routes its
// records take to them.
//
// A target is a keyed operator (an aggregate or a window, whose inputs the
// runtime sends by key) or an output: a source or stateless step that
// sinks read, whose records are written as they are. A route is one path
// of the graph from a source to a target: the stateless steps on it, in
// order. A record is decoded once, however many routes its source has;
// each route then runs its steps on a copy of its own (Record.fork), so
// one branch's key_by or map does not show in another's. A merge (a step
// reading two inputs) is simply several routes through it.
//
// A linear job (a file without from:) is one Chain, exactly as before the
// graph: one route per source, through every step, to the one target.
type Graph struct {
	targets []Target
	// routes are by source index; each lists the routes of its records.
	routes [][]route
	// linear is the job's Chain when the graph is linear (nil otherwise).
	linear *Chain
	// need is what every route's expressions read of an input value
	// (see Chain.need); maps holds the recycled maps of all the routes.
	need *fieldSet
	maps *fieldMaps
	// inputs decode the topics read in a schema format (SetInputs).
	inputs Inputs
	// joins are the join steps, each once (BindTables binds them).
	joins []*joinStep
}

// Target is where a route delivers records.
type Target struct {
	// ID is the step's id (a source's, for a sink that copies a source).
	ID string
	// Path is where the node is in the file: "steps[3]", "sources[0]".
	Path string
	// Agg is a keyed target's aggregate (a window's values); nil for an
	// output.
	Agg *Aggregator
	// Window is a window target's step, nil otherwise.
	Window *config.Window
	// Interval is an interval join target's step, nil otherwise.
	Interval *IntervalJoin
	// Sinks are the indexes in config.Sinks of the sinks that read the
	// target.
	Sinks []int
}

// Keyed reports whether the target is a keyed operator.
func (t *Target) Keyed() bool { return t.Agg != nil || t.Interval != nil }

// route is the stateless steps of one path from a source to target.
type route struct {
	target int
	chain  *Chain
	// owns[k]: the route counts its step k's records, being the first of
	// its source's routes through its steps up to k (stepcount.go); nil
	// for a linear job's one route, which counts every step.
	owns []bool
}

// CompileGraph compiles cfg's steps as its graph. It reports every problem
// it finds, each a *CompileError, joined with errors.Join. cfg is a
// validated configuration: the graph's shape (ids, order, key_by before
// every keyed step) was checked when it was loaded.
func CompileGraph(cfg *config.Config) (*Graph, error) {
	cg := cfg.Graph()
	if cg.Linear() {
		return compileLinear(cfg, cg)
	}
	g := &Graph{maps: &fieldMaps{}}
	var errs []error
	// Each step once: routes share the compiled steps.
	steps := make([]*step, len(cfg.Steps))
	aggs := make([]*Aggregator, len(cfg.Steps))
	intervals := make([]*IntervalJoin, len(cfg.Steps))
	for i, s := range cfg.Steps {
		path := fmt.Sprintf("steps[%d]", i)
		kind := s.Kind()
		switch {
		case kind == config.StepJoin && s.Join.Interval():
			ij, ierrs := compileIntervalJoin(cfg, i, s)
			errs = append(errs, ierrs...)
			intervals[i] = ij
			continue
		}
		switch kind {
		case config.StepAggregate, config.StepWindow:
			agg, aerrs := compileAggregate(i, path+"."+string(kind), s, true)
			errs = append(errs, aerrs...)
			aggs[i] = agg
		default:
			st, serrs := compileStep(i, s)
			errs = append(errs, serrs...)
			steps[i] = st
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	for _, st := range steps {
		if st != nil && st.join != nil {
			g.joins = append(g.joins, st.join)
		}
	}
	// The targets: every keyed step, and every other node a sink reads.
	targetOf := map[int]int{} // graph node -> target
	for n, nd := range cg.Nodes {
		isTarget := nd.Kind == config.NodeStep && (aggs[nd.Index] != nil || intervals[nd.Index] != nil)
		var sinks []int
		for _, o := range nd.Outputs {
			if cg.Nodes[o].Kind == config.NodeSink {
				sinks = append(sinks, cg.Nodes[o].Index)
				isTarget = true
			}
		}
		if !isTarget {
			continue
		}
		t := Target{ID: nd.ID, Path: nd.Path, Sinks: sinks}
		if nd.Kind == config.NodeStep {
			t.Agg = aggs[nd.Index]
			t.Window = cfg.Steps[nd.Index].Window
			t.Interval = intervals[nd.Index]
		}
		targetOf[n] = len(g.targets)
		g.targets = append(g.targets, t)
	}
	// The routes: every path from a source to a target.
	g.routes = make([][]route, len(cfg.Sources))
	var exprs [][]*Expr // what each route reads of the input value
	names := joinNames(g.joinSteps())
	reported := map[string]bool{}
	for n := range cg.Nodes {
		t, ok := targetOf[n]
		if !ok {
			continue
		}
		cg.Paths(n, func(path []int) bool {
			src := cg.Nodes[path[0]].Index
			c := &Chain{maps: g.maps, keyed: g.targets[t].Keyed(), firstPath: cg.Nodes[path[0]].Path}
			c.dec.maps = g.maps
			var reads []*Expr
			for _, p := range path[1:] {
				nd := cg.Nodes[p]
				if nd.Kind != config.NodeStep || steps[nd.Index] == nil {
					continue // the target itself, when it is keyed
				}
				st := steps[nd.Index]
				c.steps = append(c.steps, *st)
				if !c.mapped {
					if st.expr != nil {
						reads = append(reads, st.expr)
					}
					reads = append(reads, st.fields...)
				}
				if st.kind == config.StepMap {
					c.mapped = true
				}
			}
			if ij := g.targets[t].Interval; ij != nil {
				// The key step: the join's key on its left stream, other_key
				// on the right (the input the path reaches it by).
				side := SideLeft
				if cg.IntervalRight(cfg, n, path[len(path)-2]) {
					side = SideRight
				}
				ks := ij.keyStep(side)
				c.steps = append(c.steps, ks)
				if !c.mapped {
					reads = append(reads, ks.expr)
				}
			}
			if agg := g.targets[t].Agg; agg != nil && !c.mapped {
				for _, e := range agg.args {
					if e != nil {
						reads = append(reads, e)
					}
				}
			}
			g.routes[src] = append(g.routes[src], route{target: t, chain: c})
			exprs = append(exprs, reads)
			from := fmt.Sprintf("source %q", cg.Nodes[path[0]].ID)
			errs = append(errs, checkJoinScope(c.steps, g.targets[t].Agg, names, from, reported)...)
			return true
		})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	var all []*Expr
	for _, r := range exprs {
		all = append(all, r...)
	}
	g.need = needOf(all)
	owners(g.routes)
	for _, rs := range g.routes {
		for _, r := range rs {
			r.chain.need = g.need
		}
	}
	g.intPaths()
	return g, nil
}

// intPaths gives the routes to each aggregate the integer path
// (intpath.go) when they all have the same one: a branch of a graph
// keyed by a field and folding integer fields then reads its record's
// bytes directly, as a linear job of that shape does, instead of the
// decoded value. (An aggregate folds by one path: routes reaching it by
// steps of different shapes leave it on the general path.)
func (g *Graph) intPaths() {
	for t := range g.targets {
		agg := g.targets[t].Agg
		if agg == nil || g.targets[t].Window != nil {
			continue
		}
		var ip *intPath
		same := true
		for _, rs := range g.routes {
			for _, r := range rs {
				if r.target != t {
					continue
				}
				p := compileIntPath(r.chain.steps, agg, nil)
				switch {
				case p == nil:
					same = false
				case ip == nil:
					ip = p
				case !ip.equal(p):
					same = false
				}
			}
		}
		if !same || ip == nil {
			continue
		}
		agg.ints = ip
		for _, rs := range g.routes {
			for _, r := range rs {
				if r.target == t {
					r.chain.ints = ip
				}
			}
		}
	}
}

// compileLinear is the graph of a linear job: its one Chain.
func compileLinear(cfg *config.Config, cg *config.Graph) (*Graph, error) {
	c, err := Compile(cfg.Steps)
	if err != nil {
		return nil, err
	}
	t := Target{Agg: c.agg, Window: c.window}
	if last := len(cg.Nodes) - len(cfg.Sinks) - 1; last >= 0 { // the last step, or the last source
		t.ID, t.Path = cg.Nodes[last].ID, cg.Nodes[last].Path
	}
	for i := range cfg.Sinks {
		t.Sinks = append(t.Sinks, i)
	}
	g := &Graph{targets: []Target{t}, linear: c, maps: c.maps, need: c.need}
	for i := range c.steps {
		if j := c.steps[i].join; j != nil {
			g.joins = append(g.joins, j)
		}
	}
	g.routes = make([][]route, len(cfg.Sources))
	for i := range g.routes {
		g.routes[i] = []route{{target: 0, chain: c}}
	}
	return g, nil
}

// compileStep compiles one stateless step (filter, map, key_by).
func compileStep(i int, s config.Step) (*step, []error) {
	kind := s.Kind()
	path := fmt.Sprintf("steps[%d].%s", i, kind)
	var errs []error
	fail := func(p, format string, args ...any) {
		errs = append(errs, &CompileError{Path: p, Step: i, Kind: kind, Message: fmt.Sprintf(format, args...)})
	}
	exprErr := func(ce *CompileError) {
		ce.Step, ce.Kind = i, kind
		errs = append(errs, ce)
	}
	st := &step{kind: kind, path: path, index: i}
	switch kind {
	case config.StepJoin:
		return compileJoin(i, s)
	case config.StepFilter, config.StepKeyBy:
		want := exprAny
		src := s.KeyBy
		if kind == config.StepFilter {
			want, src = exprBool, s.Filter
		}
		e, ce := compileExpr(path, src, want)
		if ce != nil {
			exprErr(ce)
			return nil, errs
		}
		st.expr = e
	case config.StepMap:
		if len(s.Map) == 0 {
			fail(path, "map needs at least one field")
		}
		seen := map[string]bool{}
		for _, f := range s.Map {
			fpath := path + "." + f.Name
			switch {
			case f.Name == "":
				fail(fpath, "field name is empty")
				continue
			case seen[f.Name]:
				fail(fpath, "duplicate field %q", f.Name)
				continue
			case metaBit(f.Name) != 0:
				fail(fpath, "%s is reserved for the record's metadata; choose another name", f.Name)
				continue
			}
			seen[f.Name] = true
			e, ce := compileExpr(fpath, f.Expr, exprAny)
			if ce != nil {
				exprErr(ce)
				continue
			}
			st.names = append(st.names, f.Name)
			st.fields = append(st.fields, e)
		}
	default:
		fail(fmt.Sprintf("steps[%d]", i), "step has no kind: set one of filter, map, key_by, join, aggregate, window")
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return st, nil
}

// needOf is the fields exprs read of an input value, each expression
// marked as covered by them (see Chain.inputFields).
func needOf(exprs []*Expr) *fieldSet {
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
		need.slots = nil
	}
	return need
}

// SetInputs tells every route how to decode the records of topics read in
// a schema format, with a key format or an envelope (Chain.SetInputs).
// Call it before the first NewBranches.
func (g *Graph) SetInputs(in Inputs) {
	g.inputs = in
	seen := map[*Chain]bool{}
	for _, rs := range g.routes {
		for _, r := range rs {
			if !seen[r.chain] {
				seen[r.chain] = true
				r.chain.SetInputs(in)
			}
		}
	}
}

// Targets are the graph's targets, by index.
func (g *Graph) Targets() []Target { return g.targets }

// Linear is the job's one Chain when its graph is linear (a file without
// from:), nil otherwise.
func (g *Graph) Linear() *Chain { return g.linear }

// Routes reports how many routes the records of source (its index in
// config.Sources) take.
func (g *Graph) Routes(source int) int { return len(g.routes[source]) }

// Records is the most records Branches.Process takes from newRecord for
// one record of source, besides the record itself: a copy per route but
// one, and one more per route that tries the integer path (a copy it
// gives back when the record is not of its shape).
func (g *Graph) Records(source int) int {
	n := len(g.routes[source]) - 1
	for _, r := range g.routes[source] {
		if r.chain.ints != nil {
			n++
		}
	}
	return max(n, 0)
}

// Branches evaluates the graph's routes for one goroutine (it reuses a VM
// and a decoder: not safe for concurrent use; each goroutine makes its
// own with NewBranches).
type Branches struct {
	g      *Graph
	routes [][]route // clones of g's route chains, by source
	// general counts, by source, the routes that do not read by the
	// integer path.
	general []int
	dec     decoder
	// also are expressions evaluated on records besides the routes' (a
	// sink's key, a source's event time), for AlsoRead.
	need *fieldSet
	// tallied are the routes whose chains count their steps' records,
	// each chain once (a linear job's sources share one).
	tallied []route
}

// NewBranches is an evaluator of g's routes with a VM of its own.
func (g *Graph) NewBranches() *Branches {
	b := &Branches{g: g, need: g.need, routes: make([][]route, len(g.routes)), general: make([]int, len(g.routes))}
	b.dec.maps, b.dec.inputs = g.maps, g.inputs
	// One clone per route chain shared by several sources: routes of a
	// linear job all share the job's Chain.
	clones := map[*Chain]*Chain{}
	for s, rs := range g.routes {
		for _, r := range rs {
			c, ok := clones[r.chain]
			if !ok {
				c = r.chain.Clone()
				clones[r.chain] = c
				b.tallied = append(b.tallied, route{chain: c, owns: r.owns})
			}
			b.routes[s] = append(b.routes[s], route{target: r.target, chain: c, owns: r.owns})
			if c.ints == nil {
				b.general[s]++
			}
		}
		if len(rs) > 64 && b.general[s] == 0 {
			// More routes than Process's mask of them holds: the decoded
			// way, where each reads by its path from the decoding.
			b.general[s] = 1
		}
	}
	return b
}

// AlsoRead adds the fields exprs read of an input value to those decoded
// once for all routes (a sink key, an event-time expression).
func (b *Branches) AlsoRead(exprs ...*Expr) {
	if c := b.g.linear; c != nil {
		for _, rs := range b.routes {
			for _, r := range rs {
				r.chain.AlsoRead(exprs...)
			}
		}
		return
	}
	if b.need == nil {
		return
	}
	var names [][]string
	for _, e := range exprs {
		if e.env {
			b.need = nil
			b.setNeed()
			return
		}
		names = append(names, e.reads)
	}
	slots := b.need.slots != nil && onlyFields(exprs)
	b.need = newFieldSet(b.need, names...)
	if !slots {
		b.need.slots = nil
	}
	b.setNeed()
}

func (b *Branches) setNeed() {
	for _, rs := range b.routes {
		for _, r := range rs {
			r.chain.need = b.need
		}
	}
}

// Linear is the evaluator's Chain for a linear job (nil otherwise): its
// records take one route, and the caller may run it directly.
func (b *Branches) Linear() *Chain {
	if b.g.linear == nil || len(b.routes) == 0 {
		return nil
	}
	return b.routes[0][0].chain
}

// Process runs the routes of source's records on r. It decodes r once
// (the error, a decoding failure of every route, is returned and nothing
// else is called), then for each route runs the route's steps on a record
// of its own: a copy of r, in memory from newRecord, for every route but
// the last, which takes r itself. For each route whose steps let its
// record through, or failed on it, it calls out with the route's index
// among source's routes, its target, the record, and the step's error
// (nil when it passed). A record passed with a nil error is the caller's
// from then on; one a filter dropped, or passed with an error, is done
// with here (out must not keep it).
func (b *Branches) Process(source int, r *Record, newRecord func() *Record, out func(route, target int, r *Record, err *RecordError)) *RecordError {
	rs := b.routes[source]
	if len(rs) == 1 && b.g.linear != nil {
		c := rs[0].chain
		keep, err := c.Process(r)
		switch {
		case err != nil:
			out(0, rs[0].target, r, err)
			c.Recycle(r)
		case keep:
			out(0, rs[0].target, r, nil)
		default:
			c.Recycle(r)
		}
		return nil
	}
	if len(rs) == 0 {
		return nil
	}
	if b.general[source] > 0 {
		// One decoding for every route: the routes of the integer path
		// read their key and integers from it.
		if err := r.decodeFields(&b.dec, rs[0].chain.firstPath, b.need); err != nil {
			return err
		}
		for i, rt := range rs {
			rec := r
			if i < len(rs)-1 {
				rec = newRecord()
				r.fork(rec)
			}
			if rt.chain.ints != nil && rt.chain.ints.readDecoded(rec) {
				rt.chain.tally.count(len(rt.chain.steps), false)
				out(i, rt.target, rec, nil)
				continue
			}
			b.general1(i, rt, rec, out)
		}
		return nil
	}
	// Every route reads by the integer path: each reads the record's
	// bytes, and none decodes it. A record not of a route's shape goes
	// that route's general way, after one decoding for all such routes
	// (which explains the errors, once).
	var failed uint64 // bit i: route i did not take the record by its path
	input := *r       // r before any route read it
	last := len(rs) - 1
	for i, rt := range rs {
		rec := r
		if i != last || failed != 0 {
			rec = newRecord()
			*rec = input
		}
		if rt.chain.readInts(rec) {
			rt.chain.tally.count(len(rt.chain.steps), false)
			out(i, rt.target, rec, nil)
			continue
		}
		if rec == r {
			*r = input
		} else {
			rt.chain.Recycle(rec)
		}
		failed |= 1 << i
	}
	if failed == 0 {
		return nil
	}
	if err := r.decodeFields(&b.dec, rs[0].chain.firstPath, b.need); err != nil {
		return err
	}
	lastFailed := last
	for failed&(1<<lastFailed) == 0 {
		lastFailed--
	}
	for i, rt := range rs {
		if failed&(1<<i) == 0 {
			continue
		}
		rec := r
		if i < lastFailed {
			rec = newRecord()
			r.fork(rec)
		}
		b.general1(i, rt, rec, out)
	}
	return nil
}

// general1 runs route i's steps on rec, decoded, and says what came of
// it (see Process).
func (b *Branches) general1(i int, rt route, rec *Record, out func(route, target int, r *Record, err *RecordError)) {
	keep, err := rt.chain.Process(rec)
	switch {
	case err != nil:
		out(i, rt.target, rec, err)
		rt.chain.Recycle(rec)
	case keep:
		out(i, rt.target, rec, nil)
	default:
		rt.chain.Recycle(rec)
	}
}

// ProcessRoute runs one route of source's records on r (decoding it
// first), for a record that an earlier evaluation already sent down that
// route (group mode's keyed side, reading what the source side shuffled):
// the route's target, and whether the record came through, or the error.
// A record that did not come through is recycled here.
func (b *Branches) ProcessRoute(source, route int, r *Record) (target int, keep bool, err *RecordError) {
	rs := b.routes[source]
	if route < 0 || route >= len(rs) {
		return 0, false, &RecordError{Step: "route", Code: CodeDecode, Reason: fmt.Sprintf("no route %d from source %d: the job has %d", route, source, len(rs))}
	}
	rt := rs[route]
	if b.g.linear == nil {
		if err := r.decodeFields(&b.dec, rt.chain.firstPath, b.need); err != nil {
			return rt.target, false, err
		}
	}
	// Uncounted: the source side counted the record's steps.
	keep, _, err = rt.chain.process(r)
	if err != nil || !keep {
		rt.chain.Recycle(r)
	}
	return rt.target, keep, err
}

// EventTime evaluates e, a source's event-time expression, on r, decoding
// r first as Process would.
func (b *Branches) EventTime(source int, r *Record, e *Expr) (int64, *RecordError) {
	rs := b.routes[source]
	if len(rs) == 0 {
		return 0, &RecordError{Step: e.path, Code: CodeEval, Reason: "the source has no route"}
	}
	c := rs[0].chain
	if b.g.linear == nil {
		if err := r.decodeFields(&b.dec, c.firstPath, b.need); err != nil {
			return 0, err
		}
	}
	return c.EventTime(r, e)
}

// Recycle gives r's decoded value back for later records (Chain.Recycle).
func (b *Branches) Recycle(r *Record) { b.g.Recycle(r) }

// Recycle gives r's decoded value back for later records (Chain.Recycle):
// safe from any goroutine, as Chain.Recycle is.
func (g *Graph) Recycle(r *Record) { recycle(g.maps, r) }

// fork makes dst a copy of r, which is decoded and has been through no
// step: the same input and decoded value. The decoded map, if any, is
// shared by both, read only: the workers of different branches read it at
// once, a meta variable an expression reads makes a copy of it first
// (setMeta), a map step replaces it, and the last copy recycled recycles
// it (Record.release). The decoded values themselves are shared too:
// nothing changes them.
func (r *Record) fork(dst *Record) {
	if r.fields != nil {
		if r.share == nil {
			r.share = &fieldShare{}
			r.share.holders.Store(1)
		}
		r.share.holders.Add(1)
	}
	*dst = *r
}
