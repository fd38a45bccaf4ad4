package kstore

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
)

// Checkpoint records larger than a record.
//
// A checkpoint record grows with the job's input partitions: an offset
// and, with event time, a largest event time per partition, some 10 to
// 25 bytes each (the operators' descriptions are a few hundred bytes).
// At the brokers' default max.message.bytes (1 MiB) that is about 50,000
// partitions; a checkpoint topic or a broker with a smaller limit is
// reached sooner, and partitions may be added while the job runs, so a
// check at start could not cover it. A record too large for one Kafka
// record of the checkpoint topic is therefore written in pieces, like
// keyed state (state/pieces.go), in the checkpoint's transaction:
//
//  1. n >= 2 pieces, in order: key "#piece/<i>/<record key>", value the
//     bytes [i*room, (i+1)*room) of the encoded record;
//  2. then the head: the record's own key, value a checkpoint.Pieces
//     (the checkpoint's id, n and the encoded length).
//
// A record that fits is written as before, one record, byte for byte.
// Piece keys start with '#', which neither a job name nor an instance id
// may hold, so no reader that picks records by their key's prefix (a
// member's "<job>/", a pause's "<job>#pause") takes a piece for anything
// else.
//
// Newest joins a head from the latest piece values read before it: the
// checkpoint topic has one partition, and a piece of head N is only
// overwritten by a later checkpoint, whose head comes later still. Pieces
// of a head that is not the newest may have been compacted away: only
// the newest head must join (Newest.Err). Stale pieces are not deleted:
// piece keys are reused by every record in pieces, so what stays is at
// most one record's worth beyond the newest.

// piecePrefix starts the key of every piece of a checkpoint record.
const piecePrefix = "#piece/"

// ErrRecordTooLarge: a checkpoint record cannot be written even in
// pieces, because the checkpoint topic's limit leaves no room beside a
// piece's key.
var ErrRecordTooLarge = errors.New("checkpoint record too large for the checkpoint topic")

// pieceKey is the key of piece i of the record keyed key.
func pieceKey(key string, i int) string {
	return piecePrefix + strconv.Itoa(i) + "/" + key
}

// parsePieceKey returns the record key and the index of a piece's key.
func parsePieceKey(k []byte) (key string, i int, ok bool) {
	rest, found := strings.CutPrefix(string(k), piecePrefix)
	if !found {
		return "", 0, false
	}
	index, key, found := strings.Cut(rest, "/")
	if !found {
		return "", 0, false
	}
	i, err := strconv.Atoi(index)
	if err != nil || i < 0 || strconv.Itoa(i) != index {
		return "", 0, false
	}
	return key, i, true
}

// CheckpointRecords builds the Kafka records that make checkpoint rec
// durable under key (the job's name, or a group member's key), in the
// order the transaction that commits it must get them: one record, or,
// when the record's key and value would hold more than limit bytes, its
// pieces and then its head (limit <= 0: no limit; see sink.Limits.Payload).
func CheckpointRecords(rec *checkpoint.Record, key string, limit int) ([]*kgo.Record, error) {
	value, err := checkpoint.EncodeRecord(rec)
	if err != nil {
		return nil, err
	}
	topic := checkpoint.TopicName(rec.Job)
	if limit <= 0 || len(key)+len(value) <= limit {
		return []*kgo.Record{{Topic: topic, Key: []byte(key), Value: value}}, nil
	}
	// Every piece keeps at least half a record for the value; the
	// longest piece key has an index of at most 10 digits.
	room := limit - len(pieceKey(key, 1<<31))
	if room < limit/2 {
		return nil, fmt.Errorf("%w: checkpoint %d is %d bytes, and a limit of %d bytes leaves too little room beside the key %q to write it in pieces",
			ErrRecordTooLarge, rec.ID, len(value), limit, key)
	}
	n := (len(value) + room - 1) / room
	out := make([]*kgo.Record, 0, n+1)
	for i := range n {
		part := value[i*room : min((i+1)*room, len(value))]
		out = append(out, &kgo.Record{Topic: topic, Key: []byte(pieceKey(key, i)), Value: part[:len(part):len(part)]})
	}
	head := checkpoint.AppendPieces(nil, checkpoint.Pieces{ID: rec.ID, Count: n, Length: len(value)})
	return append(out, &kgo.Record{Topic: topic, Key: []byte(key), Value: head}), nil
}

// join rebuilds the record of head p from pieces, the latest piece
// values of its key.
func join(p checkpoint.Pieces, pieces map[int][]byte) (*checkpoint.Record, error) {
	value := make([]byte, 0, p.Length)
	for i := range p.Count {
		part, ok := pieces[i]
		if !ok || len(value)+len(part) > p.Length {
			return nil, fmt.Errorf("%w: checkpoint %d is in %d pieces of %d bytes, and piece %d is missing or too long",
				checkpoint.ErrCorruptRecord, p.ID, p.Count, p.Length, i)
		}
		value = append(value, part...)
	}
	if len(value) != p.Length {
		return nil, fmt.Errorf("%w: checkpoint %d: its %d pieces hold %d bytes, not %d", checkpoint.ErrCorruptRecord, p.ID, p.Count, len(value), p.Length)
	}
	rec, err := checkpoint.DecodeRecord(value)
	if err != nil {
		return nil, err
	}
	if rec.ID != p.ID {
		return nil, fmt.Errorf("%w: the pieces of checkpoint %d hold checkpoint %d", checkpoint.ErrCorruptRecord, p.ID, rec.ID)
	}
	return rec, nil
}
