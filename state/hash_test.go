package state

import (
	"encoding/binary"
	"testing"
)

// The published MurmurHash3_x86_32 reference vectors (the same table as
// github.com/spaolacci/murmur3 and Appleby's smhasher). If one fails,
// every persisted key group is wrong: do not "fix" the vector.
func TestMurmur3ReferenceVectors(t *testing.T) {
	tests := []struct {
		seed uint32
		in   string
		want uint32
	}{
		{0x00, "", 0x00000000},
		{0x00, "hello", 0x248bfa47},
		{0x00, "hello, world", 0x149bbb7f},
		{0x00, "19 Jan 2038 at 3:14:07 AM", 0xe31e8a70},
		{0x00, "The quick brown fox jumps over the lazy dog.", 0xd5c48bfc},
		{0x00, "The quick brown fox jumps over the lazy dog", 0x2e4ff723},
		{0x01, "", 0x514e28b7},
		{0x01, "hello", 0xbb4abcad},
		{0x01, "hello, world", 0x6f5cb2e9},
		{0x01, "19 Jan 2038 at 3:14:07 AM", 0xf50e1f30},
		{0x01, "The quick brown fox jumps over the lazy dog.", 0x846f6a36},
		{0x2a, "", 0x087fcd5c},
		{0x2a, "hello", 0xe2dbd2e1},
		{0x2a, "hello, world", 0x7ec7c6c2},
		{0x2a, "19 Jan 2038 at 3:14:07 AM", 0x58f745f6},
		{0x2a, "The quick brown fox jumps over the lazy dog.", 0xc02d1434},
		{0xffffffff, "", 0x81f16f39},
		{0x9747b28c, "a", 0x7fa09ea6},
		{0x9747b28c, "aa", 0x5d211726},
		{0x9747b28c, "aaa", 0x283e0130},
		{0x9747b28c, "aaaa", 0x5a97808a},
		{0x9747b28c, "abc", 0xc84a62dd},
		{0x9747b28c, "Hello, world!", 0x24884cba},
	}
	for _, tt := range tests {
		if got := murmur3([]byte(tt.in), tt.seed); got != tt.want {
			t.Errorf("murmur3(%q, %#x) = %#08x, want %#08x", tt.in, tt.seed, got, tt.want)
		}
	}
}

// SMHasher's VerificationTest: hash {}, {0}, {0,1}, ..., {0..254} with seed
// 256-len, hash the concatenated little-endian results with seed 0. The
// published value for MurmurHash3_x86_32 is 0xB0F57EE3. It covers every
// tail length and block count up to 255 bytes.
func TestMurmur3SMHasherVerification(t *testing.T) {
	key := make([]byte, 256)
	out := make([]byte, 0, 1024)
	for i := range 256 {
		key[i] = byte(i)
		out = binary.LittleEndian.AppendUint32(out, murmur3(key[:i], uint32(256-i)))
	}
	if got := murmur3(out, 0); got != 0xB0F57EE3 {
		t.Fatalf("verification value %#08x, want 0xb0f57ee3", got)
	}
}
