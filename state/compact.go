package state

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"runtime"
	"slices"
	"unsafe"

	"github.com/eoflow/pipeline/internal/mutant"
)

// Compact is the keyed state of one keyed operator on one worker, like
// Store, but holding each value as its encoding (the bytes the changelog
// gets) in pointer-free memory, outside the Go heap once it is large: a
// hash table of 8-byte slots and an arena of records. Store keeps a Go object per
// key; with a million keys that is a million objects the garbage
// collector marks on every cycle, ~560 bytes of resident memory per key,
// and a map lookup that chases three pointers. Here a key costs its bytes,
// its encoded value, a 4-byte record header and a table slot (about 70
// bytes for a count, a sum and a last value), the collector never sees it,
// a lookup is a slot and a record, and a snapshot or an export copies
// bytes instead of encoding values. The price is that the operator decodes
// a key's value before it updates it and encodes it after (see
// operator.Aggregator.DecodeInto): cheap for small fixed aggregates, which
// is what the running aggregate holds.
//
// The contract is Store's, with []byte values that the store copies on Put:
// same snapshots (Delta), same exports (All), same restore (Restorer),
// same counters (ApproxBytes is exact at every moment, not only after a
// Snapshot). A value returned by Get or Slot.Value aliases the store's
// memory: it is valid only until the next call on the store, and must not
// be written to.
//
// A Compact is owned by one goroutine. Its memory is returned to the
// system when the store becomes unreachable.
type Compact struct {
	operator string
	groups   int
	rng      Range
	// check validates a value read by a restore (nil: any bytes), so that
	// a state the operator cannot take is refused at the start, as Store's
	// Codec.Decode refuses it, not when its key next shows up.
	check func(value []byte) error
	// encode appends the changelog encoding of a stored value (nil: the
	// stored bytes are that encoding); see SetEncoding.
	encode func(dst, stored []byte) []byte

	m *compactMemory

	// dirty lists the records changed since the last Snapshot by location,
	// each once (the record's dirty flag guards against duplicates). A
	// record that grew out of its room moved: its new place is listed
	// too, and the old entry, flagged moved, is skipped.
	// Each entry is loc<<32 | hash: the hash gives the key group (and the
	// slot of a deleted key) without reading the key again.
	dirty  []uint64
	dirtyN int    // dirty keys (not counting moved entries twice)
	prefix []byte // the changelog keys' prefix, kept for the next Snapshot
	// sortScratch is sortDirty's second list, kept for the next Snapshot.
	sortScratch []uint64

	live  int   // keys with a value
	bytes int64 // sum of len(key)+len(value) over keys with a value

	// split writes the values too large for a record in pieces.
	split splitter

	// prefetched holds PrefetchHashed's first pass; touched sums the bytes its
	// second pass read, so that no load of it is optimized away.
	prefetched []uint64
	touched    byte
}

// compactMemory is a Compact's memory, apart from the store so that a
// cleanup can unmap what is mapped once the store is unreachable.
type compactMemory struct {
	// table is open addressing with linear probing over a power of two of
	// slots. A slot is 0 (empty), slotRemoved (a key removed: probes go
	// on past it) or hash<<32 | loc: the key's murmur3 hash (the key
	// group's hash, computed once per call) and its record's location.
	table   []uint64
	used    int // slots not empty: keys and removed ones
	removed int // slots that are slotRemoved

	// chunks hold the records: 4 KiB, 8 KiB, ... up to chunkBytes each
	// (a record larger than the next chunk gets a chunk of its own). A
	// location is chunk<<chunkUnitBits | the record's offset in 4-byte
	// units; location 0 is never a record.
	chunks  [][]byte
	cur     int // the chunk records are appended to, -1: none yet
	tail    int // next free unit of chunks[cur]
	inUse   int // bytes of all records allocated, moved or not
	garbage int // bytes of records moved or removed since the last compaction
}

const (
	chunkUnitBits = 18
	chunkBytes    = 4 << chunkUnitBits // 1 MiB
	// firstChunk is the size of a store's first chunk; each next one is
	// twice the last up to chunkBytes. Chunks smaller than chunkBytes, and
	// tables smaller than offHeapTable, are ordinary (pointer-free) Go
	// memory: a store of a few keys (a test, a simulation, a job of few
	// keys) costs no mapping and no page faults on a fresh megabyte.
	firstChunk   = 4 << 10
	offHeapTable = 64 << 10
	maxChunks    = 1 << (32 - chunkUnitBits)
	// slotRemoved: hash 1 and location 0, which no record has.
	slotRemoved = 1 << 32
	minTable    = 64
)

// Record flags, the first byte of a record.
const (
	flagDirty     = 1 << iota // changed since the last Snapshot, listed in dirty
	flagDeleted               // no value: a delete awaiting the next Snapshot
	flagPersisted             // the changelog holds a value for this key
	flagMoved                 // garbage: moved elsewhere or removed
	flagWide                  // the lengths are uint32s (see record)
	flagInPieces              // the changelog holds the value in pieces (see pieces.go)
)

// A record is:
//
//	byte     flags
//	3 bytes  key length, value capacity (the room for the value) and
//	         value length, one byte each; or, with flagWide, 12 bytes:
//	         the three as uint32s, little-endian
//	bytes    key
//	bytes    value, then capacity - length bytes of room
//
// rounded up to 4 bytes. A value that grows past its room moves the
// record; its old place is garbage until the next compaction.
type record struct {
	b          []byte // from the record's first byte to the end of its chunk
	klen, vcap int
	vlen       int
	keyAt      int
}

func (m *compactMemory) record(loc uint32) record {
	c := m.chunks[loc>>chunkUnitBits]
	b := c[int(loc&(1<<chunkUnitBits-1))*4:]
	if b[0]&flagWide == 0 {
		_ = b[3]
		return record{b: b, klen: int(b[1]), vcap: int(b[2]), vlen: int(b[3]), keyAt: 4}
	}
	return record{b: b, klen: int(binary.LittleEndian.Uint32(b[1:])), vcap: int(binary.LittleEndian.Uint32(b[5:])),
		vlen: int(binary.LittleEndian.Uint32(b[9:])), keyAt: 13}
}

func (r record) flags() byte      { return r.b[0] }
func (r record) key() []byte      { return r.b[r.keyAt : r.keyAt+r.klen : r.keyAt+r.klen] }
func (r record) value() []byte    { v := r.keyAt + r.klen; return r.b[v : v+r.vlen : v+r.vlen] }
func (r record) size() int        { return recordSize(r.klen, r.vcap) }
func (r record) setFlag(f byte)   { r.b[0] |= f }
func (r record) clearFlag(f byte) { r.b[0] &^= f }

// setValue writes v, which must fit the record's room, in place.
func (r *record) setValue(v []byte) {
	if r.keyAt == 4 {
		r.b[3] = byte(len(v))
	} else {
		binary.LittleEndian.PutUint32(r.b[9:], uint32(len(v)))
	}
	copy(r.b[r.keyAt+r.klen:], v)
	r.vlen = len(v)
}

// writeRecord writes the header and key of a new record into b, with room
// for vcap bytes of value and the given flags, and then value.
func writeRecord(b []byte, flags byte, key []byte, vcap int, value []byte) record {
	r := record{b: b, klen: len(key), vcap: vcap}
	if wideRecord(len(key), vcap) {
		b[0] = flags | flagWide
		binary.LittleEndian.PutUint32(b[1:], uint32(len(key)))
		binary.LittleEndian.PutUint32(b[5:], uint32(vcap))
		r.keyAt = 13
	} else {
		b[0] = flags &^ flagWide
		b[1], b[2] = byte(len(key)), byte(vcap)
		r.keyAt = 4
	}
	copy(b[r.keyAt:], key)
	r.setValue(value)
	return r
}

func wideRecord(klen, vcap int) bool { return klen > 0xff || vcap > 0xff }

// recordSize is the bytes a record of klen key bytes and vcap bytes of
// value room takes, with its padding.
func recordSize(klen, vcap int) int {
	n := 4 + klen + vcap
	if wideRecord(klen, vcap) {
		n += 9
	}
	return (n + 3) &^ 3
}

// roomFor is the value capacity a record gets for a value of n bytes: a
// little more, so that a count or a sum growing by a varint byte now and
// then stays in place.
func roomFor(n int) int { return n + max(4, n/8) }

// alloc returns the location and bytes of a new record of size bytes.
func (m *compactMemory) alloc(size int) (uint32, []byte) {
	units := (size + 3) / 4
	m.inUse += units * 4
	if m.cur < 0 || m.tail+units > len(m.chunks[m.cur])/4 {
		if m.cur >= 0 && units*4 > m.nextChunkSize() {
			// A chunk of its own, never appended to.
			loc := m.addChunk(allocChunk(units * 4))
			return loc, m.chunks[loc>>chunkUnitBits]
		}
		m.newChunk()
		if units*4 > len(m.chunks[m.cur])-m.tail*4 {
			loc := m.addChunk(allocChunk(units * 4))
			return loc, m.chunks[loc>>chunkUnitBits]
		}
	}
	loc := uint32(m.cur)<<chunkUnitBits | uint32(m.tail)
	b := m.chunks[m.cur][m.tail*4 : (m.tail+units)*4]
	m.tail += units
	return loc, b
}

// newChunk starts a chunk to append records to. The first chunk's first
// unit is left out, so that no record is at location 0.
func (m *compactMemory) newChunk() {
	first := len(m.chunks) == 0
	m.cur = int(m.addChunk(allocChunk(m.nextChunkSize())) >> chunkUnitBits)
	m.tail = 0
	if first {
		m.tail = 1
	}
}

// nextChunkSize is the size of the next chunk to append records to.
func (m *compactMemory) nextChunkSize() int {
	if len(m.chunks) >= 8 {
		return chunkBytes
	}
	return min(chunkBytes, firstChunk<<len(m.chunks))
}

// allocChunk returns a chunk of n bytes: mapped outside the heap from
// chunkBytes on, from the heap below (freeChunk tells them apart by size).
func allocChunk(n int) []byte {
	if n < chunkBytes {
		return make([]byte, n)
	}
	return allocBytes(n)
}

func freeChunk(c []byte) {
	if len(c) >= chunkBytes {
		freeBytes(c)
	}
}

func (m *compactMemory) addChunk(c []byte) uint32 {
	if len(m.chunks) >= maxChunks {
		panic(fmt.Sprintf("state: keyed state of one worker outgrew %d GiB; run the job with more workers", maxChunks*chunkBytes>>30))
	}
	m.chunks = append(m.chunks, c)
	return uint32(len(m.chunks)-1) << chunkUnitBits
}

// free returns all of m's memory to the system.
func (m *compactMemory) free() {
	for _, c := range m.chunks {
		freeChunk(c)
	}
	freeWords(m.table)
	*m = compactMemory{cur: -1}
}

// allocWords returns a zeroed table of n slots, outside the heap from
// offHeapTable bytes on (freeWords tells them apart by size).
func allocWords(n int) []uint64 {
	if n*8 < offHeapTable {
		return make([]uint64, n)
	}
	b := allocBytes(n * 8)
	if b == nil {
		return nil
	}
	return unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(b))), n)
}

func freeWords(w []uint64) {
	if cap(w)*8 < offHeapTable {
		return
	}
	freeBytes(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(w))), cap(w)*8))
}

// NewCompact returns an empty compact store for operator holding the key
// groups of r, out of groups key groups. check, if not nil, validates every
// value a restore gives it.
func NewCompact(operator string, groups int, r Range, check func(value []byte) error) (*Compact, error) {
	if operator == "" {
		return nil, errors.New("state: operator id is empty")
	}
	if err := CheckKeyGroups(groups); err != nil {
		return nil, err
	}
	if r.Start > r.End || int(r.End) > groups {
		return nil, fmt.Errorf("state: key-group range %v does not fit %d key groups", r, groups)
	}
	s := &Compact{operator: operator, groups: groups, rng: r, check: check, m: &compactMemory{cur: -1}, split: newSplitter(operator)}
	runtime.AddCleanup(s, (*compactMemory).free, s.m)
	return s, nil
}

// SetRecordLimit is Store.SetRecordLimit: values whose record would hold
// more than n bytes of key and value are written in pieces.
func (s *Compact) SetRecordLimit(n int) { s.split.setLimit(n) }

// KeysInPieces is the number of keys the changelog holds in pieces.
func (s *Compact) KeysInPieces() int { return len(s.split.counts) }

// SetEncoding lets the store hold values in a form of the operator's own
// instead of their changelog encoding: encode appends the changelog
// encoding of a stored value, and Snapshot and All give every value
// through it, so that the changelog, the checkpoints and the savepoints
// only ever see the encoding. A restore stores changelog encodings as
// they are, so the operator must read both forms. ApproxBytes counts the
// stored form.
func (s *Compact) SetEncoding(encode func(dst, stored []byte) []byte) { s.encode = encode }

// appendEncoded appends the changelog encoding of the stored value v.
func (s *Compact) appendEncoded(dst, v []byte) []byte {
	if s.encode == nil {
		return append(dst, v...)
	}
	return s.encode(dst, v)
}

// Operator is the operator id the store was created for.
func (s *Compact) Operator() string { return s.operator }

// KeyGroups is the job's key-group count the store was created with.
func (s *Compact) KeyGroups() int { return s.groups }

// Range is the key groups the store holds.
func (s *Compact) Range() Range { return s.rng }

// Len is the number of keys with a value.
func (s *Compact) Len() int { return s.live }

// DirtyLen is the number of keys changed since the last Snapshot.
func (s *Compact) DirtyLen() int { return s.dirtyN }

// ApproxBytes is the sum, over keys with a value, of the key's and the
// stored value's lengths: what a full export writes as keys and values
// when the store holds encodings (without SetEncoding). Memory
// use is higher by the record header, the value's room and the table
// slot, about 15 to 25 bytes per key.
func (s *Compact) ApproxBytes() int64 { return s.bytes }

// Grow makes room for keys keys of the operator, counted over all key
// groups (as a checkpoint's state summary counts them), so that a restore
// does not rehash the table as it fills.
func (s *Compact) Grow(keys int) {
	mine := int(int64(keys) * int64(s.rng.Len()) / int64(s.groups))
	if want := tableFor(mine); want > len(s.m.table) {
		s.rehash(want)
	}
}

// tableFor is the table size that holds keys keys at most half full.
func tableFor(keys int) int {
	n := minTable
	for n < 2*keys {
		n *= 2
	}
	return n
}

// hash is the key's murmur3 hash, whose remainder is its key group; it
// panics like Store.Put if that group is not in the store's range.
func (s *Compact) hash(key []byte) uint32 {
	return s.checkHash(HashOf(key), key)
}

// checkHash is hash for a key whose hash the caller has: it panics the
// same way if the key's group is not in the store's range.
func (s *Compact) checkHash(h Hash, key []byte) uint32 {
	if kg := KeyGroup(uint32(h) % uint32(s.groups)); !s.rng.Contains(kg) {
		s.wrongGroup(kg, key)
	}
	return uint32(h)
}

//go:noinline
func (s *Compact) wrongGroup(kg KeyGroup, key []byte) {
	panic(fmt.Sprintf("state: operator %q: key %q is in key group %d, not in this store's range %v (the record was routed to the wrong worker)",
		s.operator, string(key), kg, s.rng))
}

// find returns key's slot and record location if it is in the table, or
// else the slot a new key goes to (-1 when the table is empty).
func (s *Compact) find(h uint32, key []byte) (slot int, loc uint32, found bool) {
	t := s.m.table
	if len(t) == 0 {
		return -1, 0, false
	}
	mask := len(t) - 1
	free := -1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		switch sl := t[i]; {
		case sl == 0:
			if free < 0 {
				free = i
			}
			return free, 0, false
		case sl == slotRemoved:
			if free < 0 {
				free = i
			}
		case uint32(sl>>32) == h:
			if l := uint32(sl); bytes.Equal(s.m.record(l).key(), key) {
				return i, l, true
			}
		}
	}
}

// rehash moves every key to a new table of n slots, dropping removed
// slots.
func (s *Compact) rehash(n int) {
	old := s.m.table
	t := allocWords(n)
	mask := n - 1
	for _, sl := range old {
		if sl == 0 || sl == slotRemoved {
			continue
		}
		i := int(sl>>32) & mask
		for t[i] != 0 {
			i = (i + 1) & mask
		}
		t[i] = sl
	}
	s.m.table = t
	s.m.used -= s.m.removed
	s.m.removed = 0
	freeWords(old)
}

// insert adds a record for key, which is not in the table, at the slot
// find returned, counts the key, and returns the record.
func (s *Compact) insert(h uint32, slot int, key, value []byte, flags byte) (uint32, record) {
	m := s.m
	if slot < 0 || (m.used+1)*4 > len(m.table)*3 {
		// Full to three quarters (removed slots count: they lengthen
		// probes): a table twice the live keys, or the same size if the
		// removed slots made it full. Deleted keys keep their slots
		// until the next Snapshot: the dirty keys bound them.
		s.rehash(tableFor(s.live + 1 + s.dirtyN))
		slot, _, _ = s.find(h, key)
	}
	vcap := roomFor(len(value))
	loc, b := m.alloc(recordSize(len(key), vcap))
	r := writeRecord(b, flags, key, vcap, value)
	if m.table[slot] == slotRemoved {
		m.removed--
	} else {
		m.used++
	}
	m.table[slot] = uint64(h)<<32 | uint64(loc)
	s.live++
	s.bytes += int64(len(key) + len(value))
	return loc, r
}

// replace gives r, the record of slot at loc, the value: in place, or in
// a new record when value outgrew its room (moved; the old record is
// garbage, and stays readable until a compaction, so value may alias
// it). It returns the record as it is now.
func (s *Compact) replace(h uint32, slot int, loc uint32, r record, value []byte) (uint32, record, bool) {
	if len(value) <= r.vcap {
		r.setValue(value)
		return loc, r, false
	}
	nloc, nr := s.move(r, value)
	s.m.table[slot] = uint64(h)<<32 | uint64(nloc)
	r.setFlag(flagMoved)
	return nloc, nr, true
}

// remove takes key's record out of the table; it is garbage from now on.
func (s *Compact) remove(slot int, r record) {
	m := s.m
	m.table[slot] = slotRemoved
	m.removed++
	m.garbage += r.size()
	r.setFlag(flagMoved)
}

func (s *Compact) markDirty(h, loc uint32, r record) {
	if r.flags()&flagDirty != 0 {
		return
	}
	r.setFlag(flagDirty)
	s.dirty = append(s.dirty, uint64(loc)<<32|uint64(h))
	s.dirtyN++
}

// Get returns the value of key and whether it has one. The value aliases
// the store: valid until the next call on it, read-only.
func (s *Compact) Get(key []byte) ([]byte, bool) {
	_, loc, found := s.find(s.hash(key), key)
	if !found {
		return nil, false
	}
	r := s.m.record(loc)
	if r.flags()&flagDeleted != 0 {
		return nil, false
	}
	return r.value(), true
}

// Put sets the value of key to a copy of value and marks the key dirty.
// It panics like Store.Put if key's group is not in the store's range.
func (s *Compact) Put(key, value []byte) {
	h := s.hash(key)
	slot, loc, found := s.find(h, key)
	s.put(h, slot, loc, found, key, value)
}

// CompactSlot is one key's place in a Compact, looked up once for a Get and
// a Put of that key. Use it at once: any other call on the store in
// between may invalidate it.
type CompactSlot struct {
	s     *Compact
	h     uint32
	slot  int
	loc   uint32
	found bool
}

// PrefetchHashed brings the table slots and records of n keys into the
// cache, for a batch of lookups that follows; hash(i) is key i's Hash
// (false: no key i). A lookup in a large store is two cache misses, a
// slot and then its record, that each wait for memory; here the slots of
// all n keys are loaded in one pass of independent loads, then their
// records in another, so that the misses overlap instead of adding up.
// With the hashes at hand, the first pass reads nothing else of the keys,
// which are often in another core's cache. It only reads: a key that is
// not in the store, or not in its first slot, just does not gain.
func (s *Compact) PrefetchHashed(n int, hash func(i int) (Hash, bool)) {
	t := s.m.table
	if len(t) < offHeapTable/8 || n < 2 {
		return // a table this small is in the cache, or it does not matter
	}
	mask := len(t) - 1
	slots := s.prefetched[:0]
	for i := range n {
		if h, ok := hash(i); ok {
			slots = append(slots, t[int(h)&mask])
		}
	}
	var sum byte
	for _, sl := range slots {
		if sl != 0 && sl != slotRemoved {
			loc := uint32(sl)
			sum += s.m.chunks[loc>>chunkUnitBits][int(loc&(1<<chunkUnitBits-1))*4]
		}
	}
	s.prefetched, s.touched = slots, s.touched+sum
}

// Slot finds key's place; it panics like Put if key's group is not in the
// store's range.
func (s *Compact) Slot(key []byte) CompactSlot {
	return s.SlotHashed(HashOf(key), key)
}

// SlotHashed is Slot for a key whose Hash the caller has.
func (s *Compact) SlotHashed(h Hash, key []byte) CompactSlot {
	hv := s.checkHash(h, key)
	slot, loc, found := s.find(hv, key)
	return CompactSlot{s: s, h: hv, slot: slot, loc: loc, found: found}
}

// Value is Compact.Get of the slot's key.
func (sl CompactSlot) Value() ([]byte, bool) {
	if !sl.found {
		return nil, false
	}
	r := sl.s.m.record(sl.loc)
	if r.flags()&flagDeleted != 0 {
		return nil, false
	}
	return r.value(), true
}

// Put is Compact.Put of key, which must be the key the slot was found for.
func (sl CompactSlot) Put(key, value []byte) {
	sl.s.put(sl.h, sl.slot, sl.loc, sl.found, key, value)
}

func (s *Compact) put(h uint32, slot int, loc uint32, found bool, key, value []byte) {
	if !found {
		loc, r := s.insert(h, slot, key, value, 0)
		s.markDirty(h, loc, r)
		return
	}
	r := s.m.record(loc)
	if r.flags()&flagDeleted != 0 {
		r.clearFlag(flagDeleted)
		s.live++
		s.bytes += int64(r.klen + len(value))
	} else {
		s.bytes += int64(len(value) - r.vlen)
	}
	wasDirty := r.flags()&flagDirty != 0
	loc, r, moved := s.replace(h, slot, loc, r, value)
	if moved && wasDirty && mutant.On("state-moved-not-redirtied") {
		// The bug: a dirty record that moved to a larger place is not
		// dirty there; the next snapshot leaves its change out.
		return
	}
	if moved && wasDirty {
		// Listed already at its old place, which Snapshot skips now.
		r.setFlag(flagDirty)
		s.dirty = append(s.dirty, uint64(loc)<<32|uint64(h))
		return
	}
	s.markDirty(h, loc, r)
}

// move copies r's key and flags (except dirty) into a new record with
// value, counting r as garbage, and returns the new record.
func (s *Compact) move(r record, value []byte) (uint32, record) {
	m := s.m
	vcap := roomFor(len(value))
	loc, b := m.alloc(recordSize(r.klen, vcap))
	nr := writeRecord(b, r.flags()&^(flagDirty|flagMoved), r.key(), vcap, value)
	m.garbage += r.size()
	return loc, nr
}

// Delete removes key, marking it dirty if it had a value; the next
// Snapshot writes a tombstone for it when the changelog holds a value.
// Deleting a key without a value does nothing. Delete panics like Put.
func (s *Compact) Delete(key []byte) {
	h := s.hash(key)
	_, loc, found := s.find(h, key)
	if !found {
		return
	}
	r := s.m.record(loc)
	if r.flags()&flagDeleted != 0 {
		return
	}
	r.setFlag(flagDeleted)
	s.live--
	s.bytes -= int64(r.klen + r.vlen)
	s.markDirty(h, loc, r)
}

// Snapshot is Store.Snapshot: the changes since the previous Snapshot, one
// Entry per changed key, in the order of the records in memory, with the
// state-topic records built along (Delta.Records), in buffers the store
// never touches again.
//
// The dirty list is sorted by location first: at a barrier most records
// are dirty when the keys are few, and reading them front to back lets the
// hardware prefetch what a walk in the order the keys came would miss in
// the cache at every key. (Sorting by key group and key instead, as Store
// does, cost most of a Snapshot: a comparison reads both records when
// keys share their first 8 bytes, as "user-0001…" keys do.)
func (s *Compact) Snapshot() Delta {
	d := Delta{Operator: s.operator}
	d.records = s.snapshot(&d.Entries)
	return d
}

// SnapshotRecords is Snapshot for a caller that needs only the changelog
// records (Delta.Records): it builds no Entries, which at a million dirty
// keys is 56 MB less to write.
func (s *Compact) SnapshotRecords() []ChangelogRecord {
	return s.snapshot(nil)
}

// snapshot clears the dirty list into changelog records, and into
// *entries too if entries is not nil.
func (s *Compact) snapshot(entries *[]Entry) []ChangelogRecord {
	if s.dirtyN == 0 {
		s.dirty = s.dirty[:0]
		return nil
	}
	dirty := s.sortDirty()
	prefix := appendChangelogPrefix(s.prefix[:0], s.operator)
	s.prefix = prefix
	size := 0
	for _, e := range dirty {
		if r := s.m.record(uint32(e >> 32)); r.flags()&flagMoved == 0 {
			size += len(prefix) + 2 + r.klen + r.vlen
		}
	}
	if s.encode != nil {
		size += size / 2 // encodings may be longer than what is stored
	}
	buf := make([]byte, 0, size)
	records := make([]ChangelogRecord, 0, s.dirtyN)
	if entries != nil {
		*entries = make([]Entry, 0, s.dirtyN)
	}
	for _, e := range dirty {
		loc, h := uint32(e>>32), uint32(e)
		r := s.m.record(loc)
		if r.flags()&flagMoved != 0 {
			continue // listed again at its new place
		}
		r.clearFlag(flagDirty)
		deleted := r.flags()&flagDeleted != 0
		// A value, or a tombstone for a key the changelog holds a value
		// of; a key deleted before it was ever written needs neither.
		if !deleted || r.flags()&flagPersisted != 0 {
			group := KeyGroup(h % uint32(s.groups))
			rk := len(buf)
			buf = append(buf, prefix...)
			buf = binary.BigEndian.AppendUint16(buf, uint16(group))
			k := len(buf)
			buf = append(buf, r.key()...)
			v := len(buf)
			var value []byte // nil: a tombstone
			if !deleted {
				buf = s.appendEncoded(buf, r.value())
				value = buf[v:len(buf):len(buf)] // never nil, even when empty: buf is not nil
			}
			rec := ChangelogRecord{Key: buf[rk:v:v], Value: value}
			if len(buf)-rk <= s.split.limit && r.flags()&flagInPieces == 0 {
				records = append(records, rec)
			} else {
				var inPieces bool
				records, inPieces = s.split.write(records, rec, r.flags()&flagInPieces != 0)
				if inPieces {
					r.setFlag(flagInPieces)
				} else {
					r.clearFlag(flagInPieces)
				}
			}
			if entries != nil {
				*entries = append(*entries, Entry{Group: group, Key: buf[k:v:v], Value: value, Deleted: deleted})
			}
		}
		if deleted {
			slot, _, _ := s.find(h, r.key())
			s.remove(slot, r)
		} else {
			r.setFlag(flagPersisted)
		}
	}
	s.dirty = dirty[:0]
	s.dirtyN = 0
	s.compactIfWasteful()
	return records
}

// sortDirty sorts the dirty list by location (its entries are loc<<32 |
// hash): a least-significant-digit radix sort on the location's 32 bits,
// three passes of 11 bits through a scratch list kept for the next
// Snapshot. A comparison sort of a million entries took a fifth of the
// Snapshot; this is a few ns per entry and pass.
func (s *Compact) sortDirty() []uint64 {
	const bits, buckets = 11, 1 << 11
	src := s.dirty
	if len(src) < 256 {
		slices.Sort(src)
		return src
	}
	dst := s.sortScratch
	if cap(dst) < len(src) {
		dst = make([]uint64, len(src))
	}
	dst = dst[:len(src)]
	var count [buckets]int
	for shift := 32; shift < 64; shift += bits {
		clear(count[:])
		for _, e := range src {
			count[(e>>shift)&(buckets-1)]++
		}
		at := 0
		for i, n := range count {
			count[i] = at
			at += n
		}
		for _, e := range src {
			b := (e >> shift) & (buckets - 1)
			dst[count[b]] = e
			count[b]++
		}
		src, dst = dst, src
	}
	// Three passes: the sorted list is in what was the scratch list.
	s.dirty, s.sortScratch = src, dst
	return src
}

// compactIfWasteful rewrites the records into new chunks once more than
// half of the arena is garbage. Only between snapshots: no record is dirty
// then, so only the table refers to records.
func (s *Compact) compactIfWasteful() {
	m := s.m
	if m.garbage < chunkBytes || m.garbage*2 < m.inUse {
		return
	}
	old := m.chunks
	m.chunks, m.cur, m.tail, m.inUse, m.garbage = nil, -1, 0, 0, 0
	for i, sl := range m.table {
		if sl == 0 || sl == slotRemoved {
			continue
		}
		r := (&compactMemory{chunks: old}).record(uint32(sl))
		size := r.size()
		loc, nb := m.alloc(size)
		copy(nb, r.b[:size])
		m.table[i] = sl&^(1<<32-1) | uint64(loc)
	}
	for _, c := range old {
		freeChunk(c)
	}
}

// entryRef is a record to be exported in key-group, then key order.
// prefix, the key's first 8 bytes, decides most comparisons without
// reading the records.
type entryRef struct {
	group  KeyGroup
	prefix uint64
	loc    uint32
}

func (s *Compact) sortRefs(refs []entryRef) {
	slices.SortFunc(refs, func(a, b entryRef) int {
		switch {
		case a.group != b.group:
			return int(a.group) - int(b.group)
		case a.prefix < b.prefix:
			return -1
		case a.prefix > b.prefix:
			return 1
		}
		return bytes.Compare(s.m.record(a.loc).key(), s.m.record(b.loc).key())
	})
}

// All is Store.All: every key with a value, encoded, in key-group then key
// order (savepoints are written by key group); each Entry owns its bytes.
// The store must not be changed during the iteration.
func (s *Compact) All() iter.Seq[Entry] {
	return func(yield func(Entry) bool) {
		refs := make([]entryRef, 0, s.live)
		for _, sl := range s.m.table {
			if sl == 0 || sl == slotRemoved {
				continue
			}
			r := s.m.record(uint32(sl))
			if r.flags()&flagDeleted == 0 {
				var p [8]byte
				copy(p[:], r.key())
				group := KeyGroup(uint32(sl>>32) % uint32(s.groups))
				refs = append(refs, entryRef{group: group, prefix: binary.BigEndian.Uint64(p[:]), loc: uint32(sl)})
			}
		}
		s.sortRefs(refs)
		var buf []byte
		for _, ref := range refs {
			r := s.m.record(ref.loc)
			if buf == nil || len(buf) > exportChunk {
				buf = make([]byte, 0, 4096)
			}
			k := len(buf)
			buf = append(buf, r.key()...)
			v := len(buf)
			buf = s.appendEncoded(buf, r.value())
			if !yield(Entry{Group: ref.group, Key: buf[k:v:v], Value: buf[v:len(buf):len(buf)]}) {
				return
			}
		}
	}
}

var _ Restorable = (*Compact)(nil)

// restore applies one changelog value (nil: tombstone) of kg to s, as
// persisted and clean.
func (s *Compact) restore(kg KeyGroup, key, value []byte) error {
	h := murmur3(key, 0)
	slot, loc, found := s.find(h, key)
	if value == nil {
		if found {
			r := s.m.record(loc)
			s.live--
			s.bytes -= int64(r.klen + r.vlen)
			s.remove(slot, r)
		}
		return nil
	}
	if s.check != nil {
		if err := s.check(value); err != nil {
			return fmt.Errorf("state: restore operator %q, key group %d, key %q: %w", s.operator, kg, key, err)
		}
	}
	if !found {
		s.insert(h, slot, key, value, flagPersisted)
		return nil
	}
	r := s.m.record(loc)
	s.bytes += int64(len(value) - r.vlen)
	s.replace(h, slot, loc, r, value)
	return nil
}

// restorePieces gives key the value the changelog holds in n pieces.
func (s *Compact) restorePieces(kg KeyGroup, key, value []byte, n int) error {
	if _, _, found := s.find(murmur3(key, 0), key); found {
		return fmt.Errorf("%w: operator %q, key group %d, key %q: the state topic holds both a whole value and pieces of one", ErrPieces, s.operator, kg, key)
	}
	if err := s.restore(kg, key, value); err != nil {
		return err
	}
	_, loc, _ := s.find(murmur3(key, 0), key)
	s.m.record(loc).setFlag(flagInPieces)
	s.split.restored(s.operator, kg, key, n)
	return nil
}

// EntryRecords is Store.EntryRecords.
func (s *Compact) EntryRecords(e Entry) []ChangelogRecord {
	_, loc, found := s.find(s.hash(e.Key), e.Key)
	if !found {
		panic(fmt.Sprintf("state: operator %q: EntryRecords of key %q, which the store does not hold", s.operator, e.Key))
	}
	r := s.m.record(loc)
	recs, inPieces := s.split.write(nil, e.Record(s.operator), r.flags()&flagInPieces != 0)
	if inPieces {
		r.setFlag(flagInPieces)
	} else {
		r.clearFlag(flagInPieces)
	}
	return recs
}
