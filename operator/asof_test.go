package operator

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/eoflow/pipeline/config"
)

func rawTable() *Table {
	return NewTable(config.Table{ID: "t", Format: config.FormatRaw})
}

func TestVersionedLookupAsOf(t *testing.T) {
	vt := NewVersionedTable(rawTable())
	apply := func(k, v string, at int64) {
		t.Helper()
		var val []byte
		if v != "" {
			val = []byte(v)
		}
		if late, skip, _ := vt.ApplyAt([]byte(k), val, at); late || skip != "" {
			t.Fatalf("apply %s@%d: late %v skip %q", k, at, late, skip)
		}
	}
	apply("c1", "gold", 100)
	apply("c1", "silver", 200)
	apply("c1", "", 300) // tombstone
	apply("c1", "bronze", 400)
	apply("c2", "x", 250)
	apply("c2", "y", 250) // same time: replaces (rule 2)
	apply("c1", "early", 50)
	cases := []struct {
		key   string
		at    int64
		want  string
		found bool
	}{
		{"c1", 49, "", false},
		{"c1", 50, "early", true},
		{"c1", 99, "early", true},
		{"c1", 100, "gold", true},
		{"c1", 299, "silver", true},
		{"c1", 300, "", false},
		{"c1", 399, "", false},
		{"c1", 400, "bronze", true},
		{"c1", math.MaxInt64, "bronze", true},
		{"c2", 249, "", false},
		{"c2", 250, "y", true},
		{"c9", 1000, "", false},
	}
	for _, c := range cases {
		v, _, found, late := vt.LookupAsOf(c.key, c.at)
		if late || found != c.found || found && v != c.want {
			t.Errorf("%s as of %d: %v %v (late %v), want %q %v", c.key, c.at, v, found, late, c.want, c.found)
		}
	}
	if keys, versions := vt.Len(); keys != 2 || versions != 6 {
		t.Errorf("Len: %d keys %d versions, want 2, 6", keys, versions)
	}
}

func TestVersionedExpire(t *testing.T) {
	vt := NewVersionedTable(rawTable())
	for _, r := range []struct {
		k, v string
		at   int64
	}{{"a", "1", 10}, {"a", "2", 20}, {"a", "3", 30}, {"b", "1", 10}, {"b", "", 15}, {"c", "1", 40}} {
		var val []byte
		if r.v != "" {
			val = []byte(r.v)
		}
		vt.ApplyAt([]byte(r.k), val, r.at)
	}
	vt.Expire(25)
	// a keeps 2 (the newest at or before 25) and 3; b's newest at or
	// before 25 is a tombstone: b goes; c is after the horizon.
	if keys, versions := vt.Len(); keys != 2 || versions != 3 {
		t.Fatalf("after Expire(25): %d keys %d versions, want 2, 3", keys, versions)
	}
	for _, c := range []struct {
		key   string
		at    int64
		want  any
		found bool
	}{{"a", 25, "2", true}, {"a", 30, "3", true}, {"b", 25, nil, false}, {"c", 39, nil, false}, {"c", 40, "1", true}} {
		v, _, found, late := vt.LookupAsOf(c.key, c.at)
		if late || found != c.found || v != c.want {
			t.Errorf("%s as of %d: %v %v late %v, want %v %v", c.key, c.at, v, found, late, c.want, c.found)
		}
	}
	// Before the horizon: late, nothing found, even where a version was.
	if _, _, found, late := vt.LookupAsOf("a", 24); found || !late {
		t.Errorf("a as of 24 after Expire(25): found %v late %v, want late", found, late)
	}
	// A record before the horizon is not applied.
	if late, _, _ := vt.ApplyAt([]byte("a"), []byte("old"), 24); !late {
		t.Error("a record before the horizon was applied")
	}
	if v, _, _, _ := vt.LookupAsOf("a", 25); v != "2" {
		t.Errorf("a as of 25 after a late record: %v, want 2", v)
	}
	// The horizon does not move back.
	vt.Expire(5)
	if h, ok := vt.Horizon(); !ok || h != 25 {
		t.Errorf("horizon %d %v, want 25", h, ok)
	}
}

func TestVersionedSkips(t *testing.T) {
	vt := NewVersionedTable(NewTable(config.Table{ID: "t", Format: config.FormatJSON}))
	if _, skip, _ := vt.ApplyAt(nil, []byte(`{}`), 1); skip != SkipNoKey {
		t.Errorf("no key: skip %q", skip)
	}
	if _, skip, _ := vt.ApplyAt([]byte("k"), []byte(`{`), 1); skip != SkipDecode {
		t.Errorf("bad JSON: skip %q", skip)
	}
	if keys, _ := vt.Len(); keys != 0 {
		t.Errorf("%d keys after two skipped records", keys)
	}
}

func TestTableClock(t *testing.T) {
	c := NewTableClock([]int32{0, 1})
	if _, ok := c.Watermark(nil); ok {
		t.Fatal("a watermark before any record")
	}
	c.Observe(0, 100)
	if _, ok := c.Watermark(nil); ok {
		t.Fatal("a watermark while partition 1 has given nothing")
	}
	if wm, ok := c.Watermark(func(p int32) bool { return p == 1 }); !ok || wm != 100 {
		t.Fatalf("partition 1 idle: %d %v, want 100", wm, ok)
	}
	c.Observe(1, 50)
	c.Observe(1, 40) // out of order: the largest counts
	if wm, ok := c.Watermark(nil); !ok || wm != 50 {
		t.Fatalf("watermark %d %v, want 50", wm, ok)
	}
	if wm, ok := c.Watermark(func(int32) bool { return true }); !ok || wm != math.MaxInt64 {
		t.Fatalf("every partition idle: %d %v, want MaxInt64", wm, ok)
	}
}

func TestHoldReleaseOrder(t *testing.T) {
	var h Hold
	for _, r := range []HeldRecord{
		{At: 30, Key: "a", Topic: "s", Offset: 1},
		{At: 10, Key: "b", Topic: "s", Offset: 2},
		{At: 10, Key: "a", Topic: "s", Partition: 1, Offset: 0},
		{At: 10, Key: "a", Topic: "s", Partition: 0, Offset: 9},
		{At: 20, Key: "a", Topic: "s", Offset: 3},
	} {
		h.Add(r)
	}
	if m, ok := h.Min(); !ok || m != 10 {
		t.Fatalf("Min %d %v", m, ok)
	}
	got := h.Release(20) // strictly before 20
	want := []HeldRecord{
		{At: 10, Key: "a", Topic: "s", Partition: 0, Offset: 9},
		{At: 10, Key: "a", Topic: "s", Partition: 1, Offset: 0},
		{At: 10, Key: "b", Topic: "s", Offset: 2},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Release(20):\n got %v\nwant %v", got, want)
	}
	if h.Len() != 2 {
		t.Fatalf("%d held after release, want 2", h.Len())
	}
	enc := AppendHold(nil, &h)
	back, err := DecodeHold(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(AppendHold(nil, back), enc) {
		t.Fatal("a decoded hold encodes differently")
	}
	if got := back.Release(math.MaxInt64); len(got) != 2 || got[0].At != 20 || got[1].At != 30 {
		t.Fatalf("decoded hold released %v", got)
	}
	for i := range len(enc) {
		if _, err := DecodeHold(enc[:i]); err == nil {
			t.Fatalf("a hold cut to %d of %d bytes decoded", i, len(enc))
		}
	}
}

// asofInput is a random stream and table: table records per partition in
// event-time order, stream records at any time.
type asofInput struct {
	table  [][]tableRec // by partition
	stream []HeldRecord
}

type tableRec struct {
	key, value string // value "": a tombstone
	at         int64
}

func randomAsofInput(rng *rand.Rand) asofInput {
	var in asofInput
	keys := []string{"k1", "k2", "k3"}
	for range 2 {
		var part []tableRec
		at := int64(0)
		for range 20 {
			at += rng.Int64N(3) // equal times happen
			v := fmt.Sprintf("v%d", rng.IntN(100))
			if rng.IntN(6) == 0 {
				v = ""
			}
			part = append(part, tableRec{key: keys[rng.IntN(len(keys))], value: v, at: at})
		}
		in.table = append(in.table, part)
	}
	for i := range 40 {
		in.stream = append(in.stream, HeldRecord{At: rng.Int64N(40), Key: keys[rng.IntN(len(keys))], Topic: "s", Offset: int64(i), Record: []byte{byte(i)}})
	}
	return in
}

// oracle is the join from the input alone: each stream record meets the
// latest table record at or before its event time (in partition order
// among equal times, so a later one of one partition wins). Keys are
// partitioned by the test so that no key is in two partitions.
func (in asofInput) oracle() map[int64]string {
	out := map[int64]string{}
	for _, s := range in.stream {
		best, bestAt, found := "", int64(-1), false
		for _, part := range in.table {
			for _, r := range part {
				if r.key == s.Key && r.at <= s.At && r.at >= bestAt {
					best, bestAt, found = r.value, r.at, true
				}
			}
		}
		if found && best != "" {
			out[s.Offset] = best
		} else {
			out[s.Offset] = "<none>"
		}
	}
	return out
}

// run feeds the input in an order rng picks, the two topics interleaved,
// with barriers between, and returns what each stream record met.
func (in asofInput) run(t *testing.T, rng *rand.Rand, history int64) map[int64]string {
	t.Helper()
	j := NewAsOfJoin(rawTable(), []int32{0, 1}, history)
	next := make([]int, len(in.table))
	stream := slices.Clone(in.stream)
	rng.Shuffle(len(stream), func(a, b int) { stream[a], stream[b] = stream[b], stream[a] })
	out := map[int64]string{}
	var wm int64 = -1
	collect := func(rs []AsOfResult) {
		for _, r := range rs {
			if r.Late {
				if r.Found {
					t.Fatalf("late record %+v found a value", r.Held)
				}
				out[r.Held.Offset] = "<late>"
				continue
			}
			if _, dup := out[r.Held.Offset]; dup {
				t.Fatalf("record %d released twice", r.Held.Offset)
			}
			v := "<none>"
			if r.Found {
				v = r.Value.(string)
			}
			out[r.Held.Offset] = v
		}
	}
	for {
		done := len(stream) == 0
		for p := range next {
			done = done && next[p] == len(in.table[p])
		}
		if done {
			break
		}
		switch k := rng.IntN(4); {
		case k == 0:
			collect(j.Barrier(wm, wm >= 0, nil))
		case k == 1 && len(stream) > 0:
			s := stream[0]
			stream = stream[1:]
			wm = max(wm, s.At-10)
			j.StreamRecord(s)
		default:
			p := rng.IntN(len(next))
			if next[p] == len(in.table[p]) {
				continue
			}
			r := in.table[p][next[p]]
			next[p]++
			var v []byte
			if r.value != "" {
				v = []byte(r.value)
			}
			j.TableRecord(int32(p), []byte(r.key), v, r.at)
		}
	}
	// The end: every table partition idle.
	collect(j.Barrier(wm, wm >= 0, func(int32) bool { return true }))
	if j.Held().Len() != 0 {
		t.Fatalf("%d records still held at the end", j.Held().Len())
	}
	return out
}

// TestAsOfJoinArrivalOrder: whatever the order the stream and the table
// are read in, and wherever the barriers fall, every stream record meets
// the table value the input alone says it meets.
func TestAsOfJoinArrivalOrder(t *testing.T) {
	late, exact := 0, 0
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 34))
		in := randomAsofInput(rng)
		// No key in two partitions: a key's versions come in one order.
		for p := range in.table {
			for i := range in.table[p] {
				in.table[p][i].key = fmt.Sprintf("%s-%d", in.table[p][i].key, p)
			}
		}
		for i := range in.stream {
			in.stream[i].Key = fmt.Sprintf("%s-%d", in.stream[i].Key, rng.IntN(len(in.table)))
		}
		want := in.oracle()
		for order := range uint64(5) {
			got := in.run(t, rand.New(rand.NewPCG(seed, order)), 1000)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d order %d:\n got %v\nwant %v", seed, order, got, want)
			}
			// A short history: versions are dropped as the watermark moves,
			// and a record that comes too late meets nothing; every other
			// record still meets what the input says.
			got = in.run(t, rand.New(rand.NewPCG(seed, order)), 3)
			for off, v := range got {
				if v == "<late>" {
					late++
					continue
				}
				exact++
				if v != want[off] {
					t.Fatalf("seed %d order %d history 3: record %d met %s, want %s", seed, order, off, v, want[off])
				}
			}
		}
	}
	if late == 0 || exact == 0 {
		t.Fatalf("history 3: %d late and %d exact records: the test does not exercise both", late, exact)
	}
}

// TestAsOfJoinHistory: a record released meets its version however far
// the table has gone on; the horizon then moves to min(W, T) - history,
// and a record that comes after the horizon passed its time is late.
func TestAsOfJoinHistory(t *testing.T) {
	j := NewAsOfJoin(rawTable(), []int32{0}, 10)
	j.TableRecord(0, []byte("k"), []byte("a"), 0)
	j.TableRecord(0, []byte("k"), []byte("b"), 50)
	j.StreamRecord(HeldRecord{At: 5, Key: "k", Offset: 1})
	j.StreamRecord(HeldRecord{At: 100, Key: "k", Offset: 4})
	j.TableRecord(0, []byte("k"), []byte("c"), 60)
	j.TableRecord(0, []byte("k"), []byte("d"), 100)
	// No watermark yet: the record at 5 is released (5 < T 100) and meets
	// a; the one at 100 waits (a table record at 100 may still come).
	rs := j.Barrier(0, false, nil)
	if len(rs) != 1 || !rs[0].Found || rs[0].Value != "a" {
		t.Fatalf("released %+v, want the record at 5 meeting a", rs)
	}
	if _, ok := j.Table().Horizon(); ok {
		t.Fatal("a horizon without a watermark")
	}
	// W 95, T 100: the horizon moves to 85; a and b go.
	j.Barrier(95, true, nil)
	if _, versions := j.Table().Len(); versions != 2 {
		t.Fatalf("%d versions after the horizon moved to 85, want 2 (c, d)", versions)
	}
	j.StreamRecord(HeldRecord{At: 55, Key: "k", Offset: 2})
	j.StreamRecord(HeldRecord{At: 95, Key: "k", Offset: 3})
	j.TableRecord(0, []byte("k"), []byte("e"), 100) // replaces d
	j.TableRecord(0, []byte("j"), []byte("x"), 101)
	rs = j.Barrier(95, true, nil)
	if len(rs) != 3 || !rs[0].Late || rs[0].Found || rs[1].Late || rs[1].Value != "c" || rs[2].Value != "e" {
		t.Fatalf("released %+v, want 55 late, 95 meeting c, 100 meeting e", rs)
	}
}
