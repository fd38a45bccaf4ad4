package operator

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"runtime"
	"sync"
	"unsafe"
)

// tableStore is where a Table keeps its keys and values: as bytes, the
// values as read from the topic, in pointer-free memory that the garbage
// collector does not scan, and outside the Go heap once a shard holds
// more than a little (state.Compact's technique, for a table: one writer
// and many concurrent readers instead of one owner, and no changelog).
// A Go map of decoded values cost ~330 live heap bytes per key of a
// three-field JSON value, and twice that in resident memory with the
// collector's headroom; here a key costs its bytes, its value's bytes, a
// 3-byte header and ~2 table slots of 8 bytes.
//
// The keys are spread over tableShards shards by their hash, each with
// its own lock: the writer takes it to change the shard, a reader shares
// it while it finds a key and reads (decodes) its value, so that no value
// changes or moves under a reader.
type tableStore struct {
	seed   maphash.Seed
	shards [tableShards]storeShard
}

// tableShards spreads the keys over this many locks, so that lookups on
// many cores do not all touch one lock word. A power of two.
const tableShards = 64

type storeShard struct {
	mu sync.RWMutex
	m  *shardMemory
	_  [32]byte // with the lock and the pointer, a cache line of its own
}

// shardMemory is one shard's memory, apart from the store so that a
// cleanup can unmap it once the table is unreachable.
type shardMemory struct {
	// slots is open addressing with linear probing over a power of two
	// of slots. A slot is 0 (empty), slotGone (a key deleted: probes go
	// on past it) or hash<<32 | loc: the upper 32 bits of the key's hash
	// and the location of its record.
	slots []uint64
	used  int // slots not empty: live and gone
	gone  int // slots that are slotGone
	live  int // keys

	// chunks hold the records, appended: 4 KiB, 8 KiB, ... up to
	// storeChunk each (a record larger than the next chunk gets a chunk
	// of its own). A location is chunk<<storeOffsetBits | offset; the
	// first chunk's first byte is never a record, so location 0 is none.
	chunks  [][]byte
	tail    int // next free byte of the last chunk
	inUse   int // bytes of all records written
	garbage int // bytes of records replaced or deleted since the last compaction
}

// A record is
//
//	uvarint  key length
//	uvarint  value length
//	varint   the record's size as read (its key's and value's bytes)
//	         minus the two lengths: the key as read may be longer or
//	         shorter than its text here (a JSON or schema key)
//	bytes    key (the text it is looked up by)
//	bytes    value, as read from the topic
const (
	storeOffsetBits = 20
	storeChunk      = 1 << storeOffsetBits // 1 MiB
	storeMaxChunks  = 1 << (32 - storeOffsetBits)
	firstStoreChunk = 4 << 10
	// offHeapBytes: chunks and slot tables from this size on are mapped
	// outside the heap; smaller ones are pointer-free heap memory, so a
	// small table (a test, a few keys per shard) costs no mapping.
	offHeapBytes = 16 << 10
	// slotGone: location 0, which no record has.
	slotGone = 1 << 32
	minSlots = 16
)

// initStore makes t's store empty. Its memory is returned to the system
// when t becomes unreachable.
func (t *Table) initStore() {
	s := &t.store
	s.seed = maphash.MakeSeed()
	mems := make([]*shardMemory, tableShards)
	for i := range s.shards {
		mems[i] = &shardMemory{}
		s.shards[i].m = mems[i]
	}
	runtime.AddCleanup(t, freeShards, mems)
}

func freeShards(mems []*shardMemory) {
	for _, m := range mems {
		m.free()
	}
}

// hash is key's hash: its low bits pick the shard, its upper 32 bits are
// what the shard's slots hold.
func (s *tableStore) hash(key string) (*storeShard, uint32) {
	h := maphash.String(s.seed, key)
	return &s.shards[h%tableShards], uint32(h >> 32)
}

// put stores value (copied) as key's, size being the record's bytes as
// read; it returns the size of the value it replaced, if any. Only the
// writer calls it.
func (s *tableStore) put(key string, value []byte, size int) (old int, had bool) {
	sh, h := s.hash(key)
	sh.mu.Lock()
	old, had = sh.m.put(h, key, value, size)
	sh.mu.Unlock()
	return old, had
}

// delete removes key; it returns the size of the value it had, if any.
// Only the writer calls it.
func (s *tableStore) delete(key string) (old int, had bool) {
	sh, h := s.hash(key)
	sh.mu.Lock()
	old, had = sh.m.delete(h, key)
	sh.mu.Unlock()
	return old, had
}

// find returns key's record location and whether the shard holds key,
// else the slot a new key goes to (-1 when there are no slots).
func (m *shardMemory) find(h uint32, key string) (slot int, loc uint32, found bool) {
	if len(m.slots) == 0 {
		return -1, 0, false
	}
	mask := len(m.slots) - 1
	free := -1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		switch sl := m.slots[i]; {
		case sl == 0:
			if free < 0 {
				free = i
			}
			return free, 0, false
		case sl == slotGone:
			if free < 0 {
				free = i
			}
		case uint32(sl>>32) == h:
			if k, _, _, _ := m.record(uint32(sl)); string(k) == key {
				return i, uint32(sl), true
			}
		}
	}
}

// get returns key's value, which aliases the shard's memory: read it
// under the shard's lock.
func (m *shardMemory) get(h uint32, key string) ([]byte, bool) {
	_, loc, found := m.find(h, key)
	if !found {
		return nil, false
	}
	_, v, _, _ := m.record(loc)
	return v, true
}

// record reads the record at loc: its key and value (both alias the
// shard's memory), its size as read, and the bytes it takes.
func (m *shardMemory) record(loc uint32) (key, value []byte, size, n int) {
	b := m.chunks[loc>>storeOffsetBits][loc&(storeChunk-1):]
	kl, n1 := binary.Uvarint(b)
	vl, n2 := binary.Uvarint(b[n1:])
	d, n3 := binary.Varint(b[n1+n2:])
	k := n1 + n2 + n3
	v := k + int(kl)
	n = v + int(vl)
	return b[k:v:v], b[v:n:n], int(kl) + int(vl) + int(d), n
}

// appendRecord appends the record of key and value to dst.
func appendRecord(dst []byte, key string, value []byte, size int) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	dst = binary.AppendUvarint(dst, uint64(len(value)))
	dst = binary.AppendVarint(dst, int64(size-len(key)-len(value)))
	dst = append(dst, key...)
	return append(dst, value...)
}

// writeRecord writes the record of key and value, n bytes long, at the
// start of b.
func writeRecord(b []byte, n int, key string, value []byte, size int) {
	if w := appendRecord(b[:0:n], key, value, size); len(w) != n || unsafe.SliceData(w) != unsafe.SliceData(b) {
		panic(fmt.Sprintf("operator: a table record of %d bytes took %d", n, len(w)))
	}
}

// recordBytes is the length of key and value's record.
func recordBytes(key string, value []byte, size int) int {
	return uvarintLen(uint64(len(key))) + uvarintLen(uint64(len(value))) +
		uvarintLen(zigzag(int64(size-len(key)-len(value)))) + len(key) + len(value)
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

// zigzag is how binary.AppendVarint maps a signed value to an unsigned one.
func zigzag(x int64) uint64 { return uint64(x<<1) ^ uint64(x>>63) }

func (m *shardMemory) put(h uint32, key string, value []byte, size int) (old int, had bool) {
	slot, loc, found := m.find(h, key)
	n := recordBytes(key, value, size)
	if found {
		_, _, o, l := m.record(loc)
		if l == n {
			// The same length: in place (readers are locked out).
			writeRecord(m.chunks[loc>>storeOffsetBits][loc&(storeChunk-1):], n, key, value, size)
			return o, true
		}
		old, m.garbage = o, m.garbage+l
	} else if slot < 0 || (m.used+1)*4 > len(m.slots)*3 {
		// Full to three quarters, gone slots included (they lengthen
		// probes): a table twice the live keys, without the gone ones.
		m.rehash(slotsFor(m.live + 1))
		slot, _, _ = m.find(h, key)
	}
	if !found {
		if m.slots[slot] == slotGone {
			m.gone--
		} else {
			m.used++
		}
		m.live++
	}
	nloc, b := m.alloc(n)
	writeRecord(b, n, key, value, size)
	m.slots[slot] = uint64(h)<<32 | uint64(nloc)
	m.compactIfWasteful()
	return old, found
}

func (m *shardMemory) delete(h uint32, key string) (old int, had bool) {
	slot, loc, found := m.find(h, key)
	if !found {
		return 0, false
	}
	_, _, old, n := m.record(loc)
	m.garbage += n
	m.slots[slot] = slotGone
	m.gone++
	m.live--
	m.compactIfWasteful()
	return old, true
}

// slotsFor is the slot count that holds keys keys at most half full.
func slotsFor(keys int) int {
	n := minSlots
	for n < 2*keys {
		n *= 2
	}
	return n
}

// rehash moves every key to a new table of n slots, dropping gone ones.
func (m *shardMemory) rehash(n int) {
	old := m.slots
	t := allocSlots(n)
	mask := n - 1
	for _, sl := range old {
		if sl == 0 || sl == slotGone {
			continue
		}
		i := int(sl>>32) & mask
		for t[i] != 0 {
			i = (i + 1) & mask
		}
		t[i] = sl
	}
	m.slots = t
	m.used -= m.gone
	m.gone = 0
	freeSlots(old)
}

// alloc returns the location of n new bytes and the bytes.
func (m *shardMemory) alloc(n int) (uint32, []byte) {
	last := len(m.chunks) - 1
	if last < 0 || m.tail+n > len(m.chunks[last]) {
		start := 0
		if last < 0 {
			start = 1 // location 0 is never a record
		}
		// A record larger than the next chunk gets one of its own, at
		// an offset that still fits a location.
		m.addChunk(allocArena(max(m.nextChunk(), start+n)))
		last, m.tail = len(m.chunks)-1, start
	}
	loc := uint32(last)<<storeOffsetBits | uint32(m.tail)
	b := m.chunks[last][m.tail : m.tail+n]
	m.tail += n
	m.inUse += n
	return loc, b
}

// nextChunk is the size of the next chunk.
func (m *shardMemory) nextChunk() int {
	if len(m.chunks) >= 8 {
		return storeChunk
	}
	return min(storeChunk, firstStoreChunk<<len(m.chunks))
}

func (m *shardMemory) addChunk(c []byte) {
	if len(m.chunks) >= storeMaxChunks {
		panic(fmt.Sprintf("operator: a table shard outgrew %d chunks", storeMaxChunks))
	}
	m.chunks = append(m.chunks, c)
}

// compactIfWasteful copies the live records into new chunks once more
// than half of the written bytes are garbage (the writer holds the lock:
// no reader sees the move).
func (m *shardMemory) compactIfWasteful() {
	if m.garbage < firstStoreChunk || m.garbage*2 < m.inUse {
		return
	}
	old := m.chunks
	oldm := &shardMemory{chunks: old}
	m.chunks, m.tail, m.inUse, m.garbage = nil, 0, 0, 0
	for i, sl := range m.slots {
		if sl == 0 || sl == slotGone {
			continue
		}
		_, _, _, n := oldm.record(uint32(sl))
		b := old[uint32(sl)>>storeOffsetBits][uint32(sl)&(storeChunk-1):]
		loc, nb := m.alloc(n)
		copy(nb, b[:n])
		m.slots[i] = sl&^(1<<32-1) | uint64(loc)
	}
	for _, c := range old {
		freeArena(c)
	}
}

// free returns the shard's memory to the system.
func (m *shardMemory) free() {
	for _, c := range m.chunks {
		freeArena(c)
	}
	freeSlots(m.slots)
	*m = shardMemory{}
}

// allocArena returns n zeroed bytes, outside the heap from offHeapBytes
// on (freeArena tells them apart by size).
func allocArena(n int) []byte {
	if n < offHeapBytes {
		return make([]byte, n)
	}
	return mapBytes(n)
}

func freeArena(b []byte) {
	if cap(b) >= offHeapBytes {
		unmapBytes(b)
	}
}

func allocSlots(n int) []uint64 {
	if n*8 < offHeapBytes {
		return make([]uint64, n)
	}
	b := mapBytes(n * 8)
	return unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(b))), n)
}

func freeSlots(s []uint64) {
	if cap(s)*8 >= offHeapBytes {
		unmapBytes(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), cap(s)*8))
	}
}

// offHeap is the bytes the store has written to outside the Go heap (what
// runtime.MemStats does not count): its mapped chunks, the last one up to
// where its records end (the rest of a mapping is not resident until
// written), and its mapped slot tables.
func (s *tableStore) offHeap() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.RLock()
		for i, c := range sh.m.chunks {
			switch {
			case cap(c) < offHeapBytes:
			case i == len(sh.m.chunks)-1:
				n += sh.m.tail
			default:
				n += cap(c)
			}
		}
		if cap(sh.m.slots)*8 >= offHeapBytes {
			n += cap(sh.m.slots) * 8
		}
		sh.mu.RUnlock()
	}
	return n
}
