package state

import (
	"errors"
	"fmt"
	"unsafe"
)

// Store is the keyed state of one keyed operator on one worker: the key
// groups of the worker's Range, each a map from key to value, plus the set
// of keys changed since the last Snapshot.
//
// A Store is owned by the operator's goroutine and is not safe for
// concurrent use, counters included: publish them (e.g. to Prometheus
// gauges) from that goroutine.
type Store[V any] struct {
	operator string
	groups   int // the job's key-group count, G
	rng      Range
	codec    Codec[V]

	byGroup []group[V] // byGroup[kg-rng.Start]

	live  int   // keys with a value
	dirty int   // entries in all dirty lists
	bytes int64 // see ApproxBytes

	// split writes the values too large for a record in pieces.
	split splitter
}

// group is one key group. Its map is created on the first key, because a
// worker may own thousands of groups that hold nothing.
type group[V any] struct {
	entries map[string]*entry[V]
	// dirty lists each entry changed since the last Snapshot, once (the
	// entry's dirty flag guards against duplicates). Its capacity is kept
	// between snapshots so marking is allocation-free in steady state.
	dirty []*entry[V]
}

// entry is one key. A deleted entry stays in its map, as a tombstone,
// until the next Snapshot has written (or skipped) its delete; so a
// Delete followed by a Put of the same key in one epoch allocates nothing.
type entry[V any] struct {
	// key is the map's key too. A short one is stored in inline, inside
	// the entry, and key refers to it: a lookup then compares bytes on the
	// entry's own cache lines, and a new key is one allocation, not two.
	key    string
	inline [inlineKey]byte
	value  V
	// size is the encoded length of value at the last Snapshot or
	// restore; it is what ApproxBytes counts for the value.
	size int
	// dirty: changed since the last Snapshot, and listed in group.dirty.
	dirty bool
	// deleted: has no value; a tombstone awaiting the next Snapshot.
	deleted bool
	// persisted: the changelog written so far (every Delta returned by
	// Snapshot, after the restore this store started from) holds a live
	// value for this key. A key that never reached the changelog needs
	// no tombstone when it is deleted.
	persisted bool
	// inPieces: the changelog holds the value in pieces (see pieces.go).
	inPieces bool
}

// inlineKey is the longest key kept inside its entry.
const inlineKey = 16

// newEntry returns an entry for key, holding a copy of it.
func newEntry[V any](key []byte) *entry[V] {
	e := &entry[V]{}
	if len(key) > 0 && len(key) <= inlineKey {
		n := copy(e.inline[:], key)
		// inline is never written again: the string is immutable, and
		// points into the entry, which it keeps alive.
		e.key = unsafe.String(&e.inline[0], n)
	} else {
		e.key = string(key)
	}
	return e
}

// New returns an empty store for operator (its stable id from the job's
// configuration) holding the key groups of r, out of groups key groups.
func New[V any](operator string, groups int, r Range, codec Codec[V]) (*Store[V], error) {
	if operator == "" {
		return nil, errors.New("state: operator id is empty")
	}
	if err := CheckKeyGroups(groups); err != nil {
		return nil, err
	}
	if r.Start > r.End || int(r.End) > groups {
		return nil, fmt.Errorf("state: key-group range %v does not fit %d key groups", r, groups)
	}
	if codec == nil {
		return nil, errors.New("state: nil codec")
	}
	return &Store[V]{
		operator: operator,
		groups:   groups,
		rng:      r,
		codec:    codec,
		byGroup:  make([]group[V], r.Len()),
		split:    newSplitter(operator),
	}, nil
}

// SetRecordLimit makes the following snapshots write a value whose
// record would hold more than n bytes of key and value in pieces (see
// pieces.go); n <= 0 means no limit, which is the default.
func (s *Store[V]) SetRecordLimit(n int) { s.split.setLimit(n) }

// KeysInPieces is the number of keys the changelog holds in pieces.
func (s *Store[V]) KeysInPieces() int { return len(s.split.counts) }

// Grow makes room for keys keys of the operator, counted over all key
// groups (as a checkpoint's state summary counts them), so that a restore
// that knows the count fills maps of about the right size instead of
// rehashing each one as it grows. Only key groups without entries yet are
// sized.
func (s *Store[V]) Grow(keys int) {
	per := keys/s.groups + 1
	for i := range s.byGroup {
		if s.byGroup[i].entries == nil {
			s.byGroup[i].entries = make(map[string]*entry[V], per)
		}
	}
}

// Operator is the operator id the store was created for.
func (s *Store[V]) Operator() string { return s.operator }

// KeyGroups is the job's key-group count the store was created with.
func (s *Store[V]) KeyGroups() int { return s.groups }

// Range is the key groups the store holds.
func (s *Store[V]) Range() Range { return s.rng }

// Get returns the value of key and whether it has one.
func (s *Store[V]) Get(key []byte) (V, bool) {
	g := s.groupOf(key)
	// m[string(b)] in an index expression does not allocate.
	if e := g.entries[string(key)]; e != nil && !e.deleted {
		return e.value, true
	}
	var zero V
	return zero, false
}

// Put sets the value of key and marks the key dirty. The store keeps v as
// it is: a value that holds references (a slice, a map, a pointer) must
// not be changed afterwards except through another Put, or the change is
// invisible to Snapshot. Put of an existing key does not allocate.
//
// Put panics if key's group is not in the store's range: the shuffle
// routed the record to the wrong worker.
func (s *Store[V]) Put(key []byte, v V) {
	g := s.groupOf(key)
	s.put(g, g.entries[string(key)], key, v)
}

// Slot is one key's place in a store, looked up once for a Get and a Put
// of that key (the read-modify-write of a keyed operator). Use it at once:
// any other call on the store in between may invalidate it.
type Slot[V any] struct {
	s *Store[V]
	g *group[V]
	e *entry[V] // nil: the key has no entry
}

// Slot finds key's place; it panics like Put if key's group is not in the
// store's range.
func (s *Store[V]) Slot(key []byte) Slot[V] {
	g := s.groupOf(key)
	return Slot[V]{s: s, g: g, e: g.entries[string(key)]}
}

// Get is Store.Get of the slot's key.
func (sl Slot[V]) Get() (V, bool) {
	if sl.e != nil && !sl.e.deleted {
		return sl.e.value, true
	}
	var zero V
	return zero, false
}

// Put is Store.Put of key, which must be the key the slot was found for.
// (The slot does not keep it: it would make the caller's key escape.)
func (sl Slot[V]) Put(key []byte, v V) { sl.s.put(sl.g, sl.e, key, v) }

// put sets key's value in g, whose entry for key is e (nil if none).
func (s *Store[V]) put(g *group[V], e *entry[V], key []byte, v V) {
	if e == nil {
		if g.entries == nil {
			g.entries = make(map[string]*entry[V])
		}
		e = newEntry[V](key)
		e.deleted = true // revived just below
		g.entries[e.key] = e
	}
	if e.deleted {
		e.deleted = false
		s.live++
		s.bytes += int64(len(e.key) + e.size)
	}
	e.value = v
	s.markDirty(g, e)
}

// Delete removes key, marking it dirty if it had a value; the next
// Snapshot writes a tombstone for it when the changelog holds a value.
// Deleting a key without a value does nothing. Delete panics like Put.
func (s *Store[V]) Delete(key []byte) {
	g := s.groupOf(key)
	e := g.entries[string(key)]
	if e == nil || e.deleted {
		return
	}
	var zero V
	e.value = zero // let the old value be collected now
	e.deleted = true
	s.live--
	s.bytes -= int64(len(e.key) + e.size)
	s.markDirty(g, e)
}

// Len is the number of keys with a value.
func (s *Store[V]) Len() int { return s.live }

// DirtyLen is the number of keys changed since the last Snapshot; the
// next Delta has at most this many entries (fewer when keys were put and
// deleted again).
func (s *Store[V]) DirtyLen() int { return s.dirty }

// ApproxBytes estimates the state's size as the sum, over keys with a
// value, of the key's length and the value's encoded length as of the last
// Snapshot or restore (a key added since counts its key only). Right after
// a Snapshot it is exactly what a full export would write as keys and
// values. Memory use is higher by roughly 100 bytes of map and entry
// overhead per key, plus whatever the decoded values hold.
func (s *Store[V]) ApproxBytes() int64 { return s.bytes }

func (s *Store[V]) markDirty(g *group[V], e *entry[V]) {
	if e.dirty {
		return
	}
	e.dirty = true
	g.dirty = append(g.dirty, e)
	s.dirty++
}

// groupOf returns the group of key, which must be in the store's range.
func (s *Store[V]) groupOf(key []byte) *group[V] {
	kg := KeyGroupOf(key, s.groups)
	if !s.rng.Contains(kg) {
		s.wrongGroup(kg, key)
	}
	return &s.byGroup[kg-s.rng.Start]
}

// wrongGroup is out of line so that key does not escape from Put and Get
// (the string conversion for the message copies it).
//
//go:noinline
func (s *Store[V]) wrongGroup(kg KeyGroup, key []byte) {
	panic(fmt.Sprintf("state: operator %q: key %q is in key group %d, not in this store's range %v (the record was routed to the wrong worker)",
		s.operator, string(key), kg, s.rng))
}
