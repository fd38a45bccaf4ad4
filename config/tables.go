package config

import (
	"fmt"
	"slices"
	"strings"
)

// Tables and joins. A table is a compacted topic read as keyed state (the
// latest value per record key); a join step looks each record up in one
// by a key it computes, and later expressions read the table's value under
// the join's `as`. Tables are not nodes of the job graph: a step reads
// streams, and a table is read only through a join.

// A table's value and key formats are a source's (valueFormats,
// keyFormats): the schema registry formats decode each record with the
// writer schema its bytes name.
var joinHows = []string{string(JoinInner), string(JoinLeft)}

// exprWords are the words expr reads as operators, literals or builtins,
// which a join's `as` cannot be: an expression could never read it.
var exprWords = []string{
	"true", "false", "nil", "not", "and", "or", "in", "matches", "contains", "startsWith", "endsWith",
	"let", "if", "else", "len", "all", "none", "any", "one", "filter", "map", "count", "sum", "find",
	"findIndex", "findLast", "findLastIndex", "groupBy", "sortBy", "reduce", "abs", "ceil", "floor",
	"round", "max", "min", "mean", "median", "int", "float", "string", "type", "toJSON", "fromJSON",
	"keys", "values", "first", "last", "get", "date", "duration", "now", "trim", "upper", "lower",
	"split", "join", "replace", "repeat", "indexOf", "lastIndexOf", "hasPrefix", "hasSuffix",
}

// Table looks a table up by id.
func (c *Config) Table(id string) (*Table, bool) {
	for i := range c.Tables {
		if c.Tables[i].ID == id {
			return &c.Tables[i], true
		}
	}
	return nil, false
}

// tables checks the tables section: each table's id, topic and formats,
// that some join reads it, and that the job's mode can run it.
func (v *validator) tables() {
	c := v.c
	sources := map[string]int{}
	for i, s := range c.Sources {
		for _, t := range s.Topics {
			if _, ok := sources[t]; !ok {
				sources[t] = i
			}
		}
	}
	joined := map[string]bool{}
	for _, s := range c.Steps {
		if s.Join != nil && !s.Join.Interval() {
			joined[s.Join.Table] = true
		}
	}
	first := map[string]int{} // topic -> the table that reads it first
	for i, t := range c.Tables {
		path := fmt.Sprintf("tables[%d]", i)
		if t.ID == "" {
			v.fail(path+".id", "required: join steps name the table by it (join: {table: ID, ...})")
		}
		switch src, isSource := sources[t.Topic]; {
		case t.Topic == "":
			v.fail(path+".topic", "required: the compacted topic the table is read from")
		case !v.topic(path+".topic", t.Topic):
		case isSource:
			v.fail(path+".topic", "%q is also read by sources[%d] (id %q): a topic is either a stream or a table of the job, not both", t.Topic, src, c.Sources[src].ID)
		default:
			if j, dup := first[t.Topic]; dup {
				v.fail(path+".topic", "%q is already read by tables[%d] (id %q): read each table topic once", t.Topic, j, c.Tables[j].ID)
				break
			}
			first[t.Topic] = i
			v.notWritten(path+".topic", t.Topic)
		}
		v.enum(path+".format", "format", string(t.Format), valueFormats...)
		v.needsRegistry(path+".format", t.Format)
		v.enum(path+".key_format", "key format", string(t.KeyFormat), keyFormats...)
		v.needsRegistry(path+".key_format", t.KeyFormat)
		v.enum(path+".mode", "table mode", string(t.Mode), string(TableBroadcast), string(TablePartitioned))
		if t.Mode == TablePartitioned {
			v.partitioned(path, i, t)
		}
		if t.ID != "" && !joined[t.ID] && !v.bad["steps"] {
			v.fail(path+".id", "no join step reads table %q: join it (join: {table: %s, key: ..., as: ...}) or remove it", t.ID, t.ID)
		}
	}
	if len(c.Tables) == 0 {
		return
	}
	if c.Guarantee == AtMostOnce {
		v.fail("tables", "tables are not supported under guarantee: %s yet: use %s or %s", AtMostOnce, AtLeastOnce, ExactlyOnce)
	}
}

// partitioned checks a table of mode partitioned (tables[i] at path):
// table partition p is read by the process that owns partition p of the
// stream the joins read, and a record is looked up only in the partitions
// its process holds. Either the stream is co-partitioned with the table:
// the job reads one stream topic, partitioned as the table is (the same
// partition count, checked at start; records keyed alike, by Kafka's
// default partitioner), and every join of the table looks the record key
// up (key: _key, the same key format), so a record's key is in the table
// partition of the partition it was read from. Or the job repartitions
// the stream by the join key first (joinrepartition.go), which this
// checks it can.
func (v *validator) partitioned(path string, i int, t Table) {
	c := v.c
	if c.Scale.Mode != ScaleGroup {
		v.fail(path+".mode", "partitioned splits a table between the processes of a group-mode job; a single-mode job's one process reads every partition: remove mode (broadcast), or set scale.mode: group")
		return
	}
	joins, co := c.joinsOf(t)
	if co {
		return
	}
	// Repartitioned by the join key: the table's partitions follow the
	// repartition topic's, one per job for now (the processes deal out
	// one topic's partitions with the table's).
	for oi, o := range c.Tables {
		if oi != i && o.Mode == TablePartitioned {
			v.fail(path+".mode", "tables[%d] is partitioned too: a job whose stream is repartitioned by a join key (steps[%d] does not look the record key of one co-partitioned stream topic up) can have one partitioned table; make the others mode: broadcast", oi, joins[0])
			return
		}
	}
	if len(joins) > 1 {
		v.fail(path+".mode", "%d steps join table %q, and its stream is repartitioned by the join key: one step may join a partitioned table that way; use mode: broadcast", len(joins), t.ID)
		return
	}
	si := joins[0]
	s := c.Steps[si]
	kpath := fmt.Sprintf("steps[%d].join", si)
	why := fmt.Sprintf("the job repartitions its stream by the join key of %s (table %q is partitioned, and the step does not look the record key of one co-partitioned stream topic up)", kpath, t.ID)
	if t.KeyFormat != FormatRaw {
		v.fail(path+".key_format", "%s, but %s: the repartition topic is partitioned by the join key's text, which is where Kafka's partitioner put the table's keys only when they are that text (key_format: raw); use mode: broadcast", t.KeyFormat, why)
	}
	if c.Scale.KeyByIsRecordKey {
		v.fail("scale.key_by_is_record_key", "%s, so the job reads two topics; remove the setting (the keyed steps after the join are repartitioned)", why)
	}
	if _, taken := c.Graph().Lookup(JoinRepartitionSource(s.ID)); taken {
		v.fail(kpath, "%s through an internal source with id %q, which the job already has: rename that source or step", why, JoinRepartitionSource(s.ID))
	}
	// What crosses the topic is the record as the join's input has it:
	// a key_by's group key or an earlier join's value would not cross.
	g := c.Graph()
	if n, ok := g.Lookup(s.ID); ok {
		for _, u := range g.Upstream(n) {
			nd := g.Nodes[u]
			if nd.Kind != NodeStep {
				continue
			}
			if k := c.Steps[nd.Index].Kind(); k != StepFilter && k != StepMap {
				v.fail(kpath, "%s, and it reads %s (%s, id %q): only filter and map steps may come before such a join, since the record crosses the repartition topic without what a %s adds; move the step after the join, or use mode: broadcast for tables[%d]", why, nd.Path, k, nd.ID, k, i)
			}
		}
	}
	// Any format, envelope and key format crosses: the record crosses
	// decoded (FormatJoinRecord); so does event time (its time and its
	// partition's watermark with it, engine/jointime.go).
}

// notWritten refuses a table topic the job writes itself: a job would
// join its own output, committed only at its next checkpoint.
func (v *validator) notWritten(path, topic string) {
	for i, s := range v.c.Sinks {
		switch topic {
		case s.Topic:
			v.fail(path, "%q is the output topic of sinks[%d]: a job cannot read its own output as a table (run a second job that reads it)", topic, i)
			return
		case s.DeadLetterTopic:
			v.fail(path, "%q is the dead-letter topic of sinks[%d]: a table needs a topic of its own", topic, i)
			return
		}
	}
	for i, s := range v.c.Steps {
		if w := s.Window; w != nil && w.LateRecords == LateSideOutput && w.LateTopic == topic {
			v.fail(path, "%q is the late-record topic of steps[%d]: a table needs a topic of its own", topic, i)
			return
		}
	}
}

// join checks a join step at kpath (steps[i].join).
func (v *validator) join(kpath string, j *Join) {
	if j == nil {
		j = &Join{How: JoinInner}
	}
	if j.Interval() {
		return // intervaljoin.go: checked with the graph
	}
	var ids []string
	for _, t := range v.c.Tables {
		if t.ID != "" {
			ids = append(ids, t.ID)
		}
	}
	switch _, ok := v.c.Table(j.Table); {
	case j.Table == "":
		v.fail(kpath+".table", "required: the id of the table to look the record up in")
	case ok:
	case len(ids) == 0:
		v.fail(kpath+".table", "unknown table %q: the job has no tables; add one under tables: ({id: %s, topic: ...})", j.Table, j.Table)
	default:
		v.fail(kpath+".table", "unknown table %q%s", j.Table, suggestion(j.Table, ids))
	}
	if strings.TrimSpace(j.Key) == "" {
		v.fail(kpath+".key", "required: an expression on the record whose value is looked up among the table's keys, e.g. customer_id")
	}
	switch as := j.As; {
	case as == "":
		v.fail(kpath+".as", "required: the name later steps read the table's value by, e.g. as: customer")
	case strings.HasPrefix(as, "_"):
		v.fail(kpath+".as", "%q starts with _, which names the record's metadata (_key, _timestamp, ...): choose another name", as)
	case !identifier(as):
		v.fail(kpath+".as", "%q is not a name an expression can read: use letters, digits and _, not starting with a digit", as)
	case slices.Contains(exprWords, as):
		v.fail(kpath+".as", "%q is a word of the expression language: choose another name", as)
	}
	v.enum(kpath+".how", "join type", string(j.How), joinHows...)
}

// joinNames refuses two joins with one `as`: an expression after both
// could not tell which it reads.
func (v *validator) joinNames() {
	first := map[string]int{}
	for i, s := range v.c.Steps {
		if s.Join == nil || s.Join.As == "" {
			continue
		}
		if j, dup := first[s.Join.As]; dup {
			v.fail(fmt.Sprintf("steps[%d].join.as", i), "%q is already the name of the join steps[%d] (id %q): give each join a name of its own", s.Join.As, j, v.c.Steps[j].ID)
			continue
		}
		first[s.Join.As] = i
	}
}

// identifier reports whether s is a name an expression reads as a
// variable.
func identifier(s string) bool {
	for i, c := range []byte(s) {
		letter := c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		if !letter && !(i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return s != ""
}

// upsert checks a sink with upsert: true: it reads aggregates only (their
// outputs are the latest values of group keys), and its record key is the
// group key.
func (v *validator) upsert(path string, s Sink, g *Graph) {
	if s.Key != "" {
		v.fail(path+".key", "an upsert sink's record key is the group key (what a tombstone deletes): remove key, or upsert")
	}
	n := -1
	for i, nd := range g.Nodes {
		if nd.Kind == NodeSink && nd.Path == path {
			n = i
		}
	}
	if n < 0 {
		return
	}
	for _, in := range g.Nodes[n].Inputs {
		nd := g.Nodes[in]
		switch {
		case nd.Kind == NodeStep && v.c.Steps[nd.Index].Kind() == StepAggregate:
		case nd.Kind == NodeStep && v.c.Steps[nd.Index].Kind() == StepWindow:
			v.fail(path+".upsert", "reads the window %s (id %q): each window is a result of its own, not the latest value of its key; upsert is for aggregates", nd.Path, nd.ID)
		default:
			v.fail(path+".upsert", "reads %s (id %q), which is not an aggregate: upsert writes the latest value of each group key, and only an aggregate has one", nd.Path, nd.ID)
		}
	}
}

// joinTime checks a table join's time and history (at kpath,
// steps[i].join), reading the sources upstream. A join as of event time
// keeps versions of the table's values for history behind the watermark,
// and holds each stream record until the table's event time has passed
// the record's: it needs event time on every source it reads.
func (v *validator) joinTime(kpath string, j *Join, upstream []int) {
	if j == nil {
		return
	}
	if j.Time != "" {
		v.enum(kpath+".time", "join time", string(j.Time), string(JoinProcessingTime), string(JoinEventTime))
	}
	if j.Time != JoinEventTime {
		if v.written(kpath + ".history") {
			v.fail(kpath+".history", "keeps the table's older values for a join as of event time: add time: event_time, or remove history (a join in processing time meets the latest value only)")
		}
		return
	}
	switch {
	case !v.written(kpath + ".history"):
		v.fail(kpath+".history", "required with time: event_time: how far behind the watermark the table's older values are kept, e.g. history: 1h (Kafka Streams' historyRetention)")
	case j.History <= 0:
		v.fail(kpath+".history", "must be more than 0, e.g. 1h: a stream record further behind the watermark than history meets no value")
	default:
		v.millis(kpath+".history", j.History)
	}
	var untimed []string
	for _, src := range upstream {
		if v.c.Sources[src].EventTime == nil {
			untimed = append(untimed, fmt.Sprintf("sources[%d]", src))
		}
	}
	if len(untimed) > 0 {
		v.fail(kpath+".time", "a join as of event time looks each record up as of its event time: add \"event_time: {}\" to %s (the Kafka record timestamp), or event_time: {timestamp: <field>}", strings.Join(untimed, " and "))
	}
}
