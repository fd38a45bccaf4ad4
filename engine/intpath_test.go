package engine

import (
	"os"
	"strings"
	"testing"

	"github.com/eoflow/pipeline/checkpoint/savepoint"
	"github.com/eoflow/pipeline/config"
)

// The integer path (operator/intpath.go) against the real broker: the
// job of examples/parity-sum-by-field keys by a field and sums integers,
// so its records take that path and its states are kept in the path's
// native form, which the changelog and savepoints must never see. It also
// runs TestExactlyOnceSurvivesFailuresAtEveryPoint.

// paritySumByField loads examples/parity-sum-by-field/config.yaml, and
// makes the test's input carry the parity field it keys by.
func paritySumByField(t *testing.T, e *testEnv) *config.Config {
	t.Helper()
	data, err := os.ReadFile("../examples/parity-sum-by-field/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	e.parity = true
	return parseConfig(t, data, e.env)
}

// A stop with a savepoint, then a new job from it with more workers and
// the general path's chain (a filter before the key_by takes the chain off
// the integer path): the savepoint holds the states' encoding, which both
// paths restore, and the sums continue exactly.
func TestParitySumByFieldSavepointRestoresIntoTheGeneralPath(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	cfg := paritySumByField(t, e)
	cfg.Workers = 1
	const total = 20000
	sp, feedWait := e.stoppedUnderLoad(cfg, total)
	if op := sp.Manifest().Operator("sums"); op == nil || op.Keys != 2 {
		t.Fatalf("the savepoint's aggregate: %+v", op)
	}
	if err := sp.Verify(nil); err != nil {
		t.Fatal(err)
	}
	feedWait()

	data, err := os.ReadFile("../examples/parity-sum-by-field/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	general := strings.Replace(string(data), "steps:\n", "steps:\n  - id: positive\n    filter: 'n > 0'\n", 1)
	if general == string(data) {
		t.Fatal("no steps in parity-sum-by-field")
	}
	upgraded := parseConfig(t, []byte(general), e.env)
	upgraded.Workers = 3
	job, logs := newJob(t, upgraded, WithSavepointRestore(sp, savepoint.RestoreOptions{}))
	done := runBackground(job)
	rep := e.awaitFinal(total, &running{done: done, logs: logs})
	job.Stop()
	if err := awaitDone(t, done); err != nil {
		t.Fatal(err)
	}
	if !rep.Exact() {
		t.Fatalf("after restoring the savepoint into the general path: %v", rep)
	}
}
