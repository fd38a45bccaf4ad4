package jobtest

import (
	"context"
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
	b, err := bind(f.Path, c, readJob(t, f.Job), false)
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
