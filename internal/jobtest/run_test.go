package jobtest

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/eoflow/pipeline/internal/fault"
)

// boundCase binds the first case of an example's test file, with env over
// its variables.
func boundCase(t *testing.T, example string, env map[string]string) *bound {
	t.Helper()
	f, err := ReadFile("../../examples/" + example + "/test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c := f.Cases[0]
	for k, v := range env {
		c.Env[k] = v
	}
	b, err := bind(f.Path, c, readJob(t, f.Job), false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The crash runs can tell: the same schedule that leaves exactly_once's
// output as the crash-free run's makes at_least_once's repeat the outputs
// of the epoch it failed in. while-writing-state@1 fails the first epoch
// that changed state, after its outputs were handed to the producer.
func TestCrashRunsCatchRepeatedOutputs(t *testing.T) {
	schedule := Schedule{fault.WhileWritingState: 1}
	for _, tc := range []struct {
		guarantee string
		same      bool
	}{{"exactly_once", true}, {"at_least_once", false}} {
		t.Run(tc.guarantee, func(t *testing.T) {
			b := boundCase(t, "parity-sum", map[string]string{"GUARANTEE": tc.guarantee})
			opts := Options{Timeout: DefaultTimeout}
			base, _, err := b.execute(context.Background(), opts, fault.New(nil))
			if err != nil {
				t.Fatal(err)
			}
			cr := b.crashRun(context.Background(), opts, 1, schedule, base)
			if cr.Err != nil || cr.Restarts != 1 || len(cr.Unfired) != 0 {
				t.Fatalf("crash run: err %v, %d restarts, unfired %s", cr.Err, cr.Restarts, cr.Unfired)
			}
			if same := len(cr.Diffs) == 0; same != tc.same {
				t.Fatalf("output the same as the crash-free run's: %v, want %v; diffs %+v", same, tc.same, cr.Diffs)
			}
			if d := cr.Diffs; !tc.same && (len(d) != 1 || d[0].Name != "parity-sums" || d[0].Expected != 5 || d[0].Written <= 5) {
				var b strings.Builder
				for _, d := range d {
					WriteDiff(&b, d, Sides{"crash-free run", "crash run"}, "", Style{})
				}
				t.Fatalf("want the parity sums repeated:\n%s", b.String())
			}
		})
	}
}

// A job in the other schema formats: Protobuf values and Avro keys
// written from YAML, its JSON Schema output read back by the id the job
// registered (after the two inputs' schemas: 3) and compared as JSON; a
// value that does not match says which field, and where it was read.
func TestSchemaFormatsRun(t *testing.T) {
	f, err := ReadFile("testdata/payments/test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Prepare(f, readJob(t, f.Job), false)
	if err != nil {
		t.Fatal(err)
	}
	var results []*Result
	s.Run(context.Background(), Options{}, nil, func(r *Result) { results = append(results, r) })
	for _, r := range results {
		if !r.Passed() {
			t.Errorf("%s: %v %+v\n%s", r.Case.Name, r.Err, r.Diffs, r.Log)
		}
	}
	if len(results) != 2 {
		t.Fatalf("%d results", len(results))
	}

	f.Cases[0].Expect[0].Records[2].Value, _ = jsonValue([]byte(`{"key":"bob","count":1,"total":201}`))
	s.Run(context.Background(), Options{}, func(c *Case) bool { return c == f.Cases[0] }, func(r *Result) {
		var out strings.Builder
		for _, d := range r.Diffs {
			WriteDiff(&out, d, Sides{"expected", "written"}, "", Style{})
		}
		// The offset depends on where the checkpoints' commit markers
		// fell.
		want := regexp.MustCompile(`record 1 differs in the value: total is 200, expected 201; expected at testdata/payments/test.yaml:17:11; written at totals/0@\d+ \(read with schema id 3\)`)
		if !want.MatchString(out.String()) {
			t.Errorf("no %s in:\n%s", want, out.String())
		}
	})
}

// A sink that looks its schema up (auto_register: false) finds the one
// the test file registers for its topic, and writes with it.
func TestSinkSchemaFromTheTestFile(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile("../../examples/avro-sum/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	job := strings.Replace(string(data), "    format: ${OUTPUT_FORMAT:-avro}\n", "    format: avro\n    auto_register: false\n    schema_file: "+filepath.Join(dir, "sums.avsc")+"\n", 1)
	sums := `{"type":"record","name":"Sums","fields":[{"name":"key","type":"string"},{"name":"count","type":"long"},` +
		`{"name":"sum","type":"long"},{"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":38,"scale":2}}]}`
	test := `job: job.yaml
env: {CHECKPOINT_INTERVAL: 100ms}
schemas:
  numbers-avro: ` + mustAbs(t, "../../examples/avro-sum/number.avsc") + `
  parity-sums-avro: sums.avsc
cases:
  - name: a
    input:
      numbers-avro: [{n: 1, parity: odd, amount: 0.10, ts: 2026-12-04T10:00:00Z}]
    expect:
      parity-sums-avro: [{key: odd, value: {key: odd, count: 1, sum: 1, amount: 0.1}}]
`
	for name, text := range map[string]string{"job.yaml": job, "sums.avsc": sums, "test.yaml": test} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := ReadFile(filepath.Join(dir, "test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Prepare(f, readJob(t, f.Job), false)
	if err != nil {
		t.Fatal(err)
	}
	s.Run(context.Background(), Options{}, nil, func(r *Result) {
		if !r.Passed() {
			t.Errorf("%v %+v\n%s", r.Err, r.Diffs, r.Log)
		}
	})
}

func mustAbs(t *testing.T, path string) string {
	t.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// An upsert sink of an aggregate with a TTL: each key's latest value, and
// a tombstone once the TTL deletes the key (also under crash schedules).
func TestUpsertSinkTombstones(t *testing.T) {
	f, err := ReadFile("testdata/upsert/test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Prepare(f, readJob(t, f.Job), true)
	if err != nil {
		t.Fatal(err)
	}
	var results []*Result
	s.Run(context.Background(), Options{Crashes: 2}, nil, func(r *Result) { results = append(results, r) })
	if len(results) == 0 {
		t.Fatal("no results")
	}
	for _, r := range results {
		if !r.Passed() {
			t.Errorf("%s: %v %+v\n%s", r.Case.Name, r.Err, r.Diffs, r.Log)
		}
	}
}
