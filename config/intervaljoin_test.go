package config

import (
	"strings"
	"testing"
	"time"
)

// matched is a valid job with an interval join: payments matched with
// the orders of the hour before them. Cases below change it.
const matched = `name: job
kafka:
  brokers: [localhost:9092]
sources:
  - id: payments
    topics: [payments]
    event_time: {timestamp: ts}
  - id: orders
    topics: [orders]
    event_time: {timestamp: ts}
steps:
  - id: match
    from: payments
    join: {stream: orders, key: order, other_key: id, within: {before: 1h, after: 0s}, as: o, how: left}
sinks:
  - topic: out
`

func TestIntervalJoinLoads(t *testing.T) {
	c, err := Parse("c.yaml", []byte(matched), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	j := c.Steps[0].Join
	want := Join{Stream: "orders", Key: "order", OtherKey: "id", Within: &JoinWithin{Before: time.Hour}, As: "o", How: JoinLeft,
		LateRecords: LateSideOutput, LateTopic: "job-late"}
	if !j.Interval() || j.Within == nil || *j.Within != *want.Within {
		t.Fatalf("join = %+v", j)
	}
	got := *j
	got.Within, want.Within = nil, nil
	if got != want {
		t.Errorf("join = %+v, want %+v", got, want)
	}
	g := c.Graph()
	if g.Linear() {
		t.Error("a graph with an interval join is linear")
	}
	n, _ := g.Lookup("match")
	if ins := g.Nodes[n].Inputs; len(ins) != 2 || !g.IntervalRight(c, n, ins[1]) || g.IntervalRight(c, n, ins[0]) {
		t.Errorf("the join's inputs %v: want payments (left), then orders (right)", ins)
	}
	if text := g.Text(c); !strings.Contains(text, "match: left interval join with orders on order = id within -1h0m0s..+0s as o  <- payments, orders") {
		t.Errorf("graph text:\n%s", text)
	}
	changed, err := Parse("c.yaml", []byte(strings.Replace(matched, "before: 1h", "before: 2h", 1)), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if changed.Fingerprint() == c.Fingerprint() {
		t.Error("changing within does not change the fingerprint")
	}
}

func TestIntervalJoinErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{
			name: "unknown stream, with a suggestion",
			yaml: strings.Replace(matched, "stream: orders,", "stream: order,", 1),
			want: []string{
				`c.yaml:9:5: sources[1].topics: nothing reads this source: name its id "orders" in the from: of a step or a sink`,
				`c.yaml:14:20: steps[0].join.stream: unknown stream "order"; did you mean orders?`,
			},
		},
		{
			name: "fields missing",
			yaml: strings.Replace(matched, "join: {stream: orders, key: order, other_key: id, within: {before: 1h, after: 0s}, as: o, how: left}", "join: {stream: orders, how: outer}", 1),
			want: []string{
				"c.yaml:14:5: steps[0].join.key: required: an expression on the left stream's records (from:) whose value is matched with other_key's, e.g. order_id",
				`c.yaml:14:5: steps[0].join.other_key: required: an expression on the records of stream "orders" whose value is matched with key's, e.g. order_id`,
				"c.yaml:14:5: steps[0].join.within: required: the bounds of the other record's event time around the record's, e.g. within: {before: 1h, after: 1h}",
				"c.yaml:14:5: steps[0].join.as: required: the name the other record's value is written under, e.g. as: order",
				`c.yaml:14:33: steps[0].join.how: unknown join type "outer"; allowed: inner, left`,
			},
		},
		{
			name: "bad bounds",
			yaml: strings.Replace(matched, "within: {before: 1h, after: 0s}", "within: {before: -1h, after: 0s}", 1),
			want: []string{
				"c.yaml:14:72: steps[0].join.within.before: duration -1h is negative",
			},
		},
		{
			name: "bounds not whole milliseconds",
			yaml: strings.Replace(matched, "within: {before: 1h, after: 0s}", "within: {before: 1h, after: 1500us}", 1),
			want: []string{
				"c.yaml:14:83: steps[0].join.within.after: 1.5ms is not whole milliseconds: event time is kept in milliseconds, write e.g. 2ms",
			},
		},
		{
			name: "a stream without event time",
			yaml: strings.Replace(matched, "    topics: [orders]\n    event_time: {timestamp: ts}\n", "    topics: [orders]\n", 1),
			want: []string{
				`c.yaml:13:5: steps[0].join: an interval join matches records in event time: add "event_time: {}" to sources[1] (the Kafka record timestamp), or event_time: {timestamp: <field>}`,
			},
		},
		{
			name: "a table named as a stream, and both",
			yaml: strings.Replace(matched, "join: {stream: orders,", "join: {table: orders, stream: orders,", 1),
			want: []string{
				"c.yaml:14:19: steps[0].join.table: a join reads a table or a stream, this one names both: keep table (a lookup) or stream (an interval join)",
			},
		},
		{
			name: "the stream is also the left input",
			yaml: strings.Replace(matched, "from: payments", "from: [payments, orders]", 1),
			want: []string{
				`c.yaml:14:20: steps[0].join.stream: "orders" is also in this step's from: the left stream is from:, the right one stream:; a record of one stream joins the other's (to join a stream with itself, read it through two steps, e.g. two filters)`,
			},
		},
		{
			name: "no from: the left input defaults to every source",
			yaml: strings.Replace(matched, "    from: payments\n", "", 1),
			want: []string{
				`c.yaml:13:20: steps[0].join.stream: "orders" is also what this step reads by default (the step before it, or every source): name the left stream with from:`,
			},
		},
		{
			name: "a stream read later, and a step reading the join",
			yaml: strings.Replace(matched, "sinks:\n", "  - {id: later, from: orders, filter: 'true'}\n  - {id: after, from: match, filter: 'true'}\nsinks:\n  - {from: later, topic: l}\n", 1) + "    from: after\n",
			want: []string{
				`c.yaml:16:23: steps[2].from[0]: "match" is an interval join: only a sink can read its output`,
			},
		},
		{
			name: "a stream written after the join",
			yaml: strings.Replace(strings.Replace(matched, "stream: orders,", "stream: later,", 1), "sinks:\n", "  - {id: later, from: orders, filter: 'true'}\nsinks:\n", 1),
			want: []string{
				`c.yaml:14:5: steps[0].join: nothing reads this step: name its id "match" in the from: of a later step or a sink`,
				`c.yaml:14:20: steps[0].join.stream: "later" is steps[1], written after this step: a join reads only sources and the steps above it (move this step below it)`,
			},
		},
		{
			name: "group mode runs it; late topics",
			yaml: strings.Replace(matched, "as: o, how: left}", "as: o, how: left, late_records: drop, late_topic: x}", 1) + "scale: {mode: group}\n",
			want: []string{
				"c.yaml:14:138: steps[0].join.late_topic: late_records: drop writes no late topic: remove late_topic, or set late_records: side_output",
			},
		},
		{
			name: "a schema registry format",
			yaml: strings.Replace(matched, "  - topic: out\n", "  - {topic: out, format: avro}\nschema_registry: {url: \"http://127.0.0.1:1\"}\n", 1),
			want: []string{
				`c.yaml:16:26: sinks[0].format: reads the interval join steps[0] (id "match"), whose results have no schema to derive yet: write json (or raw)`,
			},
		},
		{
			name: "interval fields on a table join",
			yaml: `name: job
kafka:
  brokers: [localhost:9092]
sources:
  - id: orders
    topics: [orders]
tables:
  - {id: customers, topic: customers}
steps:
  - id: enrich
    join: {table: customers, key: customer, as: c, other_key: id, within: {before: 1s}}
sinks:
  - topic: out
`,
			want: []string{
				"c.yaml:11:63: steps[0].join.other_key: is a field of an interval join (join: {stream: ID, ...}); a table join has table, key, as and how",
				"c.yaml:11:67: steps[0].join.within: is a field of an interval join (join: {stream: ID, ...}); a table join has table, key, as and how",
			},
		},
		{
			name: "at most once",
			yaml: matched + "guarantee: at_most_once\n",
			want: []string{
				"c.yaml:14:5: steps[0].join: an interval join emits when a checkpoint's watermark closes a record's interval, and guarantee: at_most_once takes no checkpoints: use guarantee: at_least_once or exactly_once",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("c.yaml", []byte(tc.yaml), env(nil))
			if err == nil {
				t.Fatalf("loaded; want:\n%s", strings.Join(tc.want, "\n"))
			}
			if got := err.Error(); got != strings.Join(tc.want, "\n") {
				t.Errorf("problems:\n%s\nwant:\n%s", got, strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestIntervalJoinInGroupMode: group mode runs an interval join, and
// pipeline validate says both streams cross the repartition topic.
func TestIntervalJoinInGroupMode(t *testing.T) {
	c, err := Parse("c.yaml", []byte(matched+"scale: {mode: group}\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if want := "; repartitions every keyed record through job-repartition (32 partitions)"; !strings.HasSuffix(c.Summary(), want) {
		t.Fatalf("summary %q does not end with %q", c.Summary(), want)
	}
}
