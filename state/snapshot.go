package state

import (
	"fmt"
	"iter"
	"slices"
	"strings"
)

// Entry is one key of a Delta or of a full export.
type Entry struct {
	Group KeyGroup
	Key   []byte
	// Value is the encoded value; nil if and only if Deleted. A value that
	// encodes to zero bytes is empty but not nil, because Kafka keeps the
	// two apart: a nil record value is a tombstone, an empty one is not.
	Value   []byte
	Deleted bool
}

// Delta is what changed in one store since its previous Snapshot: one
// Entry per changed key. Store sorts them by key group, then by key bytes;
// Compact lists them in the order it holds them, which is as deterministic
// (the same changes in the same order give the same Delta) and lets it
// read its memory front to back. Its slices share a few buffers owned by
// the Delta; the store never touches them again.
type Delta struct {
	Operator string
	Entries  []Entry
	// records, if set, are Entries as state-topic records, built by the
	// store along with them (Compact's Snapshot writes each key once, with
	// its changelog prefix in front); Records returns them.
	records []ChangelogRecord
}

// Snapshot returns the changes since the previous Snapshot (or since the
// store was created or restored) and starts a new, empty set of changes:
// for every dirty key its current value, or a tombstone if it was deleted
// and the changelog holds a value for it. A key put and deleted between
// two snapshots appears in neither.
//
// The delta belongs to the checkpoint whose barrier the operator is
// handling, and it must reach the changelog in that checkpoint's
// transaction. If that checkpoint is aborted instead, this store no longer
// matches the changelog (its changes were cleared but never written) and
// must not produce another Snapshot: the job restarts from the last
// completed checkpoint and rebuilds every store from the changelog with a
// Restorer, so nothing here has to be undone.
func (s *Store[V]) Snapshot() Delta {
	d := Delta{Operator: s.operator}
	if s.dirty == 0 {
		return d
	}
	// Sort each dirty list, and size the buffer by what the keys and
	// their last encodings took, so that it rarely grows.
	n, size := 0, 0
	for i := range s.byGroup {
		g := &s.byGroup[i]
		if len(g.dirty) == 0 {
			continue
		}
		slices.SortFunc(g.dirty, func(a, b *entry[V]) int { return strings.Compare(a.key, b.key) })
		for _, e := range g.dirty {
			n++
			size += len(e.key) + e.size
		}
	}

	// One pass: each key and its value are appended to buf and cut from
	// it as they are written. When buf grows, the entries cut so far keep
	// the old array, which nothing writes to again.
	buf := make([]byte, 0, size+size/8+64)
	d.Entries = make([]Entry, 0, n)
	// A record of key and value holds the changelog prefix and the key
	// group besides: a value fits when len(key)+len(value) <= fits.
	fits := s.split.limit - s.split.head
	var att []attention
	for i := range s.byGroup {
		g := &s.byGroup[i]
		if len(g.dirty) == 0 {
			continue
		}
		kg := s.rng.Start + KeyGroup(i)
		for j, e := range g.dirty {
			g.dirty[j] = nil
			e.dirty = false
			if e.deleted {
				delete(g.entries, e.key)
				if e.persisted {
					if e.inPieces {
						att = append(att, attention{index: len(d.Entries), inPieces: true})
					}
					d.Entries = append(d.Entries, Entry{Group: kg, Key: cut(&buf, e.key), Deleted: true})
				}
				continue
			}
			e.persisted = true
			k := len(buf)
			buf = append(buf, e.key...)
			v := len(buf)
			buf = s.codec.Append(buf, e.value)
			s.bytes += int64(len(buf) - v - e.size)
			e.size = len(buf) - v
			if len(buf)-k > fits || e.inPieces {
				att = append(att, attention{index: len(d.Entries), inPieces: e.inPieces})
				e.inPieces = s.split.splits(s.split.head+v-k, e.size)
			}
			// Never nil, even when empty: buf is not nil.
			d.Entries = append(d.Entries, Entry{Group: kg, Key: buf[k:v:v], Value: buf[v:len(buf):len(buf)]})
		}
		g.dirty = g.dirty[:0] // keeping its capacity, not its entries
	}
	s.dirty = 0
	if att != nil {
		d.records = s.split.rewrite(d.Records(), att)
	}
	return d
}

// EntryRecords returns the state-topic records that write e, an entry of
// All, into a changelog that may hold anything of its key, as a
// savepoint's import does: e.Record, or its pieces (see pieces.go), with
// the tombstones of the pieces the store wrote before. The store notes
// how the key was written, as a Snapshot does; it may be called during
// All, whose iteration it does not disturb. The records' values alias
// e's.
func (s *Store[V]) EntryRecords(e Entry) []ChangelogRecord {
	en := s.byGroup[e.Group-s.rng.Start].entries[string(e.Key)]
	if en == nil {
		panic(fmt.Sprintf("state: operator %q: EntryRecords of key %q, which the store does not hold", s.operator, e.Key))
	}
	recs, inPieces := s.split.write(nil, e.Record(s.operator), en.inPieces)
	en.inPieces = inPieces
	return recs
}

// cut appends b to *buf and returns the copy with its capacity limited, so
// that an append by the caller reallocates instead of overwriting the next
// entry.
func cut[T string | []byte](buf *[]byte, b T) []byte {
	start := len(*buf)
	*buf = append(*buf, b...)
	return (*buf)[start:len(*buf):len(*buf)]
}

// exportChunk bounds the buffers All hands out, so that a caller streaming
// a large export does not keep one huge array alive.
const exportChunk = 1 << 20

// All yields every key with a value, encoded, in key-group then key order:
// the full export a savepoint needs. It ignores and keeps the dirty sets.
// Each yielded Entry owns its bytes (they are never reused), so it may be
// handed to an asynchronous producer. The store must not be changed during
// the iteration.
func (s *Store[V]) All() iter.Seq[Entry] {
	return func(yield func(Entry) bool) {
		var sorted []*entry[V]
		var buf []byte
		for i := range s.byGroup {
			g := &s.byGroup[i]
			sorted = sorted[:0]
			for _, e := range g.entries {
				if !e.deleted {
					sorted = append(sorted, e)
				}
			}
			slices.SortFunc(sorted, func(a, b *entry[V]) int { return strings.Compare(a.key, b.key) })
			kg := s.rng.Start + KeyGroup(i)
			for _, e := range sorted {
				if buf == nil || len(buf) > exportChunk {
					// A new chunk; append grows it as needed. Never a nil
					// buf: an empty value must come out empty, not nil.
					buf = make([]byte, 0, 4096)
				}
				k := len(buf)
				buf = append(buf, e.key...)
				v := len(buf)
				buf = s.codec.Append(buf, e.value)
				if !yield(Entry{Group: kg, Key: buf[k:v:v], Value: buf[v:len(buf):len(buf)]}) {
					return
				}
			}
		}
	}
}
