package config

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The job graph. A job is a directed acyclic graph: sources at the top,
// steps in the middle, sinks at the bottom. Each step and sink names its
// inputs with `from:` (one id, or a list of ids that it reads merged);
// without `from:` a step reads the step written before it (the first step
// reads every source, merged) and a sink reads the last step (every source
// when there are no steps). So a file without any `from:` is the linear
// chain it always was.
//
// A step may only read sources and steps written above it, so the file's
// order is a topological order and the graph can have no cycle. Several
// steps or sinks may read one node (fan-out); a record a source decodes is
// shared by every branch that reads it.

// NodeKind says what a graph node is.
type NodeKind uint8

const (
	NodeSource NodeKind = 1 + iota
	NodeStep
	NodeSink
)

// Node is one source, step or sink of the job graph.
type Node struct {
	Kind NodeKind
	// Index is the node's place in Sources, Steps or Sinks.
	Index int
	// ID is the operator id (a sink's is "sink-<index>:<topic>", only for
	// printing: sinks hold no state).
	ID string
	// Path is the node's place in the file: "sources[0]", "steps[2]".
	Path string
	// Inputs and Outputs are indexes into Graph.Nodes, in file order.
	Inputs, Outputs []int
}

// Graph is the job graph of a Config: every source, then every step, then
// every sink, in file order, with the edges `from:` (or its default) makes.
// Edges naming unknown or later ids are left out; validation reports them.
type Graph struct {
	Nodes []Node
	// byID indexes sources and steps by id.
	byID map[string]int
	// interval: some step is an interval join (the graph is never linear:
	// its two inputs are not a merge).
	interval bool
}

// Graph builds the job graph of c.
func (c *Config) Graph() *Graph {
	g := &Graph{byID: map[string]int{}}
	add := func(kind NodeKind, index int, id, path string) int {
		n := len(g.Nodes)
		g.Nodes = append(g.Nodes, Node{Kind: kind, Index: index, ID: id, Path: path})
		if kind != NodeSink {
			if _, dup := g.byID[id]; !dup {
				g.byID[id] = n
			}
		}
		return n
	}
	var sources []int
	for i, s := range c.Sources {
		sources = append(sources, add(NodeSource, i, s.ID, fmt.Sprintf("sources[%d]", i)))
	}
	prev := sources
	for i, s := range c.Steps {
		n := add(NodeStep, i, s.ID, fmt.Sprintf("steps[%d]", i))
		in := prev
		if s.From != nil {
			in = g.resolve(s.From, n)
		}
		if j := s.Join; j.Interval() {
			g.interval = true
			// The other stream of an interval join is an input too: the
			// last one (IntervalInput says which).
			for _, o := range g.resolve([]string{j.Stream}, n) {
				if !slices.Contains(in, o) {
					in = append(slices.Clip(in), o)
				}
			}
		}
		g.link(in, n)
		prev = []int{n}
	}
	for i, s := range c.Sinks {
		n := add(NodeSink, i, fmt.Sprintf("sink-%d:%s", i, s.Topic), fmt.Sprintf("sinks[%d]", i))
		in := prev
		if s.From != nil {
			in = g.resolve(s.From, n)
		}
		g.link(in, n)
	}
	return g
}

// resolve is the nodes that ids name, each read by node n: those written
// above n only (an unknown or later id is validation's to report).
func (g *Graph) resolve(ids []string, n int) []int {
	var in []int
	for _, id := range ids {
		if i, ok := g.byID[id]; ok && i < n && !slices.Contains(in, i) {
			in = append(in, i)
		}
	}
	return in
}

func (g *Graph) link(from []int, to int) {
	for _, f := range from {
		g.Nodes[f].Outputs = append(g.Nodes[f].Outputs, to)
		g.Nodes[to].Inputs = append(g.Nodes[to].Inputs, f)
	}
}

// Lookup is the node of a source or step id.
func (g *Graph) Lookup(id string) (int, bool) {
	i, ok := g.byID[id]
	return i, ok
}

// Linear reports whether the graph is one chain: every step reads the one
// before it (the first every source), and every sink the last step (every
// source without steps). Linear graphs are the jobs a file without `from:`
// describes.
func (g *Graph) Linear() bool {
	if g.interval {
		return false
	}
	prev := []int(nil)
	for i, n := range g.Nodes {
		switch n.Kind {
		case NodeSource:
			prev = append(prev, i)
		case NodeStep, NodeSink:
			if !slices.Equal(n.Inputs, prev) {
				return false
			}
			if n.Kind == NodeStep {
				prev = []int{i}
			}
		}
	}
	return true
}

// Upstream is every node from which node n can be reached, n excluded, in
// file order.
func (g *Graph) Upstream(n int) []int {
	seen := make([]bool, len(g.Nodes))
	var walk func(int)
	walk = func(i int) {
		for _, in := range g.Nodes[i].Inputs {
			if !seen[in] {
				seen[in] = true
				walk(in)
			}
		}
	}
	walk(n)
	var out []int
	for i, s := range seen {
		if s {
			out = append(out, i)
		}
	}
	return out
}

// Paths calls fn with every path from a source to node n, as node indexes
// from the source to n (n included), until fn returns false. Paths share
// their slice: copy one to keep it.
func (g *Graph) Paths(n int, fn func(path []int) bool) {
	var rev []int
	var walk func(int) bool
	walk = func(i int) bool {
		rev = append(rev, i)
		defer func() { rev = rev[:len(rev)-1] }()
		if g.Nodes[i].Kind == NodeSource {
			path := slices.Clone(rev)
			slices.Reverse(path)
			return fn(path)
		}
		for _, in := range g.Nodes[i].Inputs {
			if !walk(in) {
				return false
			}
		}
		return true
	}
	walk(n)
}

// Mermaid writes the graph as a Mermaid flowchart, for the docs.
func (g *Graph) Mermaid(c *Config) string {
	var b strings.Builder
	b.WriteString("flowchart TD\n")
	for i, n := range g.Nodes {
		fmt.Fprintf(&b, "  n%d%s\n", i, mermaidShape(n, g.label(c, n)))
	}
	for i, n := range g.Nodes {
		for _, o := range n.Outputs {
			fmt.Fprintf(&b, "  n%d --> n%d\n", i, o)
		}
	}
	// Tables are not nodes of the graph (no step reads one): each is
	// drawn beside the joins that look records up in it.
	for ti, t := range c.Tables {
		fmt.Fprintf(&b, "  t%d%s\n", ti, mermaidShape(Node{Kind: NodeSource}, fmt.Sprintf("%s: table %s", t.ID, t.Topic)))
		for _, j := range g.joinsOf(c, t.ID) {
			fmt.Fprintf(&b, "  t%d -.-> n%d\n", ti, j)
		}
	}
	return b.String()
}

// joinsOf are the nodes of the join steps that read table id.
func (g *Graph) joinsOf(c *Config, id string) []int {
	var out []int
	for i, n := range g.Nodes {
		if n.Kind == NodeStep && c.Steps[n.Index].Join != nil && c.Steps[n.Index].Join.Table == id {
			out = append(out, i)
		}
	}
	return out
}

func mermaidShape(n Node, label string) string {
	label = strings.ReplaceAll(label, `"`, "#quot;")
	switch n.Kind {
	case NodeSource:
		return `[("` + label + `")]`
	case NodeSink:
		return `[/"` + label + `"/]`
	}
	return `["` + label + `"]`
}

// DOT writes the graph in Graphviz's DOT language.
func (g *Graph) DOT(c *Config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "digraph %q {\n  rankdir=TB;\n", c.Name)
	for i, n := range g.Nodes {
		shape := "box"
		switch n.Kind {
		case NodeSource:
			shape = "cylinder"
		case NodeSink:
			shape = "parallelogram"
		}
		fmt.Fprintf(&b, "  n%d [shape=%s, label=%q];\n", i, shape, g.label(c, n))
	}
	for i, n := range g.Nodes {
		for _, o := range n.Outputs {
			fmt.Fprintf(&b, "  n%d -> n%d;\n", i, o)
		}
	}
	for ti, t := range c.Tables {
		fmt.Fprintf(&b, "  t%d [shape=cylinder, style=dashed, label=%q];\n", ti, fmt.Sprintf("%s: table %s", t.ID, t.Topic))
		for _, j := range g.joinsOf(c, t.ID) {
			fmt.Fprintf(&b, "  t%d -> n%d [style=dashed];\n", ti, j)
		}
	}
	b.WriteString("}\n")
	return b.String()
}

// Text writes the graph as indented lines, one node a line with what it
// reads, for `pipeline validate`.
func (g *Graph) Text(c *Config) string {
	var b strings.Builder
	for _, t := range c.Tables {
		fmt.Fprintf(&b, "  %s: table %s (%s values, %s keys)\n", t.ID, t.Topic, t.Format, t.KeyFormat)
	}
	for _, n := range g.Nodes {
		fmt.Fprintf(&b, "  %s", g.label(c, n))
		if len(n.Inputs) > 0 {
			names := make([]string, len(n.Inputs))
			for i, in := range n.Inputs {
				names[i] = g.Nodes[in].ID
			}
			fmt.Fprintf(&b, "  <- %s", strings.Join(names, ", "))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// label names a node for people: its id and what it does.
func (g *Graph) label(c *Config, n Node) string {
	switch n.Kind {
	case NodeSource:
		s := c.Sources[n.Index]
		return fmt.Sprintf("%s: source %s", s.ID, strings.Join(s.Topics, ", "))
	case NodeSink:
		return fmt.Sprintf("sink %s", c.Sinks[n.Index].Topic)
	}
	s := c.Steps[n.Index]
	what := string(s.Kind())
	switch s.Kind() {
	case StepFilter:
		what += " " + s.Filter
	case StepKeyBy:
		what += " " + s.KeyBy
	case StepJoin:
		switch j := s.Join; {
		case j.Interval():
			var before, after time.Duration
			if j.Within != nil {
				before, after = j.Within.Before, j.Within.After
			}
			what = fmt.Sprintf("%s interval join with %s on %s = %s within -%v..+%v as %s", j.How, j.Stream, j.Key, j.OtherKey, before, after, j.As)
		case j != nil:
			what = fmt.Sprintf("%s join %s on %s as %s", j.How, j.Table, j.Key, j.As)
			for _, r := range c.joinRepartitionsNeeded() {
				if r.Step == n.Index {
					what += fmt.Sprintf(" (its input repartitioned by %s through topic %s)", j.Key, r.Topic)
				}
			}
		}
	case StepWindow:
		if s.Window != nil {
			what = s.Window.Kind() + " window"
		}
	}
	return s.ID + ": " + what
}
