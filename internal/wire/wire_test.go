package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"testing"
)

// The texts of a Reader's errors are pinned: decoders build their own
// messages from Offset, What and Msg, and tests of theirs match them.
func TestReaderErrors(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		read func(r *Reader)
		kind error
		want string
	}{
		{"byte of nothing", nil, func(r *Reader) { r.Byte("kind") }, ErrTruncated, "byte 0: kind: truncated"},
		{"uvarint of nothing", nil, func(r *Reader) { r.Uvarint("id") }, ErrTruncated, "byte 0: id: truncated"},
		{"uvarint cut", []byte{7, 0x80}, func(r *Reader) { r.Byte("v"); r.Uvarint("id") }, ErrTruncated, "byte 1: id: truncated"},
		{"uvarint overflow", bytes.Repeat([]byte{0xff}, 11), func(r *Reader) { r.Uvarint("n") }, ErrOverflow, "byte 0: n: varint overflows 64 bits"},
		{"uvarint tenth byte 2", append(bytes.Repeat([]byte{0x80}, 9), 2), func(r *Reader) { r.Uvarint("n") }, ErrOverflow, "byte 0: n: varint overflows 64 bits"},
		{"uvarint not minimal", []byte{0x81, 0x00}, func(r *Reader) { r.Uvarint("n") }, ErrNotMinimal, "byte 0: n: varint not minimally encoded"},
		{"zero not minimal", []byte{0x80, 0x00}, func(r *Reader) { r.Uvarint("n") }, ErrNotMinimal, "byte 0: n: varint not minimally encoded"},
		{"varint not minimal", []byte{5, 0x82, 0x80, 0x00}, func(r *Reader) { r.Byte("v"); r.Varint("x") }, ErrNotMinimal, "byte 1: x: varint not minimally encoded"},
		{"bytes beyond input", []byte{0x7f, 'a'}, func(r *Reader) { r.Bytes("key") }, ErrTooLong, "byte 0: key: length 127 exceeds the 1 bytes left"},
		{"string length cut", []byte{1, 'a', 0x80}, func(r *Reader) { r.String("a"); r.String("b") }, ErrTruncated, "byte 2: b: truncated"},
		{"count beyond input", []byte{3, 0, 0}, func(r *Reader) { r.Count("items") }, ErrTooLong, "byte 0: items: count 3 exceeds the 2 bytes left"},
		{"fixed cut", []byte{1, 2, 3}, func(r *Reader) { r.Byte("v"); r.Uint64LE("float") }, ErrTruncated, "byte 1: float: truncated: 8 bytes needed, 2 left"},
		{"uint16 cut", []byte{1}, func(r *Reader) { r.Uint16BE("group") }, ErrTruncated, "byte 0: group: truncated: 2 bytes needed, 1 left"},
		{"trailing", []byte{1, 2, 3}, func(r *Reader) { r.Byte("v"); r.End("end") }, ErrTrailing, "byte 1: end: 2 trailing bytes"},
		{"fail points at the last item", []byte{1, 0xac, 0x02}, func(r *Reader) {
			r.Byte("v")
			if r.Uvarint("scale") > 9 {
				r.Fail("scale", "300 beyond 9")
			}
		}, ErrInvalid, "byte 1: scale: 300 beyond 9"},
		{"fail after a string points at its length", []byte{0, 2, 'h', 'i'}, func(r *Reader) { r.Byte("v"); r.String("s"); r.Fail("s", "bad") }, ErrInvalid, "byte 1: s: bad"},
		{"fail here", []byte{1, 2}, func(r *Reader) { r.Byte("v"); r.FailHere("x", "no") }, ErrInvalid, "byte 1: x: no"},
		{"first error sticks", []byte{0x81, 0x00}, func(r *Reader) { r.Uvarint("a"); r.Byte("b"); r.End("end"); r.Fail("c", "x") }, ErrNotMinimal, "byte 0: a: varint not minimally encoded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(tt.in)
			tt.read(&r)
			err := r.Err()
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, tt.kind) || err.Error() != tt.want {
				t.Fatalf("err %v, want %v %q", err, tt.kind, tt.want)
			}
		})
	}
}

func TestReaderAtBase(t *testing.T) {
	r := NewReaderAt([]byte{1}, 5)
	r.Byte("a")
	r.Byte("b")
	if err := r.Err(); err == nil || err.Error() != "byte 6: b: truncated" {
		t.Fatalf("err %v", err)
	}
	if r.Offset() != 6 {
		t.Fatalf("Offset %d", r.Offset())
	}
}

func TestReaderReadsWhatAppendWrites(t *testing.T) {
	var b []byte
	b = append(b, 7)
	b = AppendUvarint(b, math.MaxUint64)
	b = AppendVarint(b, math.MinInt64)
	b = AppendVarint(b, -1)
	b = AppendBytes(b, "héllo")
	b = AppendBytes(b, []byte{})
	b = binary.BigEndian.AppendUint16(b, 0xbeef)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(1.5))
	b = AppendUvarint(b, 2)
	b = append(b, "xy"...)
	r := NewReader(b)
	if got := r.Byte("b"); got != 7 {
		t.Fatalf("Byte %d", got)
	}
	if got := r.Uvarint("u"); got != math.MaxUint64 {
		t.Fatalf("Uvarint %d", got)
	}
	if got := r.Varint("v"); got != math.MinInt64 {
		t.Fatalf("Varint %d", got)
	}
	if got := r.Varint("v"); got != -1 {
		t.Fatalf("Varint %d", got)
	}
	if got := r.String("s"); got != "héllo" {
		t.Fatalf("String %q", got)
	}
	if got := r.Bytes("e"); got == nil || len(got) != 0 {
		t.Fatalf("Bytes %v", got)
	}
	if got := r.Uint16BE("g"); got != 0xbeef {
		t.Fatalf("Uint16BE %x", got)
	}
	if got := math.Float64frombits(r.Uint64LE("f")); got != 1.5 {
		t.Fatalf("Uint64LE %v", got)
	}
	if n := r.Count("c"); n != 2 || string(r.Rest()) != "xy" {
		t.Fatalf("Count %d", n)
	}
	if err := r.End("end"); err != nil {
		t.Fatal(err)
	}
	if UvarintLen(math.MaxUint64) != len(AppendUvarint(nil, math.MaxUint64)) || UvarintLen(0) != 1 {
		t.Fatal("UvarintLen")
	}
}

// FuzzUvarint holds the three varint readers to one rule: Uvarint,
// Reader.Uvarint and ReadUvarint accept exactly the minimal encodings
// that binary.Uvarint accepts, agree on the value, and re-encode it to
// the bytes read.
func FuzzUvarint(f *testing.F) {
	for _, s := range [][]byte{{}, {0}, {0x80, 0}, {0x81, 0}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1}, bytes.Repeat([]byte{0xff}, 11), {0x80}} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		x, n, err := Uvarint(b)
		bx, bn := binary.Uvarint(b)
		if err == nil {
			if bn != n || bx != x || !bytes.Equal(AppendUvarint(nil, x), b[:n]) {
				t.Fatalf("Uvarint(%x) = %d, %d: not the minimal encoding binary reads (%d, %d)", b, x, n, bx, bn)
			}
		} else if bn > 0 && !errors.Is(err, ErrNotMinimal) {
			t.Fatalf("Uvarint(%x) = %v, binary reads %d", b, err, bx)
		}
		sx, serr := ReadUvarint(bytes.NewReader(b))
		if sx != x || !errors.Is(serr, err) && serr != err {
			t.Fatalf("ReadUvarint(%x) = %d, %v; Uvarint %d, %v", b, sx, serr, x, err)
		}
		r := NewReader(b)
		rx := r.Uvarint("x")
		if rx != x || !errors.Is(r.Err(), err) && (r.Err() != nil || err != nil) {
			t.Fatalf("Reader.Uvarint(%x) = %d, %v; Uvarint %d, %v", b, rx, r.Err(), x, err)
		}
	})
}

// FuzzReader reads arbitrary input as a script of reads: it must never
// panic, never read past the input, and an input it reads without error
// must be what the Append functions write for the values read.
func FuzzReader(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3}, []byte{2, 3, 'a', 'b', 'c', 0x81, 0})
	f.Add([]byte{5, 4, 6}, []byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9, 1})
	f.Fuzz(func(t *testing.T, script, in []byte) {
		r := NewReader(in)
		var out []byte
		for _, op := range script {
			switch op % 8 {
			case 0:
				out = append(out, r.Byte("byte"))
			case 1:
				out = AppendUvarint(out, r.Uvarint("uvarint"))
			case 2:
				out = AppendVarint(out, r.Varint("varint"))
			case 3:
				out = AppendBytes(out, r.Bytes("bytes"))
			case 4:
				out = AppendBytes(out, r.String("string"))
			case 5:
				out = binary.BigEndian.AppendUint16(out, r.Uint16BE("u16"))
			case 6:
				out = binary.LittleEndian.AppendUint64(out, r.Uint64LE("u64"))
			case 7:
				out = AppendUvarint(out, uint64(r.Count("count")))
			}
			if r.Len() < 0 || r.Offset() > len(in) {
				t.Fatalf("read past the input: offset %d of %d", r.Offset(), len(in))
			}
		}
		if r.Err() != nil {
			var e *Error
			if !errors.As(r.Err(), &e) || e.Offset < 0 || e.Offset > len(in) {
				t.Fatalf("error %v", r.Err())
			}
			return
		}
		if !bytes.Equal(out, in[:r.Offset()]) {
			t.Fatalf("read %x, re-encoded %x", in[:r.Offset()], out)
		}
	})
}
