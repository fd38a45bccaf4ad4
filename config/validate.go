package config

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// validator checks a decoded, defaulted Config as a whole job and collects
// every problem. Expressions are only required to be non-empty here; the
// operator package compiles them and reports through Config.Errorf.
type validator struct {
	c    *Config
	file string
	at   positions
	bad  map[string]bool
	errs Errors
}

// Limits that come from Kafka and from how names are used.
const (
	maxTopicLen    = 249
	maxNameLen     = 200 // the job name prefixes topic names: leave room for "-checkpoints"
	minInterval    = 10 * time.Millisecond
	topicCharsHelp = "letters, digits, '.', '_' and '-'"
)

func validate(c *Config, d *decoder) Errors {
	v := &validator{c: c, file: d.file, at: d.at, bad: d.bad}
	v.job()
	v.kafka()
	v.checkpoint()
	v.sources()
	v.tables()
	v.steps()
	v.joinNames()
	v.sinks()
	v.paths(v.c.Graph())
	v.ids()
	v.admin()
	v.scale()
	v.registry()
	return v.errs
}

// fail reports a problem at path, unless path (or a field it is part of)
// already has a shape error: "want a list, got a string" says it all.
func (v *validator) fail(path, format string, args ...any) {
	for p := path; ; p = parent(p) {
		if v.bad[p] {
			return
		}
		if p == "" {
			break
		}
	}
	at := v.at.near(path)
	v.errs = append(v.errs, &Error{File: v.file, Line: at.line, Col: at.col, Path: path, Msg: fmt.Sprintf(format, args...)})
}

// written reports whether the file wrote a key or value at path.
func (v *validator) written(path string) bool {
	_, k := v.at.key[path]
	_, val := v.at.value[path]
	return k || val
}

// enum checks that value is one of allowed.
func (v *validator) enum(path, what, value string, allowed ...string) {
	if !slices.Contains(allowed, value) {
		v.fail(path, "unknown %s %q%s", what, value, suggestion(value, allowed))
	}
}

func (v *validator) job() {
	c := v.c
	switch name := c.Name; {
	case name == "":
		v.fail("name", "required: it names the job's internal topics, transactional ids and consumer group")
	case len(name) > maxNameLen:
		v.fail("name", "%d characters is too long: at most %d, since it prefixes topic names", len(name), maxNameLen)
	case !topicChars(name):
		v.fail("name", "%q has characters that Kafka topic names do not allow (it prefixes topic names): use %s", name, topicCharsHelp)
	}
	v.enum("guarantee", "guarantee", string(c.Guarantee), string(AtMostOnce), string(AtLeastOnce), string(ExactlyOnce))
	if c.Workers < 0 {
		v.fail("workers", "%d is negative: want 0 (one per CPU) or more", c.Workers)
	} else if kg := c.Checkpoint.KeyGroups; c.Workers > kg && kg >= 1 && kg <= MaxKeyGroups {
		v.fail("workers", "%d workers but only %d key groups (checkpoint.key_groups): a key group is never split, so the extra workers would idle; lower workers or start a new job with more key groups", c.Workers, kg)
	}
	v.enum("logging.level", "level", c.Logging.Level, "debug", "info", "warn", "error")
	v.enum("logging.format", "format", c.Logging.Format, "text", "json")
}

func (v *validator) kafka() {
	k := v.c.Kafka
	if len(k.Brokers) == 0 {
		v.fail("kafka.brokers", "at least one broker (host:port) is required")
	}
	for i, b := range k.Brokers {
		if msg := hostPort(b, true); msg != "" {
			v.fail(fmt.Sprintf("kafka.brokers[%d]", i), "%q %s", b, msg)
		}
	}
	if k.TransactionTimeout <= 0 {
		v.fail("kafka.transaction_timeout", "must be more than 0")
	} else if cp := v.c.Checkpoint; cp.Interval > 0 && cp.Timeout > 0 && k.TransactionTimeout < cp.Interval+cp.Timeout {
		// A transaction is open from the start of one checkpoint until
		// it commits; the broker aborts it after the timeout.
		path := "kafka.transaction_timeout"
		if !v.written(path) {
			path = "checkpoint.timeout"
			if !v.written(path) {
				path = "checkpoint.interval"
			}
		}
		v.fail(path, "kafka.transaction_timeout (%s) must be at least checkpoint.interval + checkpoint.timeout (%s + %s = %s), or the broker aborts a checkpoint's transaction before it may commit: raise kafka.transaction_timeout to %s or lower checkpoint.timeout",
			k.TransactionTimeout, cp.Interval, cp.Timeout, cp.Interval+cp.Timeout, cp.Interval+cp.Timeout)
	}
	codecs := make([]string, len(Compressions))
	for i, c := range Compressions {
		codecs[i] = string(c)
	}
	v.enum("kafka.compression", "compression", string(k.Compression), codecs...)
	if t := k.TLS; (t.CertFile == "") != (t.KeyFile == "") {
		if t.CertFile != "" {
			v.fail("kafka.tls.cert_file", "set without kafka.tls.key_file: a client certificate needs its key (set both or neither)")
		} else {
			v.fail("kafka.tls.key_file", "set without kafka.tls.cert_file: a client key needs its certificate (set both or neither)")
		}
	}
	s := k.SASL
	mechanisms := []string{string(SASLPlain), string(SASLScramSHA256), string(SASLScramSHA512)}
	if s.Mechanism == SASLNone {
		if s.Username != "" || s.Password != "" {
			v.fail("kafka.sasl.mechanism", "required when a username or password is set: one of %s", strings.Join(mechanisms, ", "))
		}
		return
	}
	v.enum("kafka.sasl.mechanism", "SASL mechanism", string(s.Mechanism), mechanisms...)
	if s.Username == "" {
		v.fail("kafka.sasl.username", "required with mechanism %s", s.Mechanism)
	}
	if s.Password == "" {
		v.fail("kafka.sasl.password", "required with mechanism %s", s.Mechanism)
	}
}

func (v *validator) checkpoint() {
	cp := v.c.Checkpoint
	if cp.Interval < minInterval {
		v.fail("checkpoint.interval", "%s is too short: at least %s (each checkpoint is a Kafka transaction)", cp.Interval, minInterval)
	}
	if cp.Timeout <= 0 {
		v.fail("checkpoint.timeout", "must be more than 0")
	}
	if cp.KeyGroups < 1 || cp.KeyGroups > MaxKeyGroups {
		v.fail("checkpoint.key_groups", "%d is out of range: want 1 to %d", cp.KeyGroups, MaxKeyGroups)
	}
	if cp.ReplicationFactor != -1 && cp.ReplicationFactor < 1 {
		v.fail("checkpoint.replication_factor", "%d is not a replication factor: want -1 (the brokers' default) or at least 1", cp.ReplicationFactor)
	}
}

// scale checks the scale section: in group mode, what group mode cannot
// run yet is refused here rather than half-working.
func (v *validator) scale() {
	sc := v.c.Scale
	v.enum("scale.mode", "mode", string(sc.Mode), string(ScaleSingle), string(ScaleGroup))
	if kg := v.c.Checkpoint.KeyGroups; sc.Partitions < 1 || (kg >= 1 && sc.Partitions > kg) {
		v.fail("scale.partitions", "%d is out of range: want 1 to checkpoint.key_groups (%d), since each partition owns at least one key group", sc.Partitions, kg)
	}
	if sc.SessionTimeout < time.Second {
		v.fail("scale.session_timeout", "%s is too short: at least 1s (the brokers' default minimum is 6s)", sc.SessionTimeout)
	}
	if sc.Mode != ScaleGroup {
		if sc.KeyByIsRecordKey {
			v.fail("scale.key_by_is_record_key", "only group mode repartitions: set scale.mode: group, or remove it")
		}
		return
	}
	if v.c.Guarantee == AtMostOnce {
		v.fail("scale.mode", "group mode needs checkpoints, which at_most_once does not take; an at_most_once job already shares its partitions among every process started with the same name (its consumer group): use scale.mode: single")
	}
	if sc.KeyByIsRecordKey {
		v.copartitioned()
	}
}

// copartitioned checks what scale.key_by_is_record_key needs: a keyed
// operator, and one source topic (the group deals each topic's
// partitions out on its own, so a key's partitions of two topics could
// go to two processes). Event time, windows and joins as of event time
// run: each process fires its windows at the least watermark of the
// source partitions it reads, which hold its keys, lowered to the
// records its joins as of event time hold.
func (v *validator) copartitioned() {
	const path = "scale.key_by_is_record_key"
	keyed, topics := false, 0
	for _, s := range v.c.Steps {
		keyed = keyed || s.KeyBy != ""
	}
	for _, s := range v.c.Sources {
		topics += len(s.Topics)
	}
	switch {
	case !keyed:
		v.fail(path, "the job has no key_by step: nothing is repartitioned, remove it")
	case topics != 1:
		v.fail(path, "needs exactly one source topic (the job reads %d): the group deals each topic's partitions out on its own, so one key's partitions of two topics could go to two processes", topics)
	}
}

// internalTopics are the topics the job creates for itself.
func (v *validator) internalTopics() map[string]string {
	if v.c.Name == "" {
		return nil
	}
	topics := map[string]string{
		v.c.Name + "-checkpoints": "checkpoint",
		v.c.Name + "-state":       "state",
		v.c.Name + "-repartition": "repartition",
		v.c.Name + "-group-state": "group state",
	}
	for _, s := range v.c.Steps {
		if s.Join != nil && s.Join.Table != "" && s.ID != "" {
			topics[JoinRepartitionTopic(v.c.Name, s.ID)] = "join repartition"
		}
	}
	return topics
}

// topic checks a topic name, and that it is not one of the job's own.
func (v *validator) topic(path, t string) bool {
	if msg := topicProblem(t); msg != "" {
		v.fail(path, "%s", msg)
		return false
	}
	if kind, ok := v.internalTopics()[t]; ok {
		v.fail(path, "%q is the job's internal %s topic", t, kind)
		return false
	}
	return true
}

func (v *validator) sources() {
	if len(v.c.Sources) == 0 {
		v.fail("sources", "at least one source is required")
	}
	readBy := map[string]int{} // topic -> index of the first source reading it
	for i, s := range v.c.Sources {
		path := fmt.Sprintf("sources[%d]", i)
		if len(s.Topics) == 0 {
			v.fail(path+".topics", "at least one topic is required")
		}
		for j, t := range s.Topics {
			tpath := fmt.Sprintf("%s.topics[%d]", path, j)
			if !v.topic(tpath, t) {
				continue
			}
			if first, dup := readBy[t]; dup {
				v.fail(tpath, "topic %q is already read by sources[%d] (id %q): read each topic once", t, first, v.c.Sources[first].ID)
				continue
			}
			readBy[t] = i
		}
		v.enum(path+".format", "format", string(s.Format), valueFormats...)
		v.needsRegistry(path+".format", s.Format)
		v.enum(path+".key_format", "key format", string(s.KeyFormat), keyFormats...)
		v.needsRegistry(path+".key_format", s.KeyFormat)
		v.enum(path+".envelope", "envelope", string(s.Envelope), string(EnvelopeNone), string(EnvelopeDebezium))
		if s.Envelope == EnvelopeDebezium && s.Format != FormatJSON && s.Format != FormatAvro && slices.Contains(valueFormats, string(s.Format)) {
			v.fail(path+".envelope", "debezium events are read in format json or avro, not %s", s.Format)
		}
		if et := s.EventTime; et != nil {
			v.millis(path+".event_time.max_out_of_orderness", et.MaxOutOfOrderness)
			v.millis(path+".event_time.idle_timeout", et.IdleTimeout)
			v.millis(path+".event_time.max_future", et.MaxFuture)
		}
	}
}

// millis checks that a duration is whole milliseconds: event time is
// kept in epoch milliseconds.
func (v *validator) millis(path string, d time.Duration) {
	if d%time.Millisecond != 0 {
		v.fail(path, "%v is not whole milliseconds: event time is kept in milliseconds, write e.g. %v", d, d.Round(time.Millisecond))
	}
}

// positiveMillis checks a window size, advance or gap.
func (v *validator) positiveMillis(path string, d time.Duration) {
	switch {
	case d <= 0:
		v.fail(path, "must be more than 0, e.g. 1m")
	case d < time.Millisecond:
		v.fail(path, "%v is less than a millisecond: event time is kept in milliseconds, write e.g. 1ms", d)
	default:
		v.millis(path, d)
	}
}

// window checks a window step: one shape, lateness, emit, late records,
// and event time on every source it reads (the indexes upstream).
func (v *validator) window(path string, w *Window, upstream []int) {
	var shapes []string
	for _, k := range []string{"tumbling", "hopping", "session"} {
		if v.written(path + "." + k) {
			shapes = append(shapes, k)
		}
	}
	switch len(shapes) {
	case 0:
		v.fail(path, "a window needs a shape: tumbling: 5m, hopping: {size: 5m, advance: 1m} or session: {gap: 30m}")
	case 1:
		switch shapes[0] {
		case "tumbling":
			v.positiveMillis(path+".tumbling", w.Tumbling)
		case "hopping":
			if w.Hopping == nil {
				v.fail(path+".hopping", "want a mapping {size, advance}")
				break
			}
			v.positiveMillis(path+".hopping.size", w.Hopping.Size)
			v.positiveMillis(path+".hopping.advance", w.Hopping.Advance)
			if w.Hopping.Advance > w.Hopping.Size && w.Hopping.Size > 0 {
				v.fail(path+".hopping.advance", "%v is more than size %v: records between two windows would be in none; for windows that do not overlap use tumbling: %v",
					w.Hopping.Advance, w.Hopping.Size, w.Hopping.Size)
			}
		case "session":
			if w.Session == nil {
				v.fail(path+".session", "want a mapping {gap}")
				break
			}
			v.positiveMillis(path+".session.gap", w.Session.Gap)
		}
	default:
		v.fail(path, "a window has one shape, this one sets %s: keep one", strings.Join(shapes, " and "))
	}
	v.millis(path+".allowed_lateness", w.AllowedLateness)
	if string(w.Emit) == string(EmitEveryRecord) || string(w.Emit) == string(EmitOnCheckpoint) {
		v.fail(path+".emit", "%s is an aggregate's emit mode; a window emits %s (once, when it fires) or %s (each change)", w.Emit, EmitOnWindowClose, EmitEveryUpdate)
	} else {
		v.enum(path+".emit", "emit mode", string(w.Emit), string(EmitOnWindowClose), string(EmitEveryUpdate))
	}
	v.lateRecords(path, w.LateRecords, w.LateTopic)
	if len(w.Values) == 0 {
		v.fail(path+".values", "at least one value is required, e.g. count: count()")
	}
	v.eventTimeOf(path, "a window needs event time", upstream)
}

// lateRecords checks where the late records of a window or an interval
// join at path go: late_records, and a late topic of their own.
func (v *validator) lateRecords(path string, mode LateRecords, topic string) {
	v.enum(path+".late_records", "late_records", string(mode), string(LateSideOutput), string(LateDrop))
	lpath := path + ".late_topic"
	if mode == LateDrop && v.written(lpath) {
		v.fail(lpath, "late_records: drop writes no late topic: remove late_topic, or set late_records: side_output")
	}
	if mode == LateSideOutput && topic != "" && v.topic(lpath, topic) {
		for i, s := range v.c.Sources {
			if slices.Contains(s.Topics, topic) {
				v.fail(lpath, "%q is read by sources[%d] (id %q): late records need a topic of their own", topic, i, s.ID)
			}
		}
		for i, s := range v.c.Sinks {
			switch topic {
			case s.Topic:
				v.fail(lpath, "%q is also the output topic of sinks[%d]: late records need a topic of their own", topic, i)
			case s.DeadLetterTopic:
				v.fail(lpath, "%q is also the dead-letter topic of sinks[%d]: late records need a topic of their own", topic, i)
			}
		}
	}
}

// eventTimeOf fails path, saying why (need), when any of the sources
// upstream of it has no event time.
func (v *validator) eventTimeOf(path, need string, upstream []int) {
	var untimed []string
	for _, i := range upstream {
		if v.c.Sources[i].EventTime == nil {
			untimed = append(untimed, fmt.Sprintf("sources[%d]", i))
		}
	}
	if len(untimed) > 0 {
		v.fail(path, "%s: add \"event_time: {}\" to %s (the Kafka record timestamp), or event_time: {timestamp: <field>}", need, strings.Join(untimed, " and "))
	}
}

// stepKinds are the keys that make a step what it is, in the order the
// docs list them.
var stepKinds = []StepKind{StepFilter, StepMap, StepKeyBy, StepJoin, StepAggregate, StepWindow}

func (v *validator) steps() {
	g := v.c.Graph()
	// Who reads what is known only when the steps and sinks decoded.
	readersKnown := !v.bad["steps"] && !v.bad["sinks"]
	for _, nd := range g.Nodes {
		if readersKnown && nd.Kind == NodeSource && len(nd.Outputs) == 0 {
			v.fail(nd.Path+".topics", "nothing reads this source: name its id %q in the from: of a step or a sink", nd.ID)
		}
	}
	for i, s := range v.c.Steps {
		path := fmt.Sprintf("steps[%d]", i)
		n, _ := g.Lookup(s.ID)
		if g.Nodes[n].Path != path {
			n = -1 // a duplicate id (ids reports it): no node of its own
		}
		v.from(path, s.From, g, n)
		// What the file wrote decides the kind: `filter: ""` is a filter
		// with a missing expression, not a step of no kind.
		var kinds []string
		for _, k := range stepKinds {
			if v.written(path + "." + string(k)) {
				kinds = append(kinds, string(k))
			}
		}
		switch len(kinds) {
		case 0:
			v.fail(path, "a step needs one of filter, map, key_by, join, aggregate or window")
			continue
		case 1:
		default:
			v.fail(path, "a step does one thing, this one sets %s: split it into one step each", strings.Join(kinds, " and "))
			continue
		}
		kpath := path + "." + kinds[0]
		var upstream []int // the sources this step reads, directly or not
		if n >= 0 {
			v.readsNoAggregate(path, kpath, s.From, g, n)
			for _, u := range g.Upstream(n) {
				if g.Nodes[u].Kind == NodeSource {
					upstream = append(upstream, g.Nodes[u].Index)
				}
			}
			if readersKnown && len(g.Nodes[n].Outputs) == 0 {
				v.fail(kpath, "nothing reads this step: name its id %q in the from: of a later step or a sink", s.ID)
			}
		}
		switch StepKind(kinds[0]) {
		case StepFilter:
			v.expr(kpath, s.Filter)
		case StepKeyBy:
			v.expr(kpath, s.KeyBy)
		case StepJoin:
			if s.Join.Interval() {
				v.intervalJoin(kpath, i, g, n, upstream)
				break
			}
			v.intervalFieldsOnTable(kpath, s.Join)
			v.join(kpath, s.Join)
			v.joinTime(kpath, s.Join, upstream)
		case StepMap:
			if len(s.Map) == 0 {
				v.fail(kpath, "at least one field is required, e.g. total: price * quantity")
			}
			for _, f := range s.Map {
				v.expr(kpath+"."+f.Name, f.Expr)
			}
		case StepWindow:
			if s.Window != nil {
				v.window(kpath, s.Window, upstream)
			}
			if v.c.Guarantee == AtMostOnce {
				// Windows fire at checkpoint barriers, as on_checkpoint
				// aggregates emit at them.
				v.fail(kpath, "a window fires when a checkpoint's watermark passes its end, and guarantee: %s takes no checkpoints, so nothing would ever be written: use guarantee: %s (outputs may repeat after a crash) or %s",
					AtMostOnce, AtLeastOnce, ExactlyOnce)
			}
			v.keyed(kpath, g, n)
		case StepAggregate:
			v.aggregate(kpath, s.Aggregate)
			if s.Aggregate != nil && s.Aggregate.TTL > 0 {
				v.millis(kpath+".ttl", s.Aggregate.TTL)
				timed := 0
				for _, src := range upstream {
					if v.c.Sources[src].EventTime != nil {
						timed++
					}
				}
				if timed > 0 && timed < len(upstream) {
					v.fail(kpath+".ttl", "the TTL runs in event time when the sources have event_time, and %d of %d have it: give every source event_time, or none (processing time)", timed, len(upstream))
				}
			}
			if s.Aggregate != nil && s.Aggregate.TTL > 0 && v.c.Guarantee == AtMostOnce {
				v.fail(kpath+".ttl", "keys expire at checkpoint barriers, and guarantee: %s takes no checkpoints: drop the ttl, or use guarantee: %s or %s",
					AtMostOnce, AtLeastOnce, ExactlyOnce)
			}
			v.keyed(kpath, g, n)
		}
	}
}

// from checks the ids a step's or sink's from: names (node n of g, -1
// when it has none): each must be a source or a step above it, once.
func (v *validator) from(path string, ids []string, g *Graph, n int) {
	if ids == nil {
		if v.written(path + ".from") {
			v.fail(path+".from", "names no input: give a source or step id, or a list of them, or leave from: out (the step before)")
		}
		return
	}
	if len(ids) == 0 {
		v.fail(path+".from", "names no input: give a source or step id, or a list of them, or leave from: out (the step before)")
		return
	}
	var known []string // what it may read
	for i, nd := range g.Nodes {
		if nd.Kind != NodeSink && (n < 0 || i < n) {
			known = append(known, nd.ID)
		}
	}
	for k, id := range ids {
		ipath := fmt.Sprintf("%s.from[%d]", path, k)
		if slices.Contains(ids[:k], id) {
			v.fail(ipath, "%q is named twice", id)
			continue
		}
		i, ok := g.Lookup(id)
		_, table := v.c.Table(id)
		switch {
		case !ok && table:
			v.fail(ipath, "%q is a table: steps and sinks read streams; look records up in it with a join step (join: {table: %s, key: ..., as: ...})", id, id)
		case !ok:
			if len(known) == 0 {
				v.fail(ipath, "unknown id %q", id)
			} else {
				v.fail(ipath, "unknown id %q%s", id, suggestion(id, known))
			}
		case n >= 0 && i == n:
			v.fail(ipath, "a step cannot read itself")
		case n >= 0 && i > n:
			v.fail(ipath, "%q is %s, written after this step: a step reads only sources and the steps above it (move this step below it)", id, g.Nodes[i].Path)
		}
	}
}

// readsNoAggregate refuses a step that reads an aggregate's or a window's
// output: only sinks read those.
func (v *validator) readsNoAggregate(path, kpath string, from []string, g *Graph, n int) {
	for _, in := range g.Nodes[n].Inputs {
		nd := g.Nodes[in]
		if nd.Kind != NodeStep {
			continue
		}
		kind := v.c.Steps[nd.Index].Kind()
		what := article(kind) + " " + string(kind)
		switch {
		case kind == StepJoin && v.c.Steps[nd.Index].Join.Interval():
			kind, what = "interval join", "an interval join"
		case kind != StepAggregate && kind != StepWindow:
			continue
		}
		if k := slices.Index(from, nd.ID); k >= 0 {
			v.fail(fmt.Sprintf("%s.from[%d]", path, k), "%q is %s: only a sink can read its output", nd.ID, what)
			continue
		}
		hint := ""
		if len(nd.Inputs) > 0 {
			hint = fmt.Sprintf(": to branch off before it, read what it reads, e.g. from: %s", g.Nodes[nd.Inputs[0]].ID)
		}
		v.fail(kpath, "follows the %s %s (id %q), and only a sink can read its output%s", kind, nd.Path, nd.ID, hint)
	}
}

func article(k StepKind) string {
	if k == StepAggregate {
		return "an"
	}
	return "a"
}

// keyed checks that every path from a source to the keyed step n passes a
// key_by step.
func (v *validator) keyed(kpath string, g *Graph, n int) {
	if n < 0 {
		return
	}
	// Walk up from n, stopping at key_by steps: a source reached is read
	// unkeyed.
	seen := make([]bool, len(g.Nodes))
	keyed, unkeyed := false, ""
	var walk func(int)
	walk = func(i int) {
		for _, in := range g.Nodes[i].Inputs {
			if seen[in] {
				continue
			}
			seen[in] = true
			switch nd := g.Nodes[in]; {
			case nd.Kind == NodeStep && v.c.Steps[nd.Index].Kind() == StepKeyBy:
				keyed = true
			case nd.Kind == NodeSource:
				if unkeyed == "" {
					unkeyed = nd.ID
				}
			default:
				walk(in)
			}
		}
	}
	walk(n)
	switch {
	case unkeyed == "":
	case !keyed:
		v.fail(kpath, `needs a key_by step before it to say what to group by (for one global group: key_by: '"all"')`)
	default:
		v.fail(kpath, `needs a key_by step before it on every input: what it reads from source %q is not keyed (for one global group: key_by: '"all"')`, unkeyed)
	}
}

// MaxPaths bounds the paths from the sources to any one step or sink: a
// record is evaluated once per path, so a graph of many merges of merges
// would multiply the work of every record.
const MaxPaths = 64

// paths refuses a graph with more than MaxPaths paths to a node.
func (v *validator) paths(g *Graph) {
	count := make([]int, len(g.Nodes))
	for i, nd := range g.Nodes {
		if nd.Kind == NodeSource {
			count[i] = 1
			continue
		}
		for _, in := range nd.Inputs {
			count[i] = min(count[i]+count[in], MaxPaths+1)
		}
		if count[i] > MaxPaths {
			v.fail(nd.Path+".from", "reads its sources over more than %d paths (merges of merges): each record would be evaluated once per path; merge fewer branches", MaxPaths)
			return
		}
	}
}

func (v *validator) expr(path, e string) {
	if strings.TrimSpace(e) == "" {
		v.fail(path, "an expression is required")
	}
}

func (v *validator) aggregate(path string, a *Aggregate) {
	if a == nil {
		a = &Aggregate{Emit: EmitEveryRecord}
	}
	v.enum(path+".emit", "emit mode", string(a.Emit), string(EmitEveryRecord), string(EmitOnCheckpoint))
	if a.Emit == EmitOnCheckpoint && v.c.Guarantee == AtMostOnce {
		// The job would consume everything and write nothing, silently.
		v.fail(path+".emit", "on_checkpoint emits when a checkpoint completes, and guarantee: %s takes no checkpoints, so nothing would ever be written: use emit: %s (or guarantee: %s or %s)",
			AtMostOnce, EmitEveryRecord, AtLeastOnce, ExactlyOnce)
	}
	if len(a.Values) == 0 {
		v.fail(path+".values", "at least one value is required, e.g. count: count()")
	}
}

func (v *validator) sinks() {
	c := v.c
	if len(c.Sinks) == 0 {
		v.fail("sinks", "at least one sink is required")
	}
	sources := map[string]int{}
	for i, s := range c.Sources {
		for _, t := range s.Topics {
			if _, ok := sources[t]; !ok {
				sources[t] = i
			}
		}
	}
	outputs := map[string]int{}
	for i, s := range c.Sinks {
		if _, ok := outputs[s.Topic]; !ok && s.Topic != "" {
			outputs[s.Topic] = i
		}
	}
	g := c.Graph()
	for i, s := range c.Sinks {
		path := fmt.Sprintf("sinks[%d]", i)
		v.from(path, s.From, g, -1)
		switch src, isSource := sources[s.Topic]; {
		case s.Topic == "":
			v.fail(path+".topic", "required")
		case !v.topic(path+".topic", s.Topic):
		case isSource:
			v.fail(path+".topic", "%q is also read by sources[%d] (id %q): a job must not write to a topic it reads", s.Topic, src, c.Sources[src].ID)
		}
		v.enum(path+".format", "format", string(s.Format), valueFormats...)
		v.needsRegistry(path+".format", s.Format)
		v.sinkSchema(path, s)
		if s.Upsert {
			v.upsert(path, s, g)
		}
		if s.Partitions != -1 && s.Partitions < 1 {
			v.fail(path+".partitions", "%d is not a partition count: want at least 1, or -1 (the brokers' default)", s.Partitions)
		}
		if s.ReplicationFactor != -1 && s.ReplicationFactor < 1 {
			v.fail(path+".replication_factor", "%d is not a replication factor: want at least 1, or -1 (the brokers' default)", s.ReplicationFactor)
		}

		dlq, dpath := s.DeadLetterTopic, path+".dead_letter_topic"
		if v.written(dpath) && !v.topic(dpath, dlq) {
			continue
		}
		if src, ok := sources[dlq]; ok {
			v.fail(dpath, "%q is also read by sources[%d] (id %q): dead letters need a topic of their own", dlq, src, c.Sources[src].ID)
		} else if out, ok := outputs[dlq]; ok {
			v.fail(dpath, "%q is also the output topic of sinks[%d]: dead letters need a topic of their own", dlq, out)
		}
	}
}

// The formats of values and keys.
var (
	valueFormats = []string{string(FormatJSON), string(FormatRaw), string(FormatAvro), string(FormatProtobuf), string(FormatJSONSchema)}
	keyFormats   = []string{string(FormatRaw), string(FormatJSON), string(FormatAvro), string(FormatProtobuf), string(FormatJSONSchema)}
)

// needsRegistry refuses a schema registry format without a registry.
func (v *validator) needsRegistry(path string, f Format) {
	if f.Registered() && !v.c.SchemaRegistry.Enabled() {
		v.fail(path, "%s needs a schema registry: set schema_registry.url", f)
	}
}

// sinkSchema checks where a sink's schema comes from.
func (v *validator) sinkSchema(path string, s Sink) {
	for _, field := range []string{"schema_file", "subject", "version", "subject_strategy", "auto_register"} {
		if v.written(path+"."+field) && !s.Format.Registered() && slices.Contains(valueFormats, string(s.Format)) {
			v.fail(path+"."+field, "only for the schema formats avro, protobuf and json_schema, not %s", s.Format)
			return
		}
	}
	v.enum(path+".subject_strategy", "subject strategy", string(s.SubjectStrategy), string(TopicNameStrategy), string(RecordNameStrategy))
	switch {
	case s.SchemaFile != "" && s.Subject != "":
		v.fail(path+".subject", "set either schema_file or subject (a registered schema), not both")
	case s.Version < 0:
		v.fail(path+".version", "%d is not a version: want 1 or more (leave it out for the latest)", s.Version)
	case v.written(path+".version") && s.Subject == "":
		v.fail(path+".version", "needs subject: the subject whose version to write with")
	}
}

// registry checks the schema_registry section.
func (v *validator) registry() {
	r := v.c.SchemaRegistry
	if !r.Enabled() {
		for _, f := range []string{"username", "password", "token", "tls"} {
			if v.written("schema_registry." + f) {
				v.fail("schema_registry.url", "required when schema_registry is set: the registry's base URL, e.g. http://127.0.0.1:8081")
				return
			}
		}
		return
	}
	for i, u := range r.URL {
		if msg := registryURLProblem(u); msg != "" {
			v.fail(fmt.Sprintf("schema_registry.url[%d]", i), "%q %s", u, msg)
		}
	}
	switch {
	case r.Token != "" && (r.Username != "" || r.Password != ""):
		v.fail("schema_registry.token", "set either a bearer token or username and password, not both")
	case r.Username != "" && r.Password == "":
		v.fail("schema_registry.username", "set without schema_registry.password: basic authentication needs both")
	case r.Password != "" && r.Username == "":
		v.fail("schema_registry.password", "set without schema_registry.username: basic authentication needs both")
	}
	if t := r.TLS; (t.CertFile == "") != (t.KeyFile == "") {
		if t.CertFile != "" {
			v.fail("schema_registry.tls.cert_file", "set without schema_registry.tls.key_file: a client certificate needs its key (set both or neither)")
		} else {
			v.fail("schema_registry.tls.key_file", "set without schema_registry.tls.cert_file: a client key needs its certificate (set both or neither)")
		}
	}
	if r.Timeout <= 0 {
		v.fail("schema_registry.timeout", "must be more than 0")
	}
}

// registryURLProblem says what is wrong with a registry base URL.
func registryURLProblem(s string) string {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "is not a URL: " + err.Error()
	case u.Scheme != "http" && u.Scheme != "https":
		return "is not an http:// or https:// URL"
	case u.Host == "":
		return "has no host"
	}
	return ""
}

// ids checks that operator ids are unique: sources and steps share one id
// space, since checkpoints map state to operators by id.
func (v *validator) ids() {
	first := map[string]string{}
	check := func(path, id string) {
		if prev, dup := first[id]; dup {
			v.fail(path+".id", "id %q is already used by %s: operator ids must be unique", id, prev)
			return
		}
		first[id] = path
	}
	for i, s := range v.c.Sources {
		check(fmt.Sprintf("sources[%d]", i), s.ID)
	}
	for i, s := range v.c.Steps {
		check(fmt.Sprintf("steps[%d]", i), s.ID)
	}
	for i, t := range v.c.Tables {
		if t.ID != "" {
			check(fmt.Sprintf("tables[%d]", i), t.ID)
		}
	}
}

func (v *validator) admin() {
	if l := v.c.Admin.Listen; l != "" {
		if msg := hostPort(l, false); msg != "" {
			v.fail("admin.listen", "%q %s (or %s to disable the listener)", l, msg, AdminOff)
		}
	}
	if a := v.c.Admin.Advertise; a != "" {
		if msg := hostPort(a, true); msg != "" {
			v.fail("admin.advertise", "%q %s: the address the job's other processes reach this one's admin API at", a, msg)
		}
	}
}

// hostPort checks a host:port address and says what is wrong with it.
func hostPort(s string, needHost bool) string {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "is not host:port"
	}
	if needHost && host == "" {
		return "has no host: want host:port"
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 || (needHost && n == 0) {
		return fmt.Sprintf("has no valid port (%q): want host:port", port)
	}
	return ""
}

// topicProblem says why t cannot be a Kafka topic name, or "" when it can.
func topicProblem(t string) string {
	switch {
	case t == "":
		return "a topic name cannot be empty"
	case t == "." || t == "..":
		return fmt.Sprintf("%q cannot be a topic name", t)
	case len(t) > maxTopicLen:
		return fmt.Sprintf("a topic name has at most %d characters, this one %d", maxTopicLen, len(t))
	case !topicChars(t):
		return fmt.Sprintf("%q is not a valid topic name: use %s", t, topicCharsHelp)
	}
	return ""
}

func topicChars(s string) bool {
	for _, c := range []byte(s) {
		if !(c == '.' || c == '_' || c == '-' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}
