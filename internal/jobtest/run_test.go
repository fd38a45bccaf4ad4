package jobtest

import (
	"context"
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
