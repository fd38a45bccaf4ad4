package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(good, []byte(minimal), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(good)
	if err != nil {
		t.Fatalf("Load(%s): %v", good, err)
	}
	if c.File() != good || c.Name != "job" {
		t.Errorf("Load: File() = %q, Name = %q", c.File(), c.Name)
	}

	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("name: job\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(bad)
	var problems Errors
	if !errors.As(err, &problems) || !strings.HasPrefix(problems[0].Error(), bad+":1:1: ") {
		t.Errorf("Load(bad) = %v, want Errors naming %s", err, bad)
	}
}

// TestLoadUnreadable: a file that cannot be read is one plain error that
// names the path (not Errors, not a panic).
func TestLoadUnreadable(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file.yaml")
	if err := os.WriteFile(file, []byte(minimal), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		path string
		is   error
	}{
		{"missing", filepath.Join(dir, "missing.yaml"), fs.ErrNotExist},
		{"a directory", dir, nil},
		{"below a file", filepath.Join(file, "x.yaml"), nil},
	}
	if os.Geteuid() != 0 { // root reads anything
		locked := filepath.Join(dir, "locked.yaml")
		if err := os.WriteFile(locked, []byte(minimal), 0o000); err != nil {
			t.Fatal(err)
		}
		tests = append(tests, struct {
			name string
			path string
			is   error
		}{"no permission", locked, fs.ErrPermission})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(tt.path)
			if err == nil || c != nil {
				t.Fatalf("Load(%s) = %v, %v; want an error", tt.path, c, err)
			}
			if !strings.Contains(err.Error(), "read config "+tt.path+":") {
				t.Errorf("error %q does not name the path", err)
			}
			var problems Errors
			if errors.As(err, &problems) {
				t.Errorf("error is Errors; want a plain read error")
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %v is not %v", err, tt.is)
			}
		})
	}
}

func TestParseDurationDays(t *testing.T) {
	for in, want := range map[string]time.Duration{"7d": 7 * 24 * time.Hour, "1d12h": 36 * time.Hour, "90s": 90 * time.Second, "0d": 0} {
		if got, err := parseDuration(in); err != nil || got != want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for bad, want := range map[string]error{
		"d": nil, "1.5d": nil, "1d-1h": nil, "7days": nil, "1dd": nil, "5.5.5s": nil, "-x": nil, "1x": nil,
		"-1d": errDurationNegative, "-1s": errDurationNegative, "-1d12h": errDurationNegative, "-100000d": errDurationNegative,
		"200000d": errDurationTooLarge, "1d2562047h": errDurationTooLarge, "3000000h": errDurationTooLarge,
		"99999999999999999999d": errDurationTooLarge, "106752d": errDurationTooLarge,
	} {
		got, err := parseDuration(bad)
		if err == nil || (want != nil) != errors.Is(err, want) || want == nil && (errors.Is(err, errDurationNegative) || errors.Is(err, errDurationTooLarge)) {
			t.Errorf("parseDuration(%q) = %v, %v; want error %v (nil: a syntax error)", bad, got, err, want)
		}
	}
	// Every duration a time.Duration holds is accepted: 100000d (273
	// years) too, up to 106751d.
	for in, want := range map[string]time.Duration{"100000d": 100000 * 24 * time.Hour, "106751d": 106751 * 24 * time.Hour} {
		if got, err := parseDuration(in); err != nil || got != want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}

// WithSchemaRegistry replaces the registry of a job that names one before
// it is validated; a job that names none still needs one.
func TestWithSchemaRegistry(t *testing.T) {
	text := []byte(`name: j
kafka: {brokers: 127.0.0.1:9092}
schema_registry:
  url: ${SCHEMA_REGISTRY_URL}
  username: u
  password: ${REGISTRY_PASSWORD}
  tls: {enabled: true, ca_file: /nowhere/ca.pem}
  timeout: 3s
sources: [{topics: [in], format: avro}]
sinks: [{topic: out}]
`)
	if _, err := Parse("j.yaml", text, nil); err == nil || !strings.Contains(err.Error(), "j.yaml:4:3: schema_registry.url: required when schema_registry is set") {
		t.Fatalf("without the option: %v", err)
	}
	c, err := Parse("j.yaml", text, nil, WithSchemaRegistry("http://127.0.0.1:1234"))
	if err != nil {
		t.Fatal(err)
	}
	want := SchemaRegistry{URL: []string{"http://127.0.0.1:1234"}, Timeout: 3 * time.Second}
	if !reflect.DeepEqual(c.SchemaRegistry, want) {
		t.Fatalf("schema_registry %+v, want %+v", c.SchemaRegistry, want)
	}
	// Without schema_registry: in the file, the job has none.
	none := []byte("name: j\nkafka: {brokers: 127.0.0.1:9092}\nsources: [{topics: [in], format: avro}]\nsinks: [{topic: out}]\n")
	if _, err := Parse("j.yaml", none, nil, WithSchemaRegistry("http://127.0.0.1:1234")); err == nil || !strings.Contains(err.Error(), "j.yaml:3:34: sources[0].format: avro needs a schema registry: set schema_registry.url") {
		t.Fatalf("a job without a registry: %v", err)
	}
}

// WithBrokers replaces the file's connection before it is validated: a job
// whose brokers and password come from variables no one set still loads.
func TestWithBrokers(t *testing.T) {
	text := []byte(`name: j
kafka:
  brokers: ${KAFKA_BROKERS}
  tls: {enabled: true, ca_file: /nowhere/ca.pem}
  sasl: {mechanism: PLAIN, username: u, password: "${PASSWORD}"}
sources: [{topics: [in]}]
sinks: [{topic: out}]
`)
	if _, err := Parse("j.yaml", text, nil); err == nil || !strings.Contains(err.Error(), "kafka.brokers: at least one broker") {
		t.Fatalf("without the option: %v", err)
	}
	c, err := Parse("j.yaml", text, nil, WithBrokers([]string{"127.0.0.1:1234"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Kafka.Brokers) != 1 || c.Kafka.Brokers[0] != "127.0.0.1:1234" || c.Kafka.TLS != (TLS{}) || c.Kafka.SASL != (SASL{}) {
		t.Fatalf("kafka %+v", c.Kafka)
	}
	// A value of the wrong shape there is still a problem of the file.
	bad := []byte(strings.Replace(string(text), "enabled: true", "enabled: maybe", 1))
	if _, err := Parse("j.yaml", bad, nil, WithBrokers([]string{"127.0.0.1:1234"})); err == nil || !strings.Contains(err.Error(), "kafka.tls.enabled") {
		t.Fatalf("a bad boolean: %v", err)
	}
}
