package mutant

import (
	"os"
	"testing"
)

// Without the tag nothing turns a mutant on; with it, exactly the one
// PIPELINE_MUTANT names, and none when it names none.
func TestOnFollowsTheBuild(t *testing.T) {
	name := os.Getenv(EnvVar)
	for _, n := range []string{"", "txn-recover-no-fence", name, name + "-other"} {
		want := Enabled && name != "" && n == name
		if On(n) != want {
			t.Errorf("On(%q) = %v with Enabled=%v and %s=%q, want %v", n, On(n), Enabled, EnvVar, name, want)
		}
	}
}
