package jobtest

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/eoflow/pipeline/config"
)

func readJob(t *testing.T, path string) *Job {
	t.Helper()
	j, err := ReadJob(path)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// A case names topics the job reads and writes; every problem is reported
// at once, at its place in the test file.
func TestPrepareChecksTopics(t *testing.T) {
	f := mustParse(t, `
cases:
  - name: a
    input:
      numbers-t: [1]
      numbers-ts: [{value: 1, partition: 3}]
    expect:
      parity-window: []
      late: []
      parity-windows-late: []
      dead_letters: [{value: 1, code: decode}]
      parity-windows: [{value: 1, code: decode}]
  - name: b
    expect:
      parity-windows-dead-letter: []
      dead_letters: []
`)
	_, err := Prepare(f, readJob(t, "../../examples/parity-windows/config.yaml"), true)
	want := []string{
		`t.yaml:5:7: cases[0].input.numbers-t: the job reads no topic "numbers-t"; did you mean numbers-ts?`,
		`t.yaml:8:7: cases[0].expect.parity-window: the job writes no topic "parity-window"; did you mean parity-windows?`,
		`t.yaml:10:7: cases[0].expect.parity-windows-late: topic parity-windows-late is listed already, as late: list it once`,
		`t.yaml:12:35: cases[0].expect.parity-windows[0].code: code is the error code of a dead letter; parity-windows is not a dead-letter topic`,
		`t.yaml:16:7: cases[1].expect.dead_letters: topic parity-windows-dead-letter is listed already, as parity-windows-dead-letter: list it once`,
	}
	if err == nil || err.Error() != strings.Join(want, "\n") {
		t.Fatalf("got:\n%v\nwant:\n%s", err, strings.Join(want, "\n"))
	}
}

func TestPrepare(t *testing.T) {
	f := mustParse(t, `
cases:
  - name: a
    input:
      numbers-ts: [{value: 1, partition: 3}, {value: 1, partition: 1}]
    expect:
      parity-windows: []
      parity-windows-dead-letter: []
`)
	s, err := Prepare(f, readJob(t, "../../examples/parity-windows/config.yaml"), false)
	if err != nil {
		t.Fatal(err)
	}
	b := s.cases[0]
	if b.inputs["numbers-ts"] != 4 || len(b.inputs) != 1 {
		t.Errorf("inputs %v: the largest partition named, +1", b.inputs)
	}
	if strings.Join(b.outputs, ",") != "parity-windows,parity-windows-dead-letter,parity-windows-late" {
		t.Errorf("outputs %v", b.outputs)
	}
	var checks []string
	for _, c := range b.checks {
		checks = append(checks, c.name+"="+strings.Join(c.topics, "+")+map[bool]string{true: "", false: " (unlisted)"}[c.listed])
	}
	// The late records are not listed, and still checked: none expected.
	if got := strings.Join(checks, ", "); got != "parity-windows=parity-windows, parity-windows-dead-letter=parity-windows-dead-letter, late=parity-windows-late (unlisted)" {
		t.Errorf("checks %s", got)
	}
}

// --crashes needs exactly_once; a job file that does not load with a
// case's variables is the job's problem, at the job file's lines.
func TestPrepareRefusals(t *testing.T) {
	f := mustParse(t, `
cases:
  - name: at least once
    env: {GUARANTEE: at_least_once}
  - name: bad interval
    env: {CHECKPOINT_INTERVAL: soon}
`)
	job := readJob(t, "../../examples/parity-sum/config.yaml")
	_, err := Prepare(&File{Path: "t.yaml", Cases: f.Cases[:1]}, job, true)
	want := `t.yaml:3:5: cases[0]: --crashes needs guarantee: exactly_once, and the job in ../../examples/parity-sum/config.yaml runs at_least_once, which may repeat outputs after a crash by definition`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
	if _, err := Prepare(&File{Path: "t.yaml", Cases: f.Cases[:1]}, job, false); err != nil {
		t.Fatalf("without --crashes: %v", err)
	}
	_, err = Prepare(f, job, false)
	var je *JobError
	var problems config.Errors
	if !errors.As(err, &je) || je.Case != "bad interval" || !errors.As(err, &problems) || len(problems) != 1 ||
		!strings.HasPrefix(problems[0].Error(), "../../examples/parity-sum/config.yaml:15:13: checkpoint.interval:") {
		t.Fatalf("got %v", err)
	}
}

// A case's schemas are checked against the job and its values against
// the schemas: every problem at its place, the field named; a problem of
// the file's schemas once, however many cases meet it.
func TestPrepareChecksSchemas(t *testing.T) {
	f := mustParse(t, `
schemas:
  numbers-avro: ../../examples/avro-sum/number.avsc
  parity-sums-avro: {file: nowhere.avsc}
  number-avro: ../../examples/avro-sum/number.avsc
cases:
  - name: a
    input:
      numbers-avro:
        - {n: 1, parity: odd, amount: 0.001, ts: 2026-12-04T10:00:00Z}
        - {n: 1, parity: odd, amout: 0.01, ts: 2026-12-04T10:00:00Z}
        - {n: one, parity: odd, amount: 0.01, ts: 2026-12-04T10:00:00Z}
        - {parity: odd, amount: 0.01, ts: 2026-12-04T10:00:00Z}
        - {value: {n: 1, parity: odd, amount: 0.01, ts: 0}, schema_version: 2}
        - {value: {n: 1, parity: odd, amount: 0.01, ts: 0}, key: {id: 1}}
        - 'a string is its bytes'
  - name: b
    env: {OUTPUT_FORMAT: json}
    schemas:
      numbers-avro: {file: ../../examples/avro-sum/number.avsc, message: Number}
`)
	_, err := Prepare(f, readJob(t, "../../examples/avro-sum/config.yaml"), false)
	want := []string{
		`t.yaml:4:21: schemas.parity-sums-avro: cannot read the schema file nowhere.avsc: no such file or directory`,
		`t.yaml:4:21: schemas.parity-sums-avro: the job writes the values of parity-sums-avro as json, which carries no schema: give format: (avro, protobuf or json_schema) to write them with one anyway`,
		`t.yaml:5:3: schemas.number-avro: the job reads or writes no topic "number-avro"; did you mean numbers-avro?`,
		`t.yaml:10:31: cases[0].input.numbers-avro[0].amount: 0.001 has more than the 2 digits after the point of the schema's decimal (number.avsc)`,
		`t.yaml:11:31: cases[0].input.numbers-avro[1].amout: the schema has no such field; did you mean amount? (number.avsc)`,
		`t.yaml:12:12: cases[0].input.numbers-avro[2].n: want a long, got a string "one" (number.avsc)`,
		`t.yaml:13:11: cases[0].input.numbers-avro[3].n: missing, and the schema gives it no default (number.avsc)`,
		`t.yaml:14:77: cases[0].input.numbers-avro[4].schema_version: schemas.numbers-avro lists 1 schema for the values of numbers-avro`,
		`t.yaml:15:66: cases[0].input.numbers-avro[5].key: want a key written as text, got a mapping: a key in another form needs a key schema (schemas: {numbers-avro: {key: ...}})`,
		`t.yaml:20:21: cases[1].schemas.numbers-avro: number.avsc: a message name is for Protobuf schemas, not avro`,
	}
	if err == nil || err.Error() != strings.Join(want, "\n") {
		t.Fatalf("got:\n%v\nwant:\n%s", err, strings.Join(want, "\n"))
	}

	// Values on a topic read with a schema need one, once per topic; a
	// string is its bytes.
	f = mustParse(t, `
cases:
  - name: b
    input:
      numbers-avro: [{n: 1}, {n: 2}, '{"n": 3}']
`)
	_, err = Prepare(f, readJob(t, "../../examples/avro-sum/config.yaml"), false)
	want = []string{
		`t.yaml:5:22: cases[0].input.numbers-avro[0]: the job reads numbers-avro as avro: give the schema its values are written with under schemas: ({numbers-avro: FILE}), or write the value as a string, which is its bytes`,
	}
	if err == nil || err.Error() != want[0] {
		t.Fatalf("got:\n%v\nwant:\n%s", err, want[0])
	}

	// A job that names no registry reads no schema.
	f = mustParse(t, "schemas: {numbers: x.avsc}\ncases: [{name: a}]\n")
	if _, err = Prepare(f, readJob(t, "../../examples/parity-sum/config.yaml"), false); err == nil ||
		err.Error() != "t.yaml:1:11: schemas.numbers: the job names no schema registry (schema_registry:): no record it reads or writes carries a schema" {
		t.Fatalf("got %v", err)
	}

	// Protobuf: a list's item, and a key an Avro string takes.
	f = mustParse(t, `
schemas:
  payments: {value: {file: testdata/payments/payment.proto}, key: {schema: '"string"'}}
cases:
  - name: a
    input:
      payments:
        - {key: 5, value: {customer: ann, tags: [a, {b: 1}]}}
        - {key: [5], value: {customer: ann}}
`)
	_, err = Prepare(f, readJob(t, "testdata/payments/config.yaml"), false)
	want = []string{
		`t.yaml:8:53: cases[0].input.payments[0].value.tags[1]: want a string, got an object (payment.proto)`,
		`t.yaml:9:17: cases[0].input.payments[1].key: want a string, got an array (the schema at line 3)`,
	}
	if err == nil || err.Error() != strings.Join(want, "\n") {
		t.Fatalf("got:\n%v\nwant:\n%s", err, strings.Join(want, "\n"))
	}
}

// The schemas are registered in the order the file gives them, and each
// record is written with its topic's: the version it picks, or the last;
// its key with the key schema; a string no schema takes as its bytes.
func TestPrepareWritesWithSchemas(t *testing.T) {
	for _, tc := range []struct {
		file  string
		run   int
		regs  string
		wants []string // per record: value and key, "reg:hex" or "bytes"
	}{
		{"../../examples/avro-sum/test.yaml", 1, "numbers-avro-value numbers-avro-value", []string{
			"0:02066f646402", "0:04086576656e", "1:06066f646402", "1:08086576656e"}},
		{"../../examples/avro-sum/test.yaml", 2, "numbers-avro-value", []string{"0:02066f646402", "bytes", "bytes"}},
		{"testdata/payments/test.yaml", 0, "payments-value payments-key", []string{"0:000a03616e6e", "0:000a03626f62", "0:000a03616e6e"}},
	} {
		f, err := ReadFile(tc.file)
		if err != nil {
			t.Fatal(err)
		}
		b, err := bind(f.Path, f.Cases[tc.run], readJob(t, f.Job), false, nil)
		if err != nil {
			t.Fatal(err)
		}
		var subjects []string
		for _, r := range b.regs {
			subjects = append(subjects, r.subject)
		}
		if got := strings.Join(subjects, " "); got != tc.regs {
			t.Errorf("%s case %d: registers %s, want %s", tc.file, tc.run, got, tc.regs)
		}
		if len(b.writes) != len(tc.wants) {
			t.Fatalf("%s case %d: %d records written", tc.file, tc.run, len(b.writes))
		}
		for i, w := range b.writes {
			got := "bytes"
			if w.value != nil {
				// The start of the body is enough to tell the version.
				got = fmt.Sprintf("%d:%x", w.value.reg, w.value.body[:min(len(w.value.body), 6)])
			}
			if got != tc.wants[i] {
				t.Errorf("%s case %d record %d: %s, want %s", tc.file, tc.run, i, got, tc.wants[i])
			}
		}
	}
	// An Avro key: the string "ann" under payments-key.
	f, err := ReadFile("testdata/payments/test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b, err := bind(f.Path, f.Cases[1], readJob(t, f.Job), false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if w := b.writes[0]; w.key == nil || w.key.reg != 1 || fmt.Sprintf("%x", w.key.body) != "06616e6e" || w.value != nil || string(w.rec.Value) != "not protobuf" {
		t.Errorf("a record with an Avro key and a value that is not Protobuf: %+v %+v", w.key, w.value)
	}
}

// compare: may name a rule per topic, with a default for the others; a
// topic the job does not write, or a rule that does not exist, is refused
// where it is written.
func TestComparePerTopic(t *testing.T) {
	if _, err := Parse("t.yaml", []byte("cases:\n  - name: a\n    compare: {late: sorted}\n")); err == nil ||
		err.Error() != `t.yaml:3:21: cases[0].compare.late: unknown rule "sorted"; allowed: per_key, exact, unordered, last_per_key` {
		t.Errorf("an unknown rule: %v", err)
	}
	f := mustParse(t, `
cases:
  - name: a
    expect:
      parity-windows: [{key: odd, value: 1}, {key: odd, value: 2}]
    compare: {default: last_per_key, parity-windows: per_key, dead_letters: unordered}
  - name: b
    compare: {parity-window: unordered}
`)
	_, err := Prepare(f, readJob(t, "../../examples/parity-windows/config.yaml"), false)
	want := `t.yaml:8:15: cases[1].compare.parity-window: the job writes no topic "parity-window"; did you mean parity-windows?`
	if err == nil || err.Error() != want {
		t.Fatalf("got:\n%v\nwant:\n%s", err, want)
	}
	c := f.Cases[0]
	for topic, rule := range map[string]Rule{"parity-windows": PerKey, DeadLetters: Unordered, Late: LastPerKey} {
		if got := c.RuleFor(topic); got != rule {
			t.Errorf("rule of %s: %s, want %s", topic, got, rule)
		}
	}
}
