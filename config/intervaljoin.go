package config

import (
	"slices"
	"strings"
)

// Interval joins. A join step with `stream:` instead of `table:` pairs the
// records of two streams whose keys match and whose event times are
// within bounds of each other (Flink's interval join). Its left stream is
// what the step reads (from:, or the step before it), its right stream
// the node `stream:` names; both are inputs of the step in the job graph,
// the right one last. The join keys both sides itself (key on the left,
// other_key on the right), so it needs no key_by before it, and, like an
// aggregate or a window, only sinks read what it emits.

// IntervalRight reports whether input node in of the interval join step
// at node n (of c's graph) is its right stream: the node `stream:` names.
func (g *Graph) IntervalRight(c *Config, n, in int) bool {
	nd := g.Nodes[n]
	if nd.Kind != NodeStep || !c.Steps[nd.Index].Join.Interval() {
		return false
	}
	i, ok := g.Lookup(c.Steps[nd.Index].Join.Stream)
	return ok && i == in
}

// intervalJoin checks the interval join step i at kpath (steps[i].join),
// node n of g (-1: a duplicate id), reading the sources upstream.
func (v *validator) intervalJoin(kpath string, i int, g *Graph, n int, upstream []int) {
	s := v.c.Steps[i]
	j := s.Join
	if j.Table != "" {
		v.fail(kpath+".table", "a join reads a table or a stream, this one names both: keep table (a lookup) or stream (an interval join)")
	}
	spath := kpath + ".stream"
	other, ok := g.Lookup(j.Stream)
	_, table := v.c.Table(j.Stream)
	switch {
	case !ok && table:
		v.fail(spath, "%q is a table: look records up in it with join: {table: %s, key: ..., as: ...}; stream: names a source or a step", j.Stream, j.Stream)
		return
	case !ok:
		var known []string
		for k, nd := range g.Nodes {
			if nd.Kind != NodeSink && (n < 0 || k < n) {
				known = append(known, nd.ID)
			}
		}
		v.fail(spath, "unknown stream %q%s", j.Stream, suggestion(j.Stream, known))
		return
	case n >= 0 && other == n:
		v.fail(spath, "a join cannot read itself")
		return
	case n >= 0 && other > n:
		v.fail(spath, "%q is %s, written after this step: a join reads only sources and the steps above it (move this step below it)", j.Stream, g.Nodes[other].Path)
		return
	}
	if n >= 0 {
		switch {
		case slices.Contains(s.From, j.Stream):
			v.fail(spath, "%q is also in this step's from: the left stream is from:, the right one stream:; a record of one stream joins the other's (to join a stream with itself, read it through two steps, e.g. two filters)", j.Stream)
		case s.From == nil && (i == 0 && g.Nodes[other].Kind == NodeSource || i > 0 && v.c.Steps[i-1].ID == j.Stream):
			v.fail(spath, "%q is also what this step reads by default (the step before it, or every source): name the left stream with from:", j.Stream)
		}
	}
	if strings.TrimSpace(j.Key) == "" {
		v.fail(kpath+".key", "required: an expression on the left stream's records (from:) whose value is matched with other_key's, e.g. order_id")
	}
	if strings.TrimSpace(j.OtherKey) == "" {
		v.fail(kpath+".other_key", "required: an expression on the records of stream %q whose value is matched with key's, e.g. order_id", j.Stream)
	}
	if w := j.Within; w == nil {
		v.fail(kpath+".within", "required: the bounds of the other record's event time around the record's, e.g. within: {before: 1h, after: 1h}")
	} else {
		v.millis(kpath+".within.before", w.Before)
		v.millis(kpath+".within.after", w.After)
	}
	v.joinAs(kpath+".as", j.As)
	v.enum(kpath+".how", "join type", string(j.How), joinHows...)
	for _, f := range []string{"time", "history"} {
		if v.written(kpath + "." + f) {
			v.fail(kpath+"."+f, "is a field of a table join (join: {table: ID, ...}); an interval join is in event time already, and keeps records for within")
		}
	}
	v.lateRecords(kpath, j.LateRecords, j.LateTopic)
	v.eventTimeOf(kpath, "an interval join matches records in event time", upstream)
	if n >= 0 {
		for _, o := range g.Nodes[n].Outputs {
			if sk := g.Nodes[o]; sk.Kind == NodeSink && Format(v.c.Sinks[sk.Index].Format).Registered() {
				v.fail(sk.Path+".format", "reads the interval join %s (id %q), whose results have no schema to derive yet: write json (or raw)", g.Nodes[n].Path, s.ID)
			}
		}
	}
	if v.c.Guarantee == AtMostOnce {
		v.fail(kpath, "an interval join emits when a checkpoint's watermark closes a record's interval, and guarantee: %s takes no checkpoints: use guarantee: %s or %s",
			AtMostOnce, AtLeastOnce, ExactlyOnce)
	}
}

// joinAs checks the name a join shows its match under.
func (v *validator) joinAs(path, as string) {
	switch {
	case as == "":
		v.fail(path, "required: the name the other record's value is written under, e.g. as: order")
	case strings.HasPrefix(as, "_"):
		v.fail(path, "%q starts with _, which names the record's metadata (_key, _timestamp, ...): choose another name", as)
	case !identifier(as):
		v.fail(path, "%q is not a name an expression can read: use letters, digits and _, not starting with a digit", as)
	case slices.Contains(exprWords, as):
		v.fail(path, "%q is a word of the expression language: choose another name", as)
	}
}

// intervalFieldsOnTable refuses the fields of an interval join on a table
// join (at kpath), which would otherwise be ignored.
func (v *validator) intervalFieldsOnTable(kpath string, j *Join) {
	for _, f := range []string{"other_key", "within", "late_records", "late_topic"} {
		if v.written(kpath + "." + f) {
			v.fail(kpath+"."+f, "is a field of an interval join (join: {stream: ID, ...}); a table join has table, key, as and how")
		}
	}
}
