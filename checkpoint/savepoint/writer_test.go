package savepoint

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/state"
)

// TestRoundTripRescale writes the state of 3 workers and restores it into
// 1, 2, 3 and 5 workers through state.Restorer: every key comes back to
// exactly one worker, with its value, empty values empty and not nil.
func TestRoundTripRescale(t *testing.T) {
	const groups = 16
	stores := fillStores(t, "sums", groups, 3, 500)
	want := storeEntries(stores)
	dir := filepath.Join(t.TempDir(), "sp")
	m := writeSavepoint(t, dir, stores, Options{})

	if got := len(m.Operator("sums").Files); got != 3 {
		t.Errorf("%d data files, want one per worker (3)", got)
	}
	if got := m.Operator("sums").Keys; got != 500 {
		t.Errorf("manifest says %d keys, want 500", got)
	}
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Verify(nil); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, r); !reflect.DeepEqual(got, want) {
		t.Fatalf("read back %d entries, want %d\n got: %v\nwant: %v", len(got), len(want), got, want)
	}

	for _, workers := range []int{1, 2, 3, 5} {
		// The workers restore at once, as a job's do: a Reader is shared.
		restored := make([]*state.Store[[]byte], workers)
		counts := make([]int, workers)
		errs := make([]error, workers)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				rng := state.RangeFor(w, workers, groups)
				s, _ := state.New[[]byte]("sums", groups, rng, state.BytesCodec{})
				rs, _ := state.NewRestorer(groups, rng)
				if errs[w] = rs.Register(s); errs[w] != nil {
					return
				}
				counts[w], errs[w] = r.Restore(rs, rng, []string{"sums"})
				if st := rs.Stats(); errs[w] == nil && (st.Applied != counts[w] || st.OtherGroups != 0 || len(rs.Unclaimed()) != 0) {
					errs[w] = fmt.Errorf("restorer stats %+v after %d records, unclaimed %v", st, counts[w], rs.Unclaimed())
				}
				restored[w] = s
			})
		}
		wg.Wait()
		total := 0
		for w := range workers {
			if errs[w] != nil {
				t.Fatalf("%d workers: worker %d: %v", workers, w, errs[w])
			}
			total += counts[w]
		}
		if total != len(want) {
			t.Errorf("%d workers: restored %d records, want %d", workers, total, len(want))
		}
		if got := storeEntries(restored); !reflect.DeepEqual(got, want) {
			t.Errorf("%d workers: restored stores differ from the saved ones", workers)
		}
		for _, s := range restored {
			for e := range s.All() {
				if e.Value == nil {
					t.Fatalf("%d workers: key %q restored with a nil value", workers, e.Key)
				}
			}
		}
	}
}

// TestScanRange reads only the key groups asked for, across file bounds.
func TestScanRange(t *testing.T) {
	const groups = 16
	stores := fillStores(t, "sums", groups, 4, 300)
	all := storeEntries(stores)
	dir := filepath.Join(t.TempDir(), "sp")
	writeSavepoint(t, dir, stores, Options{})
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, rng := range []state.Range{{Start: 0, End: 16}, {Start: 3, End: 9}, {Start: 5, End: 5}, {Start: 15, End: 16}} {
		var got, want []testEntry
		for _, e := range all {
			if rng.Contains(e.Group) {
				want = append(want, e)
			}
		}
		err := r.Scan("sums", rng, func(e Entry) error {
			got = append(got, testEntry{Operator: e.Operator, Group: e.Group, Key: string(e.Key), Value: string(e.Value)})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Scan %v: %d entries, want %d", rng, len(got), len(want))
		}
	}
	if err := r.Scan("numbers", state.Range{End: 16}, func(Entry) error { return nil }); err == nil || !strings.Contains(err.Error(), "is a source") {
		t.Errorf("Scan of a source: %v", err)
	}
	if err := r.Scan("nope", state.Range{End: 16}, func(Entry) error { return nil }); err == nil || !strings.Contains(err.Error(), `no operator "nope"`) {
		t.Errorf("Scan of an unknown operator: %v", err)
	}
	stop := errors.New("stop")
	if err := r.Scan("sums", state.Range{End: 16}, func(Entry) error { return stop }); err != stop {
		t.Errorf("Scan returned %v, want the callback's error", err)
	}
}

// TestMoreWorkersThanGroups: workers with an empty range write no file.
func TestMoreWorkersThanGroups(t *testing.T) {
	stores := fillStores(t, "sums", 2, 5, 20)
	want := storeEntries(stores)
	dir := filepath.Join(t.TempDir(), "sp")
	m := writeSavepoint(t, dir, stores, Options{})
	if got := len(m.Operator("sums").Files); got != 2 {
		t.Errorf("%d files, want 2 (one per non-empty range)", got)
	}
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, r); !reflect.DeepEqual(got, want) {
		t.Errorf("read back %v, want %v", got, want)
	}
}

// TestEmptyState: an aggregate without keys is saved (and covers every
// key group), so "no state" is told apart from "state missing".
func TestEmptyState(t *testing.T) {
	stores := fillStores(t, "sums", 8, 2, 0)
	dir := filepath.Join(t.TempDir(), "sp")
	m := writeSavepoint(t, dir, stores, Options{})
	op := m.Operator("sums")
	if op == nil || op.Keys != 0 || len(op.Files) != 2 {
		t.Fatalf("operator %+v", op)
	}
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Verify(nil); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, r); len(got) != 0 {
		t.Errorf("read %v from an empty state", got)
	}
}

func TestProgress(t *testing.T) {
	stores := fillStores(t, "sums", 16, 3, 2000)
	var mu sync.Mutex
	var calls []Progress
	opts := Options{ProgressEntries: 100, Progress: func(p Progress) {
		mu.Lock()
		calls = append(calls, p)
		mu.Unlock()
	}}
	writeSavepoint(t, filepath.Join(t.TempDir(), "sp"), stores, opts)
	if len(calls) < 10 {
		t.Fatalf("%d progress calls for 2000 entries every 100", len(calls))
	}
	for i := 1; i < len(calls); i++ {
		if calls[i].Entries < calls[i-1].Entries || calls[i].Bytes < calls[i-1].Bytes {
			t.Fatalf("progress went back: %v then %v", calls[i-1], calls[i])
		}
	}
	last := calls[len(calls)-1]
	if last.Entries != 2000 || last.Files != 3 {
		t.Errorf("last progress %v, want 2000 keys in 3 files", last)
	}
	if s := last.String(); !strings.HasPrefix(s, "savepoint: 2000 keys, ") || !strings.HasSuffix(s, "3 data files complete") {
		t.Errorf("progress line %q", s)
	}
}

// TestWriterRefuses: what must never become a savepoint is refused with a
// message that says what was wrong.
func TestWriterRefuses(t *testing.T) {
	const groups = 8
	key := func(kg state.KeyGroup) []byte { // the first key "x<n>" of group kg
		for i := 0; ; i++ {
			k := []byte("x" + string(rune('a'+i%26)) + strings.Repeat("y", i/26))
			if state.KeyGroupOf(k, groups) == kg {
				return k
			}
		}
	}
	k3 := key(3)
	full := state.Range{Start: 0, End: groups}
	tests := []struct {
		name string
		run  func(w *Writer) error
		want string
	}{
		{"tombstone", func(w *Writer) error {
			return addOne(w, full, state.Entry{Group: 3, Key: k3, Deleted: true})
		}, "a tombstone"},
		{"nil value", func(w *Writer) error {
			return addOne(w, full, state.Entry{Group: 3, Key: k3})
		}, "nil value"},
		{"wrong key group", func(w *Writer) error {
			return addOne(w, full, state.Entry{Group: 4, Key: k3, Value: []byte{}})
		}, "belongs to group 3 of 8"},
		{"outside the part", func(w *Writer) error {
			return addOne(w, state.Range{Start: 4, End: 8}, state.Entry{Group: 3, Key: k3, Value: []byte{}})
		}, "outside this part's range [4,8)"},
		{"out of order", func(w *Writer) error {
			op, _ := w.Aggregate("sums", sumsDesc())
			p, _ := op.Part(full)
			defer p.Close()
			if err := p.Add(state.Entry{Group: 3, Key: k3, Value: []byte{}}); err != nil {
				return err
			}
			return p.Add(state.Entry{Group: 3, Key: k3, Value: []byte{}})
		}, "not after key"},
		{"overlapping parts", func(w *Writer) error {
			op, _ := w.Aggregate("sums", sumsDesc())
			p, _ := op.Part(state.Range{Start: 0, End: 5})
			defer p.Close()
			_, err := op.Part(state.Range{Start: 4, End: 8})
			return err
		}, "part [4,8) overlaps part [0,5)"},
		{"part beyond the key groups", func(w *Writer) error {
			op, _ := w.Aggregate("sums", sumsDesc())
			_, err := op.Part(state.Range{Start: 4, End: 9})
			return err
		}, "does not fit 8 key groups"},
		{"missing worker", func(w *Writer) error {
			op, _ := w.Aggregate("sums", sumsDesc())
			if err := op.WriteAll(state.Range{Start: 0, End: 4}, nil2); err != nil {
				return err
			}
			_, err := w.Commit()
			return err
		}, "files cover key groups [0,4), not all 8: a worker's export is missing"},
		{"part still open", func(w *Writer) error {
			op, _ := w.Aggregate("sums", sumsDesc())
			p, _ := op.Part(full)
			defer p.Close()
			_, err := w.Commit()
			return err
		}, "1 data files are still open"},
		{"failed part fails the commit", func(w *Writer) error {
			addOne(w, full, state.Entry{Group: 4, Key: k3, Value: []byte{}})
			_, err := w.Commit()
			return err
		}, "not written: operator \"sums\" part [0,8)"},
		{"operator twice", func(w *Writer) error {
			w.Aggregate("sums", sumsDesc())
			_, err := w.Aggregate("sums", sumsDesc())
			return err
		}, `operator "sums" declared twice`},
		{"aggregate without values", func(w *Writer) error {
			_, err := w.Aggregate("sums", AggregateDesc{KeyBy: "k"})
			return err
		}, "aggregate.values: at least one is required"},
		{"partition gap", func(w *Writer) error {
			return w.Source("numbers", []checkpoint.SourceOffset{{Topic: "t", Partition: 0}, {Topic: "t", Partition: 2}})
		}, "want partition 1"},
		{"after commit", func(w *Writer) error {
			op, _ := w.Aggregate("sums", sumsDesc())
			op.WriteAll(full, nil2)
			if _, err := w.Commit(); err != nil {
				return err
			}
			_, err := op.Part(full)
			return err
		}, "already committed or aborted"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, err := Create(filepath.Join(t.TempDir(), "sp"), testMeta(groups), Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Abort()
			err = tc.run(w)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v\nwant an error containing %q", err, tc.want)
			}
		})
	}
}

// nil2 is an empty export.
func nil2(func(state.Entry) bool) {}

// addOne writes one entry into a new part of "sums" and closes it.
func addOne(w *Writer, rng state.Range, e state.Entry) error {
	op, err := w.Aggregate("sums", sumsDesc())
	if err != nil {
		return err
	}
	p, err := op.Part(rng)
	if err != nil {
		return err
	}
	err = p.Add(e)
	p.Close()
	return err
}

func TestCreateRefuses(t *testing.T) {
	base := t.TempDir()
	full := filepath.Join(base, "full")
	if err := os.MkdirAll(full, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(full, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		dir  string
		meta Meta
		want string
		is   error
	}{
		{"not empty", full, testMeta(8), `holds "x": choose a new path`, ErrExists},
		{"a file", file, testMeta(8), "not a directory that can take a savepoint", ErrExists},
		{"no checkpoint", filepath.Join(base, "a"), Meta{Job: "j", Created: testMeta(8).Created, KeyGroups: 8}, "checkpoint id: must not be 0", nil},
		{"no job", filepath.Join(base, "b"), Meta{CheckpointID: 1, Created: testMeta(8).Created, KeyGroups: 8}, "job: required", nil},
		{"key groups", filepath.Join(base, "c"), Meta{Job: "j", CheckpointID: 1, Created: testMeta(8).Created}, "key-group count 0 out of range", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Create(tc.dir, tc.meta, Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) || tc.is != nil && !errors.Is(err, tc.is) {
				t.Fatalf("got %v\nwant %q (%v)", err, tc.want, tc.is)
			}
		})
	}
}

// TestAtomic: nothing is at DIR before Commit, nothing is left after
// Abort, an empty DIR is taken, and a DIR filled meanwhile is not
// overwritten.
func TestAtomic(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "nested", "sp")
	w, err := Create(dir, testMeta(4), Options{})
	if err != nil {
		t.Fatal(err)
	}
	op, _ := w.Aggregate("sums", sumsDesc())
	if err := op.WriteAll(state.Range{End: 4}, nil2); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("DIR exists before Commit: %v", err)
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if names := dirNames(t, filepath.Dir(dir)); len(names) != 0 {
		t.Fatalf("Abort left %v", names)
	}

	// An empty directory (made by an operator, say) is taken.
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	w, err = Create(dir, testMeta(4), Options{})
	if err != nil {
		t.Fatal(err)
	}
	op, _ = w.Aggregate("sums", sumsDesc())
	op.WriteAll(state.Range{End: 4}, nil2)
	if _, err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); err != nil {
		t.Fatalf("Abort after Commit removed the savepoint: %v", err)
	}
	if names := dirNames(t, filepath.Dir(dir)); !slices.Equal(names, []string{"sp"}) {
		t.Fatalf("after Commit the parent holds %v", names)
	}

	// Two savepoints raced to one path: the second loses, nothing is
	// overwritten, and its temporary directory goes with Abort.
	dir2 := filepath.Join(base, "sp2")
	a, _ := Create(dir2, testMeta(4), Options{})
	b, _ := Create(dir2, testMeta(4), Options{})
	for _, w := range []*Writer{a, b} {
		op, _ := w.Aggregate("sums", sumsDesc())
		op.WriteAll(state.Range{End: 4}, nil2)
	}
	if _, err := a.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Commit(); !errors.Is(err, ErrExists) {
		t.Fatalf("second Commit: %v, want ErrExists", err)
	}
	b.Abort()
	if names := dirNames(t, base); !slices.Equal(names, []string{"nested", "sp2"}) {
		t.Fatalf("base holds %v", names)
	}
}

func TestDataFileName(t *testing.T) {
	tests := []struct {
		id   string
		rng  state.Range
		want string
	}{
		{"sums", state.Range{Start: 0, End: 64}, "sums-"},
		{"../../etc/passwd", state.Range{Start: 3, End: 4}, "_._.._etc_passwd-"},
		{".hidden", state.Range{Start: 0, End: 1}, "_hidden-"},
		{"Ünï côde", state.Range{Start: 0, End: 1}, "_n__c_de-"},
	}
	seen := map[string]bool{}
	for _, tc := range tests {
		name := dataFileName(tc.id, tc.rng)
		if !strings.HasPrefix(name, tc.want) || checkFileName(name) != nil {
			t.Errorf("dataFileName(%q) = %q, want prefix %q and a plain name", tc.id, name, tc.want)
		}
		seen[strings.ToLower(name)] = true
	}
	// Ids that look alike once made safe, or differ only in case, still
	// get names of their own.
	a, b, c := dataFileName("a/b", state.Range{End: 1}), dataFileName("a_b", state.Range{End: 1}), dataFileName("A_b", state.Range{End: 1})
	if a == b || strings.EqualFold(b, c) {
		t.Errorf("names collide: %q %q %q", a, b, c)
	}
}

// TestRestoreErrors: what the Restorer refuses comes back with the
// savepoint, operator and key named, and unwraps to the Restorer's error.
func TestRestoreErrors(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sp")
	writeSavepoint(t, dir, fillStores(t, "sums", 8, 1, 50), Options{})
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	// A job that changed its key-group count behind CheckRestore's back.
	rng := state.Range{Start: 0, End: 16}
	s, _ := state.New[[]byte]("sums", 16, rng, state.BytesCodec{})
	rs, _ := state.NewRestorer(16, rng)
	must(t, rs.Register(s))
	_, err = r.Restore(rs, rng, []string{"sums"})
	if !errors.Is(err, state.ErrKeyGroupCount) || !strings.Contains(err.Error(), `restore operator "sums", key group`) {
		t.Fatalf("restore into 16 key groups: %v", err)
	}
	if n, err := r.Restore(rs, rng, nil); n != 0 || err != nil {
		t.Errorf("Restore of no operators fed %d records: %v", n, err)
	}
}
