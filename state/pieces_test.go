package state

import (
	"bytes"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// piecesStore is what these tests do with a Store[[]byte] or a Compact.
type piecesStore interface {
	Restorable
	Put(key, value []byte)
	Delete(key []byte)
	Get(key []byte) ([]byte, bool)
	Snapshot() Delta
	SetRecordLimit(n int)
	KeysInPieces() int
	EntryRecords(e Entry) []ChangelogRecord
	All() iter.Seq[Entry]
}

// bothStores runs f on an empty one-worker Store and Compact of operator
// "agg" over 8 key groups.
func bothStores(t *testing.T, f func(t *testing.T, mk func() piecesStore)) {
	t.Run("Store", func(t *testing.T) {
		f(t, func() piecesStore {
			s, err := New[[]byte]("agg", 8, RangeFor(0, 1, 8), BytesCodec{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		})
	})
	t.Run("Compact", func(t *testing.T) {
		f(t, func() piecesStore {
			s, err := NewCompact("agg", 8, RangeFor(0, 1, 8), nil)
			if err != nil {
				t.Fatal(err)
			}
			return s
		})
	})
}

// pieceRecords describes recs one per line: "k=<n bytes>", "k:deleted",
// "k#i/n=<n bytes>" or "k#i/n:deleted", sorted (a Compact lists its
// records in memory order).
func pieceRecords(t *testing.T, recs []ChangelogRecord) string {
	t.Helper()
	var lines []string
	for _, r := range recs {
		k, err := DecodeChangelogKey(r.Key)
		if err != nil {
			t.Fatalf("record key %x: %v", r.Key, err)
		}
		name := string(k.Key)
		if k.Pieces != 0 {
			name = fmt.Sprintf("%s#%d/%d", k.Key, k.Piece, k.Pieces)
		}
		if r.Value == nil {
			lines = append(lines, name+":deleted")
		} else {
			lines = append(lines, fmt.Sprintf("%s=%d", name, len(r.Value)))
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, " ")
}

// restoreInto restores log into the empty store s.
func restoreInto(t *testing.T, s piecesStore, log []ChangelogRecord) error {
	t.Helper()
	r, err := NewRestorer(s.KeyGroups(), s.Range())
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Register(s); err != nil {
		t.Fatal(err)
	}
	for _, rec := range log {
		if err := r.Add(rec); err != nil {
			return err
		}
	}
	return r.Finish()
}

// fitsLimit fails the test if a record of recs holds more than limit bytes.
func fitsLimit(t *testing.T, recs []ChangelogRecord, limit int) {
	t.Helper()
	for _, r := range recs {
		if len(r.Key)+len(r.Value) > limit {
			t.Fatalf("a record of %d bytes of key and value, limit %d", len(r.Key)+len(r.Value), limit)
		}
	}
}

func value(n int, c byte) []byte { return bytes.Repeat([]byte{c}, n) }

// A value larger than the limit goes out in pieces that each fit, with a
// tombstone of its whole-value record; growing to another count, shrinking
// back to one record and deleting each tombstone the pieces written
// before; a restore from the log at every step gives the value back.
func TestPiecesLifecycle(t *testing.T) {
	bothStores(t, func(t *testing.T, mk func() piecesStore) {
		const limit = 100
		s := mk()
		s.SetRecordLimit(limit)
		k := []byte("k")
		// "agg" and key group: a record key of 8 bytes, a piece's of 10,
		// so each piece holds 100 - 8 - 10 = 82 bytes of the value.
		var log []ChangelogRecord
		steps := []struct {
			do   func()
			want string
		}{
			{func() { s.Put(k, value(50, 'a')) }, "k=50"},
			{func() { s.Put(k, value(200, 'b')) }, "k#0/3=82 k#1/3=82 k#2/3=36 k:deleted"},
			{func() { s.Put(k, value(240, 'c')) }, "k#0/3=82 k#1/3=82 k#2/3=76"},
			{func() { s.Put(k, value(300, 'd')) }, "k#0/3:deleted k#0/4=82 k#1/3:deleted k#1/4=82 k#2/3:deleted k#2/4=82 k#3/4=54"},
			{func() { s.Put(k, value(10, 'e')) }, "k#0/4:deleted k#1/4:deleted k#2/4:deleted k#3/4:deleted k=10"},
			{func() { s.Put(k, value(92, 'f')) }, "k=92"}, // 8 + 92: fits exactly
			{func() { s.Put(k, value(95, 'f')) }, "k#0/2=82 k#1/2=13 k:deleted"},
			{func() { s.Delete(k) }, "k#0/2:deleted k#1/2:deleted k:deleted"},
		}
		for i, st := range steps {
			st.do()
			want, wantOK := s.Get(k)
			want = bytes.Clone(want)
			recs := s.Snapshot().Records()
			if got := pieceRecords(t, recs); got != st.want {
				t.Fatalf("step %d: records\n %s\nwant\n %s", i, got, st.want)
			}
			fitsLimit(t, recs, limit)
			log = append(log, recs...)
			for _, l := range [][]ChangelogRecord{log, compact(log, rand.New(rand.NewPCG(uint64(i), 1)))} {
				r := mk()
				if err := restoreInto(t, r, l); err != nil {
					t.Fatalf("step %d: restore: %v", i, err)
				}
				got, ok := r.Get(k)
				if ok != wantOK || !bytes.Equal(got, want) || r.Len() != s.Len() {
					t.Fatalf("step %d: restored %d bytes, %v (%d keys); want %d, %v", i, len(got), ok, r.Len(), len(want), wantOK)
				}
				if r.KeysInPieces() != s.KeysInPieces() {
					t.Fatalf("step %d: restored store holds %d keys in pieces, the writer %d", i, r.KeysInPieces(), s.KeysInPieces())
				}
			}
		}
	})
}

// A restored store knows which keys the changelog holds in pieces: its
// first write of such a key tombstones them.
func TestPiecesRestoredStoreTombstonesThem(t *testing.T) {
	bothStores(t, func(t *testing.T, mk func() piecesStore) {
		w := mk()
		w.SetRecordLimit(100)
		w.Put([]byte("big"), value(500, 'x'))
		w.Put([]byte("small"), value(5, 'y'))
		log := w.Snapshot().Records()

		r := mk()
		if err := restoreInto(t, r, log); err != nil {
			t.Fatal(err)
		}
		if r.KeysInPieces() != 1 {
			t.Fatalf("%d keys in pieces after the restore, want 1", r.KeysInPieces())
		}
		r.SetRecordLimit(100)
		r.Put([]byte("big"), value(3, 'z'))
		recs := r.Snapshot().Records()
		want := "big#0/7:deleted big#1/7:deleted big#2/7:deleted big#3/7:deleted big#4/7:deleted big#5/7:deleted big#6/7:deleted big=3"
		if got := pieceRecords(t, recs); got != want {
			t.Fatalf("records\n %s\nwant\n %s", got, want)
		}
		if r.KeysInPieces() != 0 {
			t.Fatalf("%d keys in pieces, want 0", r.KeysInPieces())
		}
		again := mk()
		if err := restoreInto(t, again, compact(append(log, recs...), rand.New(rand.NewPCG(1, 1)))); err != nil {
			t.Fatal(err)
		}
		if v, _ := again.Get([]byte("big")); string(v) != "zzz" {
			t.Fatalf("restored %q", v)
		}
	})
}

// Values that fit are written exactly as without a limit, byte for byte
// and in the same order: a job whose state fits writes what it always did.
func TestPiecesLeaveValuesThatFitAlone(t *testing.T) {
	bothStores(t, func(t *testing.T, mk func() piecesStore) {
		limited, plain := mk(), mk()
		limited.SetRecordLimit(64)
		for round := range 5 {
			for i := range 40 {
				k := fmt.Appendf(nil, "key-%d", i)
				v := value((i*7+round)%40, byte('a'+round))
				if (i+round)%9 == 0 {
					limited.Delete(k)
					plain.Delete(k)
					continue
				}
				limited.Put(k, v)
				plain.Put(k, v)
			}
			got, want := limited.Snapshot().Records(), plain.Snapshot().Records()
			if len(got) != len(want) {
				t.Fatalf("round %d: %d records, %d without a limit", round, len(got), len(want))
			}
			for i := range got {
				if !bytes.Equal(got[i].Key, want[i].Key) || !bytes.Equal(got[i].Value, want[i].Value) || (got[i].Value == nil) != (want[i].Value == nil) {
					t.Fatalf("round %d, record %d: %x=%x, without a limit %x=%x", round, i, got[i].Key, got[i].Value, want[i].Key, want[i].Value)
				}
			}
		}
	})
}

// A key so long that a piece would keep less than half a record for the
// value is written whole, over the limit: the runtime refuses that record
// with a message naming the key, rather than writing thousands of slivers.
func TestPiecesLeaveAKeyTooLongWhole(t *testing.T) {
	bothStores(t, func(t *testing.T, mk func() piecesStore) {
		s := mk()
		s.SetRecordLimit(100)
		k := value(60, 'k')
		s.Put(k, value(100, 'v'))
		recs := s.Snapshot().Records()
		if len(recs) != 1 || !bytes.Equal(recs[0].Key, ChangelogKey{Operator: "agg", Group: KeyGroupOf(k, 8), Key: k}.Append(nil)) {
			t.Fatalf("records %s, want the whole value", pieceRecords(t, recs))
		}
	})
}

// EntryRecords writes a savepoint's entry as a snapshot would, and notes
// the pieces for the next snapshot.
func TestPiecesEntryRecords(t *testing.T) {
	bothStores(t, func(t *testing.T, mk func() piecesStore) {
		s := mk()
		s.Put([]byte("big"), value(300, 'x'))
		s.Put([]byte("small"), value(3, 'y'))
		s.Snapshot()
		s.SetRecordLimit(100)
		var recs []ChangelogRecord
		for e := range s.All() {
			recs = append(recs, s.EntryRecords(e)...)
		}
		// A record key of 10 bytes: 80 bytes of the value per piece.
		want := "big#0/4=80 big#1/4=80 big#2/4=80 big#3/4=60 big:deleted small=3"
		if got := pieceRecords(t, recs); got != want {
			t.Fatalf("records\n %s\nwant\n %s", got, want)
		}
		s.Delete([]byte("big"))
		want = "big#0/4:deleted big#1/4:deleted big#2/4:deleted big#3/4:deleted big:deleted"
		if got := pieceRecords(t, s.Snapshot().Records()); got != want {
			t.Fatalf("delete: records\n %s\nwant\n %s", got, want)
		}
	})
}

// A topic whose pieces do not make one value is refused by Finish, with
// what it holds; so is a key with both a whole value and pieces.
func TestPiecesDamagedTopic(t *testing.T) {
	k := []byte("k")
	kg := KeyGroupOf(k, 8)
	pc := func(n, i int, v string) ChangelogRecord {
		rec := ChangelogRecord{Key: ChangelogKey{Operator: "agg", Group: kg, Key: k, Pieces: n, Piece: i}.Append(nil)}
		if v != "" {
			rec.Value = []byte(v)
		}
		return rec
	}
	whole := ChangelogRecord{Key: ChangelogKey{Operator: "agg", Group: kg, Key: k}.Append(nil), Value: []byte("w")}
	for _, tt := range []struct {
		name string
		log  []ChangelogRecord
		msg  string
	}{
		{"a piece missing", []ChangelogRecord{pc(3, 0, "a"), pc(3, 2, "c")}, `key "k": the state topic holds pieces 0, 2 of 3`},
		{"a piece deleted", []ChangelogRecord{pc(2, 0, "a"), pc(2, 1, "b"), pc(2, 1, "")}, "holds pieces 0 of 2"},
		{"two counts", []ChangelogRecord{pc(2, 0, "a"), pc(2, 1, "b"), pc(3, 0, "x")}, "holds pieces 0, 1 of 2 and 0 of 3"},
		{"whole and pieces", []ChangelogRecord{whole, pc(2, 0, "a"), pc(2, 1, "b")}, "holds both a whole value and pieces"},
	} {
		bothStores(t, func(t *testing.T, mk func() piecesStore) {
			err := restoreInto(t, mk(), tt.log)
			if !errors.Is(err, ErrPieces) || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("%s: err %v, want ErrPieces containing %q", tt.name, err, tt.msg)
			}
		})
	}
	// Deleted pieces of an old count and a complete set: the value.
	bothStores(t, func(t *testing.T, mk func() piecesStore) {
		s := mk()
		log := []ChangelogRecord{pc(3, 0, "x"), pc(2, 1, "b"), pc(3, 0, ""), pc(2, 0, "a")}
		if err := restoreInto(t, s, log); err != nil {
			t.Fatal(err)
		}
		if v, ok := s.Get(k); !ok || string(v) != "ab" {
			t.Fatalf("restored %q, %v; want ab", v, ok)
		}
	})
}

// The pieces of an operator without a store make it Unclaimed, until
// they are deleted.
func TestPiecesOfAnUnclaimedOperator(t *testing.T) {
	w, err := New[[]byte]("gone", 8, RangeFor(0, 1, 8), BytesCodec{})
	if err != nil {
		t.Fatal(err)
	}
	w.SetRecordLimit(100)
	w.Put([]byte("k"), value(300, 'x'))
	log := w.Snapshot().Records()
	rs, _ := NewRestorer(8, RangeFor(0, 1, 8))
	for _, rec := range log {
		if err := rs.Add(rec); err != nil {
			t.Fatal(err)
		}
	}
	if got := rs.Unclaimed(); !slices.Equal(got, []string{"gone"}) {
		t.Fatalf("Unclaimed %v", got)
	}
	w.Delete([]byte("k"))
	for _, rec := range w.Snapshot().Records() {
		if err := rs.Add(rec); err != nil {
			t.Fatal(err)
		}
	}
	if got := rs.Unclaimed(); len(got) != 0 {
		t.Fatalf("Unclaimed %v after the delete", got)
	}
}
