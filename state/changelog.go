package state

import (
	"encoding/binary"
	"fmt"

	"github.com/eoflow/pipeline/internal/wire"
)

// ChangelogVersion is the changelog key format this build writes. Decoding
// accepts exactly this version and reports ErrUnknownFormat otherwise.
//
// Changing the format is a migration, not an upgrade: compaction keeps the
// latest record per exact key bytes, so a key written in two formats would
// survive in both, and once the newer tombstone is compacted away the
// older value would come back. A new version must therefore come with a
// rewrite of the state topic (for example through a savepoint into a fresh
// job).
const ChangelogVersion = 1

// ChangelogKey is the identity of one keyed value in the job's compacted
// state topic (<job>-state). Encoded with Append, version 1 is:
//
//	byte     1                        format version
//	uvarint  len(Operator)            minimal encoding
//	bytes    Operator
//	uint16   Group                    big-endian
//	bytes    Key                      to the end of the record key
//
// The encoding is injective and canonical (one byte string per key, and
// Decode rejects any other), which is what compaction needs to keep
// exactly the latest value per (operator, key). The group is redundant
// (it is a function of the key) but lets a restore skip the records of
// other workers without hashing, and lets it detect a changed key-group
// count. Keys of one operator and group sort together, bytewise.
//
// A value too large for one record is written in pieces (see pieces.go),
// each under a key of its own:
//
//	byte     0x81                     piece of a version-1 key
//	uvarint  len(Operator), bytes Operator, uint16 Group   as in version 1
//	uvarint  Pieces                   >= 2, minimal encoding
//	uvarint  Piece                    < Pieces, minimal encoding
//	bytes    Key                      to the end of the record key
//
// The first byte keeps the two forms apart (a build that knows only
// version 1 refuses a piece as ErrUnknownFormat instead of taking it for a
// value), and the count in the key makes a value written in n pieces a
// set of keys of its own: a later write in m != n pieces cannot be mixed
// up with it, and a restore can tell a complete set from a damaged one.
type ChangelogKey struct {
	Operator string
	Group    KeyGroup
	Key      []byte
	// Pieces is 0 for the record of a whole value (or its tombstone);
	// otherwise the record holds piece Piece, from 0, of a value written
	// in Pieces pieces.
	Pieces, Piece int
}

// pieceTag starts the key of a piece of a value (see ChangelogKey).
const pieceTag = 0x80 | ChangelogVersion

// maxPieces bounds the pieces of one value that a key may name: far more
// than a value of the sizes a key may hold (see pieces.go) needs, and
// small enough that the count always fits an int.
const maxPieces = 1<<31 - 1

// IsPiece reports whether a changelog record key is a piece's (see
// ChangelogKey), from its first byte alone.
func IsPiece(key []byte) bool { return len(key) > 0 && key[0] == pieceTag }

// piece is a record's place in a value written in pieces; count 0 for a
// record of a whole value.
type piece struct{ count, index int }

// ChangelogRecord is one record of the state topic: Key is an encoded
// ChangelogKey, Value is the encoded value or nil for a tombstone (send it
// as a Kafka null value, which franz-go does for a nil slice).
type ChangelogRecord struct {
	Key   []byte
	Value []byte
}

// Append appends the encoding of k to dst. k.Pieces must be 0, or at
// least 2 with k.Piece below it.
func (k ChangelogKey) Append(dst []byte) []byte {
	if k.Pieces != 0 {
		if k.Pieces < 2 || k.Pieces > maxPieces || k.Piece < 0 || k.Piece >= k.Pieces {
			panic(fmt.Sprintf("state: piece %d of %d is not a piece of a value", k.Piece, k.Pieces))
		}
		start := len(dst)
		dst = appendChangelogPrefix(dst, k.Operator)
		dst[start] = pieceTag
		dst = binary.BigEndian.AppendUint16(dst, uint16(k.Group))
		dst = binary.AppendUvarint(dst, uint64(k.Pieces))
		dst = binary.AppendUvarint(dst, uint64(k.Piece))
		return append(dst, k.Key...)
	}
	dst = appendChangelogPrefix(dst, k.Operator)
	dst = binary.BigEndian.AppendUint16(dst, uint16(k.Group))
	return append(dst, k.Key...)
}

// appendChangelogPrefix appends what every key of one operator starts with.
func appendChangelogPrefix(dst []byte, operator string) []byte {
	dst = append(dst, ChangelogVersion)
	dst = binary.AppendUvarint(dst, uint64(len(operator)))
	return append(dst, operator...)
}

// DecodeChangelogKey parses a changelog record key: a whole value's or a
// piece's. The returned Key aliases b. It never panics: a short or
// malformed key is ErrCorrupt and a key of another format version is
// ErrUnknownFormat.
func DecodeChangelogKey(b []byte) (ChangelogKey, error) {
	op, kg, key, pc, err := parseChangelogKey(b)
	if err != nil {
		return ChangelogKey{}, err
	}
	return ChangelogKey{Operator: string(op), Group: kg, Key: key, Pieces: pc.count, Piece: pc.index}, nil
}

// parseChangelogKey is DecodeChangelogKey without allocating: operator
// and key alias b.
func parseChangelogKey(b []byte) (operator []byte, kg KeyGroup, key []byte, pc piece, err error) {
	if len(b) == 0 {
		return nil, 0, nil, piece{}, fmt.Errorf("%w: empty", ErrCorrupt)
	}
	if b[0] != ChangelogVersion && b[0] != pieceTag {
		return nil, 0, nil, piece{}, fmt.Errorf("%w %d (this build reads version %d)", ErrUnknownFormat, b[0], ChangelogVersion)
	}
	r := wire.NewReaderAt(b[1:], 1)
	operator = r.Bytes("operator id")
	kg = KeyGroup(r.Uint16BE("key group"))
	if b[0] == pieceTag {
		// Minimal varints (the reader's rule), a count of at least 2
		// and an index below it: one record key per piece.
		count := r.Uvarint("piece count")
		if r.Err() == nil && (count < 2 || count > maxPieces) {
			r.Fail("piece count", fmt.Sprintf("%d pieces: a value in pieces has 2 to %d", count, maxPieces))
		}
		index := r.Uvarint("piece index")
		if r.Err() == nil && index >= count {
			r.Fail("piece index", fmt.Sprintf("piece %d of %d", index, count))
		}
		pc = piece{count: int(count), index: int(index)}
	}
	key = r.Rest()
	if err := r.Err(); err != nil {
		// A non-minimal length would give one (operator, key) two record
		// keys: the reader refuses it with the rest.
		return nil, 0, nil, piece{}, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return operator, kg, key, pc, nil
}

// Records turns d into state-topic records, in d's order, with all keys in
// one new buffer (or the store's, if it built them with d). Values are d's
// own (nil for tombstones). An entry whose value the store wrote in
// pieces (see pieces.go) is its pieces and the tombstones that go with
// them; every other entry is one record.
func (d Delta) Records() []ChangelogRecord {
	if d.records != nil {
		return d.records
	}
	prefix := appendChangelogPrefix(nil, d.Operator)
	size := 0
	for _, e := range d.Entries {
		size += len(prefix) + 2 + len(e.Key)
	}
	buf := make([]byte, 0, size)
	recs := make([]ChangelogRecord, len(d.Entries))
	for i, e := range d.Entries {
		k := len(buf)
		buf = append(buf, prefix...)
		buf = binary.BigEndian.AppendUint16(buf, uint16(e.Group))
		buf = append(buf, e.Key...)
		recs[i] = ChangelogRecord{Key: buf[k:len(buf):len(buf)], Value: e.Value}
	}
	return recs
}

// Record turns one entry of operator into a state-topic record (for
// exports from All). The key is new; the value is e's.
func (e Entry) Record(operator string) ChangelogRecord {
	return ChangelogRecord{
		Key:   ChangelogKey{Operator: operator, Group: e.Group, Key: e.Key}.Append(nil),
		Value: e.Value,
	}
}
