package config

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// full sets every field of the schema to something other than its default.
const full = `name: orders-by-user
guarantee: at_least_once
workers: 4
kafka:
  brokers:
    - kafka-1:9092
    - kafka-2:9092
  client_id: orders-app
  transaction_timeout: 2m
  tls:
    enabled: true
    ca_file: /etc/ca.pem
    cert_file: /etc/client.pem
    key_file: /etc/client.key
    server_name: kafka.internal
    insecure_skip_verify: false
  sasl:
    mechanism: SCRAM-SHA-512
    username: app
    password: secret
checkpoint:
  interval: 250ms
  timeout: 1m
  min_pause: 100ms
  key_groups: 256
  replication_factor: 3
sources:
  - id: orders
    topics: [orders-eu, orders-us]
    start: 2024-05-01T00:00:00Z
    format: json
  - id: refunds
    topics: refunds
    start: latest
    format: raw
steps:
  - id: paid
    filter: status == "paid"
  - id: shape
    map:
      user: customer.id
      amount: total * 100
  - id: by-user
    key_by: user
  - id: totals
    aggregate:
      emit: on_checkpoint
      values:
        n: count()
        total: sum(amount)
        low: min(amount)
        high: max(amount)
        mean: avg( amount )
        first_seen: first(ts)
        last_seen: last(ts)
sinks:
  - topic: totals-by-user
    key: user
    format: json
    dead_letter_topic: orders-dlq
    partitions: 6
    replication_factor: 3
admin:
  listen: 0.0.0.0:9000
  token: t0ken
  savepoint_dir: /var/lib/pipeline/savepoints
logging:
  level: debug
  format: json
`

func mustParse(t *testing.T, text string, vars map[string]string) *Config {
	t.Helper()
	c, err := Parse("c.yaml", []byte(text), env(vars))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return c
}

// public is c without the positions, for comparing with a literal.
func public(c *Config) Config {
	out := *c
	out.file, out.where = "", positions{}
	return out
}

func TestParseFull(t *testing.T) {
	c := mustParse(t, full, nil)
	want := Config{
		Name:      "orders-by-user",
		Guarantee: AtLeastOnce,
		Workers:   4,
		Kafka: Kafka{
			Brokers:            []string{"kafka-1:9092", "kafka-2:9092"},
			ClientID:           "orders-app",
			TransactionTimeout: 2 * time.Minute,
			Compression:        CompressionSnappy,
			TLS: TLS{
				Enabled: true, CAFile: "/etc/ca.pem", CertFile: "/etc/client.pem", KeyFile: "/etc/client.key",
				ServerName: "kafka.internal",
			},
			SASL: SASL{Mechanism: SASLScramSHA512, Username: "app", Password: "secret"},
		},
		Checkpoint: Checkpoint{
			Interval: 250 * time.Millisecond, Timeout: time.Minute, MinPause: 100 * time.Millisecond,
			KeyGroups: 256, ReplicationFactor: 3,
		},
		Sources: []Source{
			{
				ID: "orders", Topics: []string{"orders-eu", "orders-us"},
				Start:  StartPosition{Kind: StartAtTimestamp, At: time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)},
				Format: FormatJSON, KeyFormat: FormatRaw, Envelope: EnvelopeNone,
			},
			{ID: "refunds", Topics: []string{"refunds"}, Start: StartPosition{Kind: StartLatest}, Format: FormatRaw, KeyFormat: FormatRaw, Envelope: EnvelopeNone},
		},
		Steps: []Step{
			{ID: "paid", Filter: `status == "paid"`},
			{ID: "shape", Map: []Field{{"user", "customer.id"}, {"amount", "total * 100"}}},
			{ID: "by-user", KeyBy: "user"},
			{ID: "totals", Aggregate: &Aggregate{
				Emit: EmitOnCheckpoint,
				Values: []AggregateValue{
					{"n", AggCount, ""},
					{"total", AggSum, "amount"},
					{"low", AggMin, "amount"},
					{"high", AggMax, "amount"},
					{"mean", AggAvg, "amount"},
					{"first_seen", AggFirst, "ts"},
					{"last_seen", AggLast, "ts"},
				},
			}},
		},
		Sinks: []Sink{{Topic: "totals-by-user", Key: "user", Format: FormatJSON, DeadLetterTopic: "orders-dlq", Partitions: 6, ReplicationFactor: 3,
			SubjectStrategy: TopicNameStrategy, AutoRegister: true}},
		Admin:          Admin{Listen: "0.0.0.0:9000", Token: "t0ken", SavepointDir: "/var/lib/pipeline/savepoints"},
		Logging:        Logging{Level: "debug", Format: "json"},
		Scale:          Scale{Mode: ScaleSingle, Partitions: 32, SessionTimeout: 10 * time.Second},
		SchemaRegistry: SchemaRegistry{Timeout: DefaultRegistryTimeout},
	}
	if got := public(c); !reflect.DeepEqual(got, want) {
		t.Errorf("Parse(full) =\n%+v\nwant\n%+v", got, want)
	}
	if c.File() != "c.yaml" {
		t.Errorf("File() = %q", c.File())
	}
	for i, s := range c.Steps {
		if want := []StepKind{StepFilter, StepMap, StepKeyBy, StepAggregate}[i]; s.Kind() != want {
			t.Errorf("steps[%d].Kind() = %q, want %q", i, s.Kind(), want)
		}
	}
}

// TestParseDefaults asserts every default of a job that sets only what is
// required.
func TestParseDefaults(t *testing.T) {
	c := mustParse(t, minimal+"steps:\n  - key_by: user\n  - aggregate:\n      values: {n: count()}\n", nil)
	want := Config{
		Name:      "job",
		Guarantee: ExactlyOnce,
		Workers:   0,
		Kafka: Kafka{
			Brokers:            []string{"localhost:9092"},
			ClientID:           "pipeline-job",
			TransactionTimeout: 60 * time.Second,
			Compression:        CompressionSnappy,
		},
		Checkpoint: Checkpoint{
			Interval: time.Second, Timeout: 30 * time.Second, MinPause: 0,
			KeyGroups: 128, ReplicationFactor: -1,
		},
		Sources: []Source{{ID: "source-0", Topics: []string{"in"}, Start: StartPosition{Kind: StartEarliest}, Format: FormatJSON, KeyFormat: FormatRaw, Envelope: EnvelopeNone}},
		Steps: []Step{
			{ID: "key_by-0", KeyBy: "user"},
			{ID: "aggregate-1", Aggregate: &Aggregate{Emit: EmitEveryRecord, Values: []AggregateValue{{"n", AggCount, ""}}}},
		},
		Sinks: []Sink{{Topic: "out", Format: FormatJSON, DeadLetterTopic: "job-dead-letter", Partitions: -1, ReplicationFactor: -1,
			SubjectStrategy: TopicNameStrategy, AutoRegister: true}},
		Admin:          Admin{Listen: "127.0.0.1:8080", SavepointDir: "./savepoints"},
		Logging:        Logging{Level: "info", Format: "text"},
		Scale:          Scale{Mode: ScaleSingle, Partitions: 32, SessionTimeout: 10 * time.Second},
		SchemaRegistry: SchemaRegistry{Timeout: DefaultRegistryTimeout},
	}
	if got := public(c); !reflect.DeepEqual(got, want) {
		t.Errorf("Parse(minimal) =\n%+v\nwant\n%+v", got, want)
	}
}

func TestParseSpecialValues(t *testing.T) {
	tests := []struct {
		name  string
		yaml  string
		check func(t *testing.T, c *Config)
	}{
		{
			name: "admin off disables the listener",
			yaml: minimal + "admin:\n  listen: off\n",
			check: func(t *testing.T, c *Config) {
				if c.Admin.Listen != "" {
					t.Errorf("Admin.Listen = %q, want empty", c.Admin.Listen)
				}
			},
		},
		{
			name: "null and empty values take the default",
			yaml: minimal + "guarantee: ''\ncheckpoint:\n  interval:\n  timeout: ~\n  key_groups: ''\nlogging:\n",
			check: func(t *testing.T, c *Config) {
				if c.Guarantee != ExactlyOnce || c.Checkpoint.Interval != time.Second || c.Checkpoint.Timeout != 30*time.Second || c.Checkpoint.KeyGroups != 128 || c.Logging.Level != "info" {
					t.Errorf("defaults not applied: %+v", public(c))
				}
			},
		},
		{
			name: "quoted numbers and booleans, as from environment variables",
			yaml: withKafka("  tls: {enabled: 'true'}\n") + "workers: '3'\n",
			check: func(t *testing.T, c *Config) {
				if c.Workers != 3 || !c.Kafka.TLS.Enabled {
					t.Errorf("workers = %d, tls.enabled = %v", c.Workers, c.Kafka.TLS.Enabled)
				}
			},
		},
		{
			name: "explicit zero where zero is allowed",
			yaml: minimal + "checkpoint:\n  min_pause: 0s\nworkers: 0\n",
			check: func(t *testing.T, c *Config) {
				if c.Checkpoint.MinPause != 0 || c.Workers != 0 {
					t.Errorf("min_pause = %s, workers = %d", c.Checkpoint.MinPause, c.Workers)
				}
			},
		},
		{
			name: "anchors and aliases",
			yaml: strings.Replace(minimal, "sinks:\n  - topic: out\n", "sinks:\n  - &sink {topic: out, format: raw}\n", 1) +
				"steps:\n  - key_by: user\n  - aggregate: {values: &v {n: count()}}\n",
			check: func(t *testing.T, c *Config) {
				if c.Sinks[0].Format != FormatRaw || len(c.Steps[1].Aggregate.Values) != 1 {
					t.Errorf("sinks = %+v, steps = %+v", c.Sinks, c.Steps)
				}
			},
		},
		{
			name: "a byte order mark and CRLF line ends",
			yaml: "\ufeff" + strings.ReplaceAll(minimal, "\n", "\r\n"),
			check: func(t *testing.T, c *Config) {
				if line, col, _ := c.Position("sinks[0].topic"); line != 7 || col != 12 {
					t.Errorf("sinks[0].topic at %d:%d, want 7:12", line, col)
				}
			},
		},
		{
			name: "timestamp with an offset",
			yaml: strings.Replace(minimal, "topics: [in]", "topics: [in]\n    start: '2024-05-01T02:00:00+02:00'", 1),
			check: func(t *testing.T, c *Config) {
				if s := c.Sources[0].Start; s.Kind != StartAtTimestamp || !s.At.Equal(time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)) {
					t.Errorf("start = %+v", s)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t, mustParse(t, tt.yaml, nil))
		})
	}
}

func TestPositionAndErrorf(t *testing.T) {
	c := mustParse(t, full, nil)
	tests := []struct {
		path      string
		line, col int
		ok        bool
	}{
		{"name", 1, 7, true},
		{"kafka.brokers[1]", 7, 7, true},
		{"kafka.sasl", 17, 3, true}, // a section: its key
		{"steps[0].filter", 38, 13, true},
		{"steps[1].map.amount", 42, 15, true},
		{"steps[3].aggregate.values.mean", 53, 15, true},
		{"sinks[0].topic", 57, 12, true},
		{"sinks[0].nothing", 0, 0, false},
	}
	for _, tt := range tests {
		line, col, ok := c.Position(tt.path)
		if line != tt.line || col != tt.col || ok != tt.ok {
			t.Errorf("Position(%q) = %d, %d, %v; want %d, %d, %v", tt.path, line, col, ok, tt.line, tt.col, tt.ok)
		}
	}

	errs := Errors{
		c.Errorf("steps[0].filter", "unknown name %q", "status"),
		c.Errorf("steps[3].aggregate.values.total", "cannot sum a string"),
		c.Errorf("sinks[0].key.more", "not written: placed at the nearest field"),
		c.Errorf("workers", "written"),
	}
	errs.Sort()
	want := strings.Join([]string{
		`c.yaml:3:10: workers: written`,
		`c.yaml:38:13: steps[0].filter: unknown name "status"`,
		`c.yaml:50:16: steps[3].aggregate.values.total: cannot sum a string`,
		`c.yaml:58:5: sinks[0].key.more: not written: placed at the nearest field`,
	}, "\n")
	if got := errs.Error(); got != want {
		t.Errorf("Errorf:\n%s\nwant:\n%s", got, want)
	}

	// A Config built by hand has no positions to offer.
	var hand Config
	if got := hand.Errorf("steps[0].filter", "bad").Error(); got != "steps[0].filter: bad" {
		t.Errorf("Errorf without positions = %q", got)
	}
}

func TestSummary(t *testing.T) {
	tests := []struct {
		yaml string
		want string
	}{
		{full, `job "orders-by-user": at_least_once, 2 sources (3 topics), 4 steps, 1 sink, checkpoint every 250ms`},
		{minimal, `job "job": exactly_once, 1 source (1 topic), 0 steps, 1 sink, checkpoint every 1s`},
		{minimal + "guarantee: at_most_once\n", `job "job": at_most_once, 1 source (1 topic), 0 steps, 1 sink, no checkpoints`},
	}
	for _, tt := range tests {
		if got := mustParse(t, tt.yaml, nil).Summary(); got != tt.want {
			t.Errorf("Summary() = %s\nwant        %s", got, tt.want)
		}
	}
	// The repository's default job.
	data, err := os.ReadFile("../config.yaml")
	if err != nil {
		t.Skipf("no default job: %v", err)
	}
	c, err := Parse("config.yaml", data, env(nil))
	if err != nil {
		t.Fatalf("the repository's config.yaml: %v", err)
	}
	if got, want := c.Summary(), `job "parity-sum": exactly_once, 1 source (1 topic), 2 steps, 1 sink, checkpoint every 1s`; got != want {
		t.Errorf("config.yaml Summary() = %s, want %s", got, want)
	}
}

func TestFingerprint(t *testing.T) {
	base := mustParse(t, full, nil).Fingerprint()
	if len(base) != 64 || strings.Trim(base, "0123456789abcdef") != "" {
		t.Fatalf("Fingerprint() = %q, want 64 hex digits", base)
	}
	// How the job runs: the same fingerprint.
	same := []struct{ from, to string }{
		{"    - kafka-2:9092\n", ""},
		{"interval: 250ms", "interval: 2s"},
		{"timeout: 1m", "timeout: 50s"},
		{"start: latest", "start: earliest"},
		{"topics: [orders-eu, orders-us]", "topics: [orders-us, orders-eu]"},
		{"listen: 0.0.0.0:9000", "listen: off"},
		{"level: debug", "level: warn"},
		{"workers: 4", "workers: 8"},
		{"guarantee: at_least_once", "guarantee: exactly_once"},
		{"client_id: orders-app", "client_id: other"},
	}
	for _, tt := range same {
		if got := mustParse(t, strings.Replace(full, tt.from, tt.to, 1), nil).Fingerprint(); got != base {
			t.Errorf("%q -> %q changed the fingerprint", tt.from, tt.to)
		}
	}
	// What the job computes: a different one each.
	differ := []struct{ from, to string }{
		{"key_groups: 256", "key_groups: 512"},
		{"topics: refunds", "topics: [refunds, chargebacks]"},
		{"format: raw", "format: json"},
		{`filter: status == "paid"`, `filter: status == "PAID"`},
		{"      user: customer.id\n      amount: total * 100\n", "      amount: total * 100\n      user: customer.id\n"},
		{"id: by-user", "id: by-customer"},
		{"total: sum(amount)", "total: max(amount)"},
		{"emit: on_checkpoint", "emit: every_record"},
		{"topic: totals-by-user", "topic: totals"},
		{"key: user", "key: amount"},
		{"dead_letter_topic: orders-dlq", "dead_letter_topic: dlq"},
	}
	seen := map[string]string{base: "base"}
	for _, tt := range differ {
		fp := mustParse(t, strings.Replace(full, tt.from, tt.to, 1), nil).Fingerprint()
		if prev, dup := seen[fp]; dup {
			t.Errorf("%q -> %q: fingerprint equals that of %s", tt.from, tt.to, prev)
		}
		seen[fp] = tt.from
	}
}
