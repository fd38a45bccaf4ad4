package config

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The effective configuration of every job in the repository is a job file
// that loads back to the same configuration.
func TestEffectiveLoadsBackTheSame(t *testing.T) {
	files, err := filepath.Glob("../examples/*/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../config.yaml", "every-kind")
	for _, f := range files {
		data := []byte(everyKind)
		if f != "every-kind" {
			if data, err = os.ReadFile(f); err != nil {
				t.Fatal(err)
			}
		}
		c, err := Parse(f, data, nil)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		text, masked, err := c.Effective()
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if len(masked) != 0 {
			t.Errorf("%s: masked %v, which it does not set", f, masked)
		}
		back, err := Parse("effective.yaml", text, nil)
		if err != nil {
			t.Fatalf("%s: the effective configuration does not load: %v\n%s", f, err, text)
		}
		c.file, c.where, back.file, back.where = "", positions{}, "", positions{}
		if !reflect.DeepEqual(c, back) {
			t.Errorf("%s: the effective configuration loads as another:\n%s\nwant %+v\n got %+v", f, text, c, back)
		}
	}
}

// everyKind has a step of every kind and the settings the examples leave
// at their defaults.
const everyKind = `
name: every-kind
workers: 3
kafka:
  brokers: [a:9092, b:9092]
  compression: zstd
  tls: {ca_file: /ca.pem, server_name: kafka}
sources:
  - id: orders
    topics: [orders-eu, orders-us]
    start: 2026-05-01T00:00:00Z
    event_time: {timestamp: ts, max_out_of_orderness: 5s, idle_timeout: 1m, max_future: 7d}
steps:
  - {id: paid, filter: 'status == "paid"'}
  - id: shaped
    map: {user: customer.id, amount: amount * 2, ts: ts}
  - {id: by-user, key_by: user}
  - id: per-hour
    window: {hopping: {size: 1h, advance: 10m}, allowed_lateness: 1m, values: {n: count(), total: sum(amount)}}
  - {id: by-user-2, from: shaped, key_by: user}
  - id: sessions
    window: {session: {gap: 30m}, late_records: drop, values: {last: last(amount)}}
sinks:
  - {from: per-hour, topic: hourly, partitions: 6}
  - {from: sessions, topic: sessions, key: user}
`

// Secrets never appear: each set one is masked and named.
func TestEffectiveMasksSecrets(t *testing.T) {
	c, err := Parse("job.yaml", []byte(`
name: secrets
kafka:
  brokers: [b:9092]
  sasl: {mechanism: PLAIN, username: alice, password: kafka-s3cret}
  tls: {enabled: true, key_file: /etc/pipeline/client.key, cert_file: /etc/pipeline/client.crt}
schema_registry:
  url: [http://registry:8081]
  username: bob
  password: registry-s3cret
admin: {token: admin-s3cret}
sources: [{topics: [in]}]
sinks: [{topic: out}]
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	text, masked, err := c.Effective()
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"kafka-s3cret", "registry-s3cret", "admin-s3cret"} {
		if strings.Contains(string(text), secret) {
			t.Errorf("the effective configuration shows %q:\n%s", secret, text)
		}
	}
	if want := []string{"kafka.sasl.password", "admin.token", "schema_registry.password"}; !slices.Equal(masked, want) {
		t.Errorf("masked %v, want %v", masked, want)
	}
	for _, want := range []string{"username: alice", "password: '" + Masked + "'", "key_file: /etc/pipeline/client.key"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("the effective configuration lacks %q:\n%s", want, text)
		}
	}
}

// Every field whose name says it holds a secret is masked: a new one must
// be tagged.
func TestSecretFieldsAreTagged(t *testing.T) {
	secretName := regexp.MustCompile(`password|token|secret|credential|api_key`)
	var walk func(t reflect.Type, path string)
	found := 0
	walk = func(typ reflect.Type, path string) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct {
			return
		}
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "" || !f.IsExported() {
				continue
			}
			p := path + "." + name
			if secretName.MatchString(name) {
				found++
				if f.Tag.Get("secret") != "true" || f.Type.Kind() != reflect.String {
					t.Errorf("%s holds a secret: tag it `secret:\"true\"` so that Effective masks it", p[1:])
				}
			}
			walk(f.Type, p)
		}
	}
	walk(reflect.TypeFor[Config](), "")
	if found != 4 {
		t.Errorf("found %d secret fields, want 4 (kafka.sasl.password, schema_registry.password and token, admin.token)", found)
	}
}
