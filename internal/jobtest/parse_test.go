package jobtest

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/eoflow/pipeline/sink"
)

func mustParse(t *testing.T, text string) *File {
	t.Helper()
	f, err := Parse("t.yaml", []byte(text))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return f
}

func TestParseFile(t *testing.T) {
	f := mustParse(t, `
job: config.yaml
env: {INPUT_TOPIC: numbers, N: 3, EMPTY: ~}
cases:
  - name: first
    env: {N: 4, EXTRA: x}
    input:
      numbers:
        - {n: 1}
        - {value: {n: 2}, key: k, partition: 2, timestamp: 2026-12-04T10:00:00Z, headers: {h: v, nothing: ~}}
        - {value: '{"n": 3', timestamp: 1700000000123}
        - {value: ~, key: gone}
      other: []
    expect:
      sums:
        - {key: odd, value: {key: odd, count: 1}}
        - {value: 5, partition: 1, timestamp: 2026-12-04T10:00:00.5Z, headers: {a: b}}
      dead_letters:
        - {value: '{"n": 3', code: decode}
    compare: exact
  - name: second
`)
	if f.Job != "config.yaml" || len(f.Cases) != 2 {
		t.Fatalf("job %q, %d cases", f.Job, len(f.Cases))
	}
	if f.Env["INPUT_TOPIC"] != "numbers" || f.Env["N"] != "3" || f.Env["EMPTY"] != "" {
		t.Fatalf("file env %v", f.Env)
	}
	c := f.Cases[0]
	if c.Name != "first" || c.At != (Pos{5, 5}) || c.Path != "cases[0]" || c.Compare != Exact {
		t.Fatalf("case %+v", c)
	}
	if c.Env["N"] != "4" || c.Env["EXTRA"] != "x" || c.Env["INPUT_TOPIC"] != "numbers" || f.Env["N"] != "3" {
		t.Fatalf("case env %v (file env %v): the case's variables go over a copy of the file's", c.Env, f.Env)
	}
	if f.Cases[1].Compare != PerKey || f.Cases[1].Env["N"] != "3" {
		t.Fatalf("second case: compare %q, env %v", f.Cases[1].Compare, f.Cases[1].Env)
	}
	if len(c.Input) != 2 || c.Input[0].Topic != "numbers" || c.Input[1].Topic != "other" || len(c.Input[1].Records) != 0 {
		t.Fatalf("inputs %+v", c.Input)
	}
	in := c.Input[0].Records
	if string(in[0].Value) != `{"n":1}` || in[0].Key != nil || in[0].Partition != 0 || !in[0].Timestamp.IsZero() || in[0].At != (Pos{9, 11}) {
		t.Fatalf("shorthand record %+v", in[0])
	}
	ts := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	if string(in[1].Value) != `{"n":2}` || string(in[1].Key) != "k" || in[1].Partition != 2 || !in[1].Timestamp.Equal(ts) {
		t.Fatalf("full record %+v", in[1])
	}
	if len(in[1].Headers) != 2 || in[1].Headers[0].Key != "h" || string(in[1].Headers[0].Value) != "v" || in[1].Headers[1].Key != "nothing" || in[1].Headers[1].Value != nil {
		t.Fatalf("headers %+v", in[1].Headers)
	}
	if string(in[2].Value) != `{"n": 3` || !in[2].Timestamp.Equal(time.UnixMilli(1700000000123)) {
		t.Fatalf("bytes value, epoch millis %+v", in[2])
	}
	if in[3].Value != nil || string(in[3].Key) != "gone" {
		t.Fatalf("null value: %+v", in[3])
	}
	if len(c.Expect) != 2 || c.Expect[0].Name != "sums" || c.Expect[1].Name != DeadLetters {
		t.Fatalf("expect %+v", c.Expect)
	}
	e := c.Expect[0].Records
	if string(e[0].Key) != "odd" || e[0].Value.String() != `{"key":"odd","count":1}` || e[0].HasPartition || e[0].HasTimestamp || e[0].Where != "t.yaml:16:11" {
		t.Fatalf("expected %+v", e[0])
	}
	if !e[1].HasPartition || e[1].Partition != 1 || !e[1].HasTimestamp || !e[1].Timestamp.Equal(ts.Add(500*time.Millisecond)) || e[1].Key != nil {
		t.Fatalf("expected %+v", e[1])
	}
	dl := c.Expect[1].Records[0]
	if dl.Value.kind != valueBytes || len(dl.Headers) != 1 || dl.Headers[0].Key != sink.HeaderCode || string(dl.Headers[0].Value) != "decode" || dl.CodeAt != (Pos{19, 30}) {
		t.Fatalf("dead letter %+v", dl)
	}
}

// A YAML value is written as its JSON, a string as its bytes; numbers stay
// as written where JSON allows it.
func TestParseValues(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want string // "<null>" for a null value
		json bool
	}{
		{`{n: 1}`, `{"n":1}`, true},
		{`{b: 2, a: 1}`, `{"b":2,"a":1}`, true},
		{`'{"n": 3'`, `{"n": 3`, false},
		{`"5"`, `5`, false},
		{`plain text`, `plain text`, false},
		{`""`, ``, false},
		{`5`, `5`, true},
		{`1.50`, `1.50`, true},
		{`-1e3`, `-1e3`, true},
		{`123456789012345678901234567890`, `123456789012345678901234567890`, true},
		{`0x1F`, `31`, true},
		{`+1.5`, `1.5`, true},
		{`true`, `true`, true},
		{`~`, `<null>`, false},
		{`[1, "a", ~, false, {x: [ ]}]`, `[1,"a",null,false,{"x":[]}]`, true},
		{`{at: 2026-12-04T10:00:00Z}`, `{"at":"2026-12-04T10:00:00Z"}`, true},
		{`2026-12-04T10:00:00Z`, `2026-12-04T10:00:00Z`, false},
		{`{html: "<&>", "quote": "a\"b"}`, `{"html":"<&>","quote":"a\"b"}`, true},
		{`!!binary AAEC`, "\x00\x01\x02", false},
		{`{value: {value: 1}}`, `{"value":1}`, true}, // the full form: a value named value is written whole
		{`{1: x, "y": 2}`, `{"1":"x","y":2}`, true},
	} {
		f, err := Parse("t.yaml", []byte("cases:\n  - name: c\n    input:\n      t:\n        - "+tc.yaml+"\n"))
		if err != nil {
			t.Errorf("%s: %v", tc.yaml, err)
			continue
		}
		got := f.Cases[0].Input[0].Records[0].Value
		if tc.want == "<null>" {
			if got != nil {
				t.Errorf("%s: value %q, want null", tc.yaml, got)
			}
			continue
		}
		if got == nil || string(got) != tc.want {
			t.Errorf("%s: value %q, want %q", tc.yaml, got, tc.want)
		}
		// The same as an expectation: JSON compares as JSON, the rest as
		// bytes.
		f, err = Parse("t.yaml", []byte("cases:\n  - name: c\n    expect:\n      t:\n        - "+tc.yaml+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		if v := f.Cases[0].Expect[0].Records[0].Value; (v.kind == valueJSON) != tc.json {
			t.Errorf("%s: compares as JSON %v, want %v", tc.yaml, v.kind == valueJSON, tc.json)
		}
	}
}

// Every problem is reported at once, each at its line and column.
func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"empty file", ``, []string{"t.yaml:1:1: the file is empty: want cases: with at least one case"}},
		{"no cases", "job: x.yaml\n", []string{"t.yaml:1:1: cases: required: the list of cases"}},
		{"no case in the list", "cases: []\n", []string{"t.yaml:1:8: cases: no cases: give at least one"}},
		{"not a mapping", "- a\n", []string{"t.yaml:1:1: want a mapping, got a list"}},
		{"unknown keys with a suggestion", `
jobs: x.yaml
cases:
  - name: a
    inputs: {}
    expect:
      out:
        - {value: 1, partiton: 2}
        - {value: 1, cod: x}
`, []string{
			"t.yaml:2:1: jobs: unknown field; did you mean job?",
			"t.yaml:5:5: cases[0].inputs: unknown field; did you mean input?",
			"t.yaml:8:22: cases[0].expect.out[0].partiton: unknown field; did you mean partition?",
			"t.yaml:9:22: cases[0].expect.out[1].cod: unknown field; did you mean code?",
		}},
		{"code only in expectations", `
cases:
  - name: a
    input:
      in: [{value: 1, code: x}]
`, []string{"t.yaml:5:23: cases[0].input.in[0].code: unknown field; allowed: value, key, partition, timestamp, headers, schema_version"}},
		{"names", `
cases:
  - input: {}
  - name: ""
  - name: [a]
  - name: b
  - name: b
  - 7
`, []string{
			"t.yaml:3:5: cases[0].name: required: name the case",
			"t.yaml:4:11: cases[1].name: empty: give the case a name",
			"t.yaml:5:11: cases[2].name: want a string, got a list",
			"t.yaml:7:5: cases[4].name: a second case named \"b\" (the first is at line 6): names pick cases (--run) and name them in reports",
			"t.yaml:8:5: cases[5]: want a case (a mapping with name, input and expect), got \"7\"",
		}},
		{"keys written twice", `
cases:
  - name: a
    name: b
    input:
      t: [{value: 1, key: a, key: b}]
`, []string{
			"t.yaml:4:5: cases[0].name: written twice (first at line 3); keep one",
			"t.yaml:6:30: cases[0].input.t[0].key: written twice (first at line 6); keep one",
		}},
		{"env", `
env: {1X: a, OK: [a], MULTI: "a\nb"}
cases:
  - name: a
    env: []
`, []string{
			"t.yaml:2:7: env.1X: not a variable name: letters, digits and _, not starting with a digit",
			"t.yaml:2:18: env.OK: want a value written as text (a string, number or boolean), got a list",
			"t.yaml:2:30: env.MULTI: a variable's value must be one line (it is substituted into the job file as text)",
			"t.yaml:5:10: cases[0].env: want a mapping, got a list",
		}},
		{"record fields", `
cases:
  - name: a
    input:
      t:
        - {value: 1, partition: -1}
        - {value: 1, partition: 1024}
        - {value: 1, partition: one}
        - {value: 1, timestamp: yesterday}
        - {value: 1, timestamp: -5}
        - {value: 1, key: [a, .nan]}
        - {value: 1, headers: [a]}
        - {value: {n: .inf}}
        - {value: [.nan]}
        - {value: !!binary "not base64!"}
      u: {}
`, []string{
			"t.yaml:6:33: cases[0].input.t[0].partition: want a partition from 0 to 1023, got -1",
			"t.yaml:7:33: cases[0].input.t[1].partition: want a partition from 0 to 1023, got 1024",
			"t.yaml:8:33: cases[0].input.t[2].partition: want a partition number, got \"one\"",
			"t.yaml:9:33: cases[0].input.t[3].timestamp: want an RFC 3339 time (2026-12-04T10:00:00Z) or epoch milliseconds, got \"yesterday\"",
			"t.yaml:10:33: cases[0].input.t[4].timestamp: want an RFC 3339 time (2026-12-04T10:00:00Z) or epoch milliseconds, got \"-5\"",
			"t.yaml:11:31: cases[0].input.t[5].key[1]: .nan is not a number JSON can hold",
			"t.yaml:12:31: cases[0].input.t[6].headers: want a mapping, got a list",
			"t.yaml:13:23: cases[0].input.t[7].value.n: .inf is not a number JSON can hold",
			"t.yaml:14:20: cases[0].input.t[8].value[0]: .nan is not a number JSON can hold",
			"t.yaml:15:19: cases[0].input.t[9].value: !!binary: not base64: illegal base64 data at input byte 9",
			"t.yaml:16:10: cases[0].input.u: want a list, got a mapping",
		}},
		{"compare", `
cases:
  - name: a
    compare: per-key
  - name: b
    compare: sorted
`, []string{
			"t.yaml:4:14: cases[0].compare: unknown rule \"per-key\"; did you mean per_key?",
			"t.yaml:6:14: cases[1].compare: unknown rule \"sorted\"; allowed: per_key, exact, unordered, last_per_key",
		}},
		{"last_per_key needs one value per key", `
cases:
  - name: a
    compare: last_per_key
    expect:
      t:
        - {key: a, value: 1}
        - {key: b, value: 1}
        - {key: a, value: 2}
        - 3
        - 4
`, []string{
			"t.yaml:9:11: cases[0].expect.t[2]: key \"a\" is listed twice (first at line 7): compare: last_per_key expects one value per key, the last one written",
			"t.yaml:11:11: cases[0].expect.t[4]: no key is listed twice (first at line 10): compare: last_per_key expects one value per key, the last one written",
		}},
		{"merge keys", `
base: &b {n: 1}
cases:
  - name: a
    input:
      t: [{<<: *b, m: 2}]
`, []string{
			"t.yaml:2:1: base: unknown field; allowed: job, env, schemas, cases",
			"t.yaml:6:12: cases[0].input.t[0]: merge keys (<<) are not supported; write the entries out",
		}},
		{"syntax", "cases:\n  - name: a\n   input: 1\n", []string{"t.yaml:2:1: invalid YAML: did not find expected '-' indicator"}},
		{"two documents", "cases: []\n---\ncases: []\n", []string{"t.yaml:2:1: the file holds one YAML document; a second one starts here"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatal("accepted")
			}
			got := strings.Split(err.Error(), "\n")
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// Aliases work: a value written once, used twice.
func TestParseAliases(t *testing.T) {
	f := mustParse(t, `
cases:
  - name: a
    input:
      t:
        - &one {n: 1}
        - *one
        - {value: *one, key: k}
`)
	for i, r := range f.Cases[0].Input[0].Records {
		if string(r.Value) != `{"n":1}` {
			t.Errorf("record %d: %q", i, r.Value)
		}
	}
}

// Schemas are given by topic: a file, a list of versions, a mapping with
// the format and Protobuf message, or the value's and key's apart; a
// case's replace the file's topic by topic, and files are relative to
// the test file.
func TestParseSchemas(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/t.yaml"
	text := `
schemas:
  numbers: number.avsc
  orders: [order-v1.avsc, {file: /abs/order-v2.avsc}]
  payments: {value: {file: payment.proto, format: protobuf, message: Payment}, key: {schema: '"string"'}}
cases:
  - name: a
    schemas:
      orders: {schema: '{"type": "string"}', format: avro}
    input:
      orders:
        - {value: {id: 1}, schema_version: 2, key: {id: 1}}
        - {id: 2}
        - !!binary AAAAAAE=
        - plain
  - name: b
`
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	show := func(list []*TopicSchemas) string {
		var parts []string
		for _, ts := range list {
			side := func(specs []*SchemaSpec) string {
				var s []string
				for _, sp := range specs {
					s = append(s, fmt.Sprintf("%s@%d:%d[%s|%s|%s|%s]", sp.Path, sp.At.Line, sp.At.Col, sp.Format, strings.TrimPrefix(sp.File, dir), sp.Text, sp.Message))
				}
				return strings.Join(s, " ")
			}
			parts = append(parts, fmt.Sprintf("%s@%d:%d value(%s) key(%s)", ts.Topic, ts.At.Line, ts.At.Col, side(ts.Value), side(ts.Key)))
		}
		return strings.Join(parts, "\n")
	}
	want := `numbers@3:3 value(schemas.numbers@3:12[|/number.avsc||]) key()
orders@4:3 value(schemas.orders[0]@4:12[|/order-v1.avsc||] schemas.orders[1]@4:27[|/abs/order-v2.avsc||]) key()
payments@5:3 value(schemas.payments.value@5:21[protobuf|/payment.proto||Payment]) key(schemas.payments.key@5:85[||"string"|])`
	if got := show(f.Schemas); got != want {
		t.Errorf("file schemas:\n%s\nwant:\n%s", got, want)
	}
	if got := show(f.Cases[1].Schemas); got != want {
		t.Errorf("case b's schemas are the file's:\n%s", got)
	}
	want = strings.Replace(want, `value(schemas.orders[0]@4:12[|/order-v1.avsc||] schemas.orders[1]@4:27[|/abs/order-v2.avsc||])`,
		`value(cases[0].schemas.orders@9:15[avro||{"type": "string"}|])`, 1)
	want = strings.Replace(want, "orders@4:3", "orders@9:7", 1)
	if got := show(f.Cases[0].Schemas); got != want {
		t.Errorf("case a's schemas:\n%s\nwant:\n%s", got, want)
	}
	in := f.Cases[0].Input[0].Records
	if in[0].SchemaVersion != 2 || in[0].SchemaVersionAt != (Pos{12, 44}) || string(in[0].value.js) != `{"id":1}` || string(in[0].key.js) != `{"id":1}` || in[0].Key != nil {
		t.Errorf("record 0: version %d at %v, value %s, key %s (text %q)", in[0].SchemaVersion, in[0].SchemaVersionAt, in[0].value.js, in[0].key.js, in[0].Key)
	}
	if in[1].SchemaVersion != 0 || string(in[1].value.js) != `{"id":2}` || in[1].value.text || in[1].value.path != "cases[0].input.orders[1]" {
		t.Errorf("record 1: %+v", in[1].value)
	}
	if !in[2].value.binary || !bytes.Equal(in[2].Value, []byte{0, 0, 0, 0, 1}) {
		t.Errorf("record 2: %+v", in[2].value)
	}
	if !in[3].value.text || string(in[3].value.js) != `"plain"` || string(in[3].Value) != "plain" {
		t.Errorf("record 3: %+v", in[3].value)
	}
}

func TestParseSchemaErrors(t *testing.T) {
	_, err := Parse("t.yaml", []byte(`
schemas:
  a: []
  b: {file: x.avsc, schema: '"string"'}
  c: {format: avro}
  d: {file: x.avsc, format: avro2}
  e: {value: x.avsc, kye: y.avsc}
  f: [x.avsc, ~]
  g: {file: [x]}
cases:
  - name: a
    schemas: x.avsc
    input:
      t:
        - {value: 1, schema_version: 0}
        - {value: 1, schema_version: latest}
`))
	want := []string{
		"t.yaml:3:6: schemas.a: no schema: give one, or a list of the versions in order",
		"t.yaml:4:6: schemas.b: file: and schema: both given: keep one",
		"t.yaml:5:6: schemas.c: give the schema's file: or the schema: itself",
		"t.yaml:6:29: schemas.d.format: unknown format \"avro2\": want one with a schema; did you mean avro?",
		"t.yaml:7:22: schemas.e.kye: unknown field; did you mean key?",
		"t.yaml:8:15: schemas.f[1]: want a schema: a file name, or a mapping with file: or schema:, got nothing (null)",
		"t.yaml:9:13: schemas.g.file: want a string, got a list",
		"t.yaml:12:14: cases[0].schemas: want a mapping, got \"x.avsc\"",
		"t.yaml:15:38: cases[0].input.t[0].schema_version: want a version: 1 for the first schema the topic lists, 2 for the second, ...; got \"0\"",
		"t.yaml:16:38: cases[0].input.t[1].schema_version: want a version: 1 for the first schema the topic lists, 2 for the second, ...; got \"latest\"",
	}
	if err == nil || err.Error() != strings.Join(want, "\n") {
		t.Errorf("got:\n%v\nwant:\n%s", err, strings.Join(want, "\n"))
	}
}
