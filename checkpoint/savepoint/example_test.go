package savepoint_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/checkpoint/savepoint"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/state"
)

const job = `name: parity-sum
kafka:
  brokers: [localhost:9092]
sources:
  - id: numbers
    topics: [numbers]
steps:
  - key_by: 'n % 2 == 0 ? "even" : "odd"'
  - id: sums
    aggregate:
      values:
        count: count()
        sum: sum(n)
sinks:
  - topic: parity-sums
`

func load(yaml string) *config.Config {
	cfg, err := config.Parse("job.yaml", []byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		panic(err)
	}
	return cfg
}

// A savepoint taken by 2 workers at checkpoint 7, restored by 3 into a
// job with a filter added; then a change that cannot take the state.
func Example() {
	base, _ := os.MkdirTemp("", "savepoint-example")
	defer os.RemoveAll(base)
	dir := filepath.Join(base, "sp-7")

	// Taking it: what the runtime does at barrier 7 and after it commits.
	d := savepoint.DescribeConfig(load(job))
	w, err := savepoint.Create(dir, d.Meta(7, time.Now()), savepoint.Options{})
	if err != nil {
		panic(err)
	}
	defer w.Abort()
	ow, _ := w.Aggregate("sums", *d.Operator("sums").Aggregate)
	for worker := range 2 { // each worker, from its own goroutine
		rng := state.RangeFor(worker, 2, d.KeyGroups)
		store, _ := state.New[[]byte]("sums", d.KeyGroups, rng, state.BytesCodec{})
		for _, k := range []string{"even", "odd"} {
			if rng.Contains(state.KeyGroupOf([]byte(k), d.KeyGroups)) {
				store.Put([]byte(k), []byte("state of "+k))
			}
		}
		if err := ow.WriteAll(store.Range(), store.All()); err != nil {
			panic(err)
		}
	}
	offs, _ := d.SourceOffsets([]checkpoint.SourceOffset{{Topic: "numbers", Partition: 0, Offset: 100}})
	for id, o := range offs {
		w.Source(id, o)
	}
	if _, err := w.Commit(); err != nil {
		panic(err)
	}

	// Restoring it into a changed job with 3 workers.
	r, err := savepoint.Open(dir)
	if err != nil {
		panic(err)
	}
	changed := savepoint.DescribeConfig(load(strings.Replace(job, "steps:\n", "steps:\n  - filter: n >= 0\n", 1)))
	plan, err := savepoint.CheckRestore(r.Manifest(), changed, savepoint.RestoreOptions{Partitions: map[string]int{"numbers": 1}})
	if err != nil {
		panic(err)
	}
	fmt.Println("offsets:", plan.Offsets)
	keys := 0
	for worker := range 3 {
		rng := state.RangeFor(worker, 3, changed.KeyGroups)
		store, _ := state.New[[]byte]("sums", changed.KeyGroups, rng, state.BytesCodec{})
		restorer, _ := state.NewRestorer(changed.KeyGroups, rng)
		restorer.Register(store)
		if _, err := r.Restore(restorer, rng, plan.Restore); err != nil {
			panic(err)
		}
		keys += store.Len()
	}
	fmt.Println("keys restored:", keys)

	// A change to what the aggregate computes is refused.
	_, err = savepoint.CheckRestore(r.Manifest(), savepoint.DescribeConfig(load(strings.Replace(job, "sum(n)", "sum(amount)", 1))), savepoint.RestoreOptions{})
	fmt.Println(errors.Is(err, savepoint.ErrIncompatible))
	fmt.Println(err.(*savepoint.IncompatibleError).Problems[0].What)
	// Output:
	// offsets: [{numbers 0 100}]
	// keys restored: 2
	// true
	// operator "sums": value "sum" was sum(n), the config has sum(amount)
}
