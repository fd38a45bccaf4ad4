package state

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
)

// restoreAll builds the stores of every worker of a workers-wide job from
// log, one operator per name in ops, and fails the test on any error.
func restoreAll(t testing.TB, log []ChangelogRecord, groups, workers int, ops ...string) map[string][]*Store[[]byte] {
	t.Helper()
	stores, err := restoreWorkers(log, groups, workers, ops...)
	if err != nil {
		t.Fatal(err)
	}
	return stores
}

func restoreWorkers(log []ChangelogRecord, groups, workers int, ops ...string) (map[string][]*Store[[]byte], error) {
	stores := make(map[string][]*Store[[]byte])
	for w := range workers {
		r := RangeFor(w, workers, groups)
		rs, err := NewRestorer(groups, r)
		if err != nil {
			return nil, err
		}
		for _, op := range ops {
			s, err := New[[]byte](op, groups, r, BytesCodec{})
			if err != nil {
				return nil, err
			}
			if err := rs.Register(s); err != nil {
				return nil, err
			}
			stores[op] = append(stores[op], s)
		}
		for i, rec := range log {
			if err := rs.Add(rec); err != nil {
				return nil, fmt.Errorf("worker %d, record %d: %w", w, i, err)
			}
		}
		if err := rs.Finish(); err != nil {
			return nil, fmt.Errorf("worker %d: %w", w, err)
		}
	}
	return stores, nil
}

// contents is every key and value of one operator over all its workers,
// failing if a key is held twice or by a worker that does not own it.
func contents(t testing.TB, stores []*Store[[]byte]) map[string]string {
	t.Helper()
	m, err := storeContents(stores)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func storeContents(stores []*Store[[]byte]) (map[string]string, error) {
	m := make(map[string]string)
	for w, s := range stores {
		n := 0
		for e := range s.All() {
			n++
			if !s.Range().Contains(e.Group) || KeyGroupOf(e.Key, s.KeyGroups()) != e.Group {
				return nil, fmt.Errorf("worker %d (%v) holds key %q of group %d", w, s.Range(), e.Key, e.Group)
			}
			if _, dup := m[string(e.Key)]; dup {
				return nil, fmt.Errorf("key %q held by two workers", e.Key)
			}
			m[string(e.Key)] = string(e.Value)
		}
		if n != s.Len() {
			return nil, fmt.Errorf("worker %d: Len %d, All yields %d", w, s.Len(), n)
		}
	}
	return m, nil
}

func snapshotLog(stores ...*Store[[]byte]) []ChangelogRecord {
	var log []ChangelogRecord
	for _, s := range stores {
		log = append(log, s.Snapshot().Records()...)
	}
	return log
}

func TestRestoreAppliesInOrder(t *testing.T) {
	s := newTestStore(t, "agg", 8)
	s.Put([]byte("a"), []byte("1"))
	s.Put([]byte("b"), []byte("1"))
	s.Put([]byte("c"), []byte("1"))
	log := snapshotLog(s)
	s.Put([]byte("a"), []byte("2"))
	s.Delete([]byte("b"))
	log = append(log, snapshotLog(s)...)

	got := restoreAll(t, log, 8, 1, "agg")["agg"][0]
	if want := map[string]string{"a": "2", "c": "1"}; !maps.Equal(contents(t, []*Store[[]byte]{got}), want) {
		t.Fatalf("restored %v, want %v", contents(t, []*Store[[]byte]{got}), want)
	}
	if got.DirtyLen() != 0 || got.ApproxBytes() != 4 {
		t.Fatalf("restored store: DirtyLen %d ApproxBytes %d", got.DirtyLen(), got.ApproxBytes())
	}
	// Restored keys are in the changelog: deleting one writes a tombstone.
	got.Delete([]byte("c"))
	if d := render(got.Snapshot()); d != "c:deleted" {
		t.Fatalf("delta after deleting a restored key: %q", d)
	}
}

func TestRestoreSkipsOtherGroupsAndCountsUnclaimed(t *testing.T) {
	const groups = 16
	var log []ChangelogRecord
	for _, op := range []string{"agg", "gone", "also-gone"} {
		s := newTestStore(t, op, groups)
		for i := range 50 {
			s.Put(fmt.Appendf(nil, "k%d", i), []byte("v"))
		}
		log = append(log, snapshotLog(s)...)
	}
	r := RangeFor(1, 4, groups)
	rs, err := NewRestorer(groups, r)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := New[[]byte]("agg", groups, r, BytesCodec{})
	if err := rs.Register(s); err != nil {
		t.Fatal(err)
	}
	for _, rec := range log {
		if err := rs.Add(rec); err != nil {
			t.Fatal(err)
		}
	}
	st := rs.Stats()
	if st.Records != 150 || st.Applied != s.Len() || st.Applied+st.OtherGroups+st.Unclaimed != 150 || st.Unclaimed != 2*s.Len() {
		t.Fatalf("stats %+v with %d keys restored", st, s.Len())
	}
	if got := strings.Join(rs.Unclaimed(), ","); got != "also-gone,gone" {
		t.Fatalf("Unclaimed = %s", got)
	}

	// Once every key of "gone" is deleted (tombstones not yet compacted
	// away, as after a savepoint import that dropped it), it holds no
	// state: only "also-gone" is left unclaimed. One key back is enough.
	var deletes []ChangelogRecord
	for _, rec := range log {
		if k, err := DecodeChangelogKey(rec.Key); err == nil && k.Operator == "gone" {
			deletes = append(deletes, ChangelogRecord{Key: rec.Key})
		}
	}
	for _, rec := range deletes {
		if err := rs.Add(rec); err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Join(rs.Unclaimed(), ","); got != "also-gone" {
		t.Fatalf("Unclaimed after deleting every key of gone = %s", got)
	}
	for _, rec := range log {
		if k, _ := DecodeChangelogKey(rec.Key); k.Operator == "gone" && r.Contains(k.Group) {
			if err := rs.Add(rec); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	if got := strings.Join(rs.Unclaimed(), ","); got != "also-gone,gone" {
		t.Fatalf("Unclaimed after one key of gone came back = %s", got)
	}
}

func TestRestoreRefusesAChangedKeyGroupCount(t *testing.T) {
	for _, tt := range []struct {
		name          string
		written, read int
		msg           string
	}{
		{"fewer groups", 128, 64, "but the job has 64 key groups"},
		{"more groups", 64, 128, "but its key belongs to group"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestStore(t, "agg", tt.written)
			for i := range 200 {
				s.Put(fmt.Appendf(nil, "k%d", i), []byte("v"))
			}
			_, err := restoreWorkers(snapshotLog(s), tt.read, 1, "agg")
			if !errors.Is(err, ErrKeyGroupCount) || !strings.Contains(err.Error(), "key-group count must not change") || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("err %v", err)
			}
		})
	}
}

func TestRestoreErrors(t *testing.T) {
	good := ChangelogKey{Operator: "agg", Group: KeyGroupOf([]byte("k"), 8), Key: []byte("k")}.Append(nil)
	tests := []struct {
		name string
		rec  ChangelogRecord
		want error
		msg  string
	}{
		{"corrupt key", ChangelogRecord{Key: []byte{1, 9}}, ErrCorrupt, "byte 1: operator id: length 9 exceeds the 0 bytes left"},
		{"future format", ChangelogRecord{Key: []byte{7, 0, 0, 0}}, ErrUnknownFormat, "version 7"},
		{"bad value", ChangelogRecord{Key: good, Value: []byte{0x80}}, nil, `restore operator "agg", key group`},
	}
	for _, tt := range tests {
		rs, _ := NewRestorer(8, RangeFor(0, 1, 8))
		s, _ := New[int64]("agg", 8, RangeFor(0, 1, 8), int64Codec{})
		if err := rs.Register(s); err != nil {
			t.Fatal(err)
		}
		err := rs.Add(tt.rec)
		if err == nil || tt.want != nil && !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%s: err %v, want %v containing %q", tt.name, err, tt.want, tt.msg)
		}
	}
}

func TestRegisterRefuses(t *testing.T) {
	rs, err := NewRestorer(8, RangeFor(0, 2, 8))
	if err != nil {
		t.Fatal(err)
	}
	mk := func(op string, groups int, r Range) *Store[[]byte] {
		s, err := New[[]byte](op, groups, r, BytesCodec{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	used := mk("used", 8, RangeFor(0, 2, 8))
	used.Put([]byte("a"), nil)
	if err := rs.Register(mk("agg", 8, RangeFor(0, 2, 8))); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		s   *Store[[]byte]
		msg string
	}{
		{mk("x", 16, RangeFor(0, 2, 16)), "store has 16 key groups, restore has 8"},
		{mk("x", 8, RangeFor(1, 2, 8)), "store holds key groups [4,8), restore is for [0,4)"},
		{used, "not empty"},
		{mk("agg", 8, RangeFor(0, 2, 8)), "registered twice"},
	} {
		if err := rs.Register(tt.s); err == nil || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("Register(%s): err %v, want %q", tt.s.Operator(), err, tt.msg)
		}
	}
	if _, err := NewRestorer(8, Range{0, 9}); err == nil {
		t.Error("NewRestorer accepted a range past the key-group count")
	}
	if _, err := NewRestorer(0, Range{}); err == nil {
		t.Error("NewRestorer accepted 0 key groups")
	}
}

// Rescaling: state written by any number of workers, restored by any
// other number, gives every key to exactly one worker, unchanged.
func TestRedistribution(t *testing.T) {
	for _, groups := range []int{1, 7, 128} {
		for from := 1; from <= 5; from++ {
			want := map[string]string{}
			var log []ChangelogRecord
			writers := make([]*Store[[]byte], from)
			for w := range writers {
				s, err := New[[]byte]("agg", groups, RangeFor(w, from, groups), BytesCodec{})
				if err != nil {
					t.Fatal(err)
				}
				writers[w] = s
			}
			for i := range 500 {
				k, v := fmt.Sprintf("key-%d", i), fmt.Sprintf("%d", i*i)
				writers[WorkerOf(KeyGroupOf([]byte(k), groups), from, groups)].Put([]byte(k), []byte(v))
				want[k] = v
			}
			log = snapshotLog(writers...)
			for _, to := range []int{1, 2, 3, 4, 5, 8, groups, groups + 3} {
				got := contents(t, restoreAll(t, log, groups, to, "agg")["agg"])
				if !maps.Equal(got, want) {
					t.Fatalf("G=%d, %d -> %d workers: %d keys restored, want %d", groups, from, to, len(got), len(want))
				}
			}
		}
	}
}
