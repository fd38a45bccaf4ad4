package engine

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/checkpoint/savepoint"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/metrics"
	"github.com/eoflow/pipeline/operator"
	"github.com/eoflow/pipeline/operator/keyed"
	"github.com/eoflow/pipeline/schema"
	"github.com/eoflow/pipeline/sink"
)

// plan is the compiled form of a job's configuration: what every task
// evaluates, shared read-only by all of them (each clones what it mutates).
//
// The job is a graph (config.Graph, compiled by operator.CompileGraph):
// records take routes from their source through stateless steps to
// targets. A target is a keyed operator (an aggregate or a window, fed by
// key group) or an output (a source or stateless step that sinks read,
// fed by partition); each worker runs one operator per target. A linear
// job (a file without from:) has one target, and every task does what it
// did before jobs were graphs.
type plan struct {
	cfg   *config.Config
	graph *operator.Graph
	// targets are the graph's targets, by index (messages carry it).
	targets []*target
	// keyed: some target is a keyed operator (the job has keyed state,
	// and in group mode a repartition topic).
	keyed bool
	// time is the sources' event time (nil: none has it).
	time *timePlan
	// sinks are every sink of the job, by index in config.Sinks.
	sinks  []keyed.Sink
	format map[string]config.Format // source topic -> value format
	// source is the index in config.Sources of each source topic's
	// source (its routes are that source's).
	source map[string]int
	// metrics counts dead letters (set by the Job; nil in plan-only uses).
	metrics *metrics.Metrics
	// deadLetterLog logs dead letters, rate-limited (set by the Job; nil
	// in plan-only uses).
	deadLetterLog *deadLetterLog
	// checkpointed describes the operators of operatorIDs, sorted by id,
	// for every checkpoint record: what a restart checks the
	// configuration against (savepoint.CheckRestart).
	checkpointed []checkpoint.OperatorDesc
	// shuffle is the keyed work's layout in group mode (nil: single
	// mode; set by the Job).
	shuffle *shuffle
	// schemas decode and encode the schema registry formats (nil: the
	// job uses none; set by the Job, schemas.go).
	schemas *schema.Set
	// carriedKeys are the repartition topics of joins by a key the
	// stream is not partitioned by (config.JoinRepartition): their
	// records are keyed by the join key and carry their own in a header,
	// which the router reads back (nil: none).
	carriedKeys map[string]bool
}

// target is one target of the graph, compiled.
type target struct {
	index int
	// id is the step's (or, for a sink copying a source, the source's)
	// id: a keyed operator's state is stored under it.
	id string
	// agg is a keyed target's aggregate (a window's values); nil for an
	// output.
	agg *operator.Aggregator
	// window is a window target's step (nil otherwise).
	window *keyed.WindowSpec
	// interval is an interval join target's step (nil otherwise).
	interval *operator.IntervalJoin
	// sinks are the sinks that write what the target emits.
	sinks keyed.Sinks
}

// keyed reports whether t is a keyed operator.
func (t *target) keyed() bool { return t.agg != nil || t.interval != nil }

// compile builds the plan, reporting expression problems at their place in
// the configuration file.
func compile(cfg *config.Config) (*plan, error) {
	p := &plan{cfg: cfg, format: map[string]config.Format{}, source: map[string]int{}}
	var problems config.Errors
	g, err := operator.CompileGraph(cfg)
	if err != nil {
		problems = append(problems, compileProblems(cfg, err)...)
	}
	tp, tprobs := compileTime(cfg)
	problems = append(problems, tprobs...)
	p.time = tp
	for _, r := range cfg.JoinRepartitioned() {
		if p.carriedKeys == nil {
			p.carriedKeys = map[string]bool{}
		}
		p.carriedKeys[r.Topic] = true
	}
	for i, s := range cfg.Sinks {
		spec := keyed.Sink{Topic: s.Topic, Format: s.Format, Upsert: s.Upsert, CarryKey: p.carriedKeys[s.Topic]}
		spec.CarryTime = spec.CarryKey && tp != nil && tp.joins[s.Topic] != nil
		if s.Key != "" {
			path := fmt.Sprintf("sinks[%d].key", i)
			e, err := operator.CompileExpr(path, s.Key)
			if err != nil {
				problems = append(problems, compileProblems(cfg, err)...)
			}
			spec.Key = e
		}
		p.sinks = append(p.sinks, spec)
	}
	for i, src := range cfg.Sources {
		for _, t := range src.Topics {
			p.format[t] = src.Format
			p.source[t] = i
		}
	}
	if len(problems) > 0 {
		return nil, problems
	}
	p.graph = g
	for i, gt := range g.Targets() {
		sinks := make(keyed.Sinks, 0, len(gt.Sinks))
		for _, s := range gt.Sinks {
			sinks = append(sinks, &p.sinks[s])
		}
		t := &target{index: i, id: gt.ID, agg: gt.Agg, interval: gt.Interval, sinks: sinks}
		if gt.Window != nil {
			t.window = keyed.CompileWindow(cfg, gt.Agg.ID(), gt.Window)
		}
		p.keyed = p.keyed || t.keyed()
		p.targets = append(p.targets, t)
	}
	ids := p.operatorIDs()
	for _, op := range savepoint.DescribeConfig(cfg).Checkpointed() {
		if slices.Contains(ids, op.ID) {
			p.checkpointed = append(p.checkpointed, op)
		}
	}
	return p, nil
}

// CheckExpressions compiles the expressions of cfg and returns their
// problems at their place in the file. Loading a job with
// config.WithCheck(engine.CheckExpressions) reports them with every other
// problem of the file, since cfg may have others: compiling needs no more
// than the steps and sinks as they were written.
func CheckExpressions(cfg *config.Config) config.Errors {
	_, err := compile(cfg)
	if err == nil {
		return nil
	}
	var problems config.Errors
	if errors.As(err, &problems) {
		return problems
	}
	return config.Errors{cfg.Errorf("", "%v", err)}
}

// compileProblems places each operator.CompileError in err at its field.
func compileProblems(cfg *config.Config, err error) config.Errors {
	var out config.Errors
	var joined interface{ Unwrap() []error }
	errs := []error{err}
	if errors.As(err, &joined) {
		errs = joined.Unwrap()
	}
	for _, e := range errs {
		var ce *operator.CompileError
		if errors.As(e, &ce) {
			msg := ce.Message
			if ce.Line > 0 {
				msg = fmt.Sprintf("%s (at %d:%d of the expression)", msg, ce.Line, ce.Column)
			}
			out = append(out, cfg.Errorf(ce.Path, "%s", msg))
			continue
		}
		out = append(out, cfg.Errorf("steps", "%v", e))
	}
	return out
}

// keyedTargets are the targets that are keyed operators, in target order.
func (p *plan) keyedTargets() []*target {
	var out []*target
	for _, t := range p.targets {
		if t.keyed() {
			out = append(out, t)
		}
	}
	return out
}

// operatorIDs are the stateful operators a checkpoint holds state for:
// every source (offsets) and every keyed operator.
func (p *plan) operatorIDs() []string {
	var ids []string
	for _, s := range p.cfg.Sources {
		ids = append(ids, s.ID)
	}
	for _, t := range p.keyedTargets() {
		ids = append(ids, t.id)
	}
	return ids
}

// windows are the window targets' steps.
func (p *plan) windows() []*keyed.WindowSpec {
	var out []*keyed.WindowSpec
	for _, t := range p.targets {
		if t.window != nil {
			out = append(out, t.window)
		}
	}
	return out
}

// lateTopics are the distinct topics late records go to (none when every
// window drops them).
func (p *plan) lateTopics() []string {
	var topics []string
	for _, w := range p.windows() {
		if w.LateTopic != "" && !slices.Contains(topics, w.LateTopic) {
			topics = append(topics, w.LateTopic)
		}
	}
	for _, t := range p.targets {
		if ij := t.interval; ij != nil && ij.LateTopic != "" && !slices.Contains(topics, ij.LateTopic) {
			topics = append(topics, ij.LateTopic)
		}
	}
	return topics
}

// recycle gives op's decoded value back for later records: nothing reads
// op any more.
func (p *plan) recycle(op *operator.Record) { p.graph.Recycle(op) }

// deadLetterTopics are the distinct dead-letter topics of the sinks: a bad
// record goes to each.
func (p *plan) deadLetterTopics() []string {
	var topics []string
	seen := map[string]bool{}
	for _, s := range p.cfg.Sinks {
		if !seen[s.DeadLetterTopic] {
			seen[s.DeadLetterTopic] = true
			topics = append(topics, s.DeadLetterTopic)
		}
	}
	return topics
}

// deadLetters builds the dead-letter messages of src for every sink.
func (p *plan) deadLetters(src *kgo.Record, rerr *operator.RecordError) []message {
	recs := p.deadLetterRecords(src, rerr)
	msgs := make([]message, len(recs))
	for i, dl := range recs {
		msgs[i] = message{kind: msgDeadLetter, rec: dl}
	}
	return msgs
}

// deadLetterRecords builds the dead-letter records of src for every sink,
// and counts and logs them.
func (p *plan) deadLetterRecords(src *kgo.Record, rerr *operator.RecordError) []*kgo.Record {
	if p.metrics != nil {
		p.metrics.DeadLettered(string(rerr.Code))
		p.metrics.OperatorDeadLetter(p.operatorOf(rerr.Step))
	}
	if p.deadLetterLog != nil {
		p.deadLetterLog.record(src, rerr)
	}
	var recs []*kgo.Record
	for _, topic := range p.deadLetterTopics() {
		dl := sink.DeadLetter(topic, src, string(rerr.Code), rerr.Step, rerr.Reason)
		if rerr.SchemaID != 0 {
			dl.Headers = append(dl.Headers, kgo.RecordHeader{Key: sink.HeaderSchemaID, Value: strconv.AppendInt(nil, int64(rerr.SchemaID), 10)})
		}
		recs = append(recs, dl)
	}
	return recs
}

// env is what the keyed operators need of the job: dead letters,
// recycling decoded inputs, metrics and the clock.
func (p *plan) env(now func() time.Time) *keyed.Env {
	e := &keyed.Env{DeadLetters: p.deadLetterRecords, Recycle: p.recycle, Now: now}
	if p.metrics != nil {
		e.Metrics = p.metrics
	}
	return e
}

// newRecord fills in checkpoint N's job-wide fields, and the savepoint
// the attempt's state came from.
func (a *attempt) newRecord(id checkpoint.ID, offsets []checkpoint.SourceOffset, st []checkpoint.StateSummary, et *checkpoint.EventTime) *checkpoint.Record {
	j := a.j
	rec := &checkpoint.Record{
		ID:                id,
		Job:               j.cfg.Name,
		ConfigFingerprint: j.cfg.Fingerprint(),
		KeyGroups:         j.cfg.Checkpoint.KeyGroups,
		OperatorIDs:       j.plan.operatorIDs(),
		Offsets:           offsets,
		CreatedUnixMilli:  j.now().UnixMilli(),
		Guarantee:         string(j.cfg.Guarantee),
		State:             st,
		Savepoint:         a.savepointID,
		Operators:         j.plan.checkpointed,
		EventTime:         et,
	}
	rec.Normalize()
	return rec
}
