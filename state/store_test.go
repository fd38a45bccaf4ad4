package state

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// newTestStore is a one-worker store of []byte values over groups groups.
func newTestStore(t testing.TB, operator string, groups int) *Store[[]byte] {
	t.Helper()
	s, err := New[[]byte](operator, groups, RangeFor(0, 1, groups), BytesCodec{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// render writes a delta as "key=value" and "key:deleted" items, in order.
func render(d Delta) string {
	var items []string
	for _, e := range d.Entries {
		if e.Deleted {
			items = append(items, fmt.Sprintf("%s:deleted", e.Key))
		} else {
			items = append(items, fmt.Sprintf("%s=%s", e.Key, e.Value))
		}
	}
	return strings.Join(items, " ")
}

// Scripts of "put k v", "del k" and "snap <expected delta>", on one group.
func TestSnapshotDeltas(t *testing.T) {
	tests := []struct {
		name   string
		script []string
	}{
		{"nothing changed", []string{"snap "}},
		{"put then snapshot twice", []string{"put a 1", "snap a=1", "snap "}},
		{"latest value wins within an epoch", []string{"put a 1", "put a 2", "snap a=2"}},
		{"sorted by key", []string{"put c 1", "put a 2", "put b 3", "snap a=2 b=3 c=1"}},
		{"put and delete in one epoch leaves nothing", []string{"put a 1", "del a", "snap "}},
		{"delete of a persisted key is a tombstone", []string{"put a 1", "snap a=1", "del a", "snap a:deleted", "snap "}},
		{"delete then put is a value", []string{"put a 1", "snap a=1", "del a", "put a 2", "snap a=2"}},
		{"put delete put delete of a persisted key", []string{"put a 1", "snap a=1", "del a", "put a 2", "del a", "snap a:deleted"}},
		{"tombstone is written once", []string{"put a 1", "snap a=1", "del a", "snap a:deleted", "put a 3", "del a", "snap "}},
		{"delete of an absent key does nothing", []string{"del a", "snap ", "put a 1", "del a", "del a", "snap "}},
		{"unchanged keys are not repeated", []string{"put a 1", "put b 1", "snap a=1 b=1", "put b 2", "snap b=2"}},
		{"empty value is a value", []string{"put a ", "snap a="}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestStore(t, "op", 1)
			for i, line := range tt.script {
				cmd, arg, _ := strings.Cut(line, " ")
				switch cmd {
				case "put":
					k, v, _ := strings.Cut(arg, " ")
					s.Put([]byte(k), []byte(v))
				case "del":
					s.Delete([]byte(arg))
				case "snap":
					d := s.Snapshot()
					if got := render(d); got != arg {
						t.Fatalf("step %d %q: delta %q", i, line, got)
					}
					for _, e := range d.Entries {
						if e.Deleted != (e.Value == nil) {
							t.Fatalf("step %d: entry %q Deleted=%v with Value %v", i, e.Key, e.Deleted, e.Value)
						}
					}
					if s.DirtyLen() != 0 {
						t.Fatalf("step %d: DirtyLen %d after Snapshot", i, s.DirtyLen())
					}
				default:
					t.Fatalf("bad script line %q", line)
				}
			}
		})
	}
}

func TestSnapshotOrdersByGroupThenKey(t *testing.T) {
	const groups = 8
	s := newTestStore(t, "op", groups)
	type gk struct {
		kg  KeyGroup
		key string
	}
	var want []gk
	for i := range 200 {
		k := fmt.Sprintf("key-%d", i)
		s.Put([]byte(k), []byte("v"))
		want = append(want, gk{KeyGroupOf([]byte(k), groups), k})
	}
	slices.SortFunc(want, func(a, b gk) int {
		if a.kg != b.kg {
			return int(a.kg) - int(b.kg)
		}
		return strings.Compare(a.key, b.key)
	})
	d := s.Snapshot()
	if len(d.Entries) != len(want) {
		t.Fatalf("%d entries, want %d", len(d.Entries), len(want))
	}
	for i, e := range d.Entries {
		if e.Group != want[i].kg || string(e.Key) != want[i].key {
			t.Fatalf("entry %d is (%d, %s), want (%d, %s)", i, e.Group, e.Key, want[i].kg, want[i].key)
		}
	}
}

// The delta must not change when the caller appends to its slices or when
// the store goes on: it is handed to an asynchronous producer.
func TestDeltaIsIndependentOfTheStore(t *testing.T) {
	s := newTestStore(t, "op", 1)
	v := []byte("one")
	s.Put([]byte("a"), v)
	s.Put([]byte("b"), []byte("two"))
	d := s.Snapshot()
	_ = append(d.Entries[0].Key, 'X')
	_ = append(d.Entries[0].Value, 'X')
	v[0] = 'O' // BytesCodec keeps v, but the delta holds an encoded copy
	s.Put([]byte("a"), []byte("three"))
	s.Snapshot()
	if got := render(d); got != "a=one b=two" {
		t.Fatalf("delta changed to %q", got)
	}
}

func TestCounters(t *testing.T) {
	s := newTestStore(t, "op", 4)
	check := func(step string, keys, dirty int, bytes int64) {
		t.Helper()
		if s.Len() != keys || s.DirtyLen() != dirty || s.ApproxBytes() != bytes {
			t.Fatalf("%s: Len %d DirtyLen %d ApproxBytes %d, want %d %d %d",
				step, s.Len(), s.DirtyLen(), s.ApproxBytes(), keys, dirty, bytes)
		}
	}
	check("empty", 0, 0, 0)
	s.Put([]byte("ab"), []byte("1234"))
	s.Put([]byte("cde"), []byte("1"))
	check("after puts", 2, 2, 5) // values count from the next snapshot on
	s.Snapshot()
	check("after snapshot", 2, 0, 2+4+3+1)
	s.Put([]byte("ab"), []byte("12"))
	check("after overwrite", 2, 1, 10)
	s.Snapshot()
	check("after second snapshot", 2, 0, 2+2+3+1)
	s.Delete([]byte("cde"))
	check("after delete", 1, 1, 4)
	s.Delete([]byte("cde"))
	check("after second delete", 1, 1, 4)
	s.Put([]byte("cde"), []byte("1"))
	check("after revive", 2, 1, 8)
	s.Delete([]byte("cde"))
	s.Snapshot()
	check("after tombstone", 1, 0, 4)
}

func TestGet(t *testing.T) {
	s := newTestStore(t, "op", 16)
	if _, ok := s.Get([]byte("a")); ok {
		t.Fatal("Get of an absent key found a value")
	}
	s.Put([]byte("a"), []byte("1"))
	if v, ok := s.Get([]byte("a")); !ok || string(v) != "1" {
		t.Fatalf("Get = %q, %v", v, ok)
	}
	s.Delete([]byte("a"))
	if _, ok := s.Get([]byte("a")); ok {
		t.Fatal("Get of a deleted key found a value")
	}
}

func TestWrongGroupPanics(t *testing.T) {
	const groups = 4
	r := RangeFor(0, 2, groups) // [0,2)
	s, err := New[[]byte]("op", groups, r, BytesCodec{})
	if err != nil {
		t.Fatal(err)
	}
	var foreign []byte
	for i := 0; foreign == nil; i++ {
		if k := fmt.Appendf(nil, "k%d", i); !r.Contains(KeyGroupOf(k, groups)) {
			foreign = k
		}
	}
	for name, op := range map[string]func(){
		"Put":    func() { s.Put(foreign, nil) },
		"Get":    func() { s.Get(foreign) },
		"Delete": func() { s.Delete(foreign) },
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "routed to the wrong worker") {
					t.Errorf("%s of a foreign key: recovered %v", name, r)
				}
			}()
			op()
		}()
	}
}

func TestNewRefusesBadArguments(t *testing.T) {
	tests := []struct {
		name     string
		operator string
		groups   int
		r        Range
		codec    Codec[[]byte]
		want     string
	}{
		{"empty operator", "", 8, Range{0, 8}, BytesCodec{}, "operator id is empty"},
		{"zero groups", "op", 0, Range{0, 0}, BytesCodec{}, "out of range"},
		{"range past groups", "op", 8, Range{4, 9}, BytesCodec{}, "does not fit"},
		{"reversed range", "op", 8, Range{5, 4}, BytesCodec{}, "does not fit"},
		{"nil codec", "op", 8, Range{0, 8}, nil, "nil codec"},
	}
	for _, tt := range tests {
		_, err := New(tt.operator, tt.groups, tt.r, tt.codec)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err %v, want %q", tt.name, err, tt.want)
		}
	}
}

func TestAllExportsLiveKeysInOrder(t *testing.T) {
	const groups = 8
	s := newTestStore(t, "op", groups)
	want := map[string]string{}
	for i := range 100 {
		k, v := fmt.Sprintf("k%03d", i), fmt.Sprintf("v%d", i)
		s.Put([]byte(k), []byte(v))
		want[k] = v
	}
	s.Snapshot()
	s.Delete([]byte("k007")) // a pending tombstone is not exported
	delete(want, "k007")
	s.Put([]byte("k001"), []byte("new")) // a dirty value is, as it is now
	want["k001"] = "new"

	var got []Entry
	for e := range s.All() {
		got = append(got, e)
	}
	if len(got) != len(want) {
		t.Fatalf("%d entries, want %d", len(got), len(want))
	}
	// Checked after the iteration: yielded entries own their bytes, so
	// later ones must not have overwritten earlier ones.
	for i, e := range got {
		if i > 0 {
			p := got[i-1]
			if p.Group > e.Group || p.Group == e.Group && bytes.Compare(p.Key, e.Key) >= 0 {
				t.Fatalf("entry %d (%d, %s) after (%d, %s)", i, e.Group, e.Key, p.Group, p.Key)
			}
		}
		if e.Deleted || e.Value == nil || e.Group != KeyGroupOf(e.Key, groups) || want[string(e.Key)] != string(e.Value) {
			t.Fatalf("entry %d: %+v", i, e)
		}
	}
	if s.DirtyLen() != 2 {
		t.Fatalf("All changed the dirty set: DirtyLen %d", s.DirtyLen())
	}
	n := 0
	for range s.All() {
		n++
		break
	}
	if n != 1 {
		t.Fatal("All did not stop when asked")
	}
}

// The empty key with an empty value is a value, not a tombstone, in a
// delta and in an export (Kafka tells a nil value from an empty one).
func TestEmptyKeyAndValue(t *testing.T) {
	s := newTestStore(t, "op", 1)
	s.Put([]byte{}, []byte{})
	d := s.Snapshot()
	if len(d.Entries) != 1 || d.Entries[0].Value == nil || d.Entries[0].Deleted {
		t.Fatalf("delta %+v", d.Entries)
	}
	if rec := d.Records()[0]; rec.Value == nil {
		t.Fatal("record value is nil (a tombstone)")
	}
	for e := range s.All() {
		if e.Value == nil || e.Record("op").Value == nil {
			t.Fatalf("export %+v has a nil value", e)
		}
	}
}

// Put of an existing key is the per-record hot path: it must not allocate,
// also right after a snapshot (the dirty lists keep their capacity).
func TestPutExistingDoesNotAllocate(t *testing.T) {
	s, err := New[int64]("op", 128, RangeFor(0, 1, 128), int64Codec{})
	if err != nil {
		t.Fatal(err)
	}
	keys := make([][]byte, 1000)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "key-%d", i)
		s.Put(keys[i], 0)
	}
	s.Snapshot()
	var n int64
	allocs := testing.AllocsPerRun(10, func() {
		for _, k := range keys {
			v, _ := s.Get(k)
			n++
			s.Put(k, v+n)
		}
		s.Snapshot()
	})
	// Snapshot allocates its delta (3 allocations); the 2000 Gets and Puts
	// nothing.
	if allocs > 3 {
		t.Fatalf("%v allocations per 1000 Get+Put and a Snapshot", allocs)
	}
}

// TestSlot: Get and Put through a Slot are Store.Get and Store.Put of its
// key, for a new key, an existing one and a deleted one, with the same
// snapshots and counters.
func TestSlot(t *testing.T) {
	s := newTestStore(t, "op", 4)
	ref := newTestStore(t, "op", 4)
	step := func(key, value string) {
		t.Helper()
		sl := s.Slot([]byte(key))
		got, ok := sl.Get()
		want, wok := ref.Get([]byte(key))
		if ok != wok || !bytes.Equal(got, want) {
			t.Fatalf("%s: Slot.Get %q %v, Get %q %v", key, got, ok, want, wok)
		}
		sl.Put([]byte(key), []byte(value))
		ref.Put([]byte(key), []byte(value))
	}
	step("a", "1")
	step("b", "1")
	step("a", "2")
	if got, want := render(s.Snapshot()), render(ref.Snapshot()); got != want {
		t.Fatalf("delta %q, want %q", got, want)
	}
	s.Delete([]byte("a"))
	ref.Delete([]byte("a"))
	step("a", "3")
	step("c", "")
	if got, want := render(s.Snapshot()), render(ref.Snapshot()); got != want || s.Len() != ref.Len() || s.ApproxBytes() != ref.ApproxBytes() {
		t.Fatalf("delta %q (len %d, %d bytes), want %q (%d, %d)", got, s.Len(), s.ApproxBytes(), want, ref.Len(), ref.ApproxBytes())
	}
	if got, ok := s.Slot([]byte("z")).Get(); ok || got != nil {
		t.Fatal("Get of an absent key")
	}
}

// Grow only sizes maps: it keeps what is stored, and a grown store
// behaves like any other.
func TestGrowKeepsEntries(t *testing.T) {
	s := newTestStore(t, "agg", 8)
	s.Put([]byte("before"), []byte("1"))
	s.Grow(1000)
	for i := range 100 {
		s.Put(fmt.Appendf(nil, "k%d", i), []byte("v"))
	}
	if v, ok := s.Get([]byte("before")); !ok || string(v) != "1" || s.Len() != 101 {
		t.Fatalf("after Grow: before=%q %v, %d keys", v, ok, s.Len())
	}
	s.Grow(0) // nothing to do
	if s.Len() != 101 {
		t.Fatalf("Grow(0) changed the store: %d keys", s.Len())
	}
}
