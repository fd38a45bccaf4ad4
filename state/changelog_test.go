package state

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

// goldenKeys are encoded into testdata/changelog_key_v1.golden. Add cases
// freely; never change the bytes of an existing line: records in existing
// state topics were written with them.
var goldenKeys = []ChangelogKey{
	{Operator: "aggregate-3", Group: 71, Key: []byte("hello")},
	{Operator: "aggregate-3", Group: 0, Key: []byte{}},
	{Operator: "aggregate-3", Group: 32767, Key: []byte("user-42")},
	{Operator: "window-1", Group: 258, Key: []byte{0x00, 0xff, 0x01}},
	{Operator: "sum-€", Group: 5, Key: []byte("ключ")},
	{Operator: "o", Group: 1, Key: []byte("k")},
	{Operator: strings.Repeat("x", 127), Group: 2, Key: []byte("one length byte")},
	{Operator: strings.Repeat("y", 128), Group: 3, Key: []byte("two length bytes")},
	{Operator: "", Group: 0, Key: nil},
}

func TestChangelogKeyGolden(t *testing.T) {
	path := filepath.Join("testdata", "changelog_key_v1.golden")
	var b strings.Builder
	b.WriteString("# Changelog record keys, format version 1 (see ChangelogKey).\n")
	b.WriteString("# operator group key -> encoded, hex. Pinned: never change an existing line.\n")
	for _, k := range goldenKeys {
		fmt.Fprintf(&b, "%q %d %q -> %x\n", k.Operator, k.Group, k.Key, k.Append(nil))
	}
	if *update {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if b.String() != string(want) {
		t.Fatalf("encodings differ from %s (go test -update only for new cases):\n got:\n%s\nwant:\n%s", path, b.String(), want)
	}

	// And every pinned line decodes back to its parts.
	sc := bufio.NewScanner(bytes.NewReader(want))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		var op, key string
		var kg KeyGroup
		var enc []byte
		if _, err := fmt.Sscanf(line, "%q %d %q -> %x", &op, &kg, &key, &enc); err != nil {
			t.Fatalf("golden line %q: %v", line, err)
		}
		got, err := DecodeChangelogKey(enc)
		if err != nil || got.Operator != op || got.Group != kg || string(got.Key) != key || got.Pieces != 0 {
			t.Fatalf("golden line %q decodes to %+v, %v", line, got, err)
		}
	}
}

// goldenPieceKeys are encoded into testdata/changelog_piece_key.golden,
// pinned like goldenKeys: state topics hold them.
var goldenPieceKeys = []ChangelogKey{
	{Operator: "window-1", Group: 258, Key: []byte("user-42"), Pieces: 2, Piece: 0},
	{Operator: "window-1", Group: 258, Key: []byte("user-42"), Pieces: 2, Piece: 1},
	{Operator: "aggregate-3", Group: 0, Key: []byte{}, Pieces: 300, Piece: 127},
	{Operator: "aggregate-3", Group: 32767, Key: []byte{0x81, 0x00}, Pieces: 128, Piece: 128 - 1},
	{Operator: strings.Repeat("y", 128), Group: 3, Key: []byte("k"), Pieces: maxPieces, Piece: maxPieces - 1},
}

func TestChangelogPieceKeyGolden(t *testing.T) {
	path := filepath.Join("testdata", "changelog_piece_key.golden")
	var b strings.Builder
	b.WriteString("# Changelog record keys of pieces of a value (see ChangelogKey).\n")
	b.WriteString("# operator group key pieces piece -> encoded, hex. Pinned: never change an existing line.\n")
	for _, k := range goldenPieceKeys {
		fmt.Fprintf(&b, "%q %d %q %d %d -> %x\n", k.Operator, k.Group, k.Key, k.Pieces, k.Piece, k.Append(nil))
	}
	if *update {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if b.String() != string(want) {
		t.Fatalf("encodings differ from %s (go test -update only for new cases):\n got:\n%s\nwant:\n%s", path, b.String(), want)
	}
	sc := bufio.NewScanner(bytes.NewReader(want))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		var op, key string
		var kg KeyGroup
		var pieces, index int
		var enc []byte
		if _, err := fmt.Sscanf(line, "%q %d %q %d %d -> %x", &op, &kg, &key, &pieces, &index, &enc); err != nil {
			t.Fatalf("golden line %q: %v", line, err)
		}
		got, err := DecodeChangelogKey(enc)
		if err != nil || got.Operator != op || got.Group != kg || string(got.Key) != key || got.Pieces != pieces || got.Piece != index {
			t.Fatalf("golden line %q decodes to %+v, %v", line, got, err)
		}
	}
}

func TestDecodeChangelogKeyErrors(t *testing.T) {
	long := bytes.Repeat([]byte{0xff}, 10)
	tests := []struct {
		name string
		in   []byte
		want error
		msg  string
	}{
		{"empty", nil, ErrCorrupt, "empty"},
		{"version 0", []byte{0, 1, 'a', 0, 0}, ErrUnknownFormat, "version 0 (this build reads version 1)"},
		{"version 2", []byte{2, 1, 'a', 0, 0}, ErrUnknownFormat, "version 2"},
		{"no length", []byte{1}, ErrCorrupt, "byte 1: operator id: truncated"},
		{"length cut", []byte{1, 0x80}, ErrCorrupt, "byte 1: operator id: truncated"},
		{"length overflows", append(append([]byte{1}, long...), 1), ErrCorrupt, "byte 1: operator id: varint overflows 64 bits"},
		{"length not minimal", []byte{1, 0x81, 0x00, 'a', 0, 0}, ErrCorrupt, "byte 1: operator id: varint not minimally encoded"},
		{"operator cut", []byte{1, 5, 'a', 'b'}, ErrCorrupt, "byte 1: operator id: length 5 exceeds the 2 bytes left"},
		{"no key group", []byte{1, 1, 'a'}, ErrCorrupt, "byte 3: key group: truncated: 2 bytes needed, 0 left"},
		{"half a key group", []byte{1, 1, 'a', 0}, ErrCorrupt, "byte 3: key group: truncated: 2 bytes needed, 1 left"},
		{"piece of version 2", []byte{0x82, 1, 'a', 0, 0, 2, 0}, ErrUnknownFormat, "version 130"},
		{"no piece count", []byte{0x81, 1, 'a', 0, 0}, ErrCorrupt, "byte 5: piece count: truncated"},
		{"one piece", []byte{0x81, 1, 'a', 0, 0, 1, 0, 'k'}, ErrCorrupt, "byte 5: piece count: 1 pieces"},
		{"no pieces", []byte{0x81, 1, 'a', 0, 0, 0, 0, 'k'}, ErrCorrupt, "byte 5: piece count: 0 pieces"},
		{"too many pieces", []byte{0x81, 1, 'a', 0, 0, 0x80, 0x80, 0x80, 0x80, 0x08, 0, 'k'}, ErrCorrupt, "piece count: 2147483648 pieces"},
		{"count not minimal", []byte{0x81, 1, 'a', 0, 0, 0x82, 0x00, 0, 'k'}, ErrCorrupt, "piece count: varint not minimally encoded"},
		{"no piece index", []byte{0x81, 1, 'a', 0, 0, 2}, ErrCorrupt, "byte 6: piece index: truncated"},
		{"index past count", []byte{0x81, 1, 'a', 0, 0, 2, 2, 'k'}, ErrCorrupt, "byte 6: piece index: piece 2 of 2"},
		{"index not minimal", []byte{0x81, 1, 'a', 0, 0, 3, 0x81, 0x00, 'k'}, ErrCorrupt, "piece index: varint not minimally encoded"},
	}
	for _, tt := range tests {
		_, err := DecodeChangelogKey(tt.in)
		if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%s: err %v, want %v containing %q", tt.name, err, tt.want, tt.msg)
		}
	}
}

func TestDeltaRecords(t *testing.T) {
	s := newTestStore(t, "agg", 4)
	s.Put([]byte("a"), []byte("1"))
	s.Put([]byte("b"), []byte("2"))
	s.Snapshot()
	s.Put([]byte("a"), []byte(""))
	s.Delete([]byte("b"))
	d := s.Snapshot()
	recs := d.Records()
	if len(recs) != len(d.Entries) {
		t.Fatalf("%d records for %d entries", len(recs), len(d.Entries))
	}
	for i, rec := range recs {
		e := d.Entries[i]
		k, err := DecodeChangelogKey(rec.Key)
		if err != nil || k.Operator != "agg" || k.Group != e.Group || !bytes.Equal(k.Key, e.Key) {
			t.Fatalf("record %d key decodes to %+v, %v; entry %+v", i, k, err, e)
		}
		if !bytes.Equal(rec.Key, e.Record("agg").Key) {
			t.Fatalf("record %d: Records and Entry.Record disagree", i)
		}
		switch string(e.Key) {
		case "a":
			if rec.Value == nil || len(rec.Value) != 0 {
				t.Fatalf("empty value became %v", rec.Value)
			}
		case "b":
			if rec.Value != nil {
				t.Fatalf("tombstone has value %v", rec.Value)
			}
		}
	}
}

func FuzzDecodeChangelogKey(f *testing.F) {
	for _, k := range goldenKeys {
		f.Add(k.Append(nil))
	}
	f.Add([]byte{})
	f.Add([]byte{1})
	f.Add([]byte{1, 0x80, 0x00, 0, 0})
	f.Add([]byte{2, 0, 0, 0})
	f.Add(append([]byte{1}, bytes.Repeat([]byte{0xff}, 11)...))
	for _, k := range goldenPieceKeys {
		f.Add(k.Append(nil))
	}
	f.Add([]byte{0x81, 1, 'a', 0, 0, 1, 0})
	f.Add([]byte{0x81, 1, 'a', 0, 0, 2, 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := DecodeChangelogKey(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnknownFormat) {
				t.Fatalf("error %v is neither ErrCorrupt nor ErrUnknownFormat", err)
			}
			return
		}
		// Canonical: the only encoding of these parts is the input.
		if again := k.Append(nil); !bytes.Equal(again, b) {
			t.Fatalf("decoded %+v re-encodes to %x, input %x", k, again, b)
		}
	})
}

func FuzzChangelogKeyRoundTrip(f *testing.F) {
	for _, k := range goldenKeys {
		f.Add(k.Operator, uint16(k.Group), k.Key, uint32(0), uint32(0))
	}
	for _, k := range goldenPieceKeys {
		f.Add(k.Operator, uint16(k.Group), k.Key, uint32(k.Pieces), uint32(k.Piece))
	}
	f.Fuzz(func(t *testing.T, op string, kg uint16, key []byte, pieces, index uint32) {
		in := ChangelogKey{Operator: op, Group: KeyGroup(kg), Key: key}
		if pieces != 0 {
			// Any valid piece: a count from 2 to maxPieces, an index
			// below it.
			in.Pieces = 2 + int(pieces%(maxPieces-1))
			in.Piece = int(index) % in.Pieces
		}
		b := in.Append([]byte("prefix"))[len("prefix"):]
		out, err := DecodeChangelogKey(b)
		if err != nil {
			t.Fatalf("decode of %+v: %v", in, err)
		}
		if out.Operator != op || out.Group != in.Group || !bytes.Equal(out.Key, key) || out.Pieces != in.Pieces || out.Piece != in.Piece {
			t.Fatalf("round trip %+v -> %+v", in, out)
		}
		// A piece's key is never a whole value's, whatever the parts.
		whole := ChangelogKey{Operator: op, Group: in.Group, Key: key}.Append(nil)
		if in.Pieces != 0 && bytes.Equal(whole, b) {
			t.Fatalf("piece %+v has its value's key %x", in, b)
		}
	})
}
