package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// enriched is a valid job with a table and a left join, ten lines before
// its steps: cases below change it.
const enriched = `name: job
kafka:
  brokers: [localhost:9092]
sources:
  - id: orders
    topics: [orders]
tables:
  - id: customers
    topic: customers
steps:
  - id: enrich
    join: {table: customers, key: customer, as: c, how: left}
  - key_by: 'c == nil ? "none" : c.tier'
  - aggregate: {values: {n: count()}}
sinks:
  - topic: out
`

func TestTablesAndJoinsLoad(t *testing.T) {
	c, err := Parse("c.yaml", []byte(enriched), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Tables) != 1 || c.Tables[0] != (Table{ID: "customers", Topic: "customers", Format: FormatJSON, KeyFormat: FormatRaw, Mode: TableBroadcast}) {
		t.Errorf("tables = %+v, want customers with the default formats and mode", c.Tables)
	}
	j := c.Steps[0].Join
	if c.Steps[0].Kind() != StepJoin || j == nil || *j != (Join{Table: "customers", Key: "customer", As: "c", How: JoinLeft}) {
		t.Errorf("steps[0] = %+v (join %+v)", c.Steps[0], j)
	}
	// The default how is inner (Kafka Streams' join, SQL's JOIN).
	inner, err := Parse("c.yaml", []byte(strings.Replace(enriched, ", how: left", "", 1)), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := inner.Steps[0].Join.How; got != JoinInner {
		t.Errorf("default how = %q, want inner", got)
	}
	if got, want := c.Summary(), `job "job": exactly_once, 1 source (1 topic), 1 table, 3 steps, 1 sink, checkpoint every 1s`; got != want {
		t.Errorf("summary = %q, want %q", got, want)
	}
	text := c.Graph().Text(c)
	for _, want := range []string{"customers: table customers (json values, raw keys)", "enrich: left join customers on customer as c  <- orders"} {
		if !strings.Contains(text, want) {
			t.Errorf("graph text lacks %q:\n%s", want, text)
		}
	}
	if m := c.Graph().Mermaid(c); !strings.Contains(m, `t0[("customers: table customers")]`) || !strings.Contains(m, "t0 -.-> n1") {
		t.Errorf("mermaid does not draw the table beside its join:\n%s", m)
	}
}

// Tables and joins are part of what a job computes: changing a table's
// topic or a join changes the fingerprint; a job without tables keeps its
// old one.
func TestFingerprintTablesAndJoins(t *testing.T) {
	parse := func(y string) string {
		t.Helper()
		c, err := Parse("c.yaml", []byte(y), env(nil))
		if err != nil {
			t.Fatal(err)
		}
		return c.Fingerprint()
	}
	base := parse(enriched)
	for name, y := range map[string]string{
		"table topic":      strings.Replace(enriched, "    topic: customers\n", "    topic: customers-v2\n", 1),
		"table format":     strings.Replace(enriched, "    topic: customers\n", "    topic: customers\n    format: raw\n", 1),
		"table key format": strings.Replace(enriched, "    topic: customers\n", "    topic: customers\n    key_format: json\n", 1),
		"join how":         strings.Replace(enriched, "how: left", "how: inner", 1),
		"join key":         strings.Replace(enriched, "key: customer,", "key: customer_id,", 1),
	} {
		if parse(y) == base {
			t.Errorf("changing the %s left the fingerprint as it was", name)
		}
	}
	// minimal, with and without an empty tables list: the same job.
	if parse(minimal) != parse(minimal+"tables: []\n") {
		t.Error("an empty tables list changed the fingerprint of a job without tables")
	}
}

// TestTableErrors: every problem of tables and joins at its line and
// column, with a message that says what to do.
func TestTableErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{
			name: "unknown table, with a suggestion",
			yaml: strings.Replace(enriched, "join: {table: customers,", "join: {table: custmers,", 1),
			want: []string{
				`c.yaml:8:9: tables[0].id: no join step reads table "customers": join it (join: {table: customers, key: ..., as: ...}) or remove it`,
				`c.yaml:12:19: steps[0].join.table: unknown table "custmers"; did you mean customers?`,
			},
		},
		{
			name: "a join without tables",
			yaml: strings.Replace(enriched, "tables:\n  - id: customers\n    topic: customers\n", "", 1),
			want: []string{`c.yaml:9:19: steps[0].join.table: unknown table "customers": the job has no tables; add one under tables: ({id: customers, topic: ...})`},
		},
		{
			name: "join fields missing",
			yaml: strings.Replace(enriched, "join: {table: customers, key: customer, as: c, how: left}", "join: {how: outer}", 1),
			want: []string{
				`c.yaml:8:9: tables[0].id: no join step reads table "customers": join it (join: {table: customers, key: ..., as: ...}) or remove it`,
				"c.yaml:12:5: steps[0].join.table: required: the id of the table to look the record up in",
				"c.yaml:12:5: steps[0].join.key: required: an expression on the record whose value is looked up among the table's keys, e.g. customer_id",
				"c.yaml:12:5: steps[0].join.as: required: the name later steps read the table's value by, e.g. as: customer",
				`c.yaml:12:17: steps[0].join.how: unknown join type "outer"; allowed: inner, left`,
			},
		},
		{
			name: "as names the metadata, a keyword, or nothing an expression reads",
			yaml: strings.Replace(enriched, "  - key_by:", `  - {join: {table: customers, key: a, as: _key}}
  - {join: {table: customers, key: b, as: nil}}
  - {join: {table: customers, key: d, as: 2c}}
  - {join: {table: customers, key: e, as: c}}
  - key_by:`, 1),
			want: []string{
				`c.yaml:13:43: steps[1].join.as: "_key" starts with _, which names the record's metadata (_key, _timestamp, ...): choose another name`,
				`c.yaml:14:43: steps[2].join.as: "nil" is a word of the expression language: choose another name`,
				`c.yaml:15:43: steps[3].join.as: "2c" is not a name an expression can read: use letters, digits and _, not starting with a digit`,
				`c.yaml:16:43: steps[4].join.as: "c" is already the name of the join steps[0] (id "enrich"): give each join a name of its own`,
			},
		},
		{
			name: "a table topic the job reads, writes or reads twice",
			yaml: strings.Replace(enriched, "    topic: customers\n", `    topic: orders
  - {id: t2, topic: out}
  - {id: t3, topic: job-dead-letter}
  - {id: t4, topic: out}
  - {id: t5, topic: job-state}
`, 1),
			want: []string{
				`c.yaml:9:12: tables[0].topic: "orders" is also read by sources[0] (id "orders"): a topic is either a stream or a table of the job, not both`,
				`c.yaml:10:10: tables[1].id: no join step reads table "t2": join it (join: {table: t2, key: ..., as: ...}) or remove it`,
				`c.yaml:10:21: tables[1].topic: "out" is the output topic of sinks[0]: a job cannot read its own output as a table (run a second job that reads it)`,
				`c.yaml:11:10: tables[2].id: no join step reads table "t3": join it (join: {table: t3, key: ..., as: ...}) or remove it`,
				`c.yaml:11:21: tables[2].topic: "job-dead-letter" is the dead-letter topic of sinks[0]: a table needs a topic of its own`,
				`c.yaml:12:10: tables[3].id: no join step reads table "t4": join it (join: {table: t4, key: ..., as: ...}) or remove it`,
				`c.yaml:12:21: tables[3].topic: "out" is already read by tables[1] (id "t2"): read each table topic once`,
				`c.yaml:13:10: tables[4].id: no join step reads table "t5": join it (join: {table: t5, key: ..., as: ...}) or remove it`,
				`c.yaml:13:21: tables[4].topic: "job-state" is the job's internal state topic`,
			},
		},
		{
			name: "formats, a missing id and topic",
			yaml: strings.Replace(enriched, "    topic: customers\n", `    topic: customers
    format: avro
    key_format: jsno
  - {format: raw}
`, 1),
			want: []string{
				"c.yaml:10:13: tables[0].format: avro needs a schema registry: set schema_registry.url",
				`c.yaml:11:17: tables[0].key_format: unknown key format "jsno"; did you mean json?`,
				"c.yaml:12:5: tables[1].id: required: join steps name the table by it (join: {table: ID, ...})",
				"c.yaml:12:5: tables[1].topic: required: the compacted topic the table is read from",
			},
		},
		{
			name: "ids are shared with sources and steps",
			yaml: strings.Replace(enriched, "  - id: customers\n", "  - id: orders\n", 1),
			want: []string{
				`c.yaml:8:9: tables[0].id: no join step reads table "orders": join it (join: {table: orders, key: ..., as: ...}) or remove it`,
				`c.yaml:8:9: tables[0].id: id "orders" is already used by sources[0]: operator ids must be unique`,
				`c.yaml:12:19: steps[0].join.table: unknown table "customers"; allowed: orders`,
			},
		},
		{
			name: "a step cannot read a table",
			yaml: strings.Replace(enriched, "  - key_by:", "  - {from: customers, filter: 'true'}\n  - key_by:", 1),
			want: []string{
				`c.yaml:12:5: steps[0].join: nothing reads this step: name its id "enrich" in the from: of a later step or a sink`,
				`c.yaml:13:12: steps[1].from[0]: "customers" is a table: steps and sinks read streams; look records up in it with a join step (join: {table: customers, key: ..., as: ...})`,
			},
		},
		{
			name: "partitioned, repartitioned by the join key: the table's keys not text",
			yaml: strings.NewReplacer("name: job\n", "name: job\nscale: {mode: group}\n", "topic: customers\n", "topic: customers\n    mode: partitioned\n    key_format: json\n",
				"topics: [orders]", "topics: [orders, more]", "key: customer,", "key: _key,").Replace(enriched),
			want: []string{`c.yaml:12:17: tables[0].key_format: json, but the job repartitions its stream by the join key of steps[0].join (table "customers" is partitioned, and the step does not look the record key of one co-partitioned stream topic up): the repartition topic is partitioned by the join key's text, which is where Kafka's partitioner put the table's keys only when they are that text (key_format: raw); use mode: broadcast`},
		},
		{
			name: "partitioned, repartitioned by the join key: the setting",
			yaml: strings.NewReplacer("name: job\n", "name: job\nscale: {mode: group, key_by_is_record_key: true}\nschema_registry: {url: 'http://localhost:8081'}\n",
				"topic: customers\n", "topic: customers\n    mode: partitioned\n",
				"topics: [orders]\n", "topics: [orders]\n    event_time: {}\n  - {id: more, topics: [more], format: avro}\n",
				"  - id: enrich\n", "  - id: enrich\n    from: [orders, more]\n",
				"how: left}", "how: left, time: event_time, history: 1h}").Replace(enriched),
			want: []string{
				`c.yaml:2:44: scale.key_by_is_record_key: the job repartitions its stream by the join key of steps[0].join (table "customers" is partitioned, and the step does not look the record key of one co-partitioned stream topic up), so the job reads two topics; remove the setting (the keyed steps after the join are repartitioned)`,
				`c.yaml:2:44: scale.key_by_is_record_key: needs exactly one source topic (the job reads 2): the group deals each topic's partitions out on its own, so one key's partitions of two topics could go to two processes`,
				`c.yaml:18:69: steps[0].join.time: a join as of event time looks each record up as of its event time: add "event_time: {}" to sources[1] (the Kafka record timestamp), or event_time: {timestamp: <field>}`,
			},
		},
		{
			name: "partitioned, repartitioned by the join key: a key_by and a join before it",
			yaml: strings.NewReplacer("name: job\n", "name: job\nscale: {mode: group}\n",
				"topic: customers\n", "topic: customers\n    mode: partitioned\n  - {id: other, topic: other}\n",
				"steps:\n", "steps:\n  - filter: 'n > 0'\n  - key_by: customer\n  - join: {table: other, key: customer, as: o}\n").Replace(enriched),
			want: []string{
				`c.yaml:18:5: steps[3].join: the job repartitions its stream by the join key of steps[3].join (table "customers" is partitioned, and the step does not look the record key of one co-partitioned stream topic up), and it reads steps[1] (key_by, id "key_by-1"): only filter and map steps may come before such a join, since the record crosses the repartition topic without what a key_by adds; move the step after the join, or use mode: broadcast for tables[0]`,
				`c.yaml:18:5: steps[3].join: the job repartitions its stream by the join key of steps[3].join (table "customers" is partitioned, and the step does not look the record key of one co-partitioned stream topic up), and it reads steps[2] (join, id "join-2"): only filter and map steps may come before such a join, since the record crosses the repartition topic without what a join adds; move the step after the join, or use mode: broadcast for tables[0]`,
			},
		},
		{
			name: "partitioned, repartitioned by the join key: two partitioned tables",
			yaml: strings.NewReplacer("name: job\n", "name: job\nscale: {mode: group}\n",
				"topic: customers\n", "topic: customers\n    mode: partitioned\n  - {id: other, topic: other, mode: partitioned}\n",
				"  - key_by:", "  - join: {table: other, key: _key, as: o}\n  - key_by:").Replace(enriched),
			want: []string{`c.yaml:11:11: tables[0].mode: tables[1] is partitioned too: a job whose stream is repartitioned by a join key (steps[0] does not look the record key of one co-partitioned stream topic up) can have one partitioned table; make the others mode: broadcast`},
		},
		{
			name: "partitioned in single mode, a mode misspelt",
			yaml: strings.Replace(enriched, "topic: customers\n", "topic: customers\n    mode: partitioned\n  - {id: other, topic: other, mode: brodcast}\n", 1),
			want: []string{
				"c.yaml:10:11: tables[0].mode: partitioned splits a table between the processes of a group-mode job; a single-mode job's one process reads every partition: remove mode (broadcast), or set scale.mode: group",
				`c.yaml:11:10: tables[1].id: no join step reads table "other": join it (join: {table: other, key: ..., as: ...}) or remove it`,
				`c.yaml:11:37: tables[1].mode: unknown table mode "brodcast"; did you mean broadcast?`,
			},
		},
		{
			name: "at_most_once",
			yaml: strings.Replace(strings.Replace(enriched, "name: job\n", "name: job\nguarantee: at_most_once\n", 1), "aggregate: {values: {n: count()}}", "aggregate: {values: {n: count()}}", 1),
			want: []string{"c.yaml:8:1: tables: tables are not supported under guarantee: at_most_once yet: use at_least_once or exactly_once"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("c.yaml", []byte(tt.yaml), env(nil))
			if err == nil {
				t.Fatal("Parse succeeded; want problems")
			}
			if got := err.Error(); got != strings.Join(tt.want, "\n") {
				t.Errorf("problems:\n%s\nwant:\n%s", got, strings.Join(tt.want, "\n"))
			}
		})
	}
}

// upsert: true is for sinks of aggregates, keyed by the group key.
func TestUpsertErrors(t *testing.T) {
	const job = `name: job
kafka:
  brokers: [localhost:9092]
sources:
  - id: numbers
    topics: [numbers]
    event_time: {}
steps:
  - {id: by-parity, key_by: 'n % 2'}
  - {id: sums, aggregate: {values: {n: count()}}}
  - {id: windows, from: by-parity, window: {tumbling: 1m, values: {n: count()}}}
sinks:
  - {from: sums, topic: ok, upsert: true}
  - {from: windows, topic: w, upsert: true}
  - {from: numbers, topic: copy, upsert: true}
  - {from: sums, topic: keyed, key: 'string(key) + "x"', upsert: true}
`
	_, err := Parse("c.yaml", []byte(job), env(nil))
	want := []string{
		`c.yaml:14:39: sinks[1].upsert: reads the window steps[2] (id "windows"): each window is a result of its own, not the latest value of its key; upsert is for aggregates`,
		`c.yaml:15:42: sinks[2].upsert: reads sources[0] (id "numbers"), which is not an aggregate: upsert writes the latest value of each group key, and only an aggregate has one`,
		`c.yaml:16:37: sinks[3].key: an upsert sink's record key is the group key (what a tombstone deletes): remove key, or upsert`,
	}
	if err == nil || err.Error() != strings.Join(want, "\n") {
		t.Errorf("problems:\n%v\nwant:\n%s", err, strings.Join(want, "\n"))
	}
	ok := strings.Replace(strings.Replace(strings.Replace(job, "  - {from: windows, topic: w, upsert: true}\n", "", 1),
		"  - {from: numbers, topic: copy, upsert: true}\n", "", 1), "  - {from: sums, topic: keyed, key: 'string(key) + \"x\"', upsert: true}\n", "", 1)
	ok = strings.Replace(ok, "  - {id: windows, from: by-parity, window: {tumbling: 1m, values: {n: count()}}}\n", "", 1)
	c, err := Parse("c.yaml", []byte(ok), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Sinks[0].Upsert {
		t.Error("sinks[0].upsert not read")
	}
	plain := strings.Replace(ok, ", upsert: true}", "}", 1)
	p, err := Parse("c.yaml", []byte(plain), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if p.Fingerprint() == c.Fingerprint() {
		t.Error("upsert does not change the fingerprint")
	}
}

// Group mode takes a broadcast table (the default mode) and a partitioned
// one joined by the record key, and validate's summary says how the
// processes share each.
func TestGroupModeBroadcastTable(t *testing.T) {
	c, err := Parse("c.yaml", []byte(strings.Replace(enriched, "name: job\n", "name: job\nscale: {mode: group}\n", 1)), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Tables[0].Mode != TableBroadcast {
		t.Errorf("mode = %q, want broadcast", c.Tables[0].Mode)
	}
	if s := c.Summary(); !strings.Contains(s, "; table customers broadcast: every process reads all of topic customers") {
		t.Errorf("summary: %s", s)
	}
	part, err := Parse("c.yaml", []byte(strings.NewReplacer("name: job\n", "name: job\nscale: {mode: group}\n", "topic: customers\n", "topic: customers\n    mode: partitioned\n",
		"key: customer,", "key: _key,").Replace(enriched)), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if s := part.Summary(); !strings.Contains(s, "; table customers partitioned: each process reads the partitions of topic customers that match its partitions of the stream (co-partitioned, checked at start)") {
		t.Errorf("summary: %s", s)
	}
	single, err := Parse("c.yaml", []byte(enriched), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if s := single.Summary(); strings.Contains(s, "broadcast") {
		t.Errorf("a single-mode job's summary: %s", s)
	}
}

// A join as of event time runs in single and group mode (with a
// broadcast or a partitioned table): validate accepts it, with event time
// on the stream and a history.
func TestJoinAsOfEventTimeAccepted(t *testing.T) {
	timed := strings.Replace(enriched, "topics: [orders]\n", "topics: [orders]\n    event_time: {}\n", 1)
	yaml := strings.Replace(timed, "how: left}", "how: left, time: event_time, history: 1h}", 1)
	group := strings.Replace(yaml, "name: job\n", "name: job\nscale: {mode: group}\n", 1)
	partitioned := strings.NewReplacer("topic: customers\n", "topic: customers\n    mode: partitioned\n", "key: customer,", "key: _key,").Replace(group)
	for name, yaml := range map[string]string{"single mode": yaml, "group mode": group, "group mode, partitioned": partitioned} {
		c, err := Parse("c.yaml", []byte(yaml), env(nil))
		if err != nil {
			t.Fatalf("a join as of event time in %s: %v", name, err)
		}
		if j := c.Steps[0].Join; j.Time != JoinEventTime || j.History != time.Hour {
			t.Errorf("%s: join: time %q, history %v", name, j.Time, j.History)
		}
	}
}

// time: event_time on a table join: history with it only, a duration more
// than 0 in whole milliseconds, event time on every source it reads.
func TestJoinTimeErrors(t *testing.T) {
	asOf := func(join string) string {
		return strings.Replace(enriched, "join: {table: customers, key: customer, as: c, how: left}", join, 1)
	}
	timed := strings.Replace(enriched, "topics: [orders]\n", "topics: [orders]\n    event_time: {}\n", 1)
	tests := []struct {
		name string
		yaml string
		want []string
		// some: want is some of the problems (another check of the
		// configuration may report more).
		some bool
	}{
		{
			name: "history without time",
			yaml: asOf("join: {table: customers, key: customer, as: c, history: 1h}"),
			want: []string{"c.yaml:12:61: steps[0].join.history: keeps the table's older values for a join as of event time: add time: event_time, or remove history (a join in processing time meets the latest value only)"},
		},
		{
			name: "history with processing time",
			yaml: asOf("join: {table: customers, key: customer, as: c, time: processing_time, history: 1h}"),
			want: []string{"c.yaml:12:84: steps[0].join.history: keeps the table's older values for a join as of event time: add time: event_time, or remove history (a join in processing time meets the latest value only)"},
		},
		{
			name: "a time misspelt",
			yaml: asOf("join: {table: customers, key: customer, as: c, time: event-time}"),
			want: []string{`c.yaml:12:58: steps[0].join.time: unknown join time "event-time"; did you mean event_time?`},
		},
		{
			name: "no history, no event time on the stream",
			yaml: asOf("join: {table: customers, key: customer, as: c, time: event_time}"),
			want: []string{
				"c.yaml:12:5: steps[0].join.history: required with time: event_time: how far behind the watermark the table's older values are kept, e.g. history: 1h (Kafka Streams' historyRetention)",
				`c.yaml:12:58: steps[0].join.time: a join as of event time looks each record up as of its event time: add "event_time: {}" to sources[0] (the Kafka record timestamp), or event_time: {timestamp: <field>}`,
			},
		},
		{
			name: "history not more than 0",
			yaml: strings.Replace(timed, "how: left}", "how: left, time: event_time, history: 0s}", 1),
			want: []string{
				"c.yaml:13:90: steps[0].join.history: must be more than 0, e.g. 1h: a stream record further behind the watermark than history meets no value",
			},
		},
		{
			name: "history not whole milliseconds",
			yaml: strings.Replace(timed, "how: left}", "how: left, time: event_time, history: 1500us}", 1),
			want: []string{
				"c.yaml:13:90: steps[0].join.history: 1.5ms is not whole milliseconds: event time is kept in milliseconds, write e.g. 2ms",
			},
		},
		{
			name: "history not a duration",
			yaml: strings.Replace(timed, "how: left}", "how: left, time: event_time, history: an hour}", 1),
			want: []string{
				`c.yaml:13:90: steps[0].join.history: invalid duration "an hour": want a number with a unit (ns, us, ms, s, m, h, d), e.g. 250ms, 1s, 1m30s, 7d`,
			},
		},
		{
			name: "on an interval join",
			yaml: `name: job
kafka: {brokers: [localhost:9092]}
sources:
  - {id: a, topics: [a], event_time: {}}
  - {id: b, topics: [b], event_time: {}}
steps:
  - {from: a, join: {stream: b, key: k, other_key: k, within: {before: 1s, after: 1s}, as: o, time: event_time, history: 1h}}
sinks:
  - topic: out
`,
			want: []string{
				"c.yaml:7:101: steps[0].join.time: is a field of a table join (join: {table: ID, ...}); an interval join is in event time already, and keeps records for within",
				"c.yaml:7:122: steps[0].join.history: is a field of a table join (join: {table: ID, ...}); an interval join is in event time already, and keeps records for within",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("c.yaml", []byte(tt.yaml), env(nil))
			if err == nil {
				t.Fatal("Parse succeeded; want problems")
			}
			got := err.Error()
			if tt.some {
				for _, w := range tt.want {
					if !slices.Contains(strings.Split(got, "\n"), w) {
						t.Errorf("problems:\n%s\nwant among them:\n%s", got, w)
					}
				}
				return
			}
			if got != strings.Join(tt.want, "\n") {
				t.Errorf("problems:\n%s\nwant:\n%s", got, strings.Join(tt.want, "\n"))
			}
		})
	}
}

// A partitioned table joined by a field of the record: validate accepts
// it and says the stream is repartitioned by the join key, and
// WithJoinRepartitions writes the repartition in as a source and a sink
// of their own, with the join reading the new source and everything else
// as it was.
func TestPartitionedTableRepartitionedByJoinKey(t *testing.T) {
	yaml := strings.NewReplacer("name: job\n", "name: job\nscale: {mode: group}\n",
		"topic: customers\n", "topic: customers\n    mode: partitioned\n").Replace(enriched)
	c, err := Parse("c.yaml", []byte(yaml), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Summary(); !strings.Contains(s, "; table customers partitioned: the stream is repartitioned by the join key of steps[0] (customer) through topic job-enrich-repartition, with as many partitions as topic customers") {
		t.Errorf("summary: %s", s)
	}
	if g := c.Graph().Text(c); !strings.Contains(g, "enrich: left join customers on customer as c (its input repartitioned by customer through topic job-enrich-repartition)  <- orders") {
		t.Errorf("validate's graph:\n%s", g)
	}
	if c.JoinRepartitioned() != nil {
		t.Fatalf("a parsed configuration has repartitions %v; only WithJoinRepartitions writes them", c.JoinRepartitioned())
	}
	r := c.WithJoinRepartitions()
	want := []JoinRepartition{{Step: 0, Table: "customers", Topic: "job-enrich-repartition", Source: "enrich-repartition", From: []string{"orders"}}}
	if got := r.JoinRepartitioned(); len(got) != 1 || !slices.Equal(got[0].From, want[0].From) || got[0].Step != 0 || got[0].Topic != want[0].Topic || got[0].Source != want[0].Source || got[0].Table != "customers" {
		t.Errorf("repartitions = %+v, want %+v", got, want)
	}
	if len(r.Sources) != 2 || r.Sources[1].ID != "enrich-repartition" || !slices.Equal(r.Sources[1].Topics, []string{"job-enrich-repartition"}) ||
		r.Sources[1].Format != FormatJoinRecord || r.Sources[1].KeyFormat != FormatRaw || r.Sources[1].Start.Kind != StartEarliest {
		t.Errorf("sources = %+v", r.Sources)
	}
	if len(r.Sinks) != 2 || r.Sinks[1].Topic != "job-enrich-repartition" || r.Sinks[1].Key != "customer" || !slices.Equal(r.Sinks[1].From, []string{"orders"}) || r.Sinks[1].Format != FormatJoinRecord {
		t.Errorf("sinks = %+v", r.Sinks)
	}
	if !slices.Equal(r.Steps[0].From, []string{"enrich-repartition"}) || r.Steps[0].Join.Key != "customer" {
		t.Errorf("the join reads %v, key %q", r.Steps[0].From, r.Steps[0].Join.Key)
	}
	if c.Steps[0].From != nil || len(c.Sources) != 1 || len(c.Sinks) != 1 {
		t.Error("WithJoinRepartitions changed the configuration it was given")
	}
	if r.WithJoinRepartitions() != r {
		t.Error("a second WithJoinRepartitions rewrote the job again")
	}
	g := r.Graph()
	n, _ := g.Lookup("enrich")
	if up := g.Upstream(n); len(up) != 1 || g.Nodes[up[0]].ID != "enrich-repartition" {
		t.Errorf("the join reads %v", up)
	}
	// The co-partitioned job and a broadcast one are left as they are.
	co, err := Parse("c.yaml", []byte(strings.Replace(yaml, "key: customer,", "key: _key,", 1)), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if co.WithJoinRepartitions() != co {
		t.Error("a co-partitioned job was repartitioned")
	}
}

// Event time crosses a join's repartition topic: validate accepts event
// time on the stream and a join as of event time, and the internal source
// has event time (carried by the records, the engine's) when every source
// the join reads has; with one source without it, none.
func TestJoinRepartitionCarriesEventTime(t *testing.T) {
	base := strings.NewReplacer("name: job\n", "name: job\nscale: {mode: group}\n",
		"topic: customers\n", "topic: customers\n    mode: partitioned\n").Replace(enriched)
	timed := strings.Replace(base, "topics: [orders]\n", "topics: [orders]\n    event_time: {max_out_of_orderness: 5s}\n", 1)
	for name, yaml := range map[string]string{
		"event time":               timed,
		"a join as of event time":  strings.Replace(timed, "how: left}", "how: left, time: event_time, history: 1h}", 1),
		"one of two sources timed": strings.Replace(timed, "    event_time: {max_out_of_orderness: 5s}\n", "    event_time: {max_out_of_orderness: 5s}\n  - {id: more, topics: [more]}\n", 1),
	} {
		c, err := Parse("c.yaml", []byte(yaml), env(nil))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		r := c.WithJoinRepartitions()
		rs := r.JoinRepartitioned()
		if len(rs) != 1 {
			t.Fatalf("%s: repartitions %+v", name, rs)
		}
		if said := strings.Contains(c.Summary(), "(the records' event times and their partitions' watermarks cross with them)"); said != rs[0].Timed {
			t.Errorf("%s: the summary says event time crosses: %v, want %v: %s", name, said, rs[0].Timed, c.Summary())
		}
		internal := r.Sources[len(r.Sources)-1]
		if name == "one of two sources timed" {
			if rs[0].Timed || internal.EventTime != nil || !slices.Equal(rs[0].Upstream, []string{"orders", "more"}) {
				t.Errorf("%s: %+v, the source's event time %+v", name, rs[0], internal.EventTime)
			}
			continue
		}
		if !rs[0].Timed || !slices.Equal(rs[0].Upstream, []string{"orders"}) || internal.EventTime == nil || *internal.EventTime != (EventTime{}) {
			t.Errorf("%s: %+v, the source's event time %+v", name, rs[0], internal.EventTime)
		}
	}
}

// Whatever the sources a repartitioned join reads are written in (a
// schema registry format, raw, a Debezium envelope, keys in any format,
// several of them at once), validate accepts the job: the records cross
// the repartition topic decoded (FormatJoinRecord), which the internal
// source and sink say, and whose key the header carries as it was read
// (the internal source's key format is raw). A configuration cannot name
// that format itself.
func TestJoinRepartitionAnyFormat(t *testing.T) {
	group := strings.NewReplacer("name: job\n", "name: job\nscale: {mode: group}\nschema_registry: {url: 'http://localhost:8081'}\n",
		"topic: customers\n", "topic: customers\n    mode: partitioned\n")
	for _, src := range []string{
		"format: avro",
		"format: protobuf, key_format: avro",
		"format: json_schema, key_format: json",
		"format: raw",
		"envelope: debezium",
		"format: avro, envelope: debezium, key_format: protobuf",
	} {
		t.Run(src, func(t *testing.T) {
			yaml := group.Replace(strings.Replace(enriched, "    topics: [orders]\n",
				"    topics: [orders]\n    "+strings.ReplaceAll(src, ", ", "\n    ")+"\n  - {id: more, topics: [more], key_format: avro}\n", 1))
			c, err := Parse("c.yaml", []byte(yaml), env(nil))
			if err != nil {
				t.Fatal(err)
			}
			r := c.WithJoinRepartitions()
			if len(r.Sources) != 3 || r.Sources[2].Format != FormatJoinRecord || r.Sources[2].KeyFormat != FormatRaw || r.Sources[2].Envelope != EnvelopeNone {
				t.Errorf("the internal source: %+v", r.Sources)
			}
			if len(r.Sinks) != 2 || r.Sinks[1].Format != FormatJoinRecord || !slices.Equal(r.Sinks[1].From, []string{"orders", "more"}) {
				t.Errorf("the internal sink: %+v", r.Sinks)
			}
		})
	}
	_, err := Parse("c.yaml", []byte(strings.Replace(enriched, "    topics: [orders]\n", "    topics: [orders]\n    format: join-record\n", 1)), env(nil))
	if err == nil || !strings.Contains(err.Error(), `sources[0].format: unknown format "join-record"`) {
		t.Errorf("the internal format written in a configuration: %v", err)
	}
}
