package savepoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/eoflow/pipeline/state"
)

// goldenV2Held is a savepoint in format version 2: the golden v1
// savepoint with held records. Written once by TestGoldenV2Held
// -write-golden; never edit or regenerate it.
const goldenV2Held = "testdata/v2-held"

// goldenHeld are the held records of goldenV2Held (the record bytes are
// opaque here), in source position order.
func goldenHeld() []HeldRecord {
	return []HeldRecord{
		{Topic: "more", Partition: 0, Offset: 5, At: 1748779200000, Record: []byte{1, 2, 3}},
		{Topic: "numbers", Partition: 0, Offset: 1200, At: -7, Key: "k", Record: []byte{}},
		{Topic: "numbers", Partition: 0, Offset: 1233, At: 1748779100000, Record: []byte("held value")},
		{Topic: "numbers", Partition: 2, Offset: 1 << 53, At: 1<<62 + 1, Record: []byte{0}},
	}
}

func writeHeldSavepoint(t *testing.T, dir string, held []HeldRecord) {
	t.Helper()
	w, err := Create(dir, goldenMeta(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	w.blockSize = 30
	op, err := w.Aggregate("sums", goldenDesc())
	if err != nil {
		t.Fatal(err)
	}
	p, err := op.Part(state.Range{Start: 0, End: 8})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for id, offs := range goldenOffsets() {
		if err := w.Source(id, offs); err != nil {
			t.Fatal(err)
		}
	}
	// Out of order: SetHeld sorts.
	rev := slices.Clone(held)
	slices.Reverse(rev)
	if err := w.SetHeld(rev); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}

// TestGoldenV2Held reads the version 2 savepoint of testdata/v2-held and
// its held records, then writes it again and demands the same bytes.
func TestGoldenV2Held(t *testing.T) {
	if _, err := os.Stat(goldenV2Held); errors.Is(err, os.ErrNotExist) && *writeGolden {
		writeHeldSavepoint(t, goldenV2Held, goldenHeld())
	}
	r, err := Open(goldenV2Held)
	if err != nil {
		t.Fatalf("%v (run go test -run TestGoldenV2Held -write-golden once to create it)", err)
	}
	if err := r.Verify(nil); err != nil {
		t.Fatal(err)
	}
	if v := r.Manifest().Version; v != 2 {
		t.Fatalf("version %d, want 2", v)
	}
	got, err := r.Held()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, goldenHeld()) {
		t.Fatalf("held\n got: %+v\nwant: %+v", got, goldenHeld())
	}
	fresh := filepath.Join(t.TempDir(), "v2")
	writeHeldSavepoint(t, fresh, goldenHeld())
	names := dirNames(t, goldenV2Held)
	if got := dirNames(t, fresh); !slices.Equal(got, names) {
		t.Fatalf("the writer now writes files %v, v2-held has %v: bump Version and add a new golden", got, names)
	}
	for _, name := range names {
		want, _ := os.ReadFile(filepath.Join(goldenV2Held, name))
		got, _ := os.ReadFile(filepath.Join(fresh, name))
		if !bytes.Equal(got, want) {
			t.Errorf("the writer no longer writes the v2 bytes of %s: bump Version and add a new golden\n got: %q\nwant: %q", name, got, want)
		}
	}

	// A savepoint without held records is still version 1.
	plain := filepath.Join(t.TempDir(), "v1")
	writeHeldSavepoint(t, plain, nil)
	if r, err := Open(plain); err != nil || r.Manifest().Version != 1 || r.Manifest().Held != nil {
		t.Fatalf("a savepoint without held records: %v, %+v", err, r)
	}
	if _, err := os.Stat(filepath.Join(plain, HeldFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a savepoint without held records has %s: %v", HeldFile, err)
	}
}

// TestHeldInspect: `savepoint inspect` says how many records are held,
// by partition.
func TestHeldInspect(t *testing.T) {
	s, err := Inspect(goldenV2Held)
	if err != nil {
		t.Fatal(err)
	}
	want := "held for joins as of event time: 4 records, 14 B (" + humanBytes(s.Held.FileBytes) + " on disk)\n" +
		"    more/0: 1\n    numbers/0: 2\n    numbers/2: 1\n"
	if got := s.String(); !strings.HasSuffix(got, want) {
		t.Fatalf("inspect:\n%s\nwant it to end with:\n%s", got, want)
	}
}

// TestHeldRecordsRemap: the held records follow their topic's offsets
// through --remap-topic, and are dropped with a topic whose offsets are.
func TestHeldRecordsRemap(t *testing.T) {
	r, err := Open(goldenV2Held)
	if err != nil {
		t.Fatal(err)
	}
	d := &Descriptor{Job: "parity-sum", KeyGroups: 8, Guarantee: "exactly_once", Operators: []OperatorDesc{
		{ID: "numbers", Kind: KindSource, Topics: []string{"numbers-v2"}},
		{ID: "sums", Kind: KindAggregate, Aggregate: ptr(goldenDesc())},
	}}
	plan, err := CheckRestore(r.Manifest(), d, RestoreOptions{
		AllowDroppedState: true,
		RemapTopics:       map[string]string{"numbers": "numbers-v2"},
		Partitions:        map[string]int{"numbers-v2": 3},
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.HeldRecords(plan)
	if err != nil {
		t.Fatal(err)
	}
	var want []HeldRecord
	for _, h := range goldenHeld() {
		if h.Topic == "numbers" {
			h.Topic = "numbers-v2"
			want = append(want, h)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("held\n got: %+v\nwant: %+v", got, want)
	}
	if !slices.ContainsFunc(plan.Notes, func(n string) bool { return strings.HasPrefix(n, "3 records that a join as of event time held") }) ||
		!slices.Contains(plan.Notes, "1 held records of topics whose offsets are dropped are dropped with them (--allow-dropped-state)") {
		t.Fatalf("the plan's notes do not say the held records go back: %q", plan.Notes)
	}
}

func ptr[T any](v T) *T { return &v }

// TestHeldCorrupt: damage to the held records or their part of the
// manifest is an error, never records lost or invented.
func TestHeldCorrupt(t *testing.T) {
	tests := []struct {
		name   string
		damage func(*testing.T, string)
		is     error
		want   string
	}{
		{"held file missing", remove(HeldFile), ErrCorrupt, `held records file held.records is missing`},
		{"held file truncated", edit(HeldFile, func(s string) string { return s[:len(s)-1] }), ErrCorrupt, `held records file held.records is \d+ bytes, the manifest says \d+`},
		{"bit flipped in the held file", flip(HeldFile, 30), ErrCorrupt, `held records file held.records: SHA-256 is`},
		{"held file of a newer version", func(t *testing.T, dir string) {
			flipBit(HeldFile, 8, 1)(t, dir)
			fixHeldSum(t, dir)
		}, ErrUnknownVersion, `held records file held.records: unknown savepoint format version 3, this build reads version 1`},
		{"held file fails its CRC", func(t *testing.T, dir string) {
			flip(HeldFile, 30)(t, dir)
			fixHeldSum(t, dir)
		}, ErrCorrupt, `CRC-32C is [0-9a-f]{8}, the file says`},
		{"a partition's count changed", rewrite(func(s string) string {
			s = strings.Replace(s, `"records": 4`, `"records": 5`, 1)
			return strings.Replace(s, `"partition": 2,
        "records": 1`, `"partition": 2,
        "records": 2`, 1)
		}), ErrCorrupt, `held records file held.records holds 4 records of 14 bytes in 3 partitions; the manifest says 5 records`},
		{"held records of a partition without an offset", rewrite(func(s string) string {
			return strings.Replace(s, `"topic": "more",
        "partition": 0,
        "records"`, `"topic": "more",
        "partition": 1,
        "records"`, 1)
		}), ErrCorrupt, `held.partitions\[0\] more/1: a partition the savepoint has no offset of`},
		{"version 1 with held records", rewrite(func(s string) string {
			return strings.Replace(s, `"version": 2`, `"version": 1`, 1)
		}), ErrCorrupt, `held: held records are version 2`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyDir(t, goldenV2Held)
			tc.damage(t, dir)
			err := func() error {
				r, err := Open(dir)
				if err != nil {
					return err
				}
				_, err = r.Held()
				return err
			}()
			if err == nil {
				t.Fatal("damage went unnoticed")
			}
			if !errors.Is(err, tc.is) || !regexp.MustCompile(tc.want).MatchString(err.Error()) {
				t.Fatalf("got  %v\nwant %v matching %s", err, tc.is, tc.want)
			}
		})
	}
}

// fixHeldSum writes the held file's size and SHA-256 into the manifest,
// and the manifest's checksum: damage only the file's own checks see.
func fixHeldSum(t *testing.T, dir string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, HeldFile))
	must(t, err)
	h := encodeHexSum(b)
	rewrite(func(s string) string {
		return regexp.MustCompile(`("file": "held.records",(?s:.*?)"sha256": ")[0-9a-f]{64}`).ReplaceAllString(s, "${1}"+h)
	})(t, dir)
}

func encodeHexSum(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
