package operator

import (
	"bytes"
	"cmp"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// A join as of event time holds each stream record until the table's
// event time (TableClock) has passed the record's: only then has the
// version it must meet surely been applied, whatever the order the stream
// and the table were read in. Hold is that buffer. Release hands out the
// records the table's event time has passed, in one order fixed by the
// records alone: event time, then join key, then source position (topic,
// partition, offset). So what a release emits depends on the held records
// and the table's event time, not on when each record arrived; the
// buffer is state, checkpointed (AppendHold, DecodeHold) and restored
// exactly.

// HeldRecord is one stream record a Hold keeps: its event time, its join
// key's text, its source position, and the record itself, as the runtime
// stores it (opaque here).
type HeldRecord struct {
	At        int64
	Key       string
	Topic     string
	Partition int32
	Offset    int64
	Record    []byte
}

// compareHeld orders held records as Release hands them out.
func compareHeld(a, b *HeldRecord) int {
	return cmp.Or(cmp.Compare(a.At, b.At), cmp.Compare(a.Key, b.Key), cmp.Compare(a.Topic, b.Topic),
		cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
}

// Hold is the stream records a join as of event time holds. The zero
// value is empty and ready.
type Hold struct{ h heldHeap }

// Add holds r.
func (h *Hold) Add(r HeldRecord) { heap.Push(&h.h, r) }

// Len is how many records h holds.
func (h *Hold) Len() int { return len(h.h) }

// Min is the least event time h holds (ok false: none): the versions a
// held record needs are those at or after the newest version at or before
// it, so a table's horizon may not pass it.
func (h *Hold) Min() (at int64, ok bool) {
	if len(h.h) == 0 {
		return 0, false
	}
	return h.h[0].At, true
}

// Records returns a copy of the records h holds, in release order.
func (h *Hold) Records() []HeldRecord {
	recs := make([]HeldRecord, len(h.h))
	copy(recs, h.h)
	sortHeld(recs)
	return recs
}

// Release removes and returns, in order, every record before the table's
// event time wm. Strictly before: a table record at the held record's own
// event time may still come (and replace a version at that time, rule 2
// of VersionedTable), until the table's event time is past it.
func (h *Hold) Release(wm int64) []HeldRecord {
	var out []HeldRecord
	for len(h.h) > 0 && h.h[0].At < wm {
		out = append(out, heap.Pop(&h.h).(HeldRecord))
	}
	return out
}

type heldHeap []HeldRecord

func (h heldHeap) Len() int           { return len(h) }
func (h heldHeap) Less(i, j int) bool { return compareHeld(&h[i], &h[j]) < 0 }
func (h heldHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *heldHeap) Push(x any)        { *h = append(*h, x.(HeldRecord)) }
func (h *heldHeap) Pop() any {
	old := *h
	r := old[len(old)-1]
	old[len(old)-1] = HeldRecord{}
	*h = old[:len(old)-1]
	return r
}

// holdCodecVersion is the first byte of an encoded Hold.
const holdCodecVersion = 1

// AppendHold appends h's records to dst, in release order (so equal holds
// encode alike): a version byte, a count, then each record's fields.
func AppendHold(dst []byte, h *Hold) []byte {
	recs := make([]HeldRecord, len(h.h))
	copy(recs, h.h)
	sortHeld(recs)
	dst = append(dst, holdCodecVersion)
	dst = binary.AppendUvarint(dst, uint64(len(recs)))
	for _, r := range recs {
		dst = binary.AppendVarint(dst, r.At)
		dst = appendBytes(dst, []byte(r.Key))
		dst = appendBytes(dst, []byte(r.Topic))
		dst = binary.AppendVarint(dst, int64(r.Partition))
		dst = binary.AppendVarint(dst, r.Offset)
		dst = appendBytes(dst, r.Record)
	}
	return dst
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func sortHeld(recs []HeldRecord) {
	// Insertion into a fresh heap, popped in order: the heap's own order.
	var h heldHeap
	for _, r := range recs {
		heap.Push(&h, r)
	}
	for i := range recs {
		recs[i] = heap.Pop(&h).(HeldRecord)
	}
}

var errHoldState = errors.New("held join records: truncated or corrupt")

// DecodeHold decodes what AppendHold encoded.
func DecodeHold(src []byte) (*Hold, error) {
	r := bytes.NewReader(src)
	v, err := r.ReadByte()
	if err != nil {
		return nil, errHoldState
	}
	if v != holdCodecVersion {
		return nil, fmt.Errorf("held join records: version %d, this build reads %d", v, holdCodecVersion)
	}
	bytesOf := func() ([]byte, error) {
		n, err := binary.ReadUvarint(r)
		if err != nil || n > uint64(r.Len()) {
			return nil, errHoldState
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, errHoldState
		}
		return b, nil
	}
	n, err := binary.ReadUvarint(r)
	if err != nil || n > uint64(r.Len()) {
		return nil, errHoldState
	}
	h := &Hold{h: make(heldHeap, 0, n)}
	for range n {
		var hr HeldRecord
		var key, topic []byte
		var part int64
		if hr.At, err = binary.ReadVarint(r); err != nil {
			return nil, errHoldState
		}
		if key, err = bytesOf(); err != nil {
			return nil, err
		}
		if topic, err = bytesOf(); err != nil {
			return nil, err
		}
		if part, err = binary.ReadVarint(r); err != nil {
			return nil, errHoldState
		}
		if hr.Offset, err = binary.ReadVarint(r); err != nil {
			return nil, errHoldState
		}
		if hr.Record, err = bytesOf(); err != nil {
			return nil, err
		}
		hr.Key, hr.Topic, hr.Partition = string(key), string(topic), int32(part)
		h.Add(hr)
	}
	if r.Len() != 0 {
		return nil, errHoldState
	}
	return h, nil
}
