package savepoint

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/state"
)

// testEntry is an entry owned by the test (Reader entries are borrowed).
type testEntry struct {
	Operator string
	Group    state.KeyGroup
	Key      string
	Value    string
}

func (e testEntry) String() string {
	return fmt.Sprintf("%s/%d/%q=%x", e.Operator, e.Group, e.Key, e.Value)
}

// sumsDesc is the parity-sum aggregate of config.yaml.
func sumsDesc() AggregateDesc {
	return AggregateDesc{
		KeyBy:  `n % 2 == 0 ? "even" : "odd"`,
		Values: []Value{{Name: "count", Func: "count"}, {Name: "sum", Func: "sum", Arg: "n"}},
	}
}

func testMeta(groups int) Meta {
	return Meta{
		Job: "parity-sum", CheckpointID: 42,
		Created:           time.Date(2026, 12, 2, 10, 0, 0, 123e6, time.UTC),
		ConfigFingerprint: "9c1f3a2b4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8",
		KeyGroups:         groups, Guarantee: "exactly_once",
	}
}

// fillStores puts keys "k0".."k<n-1>" (value: the key repeated i%4 times,
// so some values are empty) into one store per worker, as the runtime's
// workers hold them.
func fillStores(t testing.TB, op string, groups, workers, n int) []*state.Store[[]byte] {
	t.Helper()
	stores := make([]*state.Store[[]byte], workers)
	for w := range stores {
		s, err := state.New[[]byte](op, groups, state.RangeFor(w, workers, groups), state.BytesCodec{})
		if err != nil {
			t.Fatal(err)
		}
		stores[w] = s
	}
	for i := range n {
		key := []byte(fmt.Sprintf("k%d", i))
		w := state.WorkerOf(state.KeyGroupOf(key, groups), workers, groups)
		stores[w].Put(key, bytes.Repeat(key, i%4))
	}
	return stores
}

// storeEntries lists what the stores hold, in key-group then key order.
func storeEntries(stores []*state.Store[[]byte]) []testEntry {
	var out []testEntry
	for _, s := range stores {
		for e := range s.All() {
			out = append(out, testEntry{Operator: s.Operator(), Group: e.Group, Key: string(e.Key), Value: string(e.Value)})
		}
	}
	return out
}

// writeSavepoint writes a savepoint of one source and the aggregate
// "sums" exported from stores, each store's part from its own goroutine.
func writeSavepoint(t testing.TB, dir string, stores []*state.Store[[]byte], opts Options) *Manifest {
	t.Helper()
	w, err := Create(dir, testMeta(stores[0].KeyGroups()), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Abort() })
	w.blockSize = 256 // many blocks from few entries
	op, err := w.Aggregate(stores[0].Operator(), sumsDesc())
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, len(stores))
	for _, s := range stores {
		go func() { errs <- op.WriteAll(s.Range(), s.All()) }()
	}
	for range stores {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Source("numbers", []checkpoint.SourceOffset{
		{Topic: "numbers", Partition: 1, Offset: 1200}, {Topic: "numbers", Partition: 0, Offset: 1234},
	}); err != nil {
		t.Fatal(err)
	}
	m, err := w.Commit()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// readAll scans every aggregate and window of the savepoint over all key
// groups.
func readAll(t testing.TB, r *Reader) []testEntry {
	t.Helper()
	var out []testEntry
	for _, op := range r.Manifest().Operators {
		if !stateful(op.Kind) {
			continue
		}
		err := r.Scan(op.ID, state.Range{Start: 0, End: state.KeyGroup(r.Manifest().KeyGroups)}, func(e Entry) error {
			if e.Value == nil {
				t.Errorf("%s: nil value", e.Key)
			}
			out = append(out, testEntry{Operator: e.Operator, Group: e.Group, Key: string(e.Key), Value: string(e.Value)})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// copyDir copies the files of src into a new temporary directory.
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "copy")
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func dirNames(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names
}
