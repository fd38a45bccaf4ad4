package state

import (
	"encoding/binary"
	"math"
)

// Values larger than a record.
//
// Kafka refuses a record larger than its topic's max.message.bytes, and a
// refused changelog record fails its checkpoint at every retry: one key
// whose state outgrew the state topic's limit (a window operator's key
// with tens of thousands of open windows, a `last` of a large input)
// stalled the job for ever. A store given the limit (SetRecordLimit)
// therefore writes such a value in pieces, each under a key of its own
// (ChangelogKey with Pieces set), all in the checkpoint's transaction:
//
//  1. A value that fits is one record, as always: a job whose values all
//     fit writes exactly what it wrote before, and reads every state
//     topic written before.
//  2. A value that does not fit is n >= 2 records, pieces 0..n-1 of n,
//     each at most the limit; the first time a key is written so, a
//     tombstone of its whole-value record goes with them.
//  3. A key written in n pieces and then written whole, in m != n pieces,
//     or deleted gets a tombstone for each of its n old piece keys in the
//     same transaction, so compaction removes them.
//
// After every committed checkpoint, each key thus has in the topic either
// a whole value or one complete set of pieces, never both: what the topic
// means is its final record per key, as compaction keeps it. A Restorer
// collects the pieces and joins them in Finish, once it has read
// everything, so neither their order nor compaction matters.
//
// A store remembers only the keys it holds in pieces, with their count
// (a flag on the key, and a map of those few keys); a Restorer rebuilds
// that. Writing a value that fits costs one comparison of its size with
// the limit.
//
// Why pieces of a value and not one record per (key, window): a window
// operator's open windows are one value per key, so its state, not the
// format, is what grows; storing each window under its own key would
// bound a record by one window, but changes the key format of every
// window job (a migration through a savepoint, see ChangelogVersion), and
// would still leave a running aggregate's `first` or `last` of a large
// input, or a long key, without a bound. Pieces hold any value, change
// nothing for the values that fit, and keep every existing state topic
// readable as it is.

// pieceKeyExtra bounds what a piece's key adds to its value's record
// key: the count and the index, two uvarints of at most 5 bytes each
// (maxPieces < 1<<35).
const pieceKeyExtra = 2 * 5

// splitter writes one store's values into records of at most limit bytes
// of key and value, and remembers the keys it wrote in pieces.
type splitter struct {
	// limit is the most bytes of key and value a record holds;
	// math.MaxInt: no limit.
	limit int
	// head is the length of a record key before the store's key: the
	// changelog prefix of the operator and the key group.
	head int
	// counts holds, by record key, the number of pieces of the keys the
	// changelog holds in pieces (and only of those).
	counts map[string]int
}

func newSplitter(operator string) splitter {
	return splitter{limit: math.MaxInt, head: len(appendChangelogPrefix(nil, operator)) + 2}
}

func (p *splitter) setLimit(n int) {
	if n <= 0 {
		n = math.MaxInt
	}
	p.limit = n
}

// room is what each piece of a value whose record key is keyLen bytes
// holds of it.
func (p *splitter) room(keyLen int) int { return p.limit - keyLen - pieceKeyExtra }

// splits reports whether a value of valueLen bytes (not a tombstone)
// under a record key of keyLen bytes is written in pieces: it does not
// fit one record, and every piece keeps at least half a record for the
// value. A key too long for that is written whole, for the sink to refuse
// with a message that names it: a key that long is itself the problem.
func (p *splitter) splits(keyLen, valueLen int) bool {
	return keyLen+valueLen > p.limit && p.room(keyLen) >= p.limit/2
}

// write appends to dst the records that write rec, a whole value or a
// tombstone of one key of the store: rec itself, or its pieces (rule 2),
// and the tombstones of pieces written before (rule 3). inPieces says
// whether the changelog holds the key in pieces so far; the result,
// whether it does after dst.
func (p *splitter) write(dst []ChangelogRecord, rec ChangelogRecord, inPieces bool) ([]ChangelogRecord, bool) {
	old := 0
	if inPieces {
		old = p.counts[string(rec.Key)]
	}
	n := 0
	if rec.Value != nil && p.splits(len(rec.Key), len(rec.Value)) {
		room := p.room(len(rec.Key))
		n = (len(rec.Value) + room - 1) / room
		if old == 0 {
			// The changelog may hold a whole value of the key.
			dst = append(dst, ChangelogRecord{Key: rec.Key})
		}
		keys := make([]byte, 0, n*(len(rec.Key)+pieceKeyExtra))
		for i := range n {
			k := len(keys)
			keys = p.appendPieceKey(keys, rec.Key, n, i)
			v := rec.Value[i*room : min((i+1)*room, len(rec.Value))]
			dst = append(dst, ChangelogRecord{Key: keys[k:len(keys):len(keys)], Value: v[:len(v):len(v)]})
		}
	} else {
		dst = append(dst, rec)
	}
	if old != 0 && old != n {
		keys := make([]byte, 0, old*(len(rec.Key)+pieceKeyExtra))
		for i := range old {
			k := len(keys)
			keys = p.appendPieceKey(keys, rec.Key, old, i)
			dst = append(dst, ChangelogRecord{Key: keys[k:len(keys):len(keys)]})
		}
	}
	switch {
	case n > 0 && n != old:
		if p.counts == nil {
			p.counts = make(map[string]int)
		}
		p.counts[string(rec.Key)] = n
	case n == 0 && old != 0:
		delete(p.counts, string(rec.Key))
	}
	return dst, n > 0
}

// rewrite replaces the records of recs at the indices of at (ascending)
// by what write makes of them; recs is not changed.
func (p *splitter) rewrite(recs []ChangelogRecord, at []attention) []ChangelogRecord {
	out := make([]ChangelogRecord, 0, len(recs)+len(at))
	next := 0
	for _, a := range at {
		out = append(out, recs[next:a.index]...)
		out, _ = p.write(out, recs[a.index], a.inPieces)
		next = a.index + 1
	}
	return append(out, recs[next:]...)
}

// attention is a record of a snapshot that write must see: its value does
// not fit a record, or its key was in pieces.
type attention struct {
	index    int
	inPieces bool
}

// appendPieceKey appends the key of piece i of n of the value whose
// record key is base (see ChangelogKey).
func (p *splitter) appendPieceKey(dst, base []byte, n, i int) []byte {
	dst = append(dst, pieceTag)
	dst = append(dst, base[1:p.head]...)
	dst = binary.AppendUvarint(dst, uint64(n))
	dst = binary.AppendUvarint(dst, uint64(i))
	return append(dst, base[p.head:]...)
}

// restored notes that the restore gave key of kg a value that the
// changelog holds in n pieces.
func (p *splitter) restored(operator string, kg KeyGroup, key []byte, n int) {
	if p.counts == nil {
		p.counts = make(map[string]int)
	}
	p.counts[string(ChangelogKey{Operator: operator, Group: kg, Key: key}.Append(nil))] = n
}

// forget drops what the splitter knows of key of kg: the store let go of
// it (Retain), so its pieces are another store's to know of.
func (p *splitter) forget(operator string, kg KeyGroup, key []byte) {
	if len(p.counts) == 0 {
		return
	}
	delete(p.counts, string(ChangelogKey{Operator: operator, Group: kg, Key: key}.Append(nil)))
}
