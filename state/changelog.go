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
type ChangelogKey struct {
	Operator string
	Group    KeyGroup
	Key      []byte
}

// ChangelogRecord is one record of the state topic: Key is an encoded
// ChangelogKey, Value is the encoded value or nil for a tombstone (send it
// as a Kafka null value, which franz-go does for a nil slice).
type ChangelogRecord struct {
	Key   []byte
	Value []byte
}

// Append appends the encoding of k to dst.
func (k ChangelogKey) Append(dst []byte) []byte {
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

// DecodeChangelogKey parses a changelog record key. The returned Key
// aliases b. It never panics: a short or malformed key is ErrCorrupt and a
// key of another format version is ErrUnknownFormat.
func DecodeChangelogKey(b []byte) (ChangelogKey, error) {
	op, kg, key, err := parseChangelogKey(b)
	if err != nil {
		return ChangelogKey{}, err
	}
	return ChangelogKey{Operator: string(op), Group: kg, Key: key}, nil
}

// parseChangelogKey is DecodeChangelogKey without allocating: all three
// parts alias b.
func parseChangelogKey(b []byte) (operator []byte, kg KeyGroup, key []byte, err error) {
	if len(b) == 0 {
		return nil, 0, nil, fmt.Errorf("%w: empty", ErrCorrupt)
	}
	if b[0] != ChangelogVersion {
		return nil, 0, nil, fmt.Errorf("%w %d (this build reads version %d)", ErrUnknownFormat, b[0], ChangelogVersion)
	}
	r := wire.NewReaderAt(b[1:], 1)
	operator = r.Bytes("operator id")
	kg = KeyGroup(r.Uint16BE("key group"))
	key = r.Rest()
	if err := r.Err(); err != nil {
		// A non-minimal length would give one (operator, key) two record
		// keys: the reader refuses it with the rest.
		return nil, 0, nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return operator, kg, key, nil
}

// Records turns d into state-topic records, in d's order, with all keys in
// one new buffer (or the store's, if it built them with d). Values are d's
// own (nil for tombstones).
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
