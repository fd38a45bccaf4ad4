package state

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

var compactSeeds = flag.Int("state.compact-seeds", 100, "seeds TestCompactMatchesStore runs (-short: 40)")

// TestCompactMatchesStore runs random Puts (values that grow, shrink and
// are empty), Deletes, Gets, Snapshots and restores on a Compact and a
// Store[[]byte] side by side: every answer, every delta and every export
// must be the same, byte for byte; exports in the same order, deltas in
// any order (Compact lists a delta in memory order, Store sorts it), with
// the same changelog records.
func TestCompactMatchesStore(t *testing.T) {
	n := *compactSeeds
	if testing.Short() {
		n = 40
	}
	for seed := uint64(1); seed <= uint64(n); seed++ {
		if err := runCompactDifferential(seed); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
}

func runCompactDifferential(seed uint64) error {
	rnd := rand.New(rand.NewPCG(seed, 0xc0))
	groups := []int{1, 3, 16, 128}[rnd.IntN(4)]
	workers := 1 + rnd.IntN(3)
	w := rnd.IntN(workers)
	rng := RangeFor(w, workers, groups)
	var keys [][]byte
	for i := 0; len(keys) < 2+rnd.IntN(300); i++ {
		k := fmt.Appendf(nil, "key-%d", i)
		if i%7 == 0 {
			k = bytes.Repeat(k, 3) // longer than a prefix
		}
		if i%50 == 1 {
			k = bytes.Repeat(k, 40) // longer than a short record's key
		}
		if i == 0 {
			k = []byte{}
		}
		if rng.Contains(KeyGroupOf(k, groups)) {
			keys = append(keys, k)
		}
		if i > 100000 {
			break
		}
	}
	if len(keys) == 0 {
		return nil
	}
	ref, err := New[[]byte]("op", groups, rng, BytesCodec{})
	if err != nil {
		return err
	}
	c, err := NewCompact("op", groups, rng, nil)
	if err != nil {
		return err
	}
	// A record limit, on half the seeds: long keys' long values then go in
	// pieces (the longest keys stay whole: too long to split).
	limit := []int{0, 0, 300, 700}[rnd.IntN(4)]
	ref.SetRecordLimit(limit)
	c.SetRecordLimit(limit)
	var log []ChangelogRecord
	for step := range 200 + rnd.IntN(3000) {
		key := keys[rnd.IntN(len(keys))]
		switch r := rnd.IntN(100); {
		case r < 50:
			v := make([]byte, rnd.IntN(1+rnd.IntN(300)))
			if limit > 0 && rnd.IntN(5) == 0 {
				v = make([]byte, rnd.IntN(3*limit))
			}
			for i := range v {
				v[i] = byte(rnd.Uint32())
			}
			ref.Put(key, bytes.Clone(v))
			if rnd.IntN(2) == 0 {
				c.Put(key, v)
			} else {
				sl := c.Slot(key)
				sl.Put(key, v)
			}
			clear(v) // the store copied it
		case r < 65:
			ref.Delete(key)
			c.Delete(key)
		case r < 85:
			want, wantOK := ref.Get(key)
			got, ok := c.Get(key)
			sv, sok := c.Slot(key).Value()
			if ok != wantOK || !bytes.Equal(got, want) || sok != ok || !bytes.Equal(sv, got) {
				return fmt.Errorf("step %d: Get(%q) = %x, %v; Store has %x, %v", step, key, got, ok, want, wantOK)
			}
		case r < 95:
			want, got := ref.Snapshot(), c.Snapshot()
			if err := sameSnapshot(got, want); err != nil {
				return fmt.Errorf("step %d: snapshot: %w", step, err)
			}
			log = append(log, want.Records()...)
			if c.ApproxBytes() != ref.ApproxBytes() {
				return fmt.Errorf("step %d: ApproxBytes %d, Store %d", step, c.ApproxBytes(), ref.ApproxBytes())
			}
		case r < 97:
			// A rebalance that keeps state: the last snapshot took every
			// change, some key groups move away (Retain) and come back
			// (restored from the log into what was kept), as a group-mode
			// worker does across consecutive generations.
			d1, d2 := ref.Snapshot(), c.Snapshot()
			if err := sameSnapshot(d2, d1); err != nil {
				return fmt.Errorf("step %d: snapshot: %w", step, err)
			}
			log = append(log, d1.Records()...)
			if err := retainAndRegain(ref, c, log, groups, rng, rnd.Uint32()); err != nil {
				return fmt.Errorf("step %d: %w", step, err)
			}
		default:
			// A restart: both restored from the log written so far.
			ref, c, err = restoreBoth(log, groups, rng)
			if err != nil {
				return fmt.Errorf("step %d: %w", step, err)
			}
			ref.SetRecordLimit(limit)
			c.SetRecordLimit(limit)
			if c.KeysInPieces() != ref.KeysInPieces() {
				return fmt.Errorf("step %d: %d keys in pieces, Store %d", step, c.KeysInPieces(), ref.KeysInPieces())
			}
		}
		if c.Len() != ref.Len() || c.DirtyLen() != ref.DirtyLen() {
			return fmt.Errorf("step %d: Len %d DirtyLen %d, Store %d %d", step, c.Len(), c.DirtyLen(), ref.Len(), ref.DirtyLen())
		}
	}
	if err := sameSnapshot(c.Snapshot(), ref.Snapshot()); err != nil {
		return fmt.Errorf("last snapshot: %w", err)
	}
	return sameExport(c, ref)
}

// retainAndRegain lets ref and c go of the key groups whose bit of moved
// is set, checks each against a restore of only the groups kept, then
// restores the groups that moved from log into each and checks them
// against a restore of everything. Neither has a change for its next
// Snapshot after either step.
func retainAndRegain(ref *Store[[]byte], c *Compact, log []ChangelogRecord, groups int, rng Range, moved uint32) error {
	away := func(kg KeyGroup) bool { return moved>>(uint(kg)%32)&1 == 1 }
	keep := func(kg KeyGroup, key []byte) bool {
		if KeyGroupOf(key, groups) != kg {
			panic(fmt.Sprintf("Retain: key %q is in key group %d, not %d", key, KeyGroupOf(key, groups), kg))
		}
		return !away(kg)
	}
	if _, err := ref.Retain(keep); err != nil {
		return err
	}
	if _, err := c.Retain(keep); err != nil {
		return err
	}
	var kept, regained []ChangelogRecord
	for _, rec := range log {
		k, err := DecodeChangelogKey(rec.Key)
		if err != nil {
			return err
		}
		if away(k.Group) {
			regained = append(regained, rec)
		} else {
			kept = append(kept, rec)
		}
	}
	wantRef, wantC, err := restoreBoth(kept, groups, rng)
	if err != nil {
		return err
	}
	if err := sameExport(c, wantRef); err != nil {
		return fmt.Errorf("after Retain: %w", err)
	}
	if err := sameExport(wantC, ref); err != nil {
		return fmt.Errorf("after Retain, Store: %w", err)
	}
	if c.KeysInPieces() != wantC.KeysInPieces() || ref.KeysInPieces() != wantRef.KeysInPieces() {
		return fmt.Errorf("after Retain: %d and %d keys in pieces, restored %d and %d", c.KeysInPieces(), ref.KeysInPieces(), wantC.KeysInPieces(), wantRef.KeysInPieces())
	}
	for _, s := range []Restorable{ref, c} {
		r, err := NewRestorer(groups, rng)
		if err != nil {
			return err
		}
		if err := r.RegisterRetained(s); err != nil {
			return err
		}
		for _, rec := range regained {
			if err := r.Add(rec); err != nil {
				return err
			}
		}
		if err := r.Finish(); err != nil {
			return err
		}
	}
	if wantRef, _, err = restoreBoth(log, groups, rng); err != nil {
		return err
	}
	if err := sameExport(c, wantRef); err != nil {
		return fmt.Errorf("after regaining: %w", err)
	}
	if err := sameExport(c, ref); err != nil {
		return fmt.Errorf("after regaining, Store: %w", err)
	}
	if c.DirtyLen() != 0 || ref.DirtyLen() != 0 {
		return fmt.Errorf("after regaining: %d and %d dirty keys", c.DirtyLen(), ref.DirtyLen())
	}
	return nil
}

// TestRetainRefusesUnsnapshottedChanges: a store with changes its last
// Snapshot did not take cannot let keys go (the changelog would not hold
// what it dropped).
func TestRetainRefusesUnsnapshottedChanges(t *testing.T) {
	ref, err := New[[]byte]("op", 4, RangeFor(0, 1, 4), BytesCodec{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCompact("op", 4, RangeFor(0, 1, 4), nil)
	if err != nil {
		t.Fatal(err)
	}
	ref.Put([]byte("a"), []byte("1"))
	c.Put([]byte("a"), []byte("1"))
	none := func(KeyGroup, []byte) bool { return false }
	if _, err := ref.Retain(none); !errors.Is(err, ErrRetainDirty) {
		t.Fatalf("Store.Retain with a change pending: %v", err)
	}
	if _, err := c.Retain(none); !errors.Is(err, ErrRetainDirty) {
		t.Fatalf("Compact.Retain with a change pending: %v", err)
	}
	ref.Snapshot()
	c.Snapshot()
	if n, err := ref.Retain(none); err != nil || n != 1 || ref.Len() != 0 {
		t.Fatalf("Store.Retain: %d, %v, %d left", n, err, ref.Len())
	}
	if n, err := c.Retain(none); err != nil || n != 1 || c.Len() != 0 {
		t.Fatalf("Compact.Retain: %d, %v, %d left", n, err, c.Len())
	}
}

func restoreBoth(log []ChangelogRecord, groups int, rng Range) (*Store[[]byte], *Compact, error) {
	ref, err := New[[]byte]("op", groups, rng, BytesCodec{})
	if err != nil {
		return nil, nil, err
	}
	c, err := NewCompact("op", groups, rng, nil)
	if err != nil {
		return nil, nil, err
	}
	for _, s := range []Restorable{ref, c} {
		r, err := NewRestorer(groups, rng)
		if err != nil {
			return nil, nil, err
		}
		if err := r.Register(s); err != nil {
			return nil, nil, err
		}
		for _, rec := range log {
			if err := r.Add(rec); err != nil {
				return nil, nil, err
			}
		}
		if err := r.Finish(); err != nil {
			return nil, nil, err
		}
	}
	return ref, c, sameExport(c, ref)
}

func sameDelta(got, want Delta) error {
	if got.Operator != want.Operator || len(got.Entries) != len(want.Entries) {
		return fmt.Errorf("%d entries of %q, Store %d of %q", len(got.Entries), got.Operator, len(want.Entries), want.Operator)
	}
	for i, g := range got.Entries {
		w := want.Entries[i]
		if g.Group != w.Group || !bytes.Equal(g.Key, w.Key) || g.Deleted != w.Deleted || !bytes.Equal(g.Value, w.Value) || (g.Value == nil) != (w.Value == nil) {
			return fmt.Errorf("entry %d: %d %q %x deleted %v; Store %d %q %x deleted %v", i, g.Group, g.Key, g.Value, g.Deleted, w.Group, w.Key, w.Value, w.Deleted)
		}
	}
	return nil
}

// sameSnapshot is sameDelta for a Compact's delta, got, in any order: its
// records (built along with its entries, and split into pieces the same
// way) must be want's, and its entries, in key-group then key order,
// want's.
func sameSnapshot(got, want Delta) error {
	byKey := func(a, b ChangelogRecord) int { return bytes.Compare(a.Key, b.Key) }
	recs, wantRecs := slices.SortedFunc(slices.Values(got.Records()), byKey), slices.SortedFunc(slices.Values(want.Records()), byKey)
	if len(recs) != len(wantRecs) {
		return fmt.Errorf("%d records, Store %d", len(recs), len(wantRecs))
	}
	for i, r := range recs {
		w := wantRecs[i]
		if !bytes.Equal(r.Key, w.Key) || !bytes.Equal(r.Value, w.Value) || (r.Value == nil) != (w.Value == nil) {
			return fmt.Errorf("record %d: %x = %x, Store %x = %x", i, r.Key, r.Value, w.Key, w.Value)
		}
	}
	sorted := Delta{Operator: got.Operator, Entries: slices.Clone(got.Entries)}
	slices.SortFunc(sorted.Entries, func(a, b Entry) int {
		if a.Group != b.Group {
			return int(a.Group) - int(b.Group)
		}
		return bytes.Compare(a.Key, b.Key)
	})
	return sameDelta(sorted, want)
}

func sameExport(c *Compact, ref *Store[[]byte]) error {
	var got, want []Entry
	for e := range c.All() {
		got = append(got, e)
	}
	for e := range ref.All() {
		want = append(want, e)
	}
	if err := sameDelta(Delta{Entries: got}, Delta{Entries: want}); err != nil {
		return fmt.Errorf("All: %w", err)
	}
	if c.Len() != ref.Len() || c.ApproxBytes() != ref.ApproxBytes() {
		return fmt.Errorf("after restore: %d keys %d bytes, Store %d %d", c.Len(), c.ApproxBytes(), ref.Len(), ref.ApproxBytes())
	}
	return nil
}

// TestCompactCompactsAndHoldsLargeValues: values that keep outgrowing
// their room leave garbage, which a Snapshot reclaims by rewriting the
// arena; a value larger than a chunk gets a chunk of its own. Nothing is
// lost either way.
func TestCompactCompactsAndHoldsLargeValues(t *testing.T) {
	c, err := NewCompact("op", 16, RangeFor(0, 1, 16), nil)
	if err != nil {
		t.Fatal(err)
	}
	const keys = 5000
	want := map[string][]byte{}
	for round := range 40 {
		for i := range keys {
			k := fmt.Appendf(nil, "k%d", i)
			v := bytes.Repeat([]byte{byte(round)}, 1+round*3+i%5)
			c.Put(k, v)
			want[string(k)] = v
		}
		c.Snapshot()
		if round == 20 {
			big := bytes.Repeat([]byte("x"), 3*chunkBytes/2)
			c.Put([]byte("big"), big)
			want["big"] = big
		}
	}
	if c.m.inUse > 4*chunkBytes+2*int(c.ApproxBytes()) {
		t.Fatalf("arena holds %d bytes for %d bytes of state: garbage was not reclaimed", c.m.inUse, c.ApproxBytes())
	}
	if len(c.m.chunks) > 16 {
		t.Fatalf("%d chunks for %d bytes of state", len(c.m.chunks), c.ApproxBytes())
	}
	got := map[string][]byte{}
	for e := range c.All() {
		got[string(e.Key)] = e.Value
	}
	if len(got) != len(want) {
		t.Fatalf("%d keys, want %d", len(got), len(want))
	}
	for k, v := range want {
		if !bytes.Equal(got[k], v) {
			t.Fatalf("key %q: %d bytes, want %d", k, len(got[k]), len(v))
		}
	}
}

// TestCompactRestoreChecksValues: a value the operator cannot take fails
// the restore with the key named, as Store's codec does.
func TestCompactRestoreChecksValues(t *testing.T) {
	bad := errors.New("not a state")
	c, err := NewCompact("op", 4, RangeFor(0, 1, 4), func(v []byte) error {
		if string(v) == "bad" {
			return bad
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := NewRestorer(4, RangeFor(0, 1, 4))
	if err := r.Register(c); err != nil {
		t.Fatal(err)
	}
	k := ChangelogKey{Operator: "op", Group: KeyGroupOf([]byte("a"), 4), Key: []byte("a")}.Append(nil)
	if err := r.Add(ChangelogRecord{Key: k, Value: []byte("good")}); err != nil {
		t.Fatal(err)
	}
	err = r.Add(ChangelogRecord{Key: k, Value: []byte("bad")})
	if !errors.Is(err, bad) || !strings.Contains(err.Error(), `key "a"`) {
		t.Fatalf("got %v", err)
	}
}

// TestCompactPutDoesNotAllocate: the read-modify-write of a key that
// exists is free of allocations, as with Store.
func TestCompactPutDoesNotAllocate(t *testing.T) {
	c, _ := NewCompact("op", 128, RangeFor(0, 1, 128), nil)
	keys := make([][]byte, 1000)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "key-%d", i)
		c.Put(keys[i], []byte("12345678"))
	}
	c.Snapshot()
	var v [8]byte
	allocs := testing.AllocsPerRun(10, func() {
		for _, k := range keys {
			sl := c.Slot(k)
			old, _ := sl.Value()
			copy(v[:], old)
			v[0]++
			sl.Put(k, v[:])
		}
	})
	if allocs > 0 {
		t.Fatalf("%v allocations per 1000 read-modify-writes", allocs)
	}
	if d := c.Snapshot(); len(d.Entries) != len(keys) {
		t.Fatalf("delta of %d entries, want %d", len(d.Entries), len(keys))
	}
}

// TestCompactGrow: Grow sizes the table for this store's share of the
// keys at once, so that a restore does not rehash as it fills; the keys
// already there stay.
func TestCompactGrow(t *testing.T) {
	c, _ := NewCompact("op", 8, RangeFor(0, 2, 8), nil) // half of the groups
	var mine [][]byte
	for i := 0; len(mine) < 10; i++ {
		k := fmt.Appendf(nil, "k%d", i)
		if c.Range().Contains(KeyGroupOf(k, 8)) {
			mine = append(mine, k)
			c.Put(k, k)
		}
	}
	c.Grow(100_000)
	if n := len(c.m.table); n < 100_000 || n > 4*100_000 {
		t.Fatalf("table of %d slots for ~50,000 keys", n)
	}
	for _, k := range mine {
		if v, ok := c.Get(k); !ok || !bytes.Equal(v, k) {
			t.Fatalf("%s lost by Grow", k)
		}
	}
	before := len(c.m.table)
	c.Grow(10)
	if len(c.m.table) != before {
		t.Fatal("Grow shrank the table")
	}
}

// TestCompactPrefetchOnlyReads: PrefetchHashed on a store large enough for it
// to act (present, deleted, absent and empty keys, and other operations'
// leftovers in its buffer) changes no answer: a twin store given the same
// operations without PrefetchHashed answers the same and snapshots the same.
func TestCompactPrefetchOnlyReads(t *testing.T) {
	a, _ := NewCompact("op", 4, RangeFor(0, 1, 4), nil)
	b, _ := NewCompact("op", 4, RangeFor(0, 1, 4), nil)
	const n = 20_000
	key := func(i int) []byte { return fmt.Appendf(nil, "key-%d", i) }
	for i := range n {
		a.Put(key(i), key(i*3))
		b.Put(key(i), key(i*3))
	}
	if len(a.m.table) < offHeapTable/8 {
		t.Fatalf("a table of %d slots: too small for PrefetchHashed to act", len(a.m.table))
	}
	a.Snapshot()
	b.Snapshot()
	for i := 0; i < n; i += 7 {
		a.Delete(key(i))
		b.Delete(key(i))
	}
	rnd := rand.New(rand.NewPCG(3, 4))
	for round := range 50 {
		batch := make([][]byte, 1+rnd.IntN(600))
		for j := range batch {
			switch rnd.IntN(10) {
			case 0:
				batch[j] = nil
			case 1:
				batch[j] = key(n + rnd.IntN(n)) // absent
			default:
				batch[j] = key(rnd.IntN(n))
			}
		}
		a.PrefetchHashed(len(batch), func(j int) (Hash, bool) { return HashOf(batch[j]), batch[j] != nil })
		for _, k := range batch {
			va, oka := a.Get(k)
			vb, okb := b.Get(k)
			if oka != okb || !bytes.Equal(va, vb) {
				t.Fatalf("round %d: %q is %q %v after PrefetchHashed, %q %v without", round, k, va, oka, vb, okb)
			}
			if len(k) > 0 && rnd.IntN(3) == 0 {
				v := fmt.Appendf(nil, "%s-%d", k, round)
				a.Put(k, v)
				b.Put(k, v)
			}
		}
	}
	if a.Len() != b.Len() || a.DirtyLen() != b.DirtyLen() || a.ApproxBytes() != b.ApproxBytes() {
		t.Fatalf("counters %d/%d/%d after PrefetchHashed, %d/%d/%d without", a.Len(), a.DirtyLen(), a.ApproxBytes(), b.Len(), b.DirtyLen(), b.ApproxBytes())
	}
	da, db := a.Snapshot(), b.Snapshot()
	if len(da.Entries) != len(db.Entries) {
		t.Fatalf("snapshots of %d and %d entries", len(da.Entries), len(db.Entries))
	}
	for i := range da.Entries {
		ea, eb := da.Entries[i], db.Entries[i]
		if !bytes.Equal(ea.Key, eb.Key) || !bytes.Equal(ea.Value, eb.Value) || ea.Deleted != eb.Deleted {
			t.Fatalf("snapshot entry %d: %+v after PrefetchHashed, %+v without", i, ea, eb)
		}
	}
}

// TestCompactSortDirty: the radix sort of the dirty list orders it as a
// comparison sort does, for lists above and below its cut-over, with
// locations spread over all 32 bits.
func TestCompactSortDirty(t *testing.T) {
	rnd := rand.New(rand.NewPCG(7, 7))
	c, _ := NewCompact("op", 1, RangeFor(0, 1, 1), nil)
	for _, n := range []int{0, 1, 255, 256, 257, 5000, 100_000} {
		locs := rnd.Perm(n + n/2)[:n] // distinct
		c.dirty = c.dirty[:0]
		for _, l := range locs {
			loc := uint64(l) * 0x9e3779b1 % (1 << 32) // spread, still distinct for these n
			c.dirty = append(c.dirty, loc<<32|uint64(rnd.Uint32()))
		}
		want := slices.Clone(c.dirty)
		slices.Sort(want)
		if got := c.sortDirty(); !slices.Equal(got, want) {
			t.Fatalf("n=%d: sortDirty differs from slices.Sort", n)
		}
		if cap(c.dirty) > 0 && cap(c.sortScratch) > 0 && &c.dirty[:1][0] == &c.sortScratch[:1][0] {
			t.Fatalf("n=%d: the dirty list and the scratch list share memory", n)
		}
	}
}
