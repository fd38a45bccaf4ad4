package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// withRegistry is minimal with a schema_registry section, from line 8 on.
func withRegistry(lines string) string {
	return minimal + "schema_registry:\n" + lines
}

// TestSchemaSettingsErrors holds the schema registry settings to exact
// positions and messages, as TestParseErrors does for the rest.
func TestSchemaSettingsErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{
			name: "a schema format needs a registry",
			yaml: strings.Replace(minimal, "topics: [in]", "topics: [in]\n    format: avro\n    key_format: protobuf", 1) + "    format: json_schema\n",
			want: []string{
				"c.yaml:6:13: sources[0].format: avro needs a schema registry: set schema_registry.url",
				"c.yaml:7:17: sources[0].key_format: protobuf needs a schema registry: set schema_registry.url",
				"c.yaml:10:13: sinks[0].format: json_schema needs a schema registry: set schema_registry.url",
			},
		},
		{
			name: "registry url, credentials and tls",
			yaml: withRegistry("  url: [localhost:8081, 'https://']\n  username: app\n  token: t\n  tls:\n    cert_file: c.pem\n  timeout: 0s\n"),
			want: []string{
				`c.yaml:9:9: schema_registry.url[0]: "localhost:8081" is not an http:// or https:// URL`,
				`c.yaml:9:25: schema_registry.url[1]: "https://" has no host`,
				"c.yaml:11:10: schema_registry.token: set either a bearer token or username and password, not both",
				"c.yaml:13:16: schema_registry.tls.cert_file: set without schema_registry.tls.key_file: a client certificate needs its key (set both or neither)",
				"c.yaml:14:12: schema_registry.timeout: must be more than 0",
			},
		},
		{
			name: "password without username",
			yaml: withRegistry("  url: http://r:8081\n  password: p\n"),
			want: []string{"c.yaml:10:13: schema_registry.password: set without schema_registry.username: basic authentication needs both"},
		},
		{
			name: "settings without a url",
			yaml: withRegistry("  token: t\n"),
			want: []string{"c.yaml:8:1: schema_registry.url: required when schema_registry is set: the registry's base URL, e.g. http://127.0.0.1:8081"},
		},
		{
			name: "source key format, envelope",
			yaml: strings.Replace(withRegistry("  url: http://r:8081\n"), "topics: [in]", "topics: [in]\n    format: protobuf\n    key_format: yaml\n    envelope: debezium", 1),
			want: []string{
				`c.yaml:7:17: sources[0].key_format: unknown key format "yaml"; allowed: raw, json, avro, protobuf, json_schema`,
				"c.yaml:8:15: sources[0].envelope: debezium events are read in format json or avro, not protobuf",
			},
		},
		{
			name: "unknown envelope",
			yaml: strings.Replace(minimal, "topics: [in]", "topics: [in]\n    envelope: canal", 1),
			want: []string{`c.yaml:6:15: sources[0].envelope: unknown envelope "canal"; allowed: none, debezium`},
		},
		{
			name: "sink schema settings on a json sink",
			yaml: minimal + "    subject: out-value\n",
			want: []string{"c.yaml:8:14: sinks[0].subject: only for the schema formats avro, protobuf and json_schema, not json"},
		},
		{
			name: "sink schema file and subject, version",
			yaml: strings.Replace(withRegistry("  url: http://r:8081\n"), "sinks:\n  - topic: out\n", "", 1) + "sinks:\n  - topic: out\n    format: avro\n    schema_file: out.avsc\n    subject: out-value\n    subject_strategy: record\n  - topic: out2\n    format: avro\n    version: 3\n  - topic: out3\n    format: avro\n    subject: s\n    version: -1\n",
			want: []string{
				"c.yaml:12:14: sinks[0].subject: set either schema_file or subject (a registered schema), not both",
				`c.yaml:13:23: sinks[0].subject_strategy: unknown subject strategy "record"; allowed: topic_name, record_name`,
				"c.yaml:16:14: sinks[1].version: needs subject: the subject whose version to write with",
				"c.yaml:20:14: sinks[2].version: -1 is not a version: want 1 or more (leave it out for the latest)",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("c.yaml", []byte(tt.yaml), env(nil))
			if err == nil {
				t.Fatalf("Parse succeeded (%s), want errors:\n%s", c.Summary(), strings.Join(tt.want, "\n"))
			}
			var problems Errors
			if !errors.As(err, &problems) {
				t.Fatalf("error is %T, want Errors: %v", err, err)
			}
			if got := err.Error(); got != strings.Join(tt.want, "\n") {
				t.Errorf("problems:\n%s\nwant:\n%s", got, strings.Join(tt.want, "\n"))
			}
		})
	}
}

// TestSchemaSettings parses a job with every schema setting.
func TestSchemaSettings(t *testing.T) {
	c := mustParse(t, `name: job
kafka:
  brokers: [localhost:9092]
schema_registry:
  url: http://r1:8081, https://r2:8081
  username: app
  password: secret
  tls:
    ca_file: ca.pem
  timeout: 3s
sources:
  - topics: [in]
    format: avro
    key_format: avro
    envelope: debezium
sinks:
  - topic: out
    format: avro
    subject: out-value
    version: 2
    subject_strategy: record_name
    auto_register: false
  - topic: out2
    format: protobuf
    schema_file: out.proto
`, nil)
	r := c.SchemaRegistry
	if !r.Enabled() || strings.Join(r.URL, " ") != "http://r1:8081 https://r2:8081" || r.Username != "app" || r.Password != "secret" ||
		r.TLS.CAFile != "ca.pem" || r.Timeout != 3*time.Second {
		t.Errorf("schema_registry = %+v", r)
	}
	s := c.Sources[0]
	if s.Format != FormatAvro || s.KeyFormat != FormatAvro || s.Envelope != EnvelopeDebezium {
		t.Errorf("sources[0] = %+v", s)
	}
	k := c.Sinks[0]
	if k.Format != FormatAvro || k.Subject != "out-value" || k.Version != 2 || k.SubjectStrategy != RecordNameStrategy || k.AutoRegister {
		t.Errorf("sinks[0] = %+v", k)
	}
	if k := c.Sinks[1]; k.SchemaFile != "out.proto" || k.SubjectStrategy != TopicNameStrategy || !k.AutoRegister {
		t.Errorf("sinks[1] = %+v", k)
	}
}
