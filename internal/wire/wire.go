package wire

import (
	"encoding/binary"
	"errors"
	"io"
	"strconv"
)

// The problems a read can find beyond a format's own rules, for errors.Is
// on an *Error. Their texts are the Msg of the *Error.
var (
	// ErrTruncated: the input ends inside the item.
	ErrTruncated = errors.New("truncated")
	// ErrOverflow: a varint does not fit 64 bits.
	ErrOverflow = errors.New("varint overflows 64 bits")
	// ErrNotMinimal: a varint is longer than needed.
	ErrNotMinimal = errors.New("varint not minimally encoded")
	// ErrTooLong: a length or count exceeds the bytes left.
	ErrTooLong = errors.New("exceeds the input")
	// ErrTrailing: bytes are left where the input should end.
	ErrTrailing = errors.New("trailing bytes")
	// ErrInvalid: the caller's own check failed (Reader.Fail).
	ErrInvalid = errors.New("invalid")
)

// Error is the first problem a Reader found.
type Error struct {
	// Offset is the byte offset (from the Reader's base) where the item
	// being read starts.
	Offset int
	// What names the item, as the decoder called it.
	What string
	// Msg is the problem, e.g. "truncated" or "length 9 exceeds the 2
	// bytes left".
	Msg string
	// Kind is one of the Err variables of this package.
	Kind error
}

func (e *Error) Error() string {
	return "byte " + strconv.Itoa(e.Offset) + ": " + e.What + ": " + e.Msg
}

// Unwrap returns Kind.
func (e *Error) Unwrap() error { return e.Kind }

// Reader reads the primitives of a []byte from the front. The zero
// Reader reads an empty input. Byte slices it returns alias the input.
type Reader struct {
	b    []byte
	off  int // next byte to read
	last int // start of the last item read, for Fail
	base int // added to offsets in errors
	err  *Error
}

// NewReader returns a Reader of b whose errors count offsets from the
// start of b.
func NewReader(b []byte) Reader { return Reader{b: b} }

// NewReaderAt returns a Reader of b whose errors count offsets from base
// (the position of b inside a larger input, e.g. after a header).
func NewReaderAt(b []byte, base int) Reader { return Reader{b: b, base: base} }

// Err returns the first problem found, an *Error, or nil.
func (r *Reader) Err() error {
	if r.err == nil {
		return nil
	}
	return r.err
}

// Offset is the offset (from the base) of the next byte to read.
func (r *Reader) Offset() int { return r.base + r.off }

// Len is the number of bytes left.
func (r *Reader) Len() int { return len(r.b) - r.off }

func (r *Reader) failAt(off int, what, msg string, kind error) {
	if r.err == nil {
		r.err = &Error{Offset: r.base + off, What: what, Msg: msg, Kind: kind}
	}
}

// Fail records a problem the caller found with the item it last read (the
// error points at that item's first byte), unless a problem is already
// recorded.
func (r *Reader) Fail(what, msg string) { r.failAt(r.last, what, msg, ErrInvalid) }

// FailHere records a problem at the next byte to read, unless a problem is
// already recorded.
func (r *Reader) FailHere(what, msg string) { r.failAt(r.off, what, msg, ErrInvalid) }

// Byte reads one byte.
func (r *Reader) Byte(what string) byte {
	if r.err != nil {
		return 0
	}
	r.last = r.off
	if r.off >= len(r.b) {
		r.failAt(r.off, what, ErrTruncated.Error(), ErrTruncated)
		return 0
	}
	c := r.b[r.off]
	r.off++
	return c
}

// Uvarint reads a minimally encoded unsigned varint.
func (r *Reader) Uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	r.last = r.off
	x, n, err := Uvarint(r.b[r.off:])
	if err != nil {
		r.failAt(r.off, what, err.Error(), err)
		return 0
	}
	r.off += n
	return x
}

// Varint reads a minimally encoded zig-zag signed varint (as
// binary.AppendVarint writes).
func (r *Reader) Varint(what string) int64 {
	u := r.Uvarint(what)
	return int64(u>>1) ^ -int64(u&1)
}

// Fixed reads the next n bytes (aliasing the input).
func (r *Reader) Fixed(what string, n int) []byte {
	if r.err != nil {
		return nil
	}
	r.last = r.off
	if n < 0 || n > len(r.b)-r.off {
		r.failAt(r.off, what, "truncated: "+strconv.Itoa(n)+" bytes needed, "+strconv.Itoa(len(r.b)-r.off)+" left", ErrTruncated)
		return nil
	}
	s := r.b[r.off : r.off+n : r.off+n]
	r.off += n
	return s
}

// Uint16BE reads a big-endian uint16.
func (r *Reader) Uint16BE(what string) uint16 {
	if b := r.Fixed(what, 2); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}

// Uint64LE reads a little-endian uint64.
func (r *Reader) Uint64LE(what string) uint64 {
	if b := r.Fixed(what, 8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

// Bytes reads a uvarint length and that many bytes (aliasing the input,
// capacity limited to them). The length is checked against the bytes left
// before it is used.
func (r *Reader) Bytes(what string) []byte {
	start := r.off
	n := r.Uvarint(what)
	if r.err != nil {
		return nil
	}
	r.last = start
	if left := len(r.b) - r.off; n > uint64(left) {
		r.failAt(start, what, "length "+strconv.FormatUint(n, 10)+" exceeds the "+strconv.Itoa(left)+" bytes left", ErrTooLong)
		return nil
	}
	s := r.b[r.off : r.off+int(n) : r.off+int(n)]
	r.off += int(n)
	return s
}

// String is Bytes as a new string.
func (r *Reader) String(what string) string { return string(r.Bytes(what)) }

// Count reads the length of a list whose every element takes at least one
// byte: a count beyond the bytes left is corrupt, which also bounds what a
// decoder allocates for the list.
func (r *Reader) Count(what string) int {
	start := r.off
	n := r.Uvarint(what)
	if r.err != nil {
		return 0
	}
	r.last = start
	if left := len(r.b) - r.off; n > uint64(left) {
		r.failAt(start, what, "count "+strconv.FormatUint(n, 10)+" exceeds the "+strconv.Itoa(left)+" bytes left", ErrTooLong)
		return 0
	}
	return int(n)
}

// Rest reads every byte left (aliasing the input).
func (r *Reader) Rest() []byte {
	if r.err != nil {
		return nil
	}
	r.last = r.off
	s := r.b[r.off:len(r.b):len(r.b)]
	r.off = len(r.b)
	return s
}

// End records a problem if bytes are left, and returns Err.
func (r *Reader) End(what string) error {
	if r.err == nil && r.off != len(r.b) {
		r.failAt(r.off, what, strconv.Itoa(len(r.b)-r.off)+" trailing bytes", ErrTrailing)
	}
	return r.Err()
}

// Uvarint decodes a minimally encoded unsigned varint from the front of b
// and returns it and its length, or ErrTruncated, ErrOverflow or
// ErrNotMinimal.
func Uvarint(b []byte) (x uint64, n int, err error) {
	x, n = binary.Uvarint(b)
	switch {
	case n == 0:
		return 0, 0, ErrTruncated
	case n < 0:
		return 0, 0, ErrOverflow
	case n > 1 && b[n-1] == 0:
		// A trailing zero group adds nothing: a second encoding of the
		// same number.
		return 0, 0, ErrNotMinimal
	}
	return x, n, nil
}

// ReadUvarint reads a minimally encoded unsigned varint from r, byte by
// byte, under the rules of Uvarint: the end of r inside it (io.EOF) is
// ErrTruncated; another error of r is returned as it is.
func ReadUvarint(r io.ByteReader) (uint64, error) {
	var x uint64
	for i := 0; ; i++ {
		c, err := r.ReadByte()
		if err == io.EOF {
			return 0, ErrTruncated
		}
		if err != nil {
			return 0, err
		}
		// The checks and their order are binary.Uvarint's, so both
		// readers tell the same story about the same bytes.
		if i == binary.MaxVarintLen64 {
			return 0, ErrOverflow
		}
		if c < 0x80 {
			if i == binary.MaxVarintLen64-1 && c > 1 {
				return 0, ErrOverflow
			}
			if i > 0 && c == 0 {
				return 0, ErrNotMinimal
			}
			return x | uint64(c)<<(7*i), nil
		}
		x |= uint64(c&0x7f) << (7 * i)
	}
}

// AppendUvarint appends the minimal encoding of x.
func AppendUvarint(dst []byte, x uint64) []byte { return binary.AppendUvarint(dst, x) }

// AppendVarint appends the minimal zig-zag encoding of x.
func AppendVarint(dst []byte, x int64) []byte { return binary.AppendVarint(dst, x) }

// AppendBytes appends the uvarint length of s and s: what Bytes and
// String read.
func AppendBytes[T string | []byte](dst []byte, s T) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// UvarintLen is the length of the encoding of x.
func UvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}
