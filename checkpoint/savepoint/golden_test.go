package savepoint

import (
	"bytes"
	"cmp"
	"encoding/hex"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/state"
)

var writeGolden = flag.Bool("write-golden", false, "write testdata/v1 if it does not exist (never overwrites: a format change is a new version and a new directory)")

// goldenV1 is a savepoint in format version 1, written once by
// TestGoldenV1 -write-golden. Never edit or regenerate it: every future
// version of the pipeline must read it as goldenEntries and goldenManifest
// say.
const goldenV1 = "testdata/v1"

// goldenEntries are the aggregate "sums" of parity-sum over 8 key groups,
// exported by two workers ([0,4) and [4,8)). Values are real
// operator.AggregateState encodings (count, sum), pinned here as bytes so
// that this test does not depend on the operator's encoding.
func goldenEntries() []testEntry {
	v := func(s string) string {
		b, err := hex.DecodeString(s)
		if err != nil {
			panic(err)
		}
		return string(b)
	}
	return []testEntry{
		{Operator: "sums", Group: 0, Key: "", Value: v("010205636f756e74030101010373756d040102010e")},        // count 1, sum 7
		{Operator: "sums", Group: 3, Key: "even", Value: v("010205636f756e74030101030373756d040102010c")},    // count 3, sum 6
		{Operator: "sums", Group: 4, Key: "ünïcode", Value: v("010205636f756e74030101010373756d0401020111")}, // count 1, sum -9
		{Operator: "sums", Group: 7, Key: "odd", Value: v("010205636f756e74030101020373756d0401020108")},     // count 2, sum 4
	}
}

// goldenMeta and goldenDesc are spelled out here, not shared with other
// tests: nothing but a new format version may change the golden bytes.
func goldenMeta() Meta {
	return Meta{
		Job: "parity-sum", CheckpointID: 42,
		Created:           time.Date(2026, 12, 2, 10, 0, 0, 123e6, time.UTC),
		ConfigFingerprint: "9c1f3a2b4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8",
		KeyGroups:         8, Guarantee: "exactly_once",
	}
}

func goldenDesc() AggregateDesc {
	return AggregateDesc{
		KeyBy:  `n % 2 == 0 ? "even" : "odd"`,
		Values: []Value{{Name: "count", Func: "count"}, {Name: "sum", Func: "sum", Arg: "n"}},
	}
}

// goldenOffsets are the sources' offsets, including one beyond 2^53 that
// a careless JSON reader (float64) would round.
func goldenOffsets() map[string][]checkpoint.SourceOffset {
	return map[string][]checkpoint.SourceOffset{
		"numbers": {{Topic: "numbers", Partition: 0, Offset: 1234}, {Topic: "numbers", Partition: 1, Offset: 0}, {Topic: "numbers", Partition: 2, Offset: 1<<53 + 1}},
		"extra":   {{Topic: "more", Partition: 0, Offset: 7}},
	}
}

// writeGoldenSavepoint writes the golden savepoint to dir with today's
// Writer.
func writeGoldenSavepoint(t *testing.T, dir string) {
	t.Helper()
	w, err := Create(dir, goldenMeta(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	w.blockSize = 30 // the second file holds two blocks
	op, err := w.Aggregate("sums", goldenDesc())
	if err != nil {
		t.Fatal(err)
	}
	for _, rng := range []state.Range{{Start: 0, End: 4}, {Start: 4, End: 8}} {
		p, err := op.Part(rng)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range goldenEntries() {
			if rng.Contains(e.Group) {
				if err := p.Add(state.Entry{Group: e.Group, Key: []byte(e.Key), Value: []byte(e.Value)}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for id, offs := range goldenOffsets() {
		if err := w.Source(id, offs); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}

// TestGoldenV1 reads the version 1 savepoint of testdata/v1 and checks
// what it holds; then writes the same savepoint again and demands the same
// bytes, file by file, so a change of either encoding cannot slip in
// without a new version.
func TestGoldenV1(t *testing.T) {
	if _, err := os.Stat(goldenV1); errors.Is(err, os.ErrNotExist) && *writeGolden {
		if err := os.MkdirAll(filepath.Dir(goldenV1), 0o755); err != nil {
			t.Fatal(err)
		}
		writeGoldenSavepoint(t, goldenV1)
	}
	r, err := Open(goldenV1)
	if err != nil {
		t.Fatalf("%v (run go test -run TestGoldenV1 -write-golden once to create it)", err)
	}
	if err := r.Verify(nil); err != nil {
		t.Fatal(err)
	}
	m := r.Manifest()
	meta := goldenMeta()
	if m.Version != 1 || m.Job != meta.Job || !m.Created.Equal(meta.Created) || m.CheckpointID != meta.CheckpointID ||
		m.ConfigFingerprint != meta.ConfigFingerprint || m.KeyGroups != 8 || m.Guarantee != meta.Guarantee {
		t.Errorf("manifest header: %+v", m)
	}
	var wantOffsets []checkpoint.SourceOffset
	for _, offs := range goldenOffsets() {
		wantOffsets = append(wantOffsets, offs...)
	}
	slices.SortFunc(wantOffsets, func(a, b checkpoint.SourceOffset) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	if got := m.Offsets(); !reflect.DeepEqual(got, wantOffsets) {
		t.Errorf("offsets\n got: %v\nwant: %v", got, wantOffsets)
	}
	if op := m.Operator("extra"); op == nil || op.Kind != KindSource {
		t.Errorf("source extra: %+v", op)
	}
	if op := m.Operator("sums"); op == nil || !reflect.DeepEqual(*op.Aggregate, goldenDesc()) || op.Keys != 4 || len(op.Files) != 2 {
		t.Errorf("aggregate sums: %+v", op)
	}
	if got := readAll(t, r); !reflect.DeepEqual(got, goldenEntries()) {
		t.Errorf("entries\n got: %v\nwant: %v", got, goldenEntries())
	}

	fresh := filepath.Join(t.TempDir(), "v1")
	writeGoldenSavepoint(t, fresh)
	names := dirNames(t, goldenV1)
	if got := dirNames(t, fresh); !slices.Equal(got, names) {
		t.Fatalf("the writer now writes files %v, v1 has %v: bump Version and add testdata/v2", got, names)
	}
	for _, name := range names {
		want, err := os.ReadFile(filepath.Join(goldenV1, name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(fresh, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("the writer no longer writes the v1 bytes of %s: bump Version (or the data file version) and add testdata/v2\n got: %q\nwant: %q", name, got, want)
		}
	}
}

// TestGoldenInspect pins what `pipeline savepoint inspect` prints.
func TestGoldenInspect(t *testing.T) {
	s, err := Inspect(goldenV1)
	if err != nil {
		t.Fatal(err)
	}
	want := `savepoint testdata/v1
  job          parity-sum
  created      2026-12-02T10:00:00.123Z
  checkpoint   42
  format       version 1, id ` + s.ID + `
  fingerprint  9c1f3a2b4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8
  key groups   8
  guarantee    exactly_once
sources
  extra
    more/0: 7
  numbers
    numbers/0: 1234
    numbers/1: 0
    numbers/2: 9007199254740993
operators
  sums (aggregate): 4 keys, 100 B in 2 files (` + humanBytes(s.Operators[0].FileBytes) + ` on disk)
    key_by  n % 2 == 0 ? "even" : "odd"
    values  count: count(), sum: sum(n)
`
	if got := s.String(); got != want {
		t.Errorf("inspect:\n%s\nwant:\n%s", got, want)
	}
	if len(s.ID) != 64 {
		t.Errorf("id %q", s.ID)
	}
}
