package savepoint

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/config"
)

// Descriptor is what a configuration says about its operators, in the
// terms a savepoint records: the input of CheckRestore, and where the
// runtime takes Meta and the aggregates' AggregateDesc from when it writes
// a savepoint. DescribeConfig builds it; it holds no expressions compiled,
// so it works for `validate` as well as for `run`.
type Descriptor struct {
	Job         string
	Fingerprint string
	KeyGroups   int
	Guarantee   string
	// Operators are every source and step of the configuration, sources
	// first, in configuration order.
	Operators []OperatorDesc
	// Tables are the configuration's tables, in configuration order.
	Tables []TableDesc
}

// OperatorDesc is one source or step.
type OperatorDesc struct {
	ID string
	// Kind is KindSource, KindAggregate, or the step kind of a stateless
	// step ("filter", "map", "key_by").
	Kind Kind
	// Path is where the configuration defines it, e.g. "steps[2]".
	Path string
	// Topics (sources) are the topics it reads.
	Topics []string
	// EventTime (sources) says the source has event_time.
	EventTime bool
	// Aggregate (aggregates) describes its state.
	Aggregate *AggregateDesc
}

// DescribeConfig describes cfg (loaded, so ids have their defaults). An
// aggregate's key expression is the key_by of the last key_by step before
// it: that is what computes the group keys its state is stored under.
func DescribeConfig(cfg *config.Config) *Descriptor {
	// The job the engine runs: a join's repartition by its key is a
	// source (and a sink) of its own, whose offsets a savepoint holds
	// (config.WithJoinRepartitions; the same configuration when none).
	cfg = cfg.WithJoinRepartitions()
	d := &Descriptor{
		Job:         cfg.Name,
		Fingerprint: cfg.Fingerprint(),
		KeyGroups:   cfg.Checkpoint.KeyGroups,
		Guarantee:   string(cfg.Guarantee),
	}
	for i, s := range cfg.Sources {
		d.Operators = append(d.Operators, OperatorDesc{
			ID: s.ID, Kind: KindSource, Path: fmt.Sprintf("sources[%d]", i),
			Topics:    slices.Compact(slices.Sorted(slices.Values(s.Topics))),
			EventTime: s.EventTime != nil,
		})
	}
	for _, t := range cfg.Tables {
		d.Tables = append(d.Tables, TableDesc{ID: t.ID, Topic: t.Topic})
	}
	keyBy := ""
	g := cfg.Graph()
	for i, s := range cfg.Steps {
		op := OperatorDesc{ID: s.ID, Kind: Kind(s.Kind()), Path: fmt.Sprintf("steps[%d]", i)}
		if s.Kind() == config.StepAggregate || s.Kind() == config.StepWindow {
			if !g.Linear() {
				keyBy = graphKeyBy(cfg, g, op.Path)
			}
		}
		switch s.Kind() {
		case config.StepKeyBy:
			keyBy = strings.TrimSpace(s.KeyBy)
		case config.StepAggregate:
			a := &AggregateDesc{KeyBy: keyBy}
			for _, v := range s.Aggregate.Values {
				a.Values = append(a.Values, Value{Name: v.Name, Func: string(v.Func), Arg: strings.TrimSpace(v.Arg)})
			}
			op.Aggregate = a
		case config.StepWindow:
			a := &AggregateDesc{KeyBy: keyBy, Window: configWindow(s.Window)}
			for _, v := range s.Window.Values {
				a.Values = append(a.Values, Value{Name: v.Name, Func: string(v.Func), Arg: strings.TrimSpace(v.Arg)})
			}
			op.Aggregate = a
		case config.StepJoin:
			if s.Join.Interval() {
				op.Kind, op.Aggregate = KindAggregate, intervalJoinDesc(s.Join)
			}
		}
		d.Operators = append(d.Operators, op)
	}
	return d
}

// graphKeyBy is what computes the group keys of the keyed step at path in
// a job graph: the nearest key_by on each path to it, or, when its
// inputs are keyed by different expressions, all of them, sorted and
// joined by " | ".
func graphKeyBy(cfg *config.Config, g *config.Graph, path string) string {
	n := slices.IndexFunc(g.Nodes, func(nd config.Node) bool { return nd.Path == path })
	if n < 0 {
		return ""
	}
	var found []string
	seen := make([]bool, len(g.Nodes))
	var walk func(int)
	walk = func(i int) {
		for _, in := range g.Nodes[i].Inputs {
			if seen[in] {
				continue
			}
			seen[in] = true
			nd := g.Nodes[in]
			if nd.Kind == config.NodeStep && cfg.Steps[nd.Index].Kind() == config.StepKeyBy {
				found = append(found, strings.TrimSpace(cfg.Steps[nd.Index].KeyBy))
				continue
			}
			walk(in)
		}
	}
	walk(n)
	slices.Sort(found)
	return strings.Join(slices.Compact(found), " | ")
}

// Checkpointed describes the stateful operators (sources and aggregates)
// as a checkpoint record carries them (checkpoint.Record.Operators),
// sorted by id: what CheckRestart compares a later configuration with.
func (d *Descriptor) Checkpointed() []checkpoint.OperatorDesc {
	var out []checkpoint.OperatorDesc
	for _, op := range d.Operators {
		switch op.Kind {
		case KindSource:
			out = append(out, checkpoint.OperatorDesc{ID: op.ID, Kind: checkpoint.KindSource, Topics: op.Topics})
		case KindAggregate, KindWindow:
			desc := checkpoint.OperatorDesc{ID: op.ID, Kind: checkpoint.KindAggregate, KeyBy: op.Aggregate.KeyBy}
			if op.Kind == KindWindow {
				desc.Kind, desc.Window = checkpoint.KindWindow, op.Aggregate.Window.checkpointDesc()
			}
			for _, v := range op.Aggregate.Values {
				desc.Values = append(desc.Values, checkpoint.AggregateValue{Name: v.Name, Func: v.Func, Arg: v.Arg})
			}
			out = append(out, desc)
		}
	}
	slices.SortFunc(out, func(a, b checkpoint.OperatorDesc) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// Operator returns the source or step with id, or nil.
func (d *Descriptor) Operator(id string) *OperatorDesc {
	for i := range d.Operators {
		if d.Operators[i].ID == id {
			return &d.Operators[i]
		}
	}
	return nil
}

// Aggregates are the operators with keyed state (aggregates and windows),
// in configuration order.
func (d *Descriptor) Aggregates() []OperatorDesc {
	var out []OperatorDesc
	for _, op := range d.Operators {
		if stateful(op.Kind) {
			out = append(out, op)
		}
	}
	return out
}

// sourceOf returns the source that reads topic, or nil.
func (d *Descriptor) sourceOf(topic string) *OperatorDesc {
	for i := range d.Operators {
		if op := &d.Operators[i]; op.Kind == KindSource && slices.Contains(op.Topics, topic) {
			return op
		}
	}
	return nil
}

// Meta is the Meta of a savepoint of this job holding checkpoint id.
func (d *Descriptor) Meta(id checkpoint.ID, created time.Time) Meta {
	return Meta{
		Job: d.Job, CheckpointID: id, Created: created,
		ConfigFingerprint: d.Fingerprint, KeyGroups: d.KeyGroups, Guarantee: d.Guarantee,
	}
}

// SourceOffsets groups a checkpoint's offsets (checkpoint.Record.Offsets,
// which do not say which source read them) by the source that reads each
// topic, for Writer.Source. Every source of the configuration gets an
// entry; an offset of a topic no source reads is an error.
func (d *Descriptor) SourceOffsets(offsets []checkpoint.SourceOffset) (map[string][]checkpoint.SourceOffset, error) {
	out := map[string][]checkpoint.SourceOffset{}
	for _, op := range d.Operators {
		if op.Kind == KindSource {
			out[op.ID] = nil
		}
	}
	var unknown []string
	for _, o := range offsets {
		src := d.sourceOf(o.Topic)
		if src == nil {
			if !slices.Contains(unknown, o.Topic) {
				unknown = append(unknown, o.Topic)
			}
			continue
		}
		out[src.ID] = append(out[src.ID], o)
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("savepoint: the checkpoint has offsets of topics %s that no source of the configuration reads", quoteList(unknown))
	}
	for _, offs := range out {
		slices.SortFunc(offs, checkpoint.CompareOffsets)
	}
	return out, nil
}

// quoteList renders ids as `"a", "b" and "c"`.
func quoteList(ids []string) string {
	q := make([]string, len(ids))
	for i, id := range ids {
		q[i] = fmt.Sprintf("%q", id)
	}
	switch len(q) {
	case 0:
		return ""
	case 1:
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " and " + q[len(q)-1]
}

// configWindow is the shape of a window step.
func configWindow(w *config.Window) *WindowDesc {
	switch {
	case w.Tumbling > 0:
		return &WindowDesc{Kind: "tumbling", SizeMs: w.Tumbling.Milliseconds()}
	case w.Hopping != nil:
		return &WindowDesc{Kind: "hopping", SizeMs: w.Hopping.Size.Milliseconds(), AdvanceMs: w.Hopping.Advance.Milliseconds()}
	case w.Session != nil:
		return &WindowDesc{Kind: "session", GapMs: w.Session.Gap.Milliseconds()}
	}
	return &WindowDesc{}
}
