package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every example's test file passes against its job.
func TestTestCommandPassesOnEveryExample(t *testing.T) {
	files, err := filepath.Glob("../../../examples/*/config.yaml")
	if err != nil || len(files) < 4 {
		t.Fatalf("examples: %v, %v", files, err)
	}
	for _, job := range files {
		test := filepath.Join(filepath.Dir(job), "test.yaml")
		code, out, errOut := runCLI("test", test)
		if code != 0 || !strings.Contains(out, "ok: ") || strings.Contains(out, "FAIL") {
			t.Errorf("pipeline test %s: exit %d\n%s%s", test, code, out, errOut)
		}
	}
}

// A test file written for sum(n) fails, with a diff, against the same job
// changed to sum(n*2).
func TestTestCommandFailsOnAChangedAggregate(t *testing.T) {
	data, err := os.ReadFile("../../../examples/parity-sum/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(data), "sum: sum(n)", "sum: sum(n*2)", 1)
	if changed == string(data) {
		t.Fatal("the example no longer says sum: sum(n)")
	}
	job := filepath.Join(t.TempDir(), "doubled.yaml")
	if err := os.WriteFile(job, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI("test", "-c", job, "--run", "^running count and sum per parity$", "../../../examples/parity-sum/test.yaml")
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		"  FAIL  running count and sum per parity",
		`parity-sums, compare per_key: 5 records expected, 5 written`,
		`key "odd": 3 expected, 3 written, differ from record 1`,
		`✗ 1 {"key":"odd","count":1,"sum":1}  {"key":"odd","count":1,"sum":2}`,
		`record 1 differs in the value: sum is 2, expected 1; expected at ../../../examples/parity-sum/test.yaml:`,
		`key "even": 2 expected, 2 written, differ from record 1`,
		"FAIL: 1 of 1 case failed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
}

// examples/avro-sum on the test's own schema registry: its Avro input
// written from YAML, its Avro output read back and compared as JSON. A
// test written for sum(n) fails with a diff against sum(n*2), the
// decimal amounts still exact; every case passes under crash schedules;
// a schema the test file names and cannot read is a bad test file.
func TestTestCommandAvro(t *testing.T) {
	const test = "../../../examples/avro-sum/test.yaml"
	data, err := os.ReadFile("../../../examples/avro-sum/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(data), "sum: sum(n)", "sum: sum(n * 2)", 1)
	if changed == string(data) {
		t.Fatal("the example no longer says sum: sum(n)")
	}
	job := filepath.Join(t.TempDir(), "doubled.yaml")
	if err := os.WriteFile(job, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI("test", "-c", job, "--run", "^exact decimal sums per parity$", test)
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		"  FAIL  exact decimal sums per parity",
		`parity-sums-avro, compare per_key: 4 records expected, 4 written`,
		`key "odd": 2 expected, 2 written, differ from record 1`,
		`✗ 1 {"key":"odd","count":1,"sum":1,"amount":0.10}  {"key":"odd","count":1,"sum":2,"amount":0.1}`,
		`✗ 2 {"key":"odd","count":2,"sum":4,"amount":0.30}  {"key":"odd","count":2,"sum":8,"amount":0.3}`,
		`record 1 differs in the value: sum is 2, expected 1; expected at ../../../examples/avro-sum/test.yaml:`,
		`(read with schema id 2)`, // numbers-avro-value is 1, the job's output 2
		"FAIL: 1 of 1 case failed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}

	code, out, errOut = runCLI("test", "--crashes", "2", "--seed", "11", test)
	if code != 0 || !regexp.MustCompile(`ok: 3 cases passed, each under crash schedules too \(6 crash runs, \d+ restarts\)`).MatchString(out) {
		t.Errorf("--crashes 2: exit %d\n%s%s", code, out, errOut)
	}

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("schemas:\n  numbers-avro: number-v3.avsc\ncases: [{name: a}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runCLI("test", "-c", "../../../examples/avro-sum/config.yaml", bad)
	if want := bad + ":2:17: schemas.numbers-avro: cannot read the schema file " + filepath.Join(filepath.Dir(bad), "number-v3.avsc") + ": no such file or directory\n"; code != 2 || out != want {
		t.Errorf("exit %d\n%s\nwant\n%s", code, out, want)
	}
}

// Each case runs again under crash schedules drawn from the seed, and
// must commit what its crash-free run did.
func TestTestCommandCrashes(t *testing.T) {
	code, out, errOut := runCLI("test", "--crashes", "2", "--seed", "7", "--run", "dead letters", "../../../examples/parity-sum/test.yaml")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	m := regexp.MustCompile(`ok    records the job cannot use go to the dead letters: 2 of 2 crash schedules, (\d+) restarts`).FindStringSubmatch(out)
	if m == nil || m[1] == "0" {
		t.Fatalf("want two crash runs that restarted the job:\n%s", out)
	}
	if !strings.Contains(out, "ok: 1 case passed, each under crash schedules too (2 crash runs, "+m[1]+" restarts)") {
		t.Errorf("summary:\n%s", out)
	}
	// -v prints each crash run with its schedule; --seed alone replays
	// one schedule.
	code, out, _ = runCLI("test", "--seed", "7", "-v", "--run", "dead letters", "../../../examples/parity-sum/test.yaml")
	if code != 0 || !regexp.MustCompile(`crash schedule seed 7 \(\S+@\d`).MatchString(out) || !strings.Contains(out, "1 of 1 crash schedule") {
		t.Errorf("--seed 7: exit %d\n%s", code, out)
	}
}

// A bad test file is refused before anything runs: every problem at its
// line and column, exit 2. So is --crashes with a job that is not
// exactly_once.
func TestTestCommandRefusesBadFiles(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(`job: ../../../examples/parity-sum/config.yaml
cases:
  - name: a
    inputs: {}
    compare: per-key
`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI("test", "-c", "../../../examples/parity-sum/config.yaml", bad)
	want := bad + ":4:5: cases[0].inputs: unknown field; did you mean input?\n" +
		bad + ":5:14: cases[0].compare: unknown rule \"per-key\"; did you mean per_key?\n"
	if code != 2 || out != want || !strings.Contains(errOut, "2 problem(s)") {
		t.Errorf("exit %d, stdout:\n%s\nwant:\n%s\nstderr %s", code, out, want, errOut)
	}

	topics := filepath.Join(dir, "topics.yaml")
	if err := os.WriteFile(topics, []byte(`cases:
  - name: a
    env: {GUARANTEE: at_least_once}
    input:
      number: [1]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runCLI("test", "--crashes", "1", "-c", "../../../examples/parity-sum/config.yaml", topics)
	for _, want := range []string{
		topics + `:2:5: cases[0]: --crashes needs guarantee: exactly_once, and the job in ../../../examples/parity-sum/config.yaml runs at_least_once`,
		topics + `:5:7: cases[0].input.number: the job reads no topic "number"; did you mean numbers?`,
	} {
		if code != 2 || !strings.Contains(out, want) {
			t.Errorf("exit %d, no %q in:\n%s", code, want, out)
		}
	}

	// No job named anywhere; a job file with problems (its brokers need
	// not be given: the test gives its own); no test file.
	if code, _, errOut := runCLI("test", topics); code != 2 || !strings.Contains(errOut, "names no job: give -c FILE") {
		t.Errorf("no job: exit %d, %s", code, errOut)
	}
	job := writeFile(t, "name: x\nsources: [{topics: [in]}]\nsinks: [{topic: out, formatt: json}]\n")
	code, out, errOut = runCLI("test", "-c", job, topics)
	if code != 2 || !strings.Contains(out, job+":3:22: sinks[0].formatt: unknown field; did you mean format?") || !strings.Contains(errOut, `does not load with the variables of case "a"`) {
		t.Errorf("bad job: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := runCLI("test"); code != 2 || !strings.Contains(errOut, "name at least one test file") {
		t.Errorf("no file: exit %d, %s", code, errOut)
	}
	if code, _, errOut := runCLI("test", "--run", "nothing", "../../../examples/parity-sum/test.yaml"); code != 2 || !strings.Contains(errOut, "no case matches") {
		t.Errorf("--run matching nothing: exit %d, %s", code, errOut)
	}
}

// A job that stops on its own, before it has read its input, fails the
// case (exit 1) with its reason and the end of its log.
func TestTestCommandReportsAJobThatStops(t *testing.T) {
	data, err := os.ReadFile("../../../examples/parity-sum/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Three replicas on the one-broker in-memory cluster: the job stops
	// at start, saying so.
	unfit := strings.Replace(string(data), "  - topic: ${OUTPUT_TOPIC:-parity-sums}", "  - topic: ${OUTPUT_TOPIC:-parity-sums}\n    replication_factor: 3", 1)
	job := filepath.Join(t.TempDir(), "unfit.yaml")
	if err := os.WriteFile(job, []byte(unfit), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI("test", "-c", job, "--run", "^running count", "../../../examples/parity-sum/test.yaml")
	if code != 1 || !strings.Contains(out, "the job stopped before it had read its input (no checkpoint completed yet; state failed)") ||
		!strings.Contains(out, "sinks[0].replication_factor is 3 but the cluster has 1 broker(s)") {
		t.Errorf("exit %d\n%s%s", code, out, errOut)
	}
}

// The test file the README and docs/testing.md show passes against the
// job it is written for.
func TestTestCommandReadmeExample(t *testing.T) {
	example := regexp.MustCompile("(?s)```yaml\n(# a test of examples/parity-sum.*?)```")
	for _, doc := range []string{"../../../README.md", "../../../docs/testing.md"} {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		m := example.FindSubmatch(text)
		if m == nil {
			t.Errorf("%s shows no test file for examples/parity-sum", doc)
			continue
		}
		file := filepath.Join(t.TempDir(), "test.yaml")
		if err := os.WriteFile(file, m[1], 0o644); err != nil {
			t.Fatal(err)
		}
		if code, out, errOut := runCLI("test", "-c", "../../../examples/parity-sum/config.yaml", file); code != 0 {
			t.Errorf("%s's test file: exit %d\n%s%s", doc, code, out, errOut)
		}
	}
}
