package savepoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"reflect"
	"strings"
	"testing"

	"github.com/eoflow/pipeline/state"
)

type rawEntry struct {
	Group      state.KeyGroup
	Key, Value string
}

// keysOf returns n entries of hdr's range, sorted, with values of varied
// length (some empty).
func keysOf(hdr dataHeader, n int) []rawEntry {
	var out []rawEntry
	for i := 0; len(out) < n; i++ {
		k := fmt.Sprintf("key-%d", i)
		kg := state.KeyGroupOf([]byte(k), hdr.KeyGroups)
		if hdr.Range.Contains(kg) {
			out = append(out, rawEntry{Group: kg, Key: k, Value: strings.Repeat("v", i%5)})
		}
	}
	sortEntries(out)
	return out
}

func sortEntries(es []rawEntry) {
	for i := 1; i < len(es); i++ {
		for j := i; j > 0 && (es[j].Group < es[j-1].Group || es[j].Group == es[j-1].Group && es[j].Key < es[j-1].Key); j-- {
			es[j], es[j-1] = es[j-1], es[j]
		}
	}
}

// encodeData encodes entries into a data file, with blocks of target.
func encodeData(t testing.TB, hdr dataHeader, target int, entries []rawEntry) []byte {
	t.Helper()
	var b bytes.Buffer
	e, err := newDataEncoder(&b, hdr, target)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range entries {
		if err := e.add(x.Group, []byte(x.Key), []byte(x.Value)); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.finish(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// decodeData decodes a whole data file.
func decodeData(b []byte) (dataHeader, []rawEntry, []int, error) {
	d, err := newDataDecoder(bytes.NewReader(b), "test.state")
	if err != nil {
		return dataHeader{}, nil, nil, err
	}
	d.recordBlocks = true
	var out []rawEntry
	err = d.each(func(kg state.KeyGroup, key, value []byte) error {
		if value == nil {
			return errors.New("nil value")
		}
		out = append(out, rawEntry{Group: kg, Key: string(key), Value: string(value)})
		return nil
	})
	return d.hdr, out, d.blocks, err
}

func TestDataRoundTrip(t *testing.T) {
	hdr := dataHeader{Operator: "sums", KeyGroups: 128, Range: state.Range{Start: 10, End: 70}}
	for _, tc := range []struct {
		n, target int
	}{{0, defaultBlockSize}, {1, defaultBlockSize}, {500, defaultBlockSize}, {500, 1}, {500, 100}} {
		entries := keysOf(hdr, tc.n)
		b := encodeData(t, hdr, tc.target, entries)
		gotHdr, got, blocks, err := decodeData(b)
		if err != nil {
			t.Fatalf("%d entries, blocks of %d: %v", tc.n, tc.target, err)
		}
		if gotHdr != hdr || !reflect.DeepEqual(got, entries) {
			t.Fatalf("%d entries, blocks of %d: decoded %v %d entries", tc.n, tc.target, gotHdr, len(got))
		}
		if tc.target == 1 && len(blocks) != tc.n {
			t.Errorf("blocks of 1 byte: %d blocks for %d entries", len(blocks), tc.n)
		}
	}
}

// TestDataDamage: every truncation and every single-bit flip of a small
// file is an error wrapping ErrCorrupt (or ErrUnknownVersion for the
// version byte), never a panic and never a silent success.
func TestDataDamage(t *testing.T) {
	hdr := dataHeader{Operator: "sums", KeyGroups: 8, Range: state.Range{Start: 0, End: 8}}
	good := encodeData(t, hdr, 40, keysOf(hdr, 12))
	for n := range len(good) {
		_, _, _, err := decodeData(good[:n])
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "truncated") {
			t.Fatalf("cut to %d of %d bytes: %v", n, len(good), err)
		}
	}
	if _, _, _, err := decodeData(append(bytes.Clone(good), 0)); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "bytes after the trailer") {
		t.Fatalf("a byte appended: %v", err)
	}
	for i := range len(good) * 8 {
		b := bytes.Clone(good)
		b[i/8] ^= 1 << (i % 8)
		_, _, _, err := decodeData(b)
		switch {
		case i/8 == len(dataMagic):
			if !errors.Is(err, ErrUnknownVersion) {
				t.Fatalf("bit %d (version byte) flipped: %v", i, err)
			}
		case !errors.Is(err, ErrCorrupt):
			t.Fatalf("bit %d (byte %d) flipped: %v", i, i/8, err)
		}
	}
}

// TestDataDecodeErrors: hand-made files that are well framed (valid
// CRCs) but wrong inside get errors saying what is wrong.
func TestDataDecodeErrors(t *testing.T) {
	hdr := dataHeader{Operator: "sums", KeyGroups: 8, Range: state.Range{Start: 0, End: 8}}
	e := keysOf(hdr, 2) // two entries, sorted
	block := func(n int, body []byte) []byte {
		f := appendUvarints(nil, uint64(n), uint64(len(body)))
		f = append(f, body...)
		return appendCRC(f, f)
	}
	entry := func(x rawEntry) []byte {
		b := appendUvarints(nil, uint64(x.Group))
		b = appendString(b, x.Key)
		return appendString(b, x.Value)
	}
	trailer := func(n, size uint64) []byte {
		t := appendUvarints([]byte{0}, n, size)
		return appendCRC(t, t)
	}
	head := encodeData(t, hdr, 1, nil)
	head = head[:len(head)-len(trailer(0, 0))]
	size := func(xs ...rawEntry) uint64 {
		n := 0
		for _, x := range xs {
			n += len(x.Key) + len(x.Value)
		}
		return uint64(n)
	}
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	tests := []struct {
		name string
		file []byte
		want string
	}{
		{"valid", cat(head, block(2, cat(entry(e[0]), entry(e[1]))), trailer(2, size(e...))), ""},
		{"not a data file", []byte("{\"format\": \"eoflow\"}"), "does not start with the savepoint data magic"},
		{"empty", nil, "truncated at byte 0, inside the header"},
		{"unsorted", cat(head, block(2, cat(entry(e[1]), entry(e[0]))), trailer(2, size(e...))), "is not after key"},
		{"repeated", cat(head, block(2, cat(entry(e[0]), entry(e[0]))), trailer(2, 2*size(e[0]))), "is not after key"},
		{"wrong key group", cat(head, block(1, entry(rawEntry{Group: (e[0].Group + 1) % 8, Key: e[0].Key})), trailer(1, uint64(len(e[0].Key)))), "belongs to group"},
		{"key group outside the range", cat(head, block(1, entry(rawEntry{Group: 9, Key: "x"})), trailer(1, 1)), "outside the file's range"},
		{"block shorter than its entries", cat(head, block(2, entry(e[0])), trailer(2, size(e...))), "does not fit the block"},
		{"bytes left in a block", cat(head, block(1, cat(entry(e[0]), []byte{0, 0, 0})), trailer(1, size(e[0]))), "3 bytes left in the block"},
		{"too many entries for the length", cat(head, block(9, []byte{0, 0, 0}), trailer(0, 0)), "cannot hold 9 entries"},
		{"trailer disagrees", cat(head, block(1, entry(e[0])), trailer(2, size(e[0]))), "trailer says 2 entries"},
		{"block length beyond the limit", cat(head, appendUvarints(nil, 1, maxBlockLen+1)), "exceeds"},
		{"block length beyond the file", cat(head, appendUvarints(nil, 1, 1<<20), []byte("short")), "truncated"},
		{"varint not minimal", cat(head, []byte{0x81, 0x00}), "not minimally encoded"},
		{"varint overflow", cat(head, bytes.Repeat([]byte{0xff}, 10), []byte{1}), "overflows 64 bits"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, _, err := decodeData(tc.file)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v\nwant ErrCorrupt containing %q", err, tc.want)
			}
		})
	}
}

func appendUvarints(b []byte, xs ...uint64) []byte {
	for _, x := range xs {
		b = appendUvarint(b, x)
	}
	return b
}

// FuzzReadEntries feeds the data-file decoder arbitrary bytes. It must
// never panic; every error must wrap ErrCorrupt or ErrUnknownVersion; and
// whatever it accepts must be canonical: re-encoding the entries with the
// same block boundaries gives back the input byte for byte.
//
//	go test ./checkpoint/savepoint -run '^$' -fuzz FuzzReadEntries -fuzztime 30s -fuzzminimizetime 2s
func FuzzReadEntries(f *testing.F) {
	hdr := dataHeader{Operator: "sums", KeyGroups: 8, Range: state.Range{Start: 2, End: 7}}
	f.Add(encodeData(f, hdr, defaultBlockSize, nil))
	f.Add(encodeData(f, hdr, defaultBlockSize, keysOf(hdr, 3)))
	f.Add(encodeData(f, hdr, 16, keysOf(hdr, 9)))
	f.Add(encodeData(f, dataHeader{Operator: "ü", KeyGroups: 1, Range: state.Range{Start: 0, End: 1}}, 1, []rawEntry{{Key: ""}, {Key: "a", Value: "b"}}))
	f.Add([]byte{})
	f.Add(dataMagic[:])
	f.Fuzz(func(t *testing.T, data []byte) {
		gotHdr, entries, blocks, err := decodeData(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnknownVersion) {
				t.Fatalf("error wraps neither ErrCorrupt nor ErrUnknownVersion: %v", err)
			}
			return
		}
		var b bytes.Buffer
		e, err := newDataEncoder(&b, gotHdr, maxBlockLen)
		if err != nil {
			t.Fatalf("decoded header %+v does not encode: %v", gotHdr, err)
		}
		i := 0
		for _, n := range blocks {
			for _, x := range entries[i : i+n] {
				if err := e.add(x.Group, []byte(x.Key), []byte(x.Value)); err != nil {
					t.Fatalf("decoded entry does not encode: %v", err)
				}
			}
			i += n
			if err := e.flush(); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.finish(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b.Bytes(), data) {
			t.Fatalf("accepted a non-canonical file\n  in: %x\n out: %x", data, b.Bytes())
		}
	})
}

func appendUvarint(b []byte, x uint64) []byte { return binary.AppendUvarint(b, x) }

// appendCRC appends the CRC-32C of over to b.
func appendCRC(b, over []byte) []byte {
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(over, castagnoli))
}
