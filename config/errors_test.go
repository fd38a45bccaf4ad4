package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// minimal is the smallest valid job, seven lines long: cases below append
// to it, so their problems are on line 8 and after.
const minimal = `name: job
kafka:
  brokers: [localhost:9092]
sources:
  - topics: [in]
sinks:
  - topic: out
`

// withKafka adds lines to the kafka section of minimal, from line 4 on.
func withKafka(lines string) string {
	return strings.Replace(minimal, "  brokers: [localhost:9092]\n", "  brokers: [localhost:9092]\n"+lines, 1)
}

// env is the environment of the table tests.
func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}
}

// TestParseErrors asserts the exact text of the problems reported for bad
// files: position, path and message are all part of the contract.
func TestParseErrors(t *testing.T) {
	long := strings.Repeat("a", 250)
	tests := []struct {
		name string
		yaml string
		env  map[string]string
		want []string
	}{
		// The file as a whole.
		{
			name: "empty file names every required field",
			yaml: "",
			want: []string{
				"c.yaml:1:1: name: required: it names the job's internal topics, transactional ids and consumer group",
				"c.yaml:1:1: kafka.brokers: at least one broker (host:port) is required",
				"c.yaml:1:1: sources: at least one source is required",
				"c.yaml:1:1: sinks: at least one sink is required",
			},
		},
		{
			name: "yaml syntax error carries the parser's line",
			yaml: "name: job\nkafka:\n  brokers: [a:1\nsources: []\n",
			want: []string{"c.yaml:3:1: invalid YAML: did not find expected ',' or ']'"},
		},
		{
			name: "top level must be a mapping",
			yaml: "- name: job\n",
			want: []string{"c.yaml:1:1: want a mapping, got a list"},
		},
		{
			name: "second document",
			yaml: minimal + "---\nname: other\n",
			want: []string{"c.yaml:8:1: the file holds one YAML document; a second one starts here"},
		},
		{
			name: "control character",
			yaml: "name: jo\x01b\n",
			want: []string{"c.yaml:1:9: character U+0001 is not allowed in YAML"},
		},
		{
			name: "invalid UTF-8",
			yaml: "name: j\xffob\n",
			want: []string{"c.yaml:1:8: invalid UTF-8 (the file must be UTF-8 text)"},
		},

		// Interpolation.
		{
			name: "unterminated reference",
			yaml: "name: ${JOB\n",
			want: []string{"c.yaml:1:7: unterminated ${: missing } on the same line (write $$ for a literal $)"},
		},
		{
			name: "bad variable name, every one reported",
			yaml: "name: ${1JOB}\nguarantee: ${GUARANTEE:?unset}\n",
			want: []string{
				"c.yaml:1:7: bad variable reference ${1JOB}: the name must be letters, digits and _, not starting with a digit; the forms are ${VAR} and ${VAR:-default}",
				"c.yaml:2:12: bad variable reference ${GUARANTEE:?unset}: the name must be letters, digits and _, not starting with a digit; the forms are ${VAR} and ${VAR:-default}",
			},
		},
		{
			name: "a bad reference hides only what is on its line",
			yaml: "name: ${JOB\nworkers: many\n" + strings.Replace(minimal[len("name: job\n"):], "topic: out", "topic: ${OUT:-out", 1) +
				"steps:\n  - aggregate: {values: {n: count()}}\n",
			want: []string{
				"c.yaml:1:7: unterminated ${: missing } on the same line (write $$ for a literal $)",
				`c.yaml:2:10: workers: want a whole number, got the string "many"`,
				"c.yaml:8:12: unterminated ${: missing } on the same line (write $$ for a literal $)",
				`c.yaml:10:5: steps[0].aggregate: needs a key_by step before it to say what to group by (for one global group: key_by: '"all"')`,
			},
		},
		{
			name: "nested reference in a default",
			yaml: "name: ${JOB:-${OTHER}}\n",
			want: []string{"c.yaml:1:7: bad variable reference ${JOB:-${OTHER}: a default cannot contain ${"},
		},
		{
			name: "value with a line break",
			yaml: "name: ${JOB}\n",
			env:  map[string]string{"JOB": "a\nb"},
			want: []string{"c.yaml:1:7: the value of JOB contains a line break; values must fit on one line"},
		},
		{
			name: "column after a substitution is the column as written",
			yaml: "name: job\nkafka:\n  brokers: [${B}, nohost]\nsources:\n  - topics: [in]\nsinks:\n  - topic: out\n",
			env:  map[string]string{"B": "kafka-1.example.com:9092"},
			want: []string{`c.yaml:3:19: kafka.brokers[1]: "nohost" is not host:port`},
		},
		{
			name: "unset variable in a required field",
			yaml: strings.Replace(minimal, "topic: out", "topic: ${OUTPUT_TOPIC}", 1),
			want: []string{"c.yaml:7:5: sinks[0].topic: required"},
		},
		{
			name: "comma list item points into the list",
			yaml: strings.Replace(minimal, "[localhost:9092]", "a:1, b, c:3", 1),
			want: []string{`c.yaml:3:17: kafka.brokers[1]: "b" is not host:port`},
		},

		// Shapes.
		{
			name: "unknown field suggests the closest",
			yaml: strings.Replace(minimal, "topic: out", "topc: out", 1),
			want: []string{
				"c.yaml:7:5: sinks[0].topc: unknown field; did you mean topic?",
				"c.yaml:7:5: sinks[0].topic: required",
			},
		},
		{
			// Every field and enum name gets the suggestion a typo deserves:
			// a swap of two letters is one edit (strat, jsno), and a short
			// word's one edit is close enough (inof, smu).
			name: "typos of fields and enum values suggest the closest",
			yaml: "name: job\nkafka:\n  brokers: [localhost:9092]\nsources:\n  - topics: [in]\n    strat: earliest\n    format: jsno\n" +
				"  - topics: [in2]\n    start: earlist\nsteps:\n  - key_by: n\n  - aggregate:\n      values:\n        c: cuont()\n        s: smu(n)\n" +
				"sinks:\n  - topic: out\nlogging:\n  level: inof\n",
			want: []string{
				"c.yaml:6:5: sources[0].strat: unknown field; did you mean start?",
				`c.yaml:7:13: sources[0].format: unknown format "jsno"; did you mean json?`,
				`c.yaml:9:12: sources[1].start: unknown start "earlist"; did you mean earliest? (want earliest, latest or an RFC 3339 timestamp such as 2024-05-01T00:00:00Z)`,
				`c.yaml:14:12: steps[1].aggregate.values.c: unknown aggregate function "cuont"; did you mean count?`,
				`c.yaml:15:12: steps[1].aggregate.values.s: unknown aggregate function "smu"; did you mean sum?`,
				`c.yaml:19:10: logging.level: unknown level "inof"; did you mean info?`,
			},
		},
		{
			name: "unknown field far from all lists them",
			yaml: minimal + "admin:\n  colour: blue\n",
			want: []string{"c.yaml:9:3: admin.colour: unknown field; allowed: listen, advertise, token, savepoint_dir"},
		},
		{
			name: "duplicate key",
			yaml: minimal + "name: again\n",
			want: []string{"c.yaml:8:1: name: written twice (first at line 1); keep one"},
		},
		{
			name: "merge key",
			yaml: minimal + "base: &b {level: info}\nlogging:\n  <<: *b\n",
			want: []string{
				"c.yaml:8:1: base: unknown field; allowed: name, guarantee, workers, kafka, checkpoint, sources, tables, steps, sinks, admin, logging, scale, schema_registry",
				"c.yaml:10:3: logging: merge keys (<<) are not supported; write the settings out",
			},
		},
		{
			name: "mapping where a string is expected",
			yaml: strings.Replace(minimal, "name: job", "name: {first: job}", 1),
			want: []string{"c.yaml:1:7: name: want a string, got a mapping"},
		},
		{
			name: "string where a mapping is expected",
			yaml: strings.Replace(minimal, "kafka:\n  brokers: [localhost:9092]", "kafka: localhost:9092", 1),
			want: []string{`c.yaml:2:8: kafka: want a mapping, got the string "localhost:9092"`},
		},
		{
			name: "mapping where a list is expected",
			yaml: strings.Replace(minimal, "sinks:\n  - topic: out", "sinks:\n  topic: out", 1),
			want: []string{"c.yaml:7:3: sinks: want a list, got a mapping"},
		},
		{
			name: "not a number",
			yaml: minimal + "workers: abc\ncheckpoint:\n  key_groups: 1.5\n",
			want: []string{
				`c.yaml:8:10: workers: want a whole number, got the string "abc"`,
				"c.yaml:10:15: checkpoint.key_groups: want a whole number, got the number 1.5",
			},
		},
		{
			name: "not a boolean",
			yaml: withKafka("  tls:\n    enabled: yes\n"),
			want: []string{`c.yaml:5:14: kafka.tls.enabled: want true or false, got the string "yes"`},
		},
		{
			name: "list of mappings where strings are expected",
			yaml: strings.Replace(minimal, "topics: [in]", "topics: [{name: in}]", 1),
			want: []string{"c.yaml:5:14: sources[0].topics[0]: want a string, got a mapping"},
		},

		// Durations.
		{
			name: "duration without a unit",
			yaml: minimal + "checkpoint:\n  interval: 1000\n",
			want: []string{"c.yaml:9:13: checkpoint.interval: duration needs a unit, e.g. 1s (got 1000)"},
		},
		{
			name: "bad and negative durations",
			yaml: minimal + "checkpoint:\n  timeout: soon\n  min_pause: -1s\n",
			want: []string{
				`c.yaml:9:12: checkpoint.timeout: invalid duration "soon": want a number with a unit (ns, us, ms, s, m, h, d), e.g. 250ms, 1s, 1m30s, 7d`,
				"c.yaml:10:14: checkpoint.min_pause: duration -1s is negative",
			},
		},
		{
			name: "durations in days: negative and too large",
			yaml: minimal + "checkpoint:\n  timeout: -1d\n  min_pause: 200000d\n  interval: 3000000h\n",
			want: []string{
				"c.yaml:9:12: checkpoint.timeout: duration -1d is negative",
				"c.yaml:10:14: checkpoint.min_pause: duration 200000d is too large: at most 106751d (about 292 years)",
				"c.yaml:11:13: checkpoint.interval: duration 3000000h is too large: at most 106751d (about 292 years)",
			},
		},

		// Enums.
		{
			name: "unknown enum values list the allowed ones",
			yaml: minimal + "    format: parquet\n    dead_letter_topic: dlq\nguarantee: exactly-once\nlogging:\n  level: verbose\n  format: xml\n",
			want: []string{
				"c.yaml:8:13: sinks[0].format: unknown format \"parquet\"; allowed: json, raw, avro, protobuf, json_schema",
				"c.yaml:10:12: guarantee: unknown guarantee \"exactly-once\"; did you mean exactly_once?",
				"c.yaml:12:10: logging.level: unknown level \"verbose\"; allowed: debug, info, warn, error",
				"c.yaml:13:11: logging.format: unknown format \"xml\"; allowed: text, json",
			},
		},
		{
			name: "source start",
			yaml: strings.Replace(minimal, "topics: [in]", "topics: [in]\n    start: 2024-05-01", 1),
			want: []string{`c.yaml:6:12: sources[0].start: want earliest, latest or an RFC 3339 timestamp such as 2024-05-01T00:00:00Z, got "2024-05-01"`},
		},
		{
			name: "sasl mechanism and credentials",
			yaml: withKafka("  sasl:\n    mechanism: plain\n"),
			want: []string{
				"c.yaml:4:3: kafka.sasl.username: required with mechanism plain",
				"c.yaml:4:3: kafka.sasl.password: required with mechanism plain",
				`c.yaml:5:16: kafka.sasl.mechanism: unknown SASL mechanism "plain"; did you mean PLAIN?`,
			},
		},
		{
			name: "compression",
			yaml: withKafka("  compression: zstandard\n"),
			want: []string{`c.yaml:4:16: kafka.compression: unknown compression "zstandard"; allowed: none, gzip, snappy, lz4, zstd`},
		},
		{
			name: "sasl credentials without a mechanism",
			yaml: withKafka("  sasl:\n    username: u\n    password: p\n"),
			want: []string{"c.yaml:4:3: kafka.sasl.mechanism: required when a username or password is set: one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"},
		},

		// Steps.
		{
			name: "step with no kind and step with two",
			yaml: minimal + "steps:\n  - id: nothing\n  - filter: x > 1\n    key_by: x\n",
			want: []string{
				"c.yaml:9:5: steps[0]: a step needs one of filter, map, key_by, join, aggregate or window",
				"c.yaml:10:5: steps[1]: a step does one thing, this one sets filter and key_by: split it into one step each",
			},
		},
		{
			name: "empty expressions",
			yaml: minimal + "steps:\n  - filter: ''\n  - key_by:\n  - map: {a: x, b: }\n",
			want: []string{
				"c.yaml:9:13: steps[0].filter: an expression is required",
				"c.yaml:10:5: steps[1].key_by: an expression is required",
				"c.yaml:11:17: steps[2].map.b: an expression is required",
			},
		},
		{
			name: "map shape",
			yaml: minimal + "steps:\n  - map: [a, b]\n  - map: {}\n  - map: {a: [x]}\n",
			want: []string{
				"c.yaml:9:10: steps[0].map: want a mapping, got a list",
				"c.yaml:10:5: steps[1].map: at least one field is required, e.g. total: price * quantity",
				"c.yaml:11:14: steps[2].map.a: want an expression (a string), got a list",
			},
		},
		{
			name: "aggregate values",
			yaml: minimal + `steps:
  - key_by: user
  - aggregate:
      emit: sometimes
      values:
        n: count(x)
        total: sum()
        avg: average(x)
        top: max
        none:
`,
			want: []string{
				"c.yaml:11:13: steps[1].aggregate.emit: unknown emit mode \"sometimes\"; allowed: every_record, on_checkpoint",
				"c.yaml:13:12: steps[1].aggregate.values.n: count() takes no argument; got count(x)",
				"c.yaml:14:16: steps[1].aggregate.values.total: sum() needs an argument, e.g. sum(amount)",
				"c.yaml:15:14: steps[1].aggregate.values.avg: unknown aggregate function \"average\"; allowed: count, sum, min, max, avg, first, last",
				"c.yaml:16:14: steps[1].aggregate.values.top: want function(expression), e.g. sum(amount) or count(); got \"max\"",
				"c.yaml:17:9: steps[1].aggregate.values.none: want an aggregate such as count() or sum(amount)",
			},
		},
		{
			name: "on_checkpoint under at_most_once would never emit",
			yaml: minimal + "steps:\n  - key_by: user\n  - aggregate:\n      emit: on_checkpoint\n      values: {n: count()}\nguarantee: at_most_once\n",
			want: []string{"c.yaml:11:13: steps[1].aggregate.emit: on_checkpoint emits when a checkpoint completes, and guarantee: at_most_once takes no checkpoints, so nothing would ever be written: use emit: every_record (or guarantee: at_least_once or exactly_once)"},
		},
		{
			name: "on_checkpoint from the environment under at_most_once",
			yaml: "guarantee: ${G}\n" + minimal + "steps:\n  - key_by: user\n  - aggregate: {emit: '${EMIT}', values: {n: count()}}\n",
			env:  map[string]string{"G": "at_most_once", "EMIT": "on_checkpoint"},
			want: []string{"c.yaml:11:23: steps[1].aggregate.emit: on_checkpoint emits when a checkpoint completes, and guarantee: at_most_once takes no checkpoints, so nothing would ever be written: use emit: every_record (or guarantee: at_least_once or exactly_once)"},
		},
		{
			name: "aggregate without values",
			yaml: minimal + "steps:\n  - key_by: user\n  - aggregate:\n",
			want: []string{"c.yaml:10:5: steps[1].aggregate.values: at least one value is required, e.g. count: count()"},
		},
		{
			name: "aggregate needs key_by before it, and no step follows it",
			yaml: minimal + "steps:\n  - aggregate: {values: {n: count()}}\n  - key_by: user\n  - aggregate: {values: {n: count()}}\n",
			want: []string{
				`c.yaml:9:5: steps[0].aggregate: needs a key_by step before it to say what to group by (for one global group: key_by: '"all"')`,
				`c.yaml:10:13: steps[1].key_by: follows the aggregate steps[0] (id "aggregate-0"), and only a sink can read its output: to branch off before it, read what it reads, e.g. from: source-0`,
			},
		},
		{
			name: "duplicate operator ids across sources and steps",
			yaml: minimal + "steps:\n  - id: source-0\n    filter: x > 1\n  - filter: y\n  - id: filter-1\n    filter: z\n",
			want: []string{
				"c.yaml:9:9: steps[0].id: id \"source-0\" is already used by sources[0]: operator ids must be unique",
				"c.yaml:12:9: steps[2].id: id \"filter-1\" is already used by steps[1]: operator ids must be unique",
			},
		},

		// Topics.
		{
			name: "sink topic is a source topic",
			yaml: strings.Replace(minimal, "topic: out", "topic: in", 1),
			want: []string{`c.yaml:7:12: sinks[0].topic: "in" is also read by sources[0] (id "source-0"): a job must not write to a topic it reads`},
		},
		{
			name: "dead-letter topic shared with a sink or a source",
			yaml: minimal + "    dead_letter_topic: in\n  - topic: other\n    dead_letter_topic: out\n",
			want: []string{
				`c.yaml:8:24: sinks[0].dead_letter_topic: "in" is also read by sources[0] (id "source-0"): dead letters need a topic of their own`,
				`c.yaml:10:24: sinks[1].dead_letter_topic: "out" is also the output topic of sinks[0]: dead letters need a topic of their own`,
			},
		},
		{
			name: "invalid topic names",
			yaml: strings.Replace(minimal, "topics: [in]", "topics: [in, 'a b', ., "+long+", in, job-state]", 1),
			want: []string{
				`c.yaml:5:18: sources[0].topics[1]: "a b" is not a valid topic name: use letters, digits, '.', '_' and '-'`,
				`c.yaml:5:25: sources[0].topics[2]: "." cannot be a topic name`,
				`c.yaml:5:28: sources[0].topics[3]: a topic name has at most 249 characters, this one 250`,
				`c.yaml:5:280: sources[0].topics[4]: topic "in" is already read by sources[0] (id "source-0"): read each topic once`,
				`c.yaml:5:284: sources[0].topics[5]: "job-state" is the job's internal state topic`,
			},
		},
		{
			name: "missing topics",
			yaml: strings.Replace(minimal, "topics: [in]", "topics: []", 1),
			want: []string{"c.yaml:5:5: sources[0].topics: at least one topic is required"},
		},

		// Job and connection.
		{
			name: "job name",
			yaml: strings.Replace(minimal, "name: job", "name: my job", 1),
			want: []string{`c.yaml:1:7: name: "my job" has characters that Kafka topic names do not allow (it prefixes topic names): use letters, digits, '.', '_' and '-'`},
		},
		{
			name: "job name too long",
			yaml: strings.Replace(minimal, "name: job", "name: "+long[:201], 1),
			want: []string{"c.yaml:1:7: name: 201 characters is too long: at most 200, since it prefixes topic names"},
		},
		{
			name: "brokers",
			yaml: strings.Replace(minimal, "[localhost:9092]", "[localhost, ':9092', 'h:99999']", 1),
			want: []string{
				`c.yaml:3:13: kafka.brokers[0]: "localhost" is not host:port`,
				`c.yaml:3:24: kafka.brokers[1]: ":9092" has no host: want host:port`,
				`c.yaml:3:33: kafka.brokers[2]: "h:99999" has no valid port ("99999"): want host:port`,
			},
		},
		{
			name: "no brokers",
			yaml: strings.Replace(minimal, "[localhost:9092]", "[]", 1),
			want: []string{"c.yaml:3:3: kafka.brokers: at least one broker (host:port) is required"},
		},
		{
			name: "tls certificate without key",
			yaml: withKafka("  tls:\n    cert_file: client.pem\n"),
			want: []string{"c.yaml:5:16: kafka.tls.cert_file: set without kafka.tls.key_file: a client certificate needs its key (set both or neither)"},
		},
		{
			name: "tls key without certificate",
			yaml: withKafka("  tls:\n    key_file: client.key\n"),
			want: []string{"c.yaml:5:15: kafka.tls.key_file: set without kafka.tls.cert_file: a client key needs its certificate (set both or neither)"},
		},
		{
			name: "workers",
			yaml: minimal + "workers: -1\n",
			want: []string{"c.yaml:8:10: workers: -1 is negative: want 0 (one per CPU) or more"},
		},
		{
			name: "more workers than key groups",
			yaml: minimal + "workers: 16\ncheckpoint:\n  key_groups: 8\n",
			want: []string{"c.yaml:8:10: workers: 16 workers but only 8 key groups (checkpoint.key_groups): a key group is never split, so the extra workers would idle; lower workers or start a new job with more key groups"},
		},
		{
			name: "admin listen",
			yaml: minimal + "admin:\n  listen: 8080\n",
			want: []string{`c.yaml:9:11: admin.listen: "8080" is not host:port (or off to disable the listener)`},
		},

		// Checkpoints.
		{
			name: "checkpoint ranges",
			yaml: minimal + "checkpoint:\n  interval: 5ms\n  timeout: 0s\n  key_groups: 0\n  replication_factor: 0\n",
			want: []string{
				"c.yaml:9:13: checkpoint.interval: 5ms is too short: at least 10ms (each checkpoint is a Kafka transaction)",
				"c.yaml:10:12: checkpoint.timeout: must be more than 0",
				"c.yaml:11:15: checkpoint.key_groups: 0 is out of range: want 1 to 32768",
				"c.yaml:12:23: checkpoint.replication_factor: 0 is not a replication factor: want -1 (the brokers' default) or at least 1",
			},
		},
		{
			name: "sink partitions and replication",
			yaml: minimal + "    partitions: 0\n    replication_factor: -2\n",
			want: []string{
				"c.yaml:8:17: sinks[0].partitions: 0 is not a partition count: want at least 1, or -1 (the brokers' default)",
				"c.yaml:9:25: sinks[0].replication_factor: -2 is not a replication factor: want at least 1, or -1 (the brokers' default)",
			},
		},
		{
			name: "too many key groups",
			yaml: minimal + "checkpoint:\n  key_groups: 40000\n",
			want: []string{"c.yaml:9:15: checkpoint.key_groups: 40000 is out of range: want 1 to 32768"},
		},
		{
			name: "transaction timeout shorter than a checkpoint",
			yaml: withKafka("  transaction_timeout: 20s\n"),
			want: []string{"c.yaml:4:24: kafka.transaction_timeout: kafka.transaction_timeout (20s) must be at least checkpoint.interval + checkpoint.timeout (1s + 30s = 31s), or the broker aborts a checkpoint's transaction before it may commit: raise kafka.transaction_timeout to 31s or lower checkpoint.timeout"},
		},
		{
			name: "default transaction timeout shorter than a long checkpoint timeout",
			yaml: minimal + "checkpoint:\n  timeout: 2m\n",
			want: []string{"c.yaml:9:12: checkpoint.timeout: kafka.transaction_timeout (1m0s) must be at least checkpoint.interval + checkpoint.timeout (1s + 2m0s = 2m1s), or the broker aborts a checkpoint's transaction before it may commit: raise kafka.transaction_timeout to 2m1s or lower checkpoint.timeout"},
		},

		// Several problems at once, in file order.
		{
			name: "every problem of a file, in order",
			yaml: `name: orders
guarantee: exactly_once
kafka:
  brokers: ${KAFKA_BROKERS:-localhost}
  transaction_timeout: 10
sources:
  - id: orders
    topics: orders
steps:
  - filter: amount > 0
    mapp: {x: 1}
  - aggregate:
      values: {total: sum(amount)}
sinks:
  - topic: orders
  - key: user
`,
			want: []string{
				`c.yaml:4:12: kafka.brokers[0]: "localhost" is not host:port`,
				"c.yaml:5:24: kafka.transaction_timeout: duration needs a unit, e.g. 1s (got 10)",
				"c.yaml:11:5: steps[0].mapp: unknown field; did you mean map?",
				`c.yaml:12:5: steps[1].aggregate: needs a key_by step before it to say what to group by (for one global group: key_by: '"all"')`,
				`c.yaml:15:12: sinks[0].topic: "orders" is also read by sources[0] (id "orders"): a job must not write to a topic it reads`,
				"c.yaml:16:5: sinks[1].topic: required",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("c.yaml", []byte(tt.yaml), env(tt.env))
			if err == nil {
				t.Fatalf("Parse succeeded (%s), want errors:\n%s", c.Summary(), strings.Join(tt.want, "\n"))
			}
			if c != nil {
				t.Errorf("Parse returned a Config with an error")
			}
			var problems Errors
			if !errors.As(err, &problems) {
				t.Fatalf("error is %T, want Errors: %v", err, err)
			}
			got := strings.Split(err.Error(), "\n")
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("problems:\n%s\nwant:\n%s", err, strings.Join(tt.want, "\n"))
			}
			if len(problems) != len(tt.want) {
				t.Errorf("len(Errors) = %d, want %d", len(problems), len(tt.want))
			}
		})
	}
}

func TestErrorFormat(t *testing.T) {
	tests := []struct {
		e    Error
		want string
	}{
		{Error{File: "c.yaml", Line: 3, Col: 5, Path: "sinks[0].topic", Msg: "required"}, "c.yaml:3:5: sinks[0].topic: required"},
		{Error{File: "c.yaml", Line: 3, Col: 1, Msg: "invalid YAML: x"}, "c.yaml:3:1: invalid YAML: x"},
		{Error{File: "c.yaml", Msg: "invalid YAML: x"}, "c.yaml: invalid YAML: x"},
		{Error{Path: "steps", Msg: "m"}, "steps: m"},
		{Error{File: "c.yaml", Line: 2, Col: 1, Path: "admin.a\nb", Msg: "unknown field"}, `c.yaml:2:1: "admin.a\nb": unknown field`},
	}
	for _, tt := range tests {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

func TestErrorsSortAndUnwrap(t *testing.T) {
	es := Errors{
		{File: "f", Line: 9, Col: 1, Msg: "c"},
		{File: "f", Line: 2, Col: 7, Msg: "b"},
		{File: "f", Line: 2, Col: 3, Msg: "a"},
		{File: "f", Line: 9, Col: 1, Msg: "d"},
	}
	es.Sort()
	if got, want := es.Error(), "f:2:3: a\nf:2:7: b\nf:9:1: c\nf:9:1: d"; got != want {
		t.Errorf("sorted:\n%s\nwant:\n%s", got, want)
	}
	var one *Error
	if !errors.As(error(es), &one) || one.Msg != "a" {
		t.Errorf("errors.As(*Error) = %v, want the first problem", one)
	}
}

// TestAliasBudget: a small file whose aliases expand to millions of nodes
// is refused quickly instead of being walked.
func TestAliasBudget(t *testing.T) {
	var b strings.Builder
	b.WriteString("name: job\nkafka: {brokers: [h:1]}\nsinks: [{topic: out}]\nt: &t [")
	for i := range 2000 {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("a")
	}
	b.WriteString("]\ns: &s {topics: *t}\nsources: [")
	for i := range 2000 {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("*s")
	}
	b.WriteString("]\n")
	_, err := Parse("c.yaml", []byte(b.String()), nil)
	var problems Errors
	if !errors.As(err, &problems) {
		t.Fatalf("Parse = %v, want Errors", err)
	}
	const want = "c.yaml:4:5507: the document expands (through aliases) to more than 100000 nodes; write it out without aliases"
	if err.Error() != want {
		t.Errorf("problems (%d):\n%.500s\nwant:\n%s", len(problems), err, want)
	}
}

// incomplete stands in for the operator package's expression check: an
// expression ending in "+" does not compile, and a step of no kind is one
// the check reports too (as the operator package does).
func incomplete(c *Config) Errors {
	var es Errors
	for i, s := range c.Steps {
		path := fmt.Sprintf("steps[%d]", i)
		switch {
		case s.Kind() == "":
			es = append(es, c.Errorf(path, "step has no kind"))
		case strings.HasSuffix(s.Filter, "+"):
			es = append(es, c.Errorf(path+".filter", "incomplete"))
		}
	}
	for i, s := range c.Sinks {
		if strings.HasSuffix(s.Key, "+") {
			es = append(es, c.Errorf(fmt.Sprintf("sinks[%d].key", i), "incomplete"))
		}
	}
	return es
}

// TestParseWithCheck: what a check finds is reported with every other
// problem of the file, except its consequences of those.
func TestParseWithCheck(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{
			name: "alone",
			yaml: minimal + "    key: n +\n",
			want: []string{"c.yaml:8:10: sinks[0].key: incomplete"},
		},
		{
			name: "with schema, validation and interpolation problems",
			yaml: "name: ${JOB\n" + minimal[len("name: job\n"):] + "    key: n +\n    formatt: json\nworkers: -1\nsteps:\n  - filter: x +\n",
			want: []string{
				"c.yaml:1:7: unterminated ${: missing } on the same line (write $$ for a literal $)",
				"c.yaml:8:10: sinks[0].key: incomplete",
				"c.yaml:9:5: sinks[0].formatt: unknown field; did you mean format?",
				"c.yaml:10:10: workers: -1 is negative: want 0 (one per CPU) or more",
				"c.yaml:12:13: steps[0].filter: incomplete",
			},
		},
		{
			name: "not the consequences of other problems",
			yaml: minimal + "    key: ${K +\nsteps:\n  - filter: [x +]\n  - id: nothing\n  - filter: ''\n",
			want: []string{
				"c.yaml:8:10: unterminated ${: missing } on the same line (write $$ for a literal $)",
				"c.yaml:10:13: steps[0].filter: want a string, got a list",
				"c.yaml:11:5: steps[1]: a step needs one of filter, map, key_by, join, aggregate or window",
				"c.yaml:12:13: steps[2].filter: an expression is required",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("c.yaml", []byte(tt.yaml), nil, WithCheck(incomplete))
			if c != nil || err == nil {
				t.Fatalf("Parse = %v, %v; want only problems", c, err)
			}
			if got := err.Error(); got != strings.Join(tt.want, "\n") {
				t.Errorf("problems:\n%s\nwant:\n%s", got, strings.Join(tt.want, "\n"))
			}
		})
	}
}

// The distance behind "did you mean": a swap of neighbours is one edit.
func TestEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"strat", "start", 1}, {"jsno", "json", 1}, {"smu", "sum", 1}, {"ab", "ba", 1},
		{"fromat", "format", 1}, {"topc", "topic", 1}, {"", "abc", 3}, {"abc", "abc", 0},
		{"kitten", "sitting", 3}, {"ca", "abc", 3},
	} {
		if got := editDistance(c.a, c.b); got != c.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
