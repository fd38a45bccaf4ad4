package state

import (
	"encoding/binary"
	"math/bits"
)

// murmur3 is MurmurHash3_x86_32 exactly as in Austin Appleby's reference
// (smhasher/src/MurmurHash3.cpp): 4-byte blocks read little-endian, the
// 1..3 byte tail, the length mixed in, then fmix32.
//
// It is written out here instead of imported because its output is part of
// the persistent format: key groups are recorded in every checkpoint,
// changelog key and savepoint, so this function must return the same value
// for the same bytes on every platform, in every version, forever. Tests
// pin it to the published reference vectors and to SMHasher's verification
// value, so an accidental change cannot pass review.
//
// murmur3 rather than FNV-1a: FNV-1a ends with a multiplication, so its low
// k bits depend only on the low k bits of every input byte, and key groups
// are taken modulo G (often a power of two such as 128). murmur3's final
// avalanche (fmix32) makes every output bit depend on every input bit.
func murmur3(data []byte, seed uint32) uint32 {
	const (
		c1 = 0xcc9e2d51
		c2 = 0x1b873593
	)
	h := seed
	n := len(data)
	i := 0
	for ; i+4 <= n; i += 4 {
		k := binary.LittleEndian.Uint32(data[i:])
		k *= c1
		k = bits.RotateLeft32(k, 15)
		k *= c2
		h ^= k
		h = bits.RotateLeft32(h, 13)
		h = h*5 + 0xe6546b64
	}
	var k uint32
	switch n & 3 {
	case 3:
		k ^= uint32(data[i+2]) << 16
		fallthrough
	case 2:
		k ^= uint32(data[i+1]) << 8
		fallthrough
	case 1:
		k ^= uint32(data[i])
		k *= c1
		k = bits.RotateLeft32(k, 15)
		k *= c2
		h ^= k
	}
	h ^= uint32(n)
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}
