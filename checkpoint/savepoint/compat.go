package savepoint

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/eoflow/pipeline/checkpoint"
)

// RestoreOptions are the user's answers to what a restore may change
// (the flags of `pipeline run --from-savepoint`).
type RestoreOptions struct {
	// AllowDroppedState lets state of the savepoint that no operator of
	// the configuration takes be dropped (--allow-dropped-state; Flink's
	// --allowNonRestoredState): aggregates whose id is gone or names
	// another kind of step now, and topics no source reads any more.
	AllowDroppedState bool
	// RemapTopics renames the savepoint's topics, old -> new, to move a
	// job to other topics or another cluster (--remap-topic old=new).
	RemapTopics map[string]string
	// Partitions is the partition count of each topic the configuration
	// reads, as the target cluster reports it; a topic missing from it
	// does not exist there. nil skips the partition checks (`validate`,
	// which has no broker).
	Partitions map[string]int
}

// RestorePlan is what a compatible restore does. Log Notes; hand Offsets
// to the sources and Restore to Reader.Restore.
type RestorePlan struct {
	// Offsets are where the partitions of the savepoint's topics resume,
	// under their new names, sorted by topic then partition. Topics not
	// here (NewTopics) start at their source's start position.
	Offsets []checkpoint.SourceOffset
	// Topics are the savepoint's topics whose offsets carry over.
	Topics []TopicMapping
	// Restore are the aggregates whose state is restored.
	Restore []string
	// Empty are the configuration's aggregates without state in the
	// savepoint: they start empty.
	Empty []string
	// NewTopics are topics the configuration reads that have no offsets in
	// the savepoint: they start at their source's start position.
	NewTopics []string
	// Dropped are the savepoint's aggregates whose state is not restored,
	// and DroppedTopics its topics whose offsets are not (both only with
	// AllowDroppedState).
	Dropped       []string
	DroppedTopics []string
	// Tables are where the configuration's tables resume (under their
	// topics' new names): the savepoint's position of each table whose id
	// it has, read from the same topic (after RemapTopics). A job started
	// from the savepoint reads each table to its end, at or past this.
	Tables []checkpoint.TableOffsets
	// Notes say, one line each, what differs but is allowed: for the log.
	Notes []string
}

// TopicMapping is one savepoint topic and the topic it resumes as.
type TopicMapping struct {
	From, To   string
	Partitions int
}

// Problem is one reason a savepoint cannot be restored: What differs, and
// how to Fix it.
type Problem struct {
	What string
	Fix  string
}

// IncompatibleError lists every Problem at once, so a user fixes them in
// one round. It matches ErrIncompatible with errors.Is.
type IncompatibleError struct {
	Job          string // of the savepoint
	CheckpointID checkpoint.ID
	Problems     []Problem
	// Restart: the refusal is of a plain restart from the job's own
	// checkpoint CheckpointID (CheckRestart), not of a savepoint. It then
	// matches checkpoint.ErrIncompatible instead of ErrIncompatible.
	Restart bool
}

// RestartFix is how to make a change that a plain restart refuses: the
// job's own checkpoints allow no flags.
const RestartFix = "a restart from the job's own checkpoints cannot drop state or remap topics: put the configuration back; " +
	"or stop the job running it with a savepoint (pipeline savepoint create --stop DIR, or run --stop-with-savepoint DIR) and start the changed job from that savepoint " +
	"(run --from-savepoint DIR, with the flag a fix above names); or start the changed job under a new name (name:), without state"

func (e *IncompatibleError) Error() string {
	var b strings.Builder
	if e.Restart {
		fmt.Fprintf(&b, "%v (checkpoint %d of job %q, restarting):", checkpoint.ErrIncompatible, e.CheckpointID, e.Job)
	} else {
		fmt.Fprintf(&b, "%v (savepoint of job %q at checkpoint %d):", ErrIncompatible, e.Job, e.CheckpointID)
	}
	for i, p := range e.Problems {
		fmt.Fprintf(&b, "\n  - %s", p.What)
		// Consecutive problems of one operator share their fix.
		if p.Fix != "" && (i+1 == len(e.Problems) || e.Problems[i+1].Fix != p.Fix) {
			fmt.Fprintf(&b, "\n    fix: %s", p.Fix)
		}
	}
	if e.Restart {
		fmt.Fprintf(&b, "\n  %s", RestartFix)
	}
	return b.String()
}

// Is makes errors.Is(err, ErrIncompatible) true, or, for a restart,
// errors.Is(err, checkpoint.ErrIncompatible).
func (e *IncompatibleError) Is(target error) bool {
	if e.Restart {
		return target == checkpoint.ErrIncompatible
	}
	return target == ErrIncompatible
}

// The flags the messages name; cmd/pipeline must spell them the same.
const (
	FlagAllowDroppedState = "--allow-dropped-state"
	FlagRemapTopic        = "--remap-topic"
)

// CheckRestore decides whether a job configured as d can start from the
// savepoint m, and how. The rules, each checked so that every problem is
// reported at once:
//
//  1. The key-group count must be equal: a key's group is hash(key) mod
//     the count, so another count puts every key in the wrong group. The
//     number of workers may change freely.
//  2. State maps to operators by id. An aggregate or window of the
//     savepoint whose id the configuration does not have, or gives to
//     another kind of step (an aggregate that became a window too), is
//     refused unless AllowDroppedState. An aggregate or window of the
//     configuration that the savepoint does not have starts empty.
//  3. An aggregate restored must have the same key_by expression text and
//     the same values (names, functions and arguments): its state is one
//     encoded accumulator per value per group key, each under its value's
//     name, so values may be reordered but not renamed, added or removed.
//     A window also keeps its shape (kind, size, advance, gap): its state
//     holds its open windows by their start and end. Its allowed_lateness
//     and its sources' max_out_of_orderness may change (neither is stored).
//  4. Offsets belong to partitions, not to sources: a savepoint topic
//     (after RemapTopics) resumes wherever the configuration reads it, so
//     a source may be renamed, split or merged. A savepoint topic nobody
//     reads is refused unless AllowDroppedState; with Partitions, a topic
//     must exist with the same partition count. Every key of RemapTopics
//     must be a savepoint topic, and no two topics may end up with one
//     name. A topic the savepoint has no offsets for starts at its
//     source's start position.
//
// Differences that do not stop a restore (job name, fingerprint,
// guarantee, dropped state, event time that only one side has) are in
// RestorePlan.Notes. A refusal is an
// *IncompatibleError.
func CheckRestore(m *Manifest, d *Descriptor, opts RestoreOptions) (*RestorePlan, error) {
	return check(&checker{m: m, d: d, opts: opts, plan: &RestorePlan{}, from: "savepoint"})
}

// CheckRestart decides, with the rules of CheckRestore, whether a job
// configured as d can restart from its own checkpoint rec: a plain
// restart must not read state as something it is not any more than a
// restore from a savepoint may. A restart has no flags, so what a
// savepoint restore allows only with one is refused (RestartFix says what
// to do instead), and partition counts are not compared: partitions added
// to a topic start at their source's start position. rec must describe its
// operators (rec.Operators, format v3); an older record cannot be checked,
// which is an error wrapping ErrUndescribed. A refusal is an
// *IncompatibleError with Restart set.
func CheckRestart(rec *checkpoint.Record, d *Descriptor) (*RestorePlan, error) {
	if len(rec.Operators) == 0 {
		return nil, fmt.Errorf("checkpoint %d: %w", rec.ID, ErrUndescribed)
	}
	return check(&checker{m: manifestOf(rec), d: d, plan: &RestorePlan{}, from: "checkpoint", restart: true})
}

// ErrUndescribed: a checkpoint record written before format v3 does not
// say what its state means, so CheckRestart cannot compare it.
var ErrUndescribed = errors.New("the checkpoint record does not describe its operators (written by an older build)")

// manifestOf is the manifest a savepoint of checkpoint rec would have,
// without its files: what the rules compare.
func manifestOf(rec *checkpoint.Record) *Manifest {
	m := &Manifest{
		Job: rec.Job, CheckpointID: rec.ID, ConfigFingerprint: rec.ConfigFingerprint,
		KeyGroups: rec.KeyGroups, Guarantee: rec.Guarantee,
	}
	for _, desc := range rec.Operators {
		op := Operator{ID: desc.ID}
		switch desc.Kind {
		case checkpoint.KindSource:
			op.Kind = KindSource
			for _, o := range rec.Offsets {
				if slices.Contains(desc.Topics, o.Topic) {
					op.Offsets = append(op.Offsets, o)
				}
			}
		case checkpoint.KindAggregate, checkpoint.KindWindow:
			op.Kind = KindAggregate
			a := &AggregateDesc{KeyBy: desc.KeyBy}
			if desc.Kind == checkpoint.KindWindow {
				op.Kind, a.Window = KindWindow, windowDescOf(desc.Window)
			}
			for _, v := range desc.Values {
				a.Values = append(a.Values, Value{Name: v.Name, Func: v.Func, Arg: v.Arg})
			}
			op.Aggregate = a
			for _, st := range rec.State {
				if st.Operator == desc.ID {
					op.Keys, op.Bytes = st.Keys, st.Bytes
				}
			}
		}
		m.Operators = append(m.Operators, op)
	}
	m.EventTime = EventTimeOf(rec.EventTime)
	return m
}

func check(c *checker) (*RestorePlan, error) {
	c.keyGroups()
	c.operators()
	c.topics()
	c.notes()
	c.tables()
	if len(c.problems) > 0 {
		return nil, &IncompatibleError{Job: c.m.Job, CheckpointID: c.m.CheckpointID, Problems: c.problems, Restart: c.restart}
	}
	return c.plan, nil
}

type checker struct {
	m        *Manifest
	d        *Descriptor
	opts     RestoreOptions
	plan     *RestorePlan
	problems []Problem
	// from names what the state comes from in messages: "savepoint" or
	// "checkpoint" (restart: a plain restart, CheckRestart).
	from    string
	restart bool
	// reordered are notes of aggregates whose values were reordered.
	reordered []string
	// droppedKinds are the kinds of plan.Dropped, in its order.
	droppedKinds []Kind
}

func (c *checker) fail(fix, format string, args ...any) {
	c.problems = append(c.problems, Problem{What: fmt.Sprintf(format, args...), Fix: fix})
}

func (c *checker) keyGroups() {
	if c.m.KeyGroups == c.d.KeyGroups {
		return
	}
	c.fail(fmt.Sprintf("set checkpoint.key_groups: %d. The count cannot change for a job's state, because every key's group is hash(key) mod the count; the number of workers may change freely", c.m.KeyGroups),
		"key groups: the %s has %d, the config has %d", c.from, c.m.KeyGroups, c.d.KeyGroups)
}

// operators maps the savepoint's aggregates to the config's by id.
// Sources are not matched by id: their state is offsets, which belong to
// partitions (see topics), so a source may be renamed, split or merged.
func (c *checker) operators() {
	var missing []string // `"id" (N keys)`, for one message
	var missingKinds []Kind
	for _, op := range c.m.Operators {
		if !stateful(op.Kind) {
			continue
		}
		cur := c.d.Operator(op.ID)
		switch {
		case cur == nil:
			missing = append(missing, fmt.Sprintf("%q (%s)", op.ID, keys(op.Keys)))
			missingKinds = append(missingKinds, op.Kind)
			c.plan.Dropped = append(c.plan.Dropped, op.ID)
			c.droppedKinds = append(c.droppedKinds, op.Kind)
		case cur.Kind != op.Kind:
			if !c.opts.AllowDroppedState {
				c.fail(fmt.Sprintf("give the %s back the id %q and the %s another id, or pass %s to start without the %s's state", op.Kind, op.ID, kindNoun(cur.Kind), FlagAllowDroppedState, op.Kind),
					"operator %q is %s in the %s (%s) but %s in the config (%s)", op.ID, kindPhrase(op.Kind), c.from, keys(op.Keys), kindPhrase(cur.Kind), cur.Path)
			}
			c.plan.Dropped = append(c.plan.Dropped, op.ID)
			c.droppedKinds = append(c.droppedKinds, op.Kind)
		default:
			if c.aggregate(&op, cur) {
				c.plan.Restore = append(c.plan.Restore, op.ID)
			}
		}
	}
	if len(missing) > 0 && !c.opts.AllowDroppedState {
		noun := stateNoun(missingKinds)
		plural, verb := noun, "has state in the "+c.from+" but is"
		if len(missing) > 1 {
			plural, verb = noun+"s", "have state in the "+c.from+" but are"
		}
		c.fail(fmt.Sprintf("state maps to operators by id (steps[].id): give the %s back its id, or pass %s to start without that state", noun, FlagAllowDroppedState),
			"%s %s %s not in the config", plural, strings.Join(missing, ", "), verb)
	}
	for _, op := range c.d.Operators {
		if stateful(op.Kind) && c.m.Operator(op.ID) == nil {
			c.plan.Empty = append(c.plan.Empty, op.ID)
		}
	}
}

// rename is the name a savepoint topic resumes as.
func (c *checker) rename(topic string) string {
	if n, ok := c.opts.RemapTopics[topic]; ok {
		return n
	}
	return topic
}

func keys(n uint64) string {
	if n == 1 {
		return "1 key"
	}
	return fmt.Sprintf("%d keys", n)
}

// aggregate compares the savepoint's aggregate op with the config's cur
// and reports whether its state can be restored.
func (c *checker) aggregate(op *Operator, cur *OperatorDesc) bool {
	was, now := op.Aggregate, cur.Aggregate
	fix := fmt.Sprintf("put back the key_by and values the %s was taken with; or, to start %q empty, give the %s a new id and pass %s", c.from, op.ID, op.Kind, FlagAllowDroppedState)
	n := len(c.problems)
	if was.Window != nil && now.Window != nil && *was.Window != *now.Window {
		c.fail(fmt.Sprintf("put back the window the %s was taken with; or, to start %q empty, give the window a new id and pass %s", c.from, op.ID, FlagAllowDroppedState),
			"operator %q: window was %s, the config has %s (its open windows are stored by their start and end)", op.ID, was.Window, now.Window)
	}
	if was.KeyBy != now.KeyBy {
		c.fail(fix, "operator %q: key_by was '%s', the config has '%s' (its state is stored under the keys the old expression computed)", op.ID, was.KeyBy, now.KeyBy)
	}
	oldNames, newNames := valueNames(was.Values), valueNames(now.Values)
	switch {
	case slices.Equal(oldNames, newNames):
	case slices.Equal(slices.Sorted(slices.Values(oldNames)), slices.Sorted(slices.Values(newNames))):
		// Harmless: each value's state is stored under its name.
		c.reordered = append(c.reordered, fmt.Sprintf("operator %q: values reordered: the %s has [%s], the config has [%s]; each value keeps its state",
			op.ID, c.from, strings.Join(oldNames, ", "), strings.Join(newNames, ", ")))
	default:
		var gone, added []string
		for _, name := range oldNames {
			if !slices.Contains(newNames, name) {
				gone = append(gone, name)
			}
		}
		for _, name := range newNames {
			if !slices.Contains(oldNames, name) {
				added = append(added, name)
			}
		}
		var what []string
		if len(gone) > 0 {
			what = append(what, fmt.Sprintf("%s %s not in the config", plural(gone, "value"), isAre(gone)))
		}
		if len(added) > 0 {
			what = append(what, fmt.Sprintf("%s %s not in the %s", plural(added, "value"), isAre(added), c.from))
		}
		if len(gone) == 0 && len(added) == 0 {
			what = append(what, "a value is repeated")
		}
		c.fail(fix, "operator %q: values differ: the %s has [%s], the config has [%s]: %s",
			op.ID, c.from, renderValues(was.Values), renderValues(now.Values), strings.Join(what, "; "))
	}
	// Same name, other function or argument: wherever the value now is.
	for _, v := range was.Values {
		i := slices.IndexFunc(now.Values, func(w Value) bool { return w.Name == v.Name })
		if i >= 0 && (now.Values[i].Func != v.Func || now.Values[i].Arg != v.Arg) {
			c.fail(fix, "operator %q: value %q was %s, the config has %s", op.ID, v.Name, v, now.Values[i])
		}
	}
	return len(c.problems) == n
}

func (c *checker) topics() {
	type topic struct {
		source     string
		partitions int
	}
	saved := map[string]*topic{}
	for _, op := range c.m.Operators {
		for _, o := range op.Offsets {
			if t := saved[o.Topic]; t != nil {
				t.partitions++
			} else {
				saved[o.Topic] = &topic{source: op.ID, partitions: 1}
			}
		}
	}
	names := slices.Sorted(maps.Keys(saved))

	// The remap must name savepoint topics and keep topics apart.
	known := names
	if tt := c.m.tableTopics(); len(tt) > 0 {
		known = slices.Sorted(maps.Keys(tt))
		for _, t := range names {
			if !tt[t] {
				known = append(known, t)
			}
		}
		slices.Sort(known)
	}
	for _, old := range slices.Sorted(maps.Keys(c.opts.RemapTopics)) {
		if !slices.Contains(known, old) {
			c.fail(fmt.Sprintf("the savepoint's topics are %s", quoteList(known)),
				"%s %s=%s: the savepoint has no topic %q", FlagRemapTopic, old, c.opts.RemapTopics[old], old)
		}
	}
	byNew := map[string][]string{}
	for _, t := range names {
		byNew[c.rename(t)] = append(byNew[c.rename(t)], t)
	}
	clash := map[string]bool{}
	for _, nt := range slices.Sorted(maps.Keys(byNew)) {
		if olds := byNew[nt]; len(olds) > 1 {
			for _, t := range olds {
				clash[t] = true
			}
			all := "all"
			if len(olds) == 2 {
				all = "both"
			}
			c.fail(fmt.Sprintf("map each savepoint topic to a topic of its own with %s", FlagRemapTopic),
				"savepoint topics %s would %s resume as topic %q", quoteList(olds), all, nt)
		}
	}

	matched := map[string]bool{}
	for _, t := range names {
		if clash[t] {
			continue
		}
		st, nt := saved[t], c.rename(t)
		as := fmt.Sprintf("%s topic %q", c.from, t)
		if nt != t {
			as = fmt.Sprintf("%s topic %q (remapped to %q)", c.from, t, nt)
		}
		if c.d.sourceOf(nt) == nil {
			c.plan.DroppedTopics = append(c.plan.DroppedTopics, t)
			if !c.opts.AllowDroppedState {
				c.fail(fmt.Sprintf("if it moved to another name or cluster, map it with %s %s=NEW; to start without its offsets, pass %s", FlagRemapTopic, t, FlagAllowDroppedState),
					"%s is not read by any source of the config (it holds the offsets of %d partitions, read by source %q)", as, st.partitions, st.source)
			}
			continue
		}
		if c.opts.Partitions != nil {
			switch n, ok := c.opts.Partitions[nt]; {
			case !ok:
				c.fail(fmt.Sprintf("create it with %d partitions, or map %q to a topic that exists with %s", st.partitions, t, FlagRemapTopic),
					"%s does not exist in the cluster", as)
				continue
			case n != st.partitions:
				c.fail(fmt.Sprintf("offsets are per partition and cannot carry over to another partition count: restore into a topic with %d partitions", st.partitions),
					"%s has %d partitions in the savepoint, but %d in the cluster", strings.TrimPrefix(as, c.from+" "), st.partitions, n)
				continue
			}
		}
		matched[nt] = true
		c.plan.Topics = append(c.plan.Topics, TopicMapping{From: t, To: nt, Partitions: st.partitions})
	}
	for _, op := range c.m.Operators {
		for _, o := range op.Offsets {
			if nt := c.rename(o.Topic); matched[nt] && !clash[o.Topic] {
				c.plan.Offsets = append(c.plan.Offsets, checkpoint.SourceOffset{Topic: nt, Partition: o.Partition, Offset: o.Offset})
			}
		}
	}
	slices.SortFunc(c.plan.Offsets, checkpoint.CompareOffsets)
	for _, op := range c.d.Operators {
		for _, t := range op.Topics {
			if !matched[t] {
				c.plan.NewTopics = append(c.plan.NewTopics, t)
			}
		}
	}
	slices.Sort(c.plan.NewTopics)
}

// notes records what differs but is allowed.
func (c *checker) notes() {
	p, m, d := c.plan, c.m, c.d
	note := func(format string, args ...any) { p.Notes = append(p.Notes, fmt.Sprintf(format, args...)) }
	if m.Job != d.Job {
		note("the savepoint is of job %q, this job is %q", m.Job, d.Job)
	}
	if m.ConfigFingerprint != d.Fingerprint {
		note("the configuration changed since the %s (fingerprint %s, now %s)", c.from, short(m.ConfigFingerprint), short(d.Fingerprint))
	}
	if m.Guarantee != d.Guarantee {
		note("the guarantee was %s, now %s", m.Guarantee, d.Guarantee)
	}
	for _, t := range p.Topics {
		if t.From != t.To {
			note("topic %q resumes as %q (%d partitions)", t.From, t.To, t.Partitions)
		}
	}
	if len(p.Dropped) > 0 {
		note("state of %s is dropped (%s)", plural(p.Dropped, stateNoun(c.droppedKinds)), FlagAllowDroppedState)
	}
	if len(p.DroppedTopics) > 0 {
		note("offsets of %s are dropped (%s)", plural(p.DroppedTopics, "topic"), FlagAllowDroppedState)
	}
	var emptyKinds []Kind
	for _, id := range p.Empty {
		emptyKinds = append(emptyKinds, d.Operator(id).Kind)
	}
	empty := stateNoun(emptyKinds)
	if len(p.Empty) == 1 {
		note("%s starts without state", plural(p.Empty, empty))
	} else if len(p.Empty) > 1 {
		note("%s start without state", plural(p.Empty, empty))
	}
	p.Notes = append(p.Notes, c.reordered...)
	timed := false
	for _, op := range d.Operators {
		timed = timed || op.EventTime
	}
	switch {
	case m.EventTime != nil && !timed:
		note("the %s has event time (watermark %s) but the config's sources have no event_time: it is not used", c.from, watermarkText(m.EventTime.Watermark))
	case m.EventTime == nil && timed && len(m.Operators) > 0:
		note("the %s has no event time: the watermarks start over, each partition from its first record", c.from)
	}
	if h := m.Held; h != nil {
		carried := map[string]bool{}
		for _, t := range p.Topics {
			carried[t.From] = true
		}
		var kept uint64
		for _, hp := range h.Partitions {
			if carried[hp.Topic] {
				kept += hp.Records
			}
		}
		note("%d records that a join as of event time held at the savepoint go back to the source tasks that read their partitions (a configuration without such a join releases them at its first checkpoint)", kept)
		if kept < h.Records {
			note("%d held records of topics whose offsets are dropped are dropped with them (%s)", h.Records-kept, FlagAllowDroppedState)
		}
	}
	if len(p.NewTopics) == 1 {
		note("%s starts at its source's start position", plural(p.NewTopics, "topic"))
	} else if len(p.NewTopics) > 1 {
		note("%s start at their sources' start positions", plural(p.NewTopics, "topic"))
	}
}

func valueNames(vs []Value) []string {
	names := make([]string, len(vs))
	for i, v := range vs {
		names[i] = v.Name
	}
	return names
}

// renderValues writes values as the config does: "count: count(), sum: sum(n)".
func renderValues(vs []Value) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = v.Name + ": " + v.String()
	}
	return strings.Join(parts, ", ")
}

// plural renders `value "a"` or `values "a" and "b"`.
func plural(items []string, noun string) string {
	if len(items) == 1 {
		return noun + " " + quoteList(items)
	}
	return noun + "s " + quoteList(items)
}

func isAre(items []string) string {
	if len(items) == 1 {
		return "is"
	}
	return "are"
}

// kindNoun names what an operator of kind k is: "source", "aggregate",
// "filter step".
func kindNoun(k Kind) string {
	if k == KindSource || stateful(k) {
		return string(k)
	}
	return string(k) + " step"
}

// stateNoun names operators with state of the given kinds in a message:
// "aggregate" or "window" when they are all of one kind, else "operator".
func stateNoun(kinds []Kind) string {
	if len(kinds) > 0 && !slices.ContainsFunc(kinds, func(k Kind) bool { return k != kinds[0] }) {
		return string(kinds[0])
	}
	return "operator"
}

// kindPhrase is kindNoun with its article.
func kindPhrase(k Kind) string {
	if n := kindNoun(k); n[0] == 'a' {
		return "an " + n
	}
	return "a " + kindNoun(k)
}

// short abbreviates a fingerprint for a log line.
func short(fp string) string {
	if len(fp) > 12 {
		return fp[:12]
	}
	if fp == "" {
		return "(none)"
	}
	return fp
}

// watermarkText renders a watermark for a note: RFC 3339, or "none yet".
func watermarkText(ms *int64) string {
	if ms == nil {
		return "none yet"
	}
	return time.UnixMilli(*ms).UTC().Format(time.RFC3339Nano)
}
