package savepoint

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/eoflow/pipeline/internal/wire"
)

// Held records in a savepoint (format version 2). A job that joins a
// table as of event time holds stream records in its source tasks until
// the table's event time passes them (docs/joins.md): read already (the
// source offsets are past them), not yet joined, so state of every
// checkpoint (checkpoint.Record.Held) and of a savepoint. The manifest
// says how many each source partition holds ("held", keyed by topic and
// partition as the sources' offsets are, so --remap-topic renames them
// with their offsets); one file, HeldFile, holds the records:
//
//	8 bytes   magic 89 'P' 'S' 'H' 0d 0a 1a 0a
//	1 byte    held file format version (1)
//	uvarint   n, the number of records (>= 1)
//	n ×       string topic, uvarint partition, varint offset,
//	          varint event time (Unix ms), string order key,
//	          string record (the runtime's encoding, opaque here)
//	4 bytes   CRC-32C (Castagnoli) of every byte before it, big-endian
//
// where string = uvarint length + bytes. Records are sorted by topic,
// partition, offset, without duplicates, and varints are minimal, so one
// set of records has one encoding. The manifest holds the file's size and
// SHA-256, which Open and Reader.Held check.
//
// A savepoint without held records has no "held" and is version 1, byte
// for byte what it was before held records existed (as a checkpoint
// record without them keeps format v5); a build before version 2 refuses
// one with held records as written by a newer pipeline.

// HeldFile is the name of the held records' file in a savepoint
// directory.
const HeldFile = "held.records"

// heldMagic starts the held records' file (data files start with
// dataMagic: the fourth byte tells them apart).
var heldMagic = [8]byte{0x89, 'P', 'S', 'H', '\r', '\n', 0x1a, '\n'}

const (
	heldFileVersion = 1
	// minHeldFileSize is the magic, the version, a count of 1 and the
	// CRC, with one record of empty fields.
	minHeldFileSize = len(heldMagic) + 1 + 1 + 6 + 4
)

// HeldRecord is one stream record a join as of event time held at the
// savepoint's checkpoint: its source position, its event time, the key
// the runtime's hold orders it by, and the record as the runtime encodes
// it (operator.HeldRecord's fields).
type HeldRecord struct {
	Topic     string
	Partition int32
	Offset    int64
	At        int64
	Key       string
	Record    []byte
}

func compareHeldPosition(a, b HeldRecord) int {
	return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
}

// Held is the manifest's "held" (version 2 only): the held records' file
// and how many records each source partition holds.
type Held struct {
	File string `json:"file"` // HeldFile
	// Records is the number of records, Bytes the sum of their encoded
	// records' lengths.
	Records uint64 `json:"records"`
	Bytes   uint64 `json:"bytes"`
	Size    int64  `json:"size"`   // of the file, in bytes
	SHA256  string `json:"sha256"` // of the whole file, lowercase hex
	// Partitions are the partitions with held records, sorted by topic
	// then partition.
	Partitions []HeldPartition `json:"partitions"`
}

// HeldPartition is how many records one source partition holds.
type HeldPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Records   uint64 `json:"records"`
}

// SetHeld writes the records joins as of event time held at the
// savepoint's checkpoint into the savepoint (none: it stays version 1).
// Call it once, before Commit.
func (w *Writer) SetHeld(recs []HeldRecord) error {
	if len(recs) == 0 {
		return nil
	}
	recs = slices.Clone(recs)
	slices.SortFunc(recs, compareHeldPosition)
	h := &Held{File: HeldFile, Records: uint64(len(recs))}
	for i, r := range recs {
		if r.Topic == "" || r.Partition < 0 {
			return fmt.Errorf("%w: held record %s/%d@%d: no topic, or a negative partition", ErrInvalidEntry, r.Topic, r.Partition, r.Offset)
		}
		if i > 0 && compareHeldPosition(recs[i-1], r) == 0 {
			return fmt.Errorf("%w: held record %s/%d@%d twice", ErrInvalidEntry, r.Topic, r.Partition, r.Offset)
		}
		h.Bytes += uint64(len(r.Record))
		if n := len(h.Partitions); n > 0 && h.Partitions[n-1].Topic == r.Topic && h.Partitions[n-1].Partition == r.Partition {
			h.Partitions[n-1].Records++
			continue
		}
		h.Partitions = append(h.Partitions, HeldPartition{Topic: r.Topic, Partition: r.Partition, Records: 1})
	}
	b := encodeHeld(recs)
	h.Size = int64(len(b))
	sum := sha256.Sum256(b)
	h.SHA256 = hex.EncodeToString(sum[:])
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.mu.done:
		return fmt.Errorf("savepoint %s: already committed or aborted", w.dir)
	case w.mu.held != nil:
		return fmt.Errorf("savepoint %s: held records set twice", w.dir)
	}
	if err := writeSynced(filepath.Join(w.tmp, HeldFile), b); err != nil {
		return fmt.Errorf("savepoint %s: %w", w.dir, err)
	}
	w.mu.held = h
	return nil
}

// encodeHeld is the held file of recs, sorted by position.
func encodeHeld(recs []HeldRecord) []byte {
	b := append([]byte(nil), heldMagic[:]...)
	b = append(b, heldFileVersion)
	b = binary.AppendUvarint(b, uint64(len(recs)))
	str := func(s []byte) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	for _, r := range recs {
		str([]byte(r.Topic))
		b = binary.AppendUvarint(b, uint64(r.Partition))
		b = binary.AppendVarint(b, r.Offset)
		b = binary.AppendVarint(b, r.At)
		str([]byte(r.Key))
		str(r.Record)
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decodeHeld parses a held file (its SHA-256 already checked).
func decodeHeld(b []byte) ([]HeldRecord, error) {
	if len(b) < minHeldFileSize || !bytes.Equal(b[:len(heldMagic)], heldMagic[:]) {
		return nil, errors.New("does not start with the savepoint held-records magic")
	}
	if v := b[len(heldMagic)]; v != heldFileVersion {
		return nil, fmt.Errorf("%w %d, this build reads version %d", ErrUnknownVersion, v, heldFileVersion)
	}
	body, crc := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if got := crc32.Checksum(body, castagnoli); got != crc {
		return nil, fmt.Errorf("CRC-32C is %08x, the file says %08x (damaged)", got, crc)
	}
	r := wire.NewReaderAt(body[len(heldMagic)+1:], len(heldMagic)+1)
	n := r.Uvarint("count")
	if r.Err() == nil && (n == 0 || n > uint64(r.Len())) {
		return nil, fmt.Errorf("count %d: none, or more than the file can hold", n)
	}
	recs := make([]HeldRecord, 0, min(n, 1<<20))
	for i := uint64(0); i < n && r.Err() == nil; i++ {
		rec := HeldRecord{Topic: string(r.Bytes("topic"))}
		p := r.Uvarint("partition")
		rec.Offset = r.Varint("offset")
		rec.At = r.Varint("event time")
		rec.Key = string(r.Bytes("key"))
		rec.Record = bytes.Clone(r.Bytes("record"))
		if r.Err() != nil {
			break
		}
		if rec.Topic == "" || p > uint64(1<<31-1) {
			return nil, fmt.Errorf("record %d: empty topic, or partition %d out of range", i, p)
		}
		rec.Partition = int32(p)
		if k := len(recs); k > 0 && compareHeldPosition(recs[k-1], rec) >= 0 {
			return nil, fmt.Errorf("record %d %s/%d@%d: not after %s/%d@%d (sorted by position, no duplicates)",
				i, rec.Topic, rec.Partition, rec.Offset, recs[k-1].Topic, recs[k-1].Partition, recs[k-1].Offset)
		}
		recs = append(recs, rec)
	}
	r.End("end")
	if err := r.Err(); err != nil {
		return nil, err
	}
	return recs, nil
}

// Held reads the records joins as of event time held at the savepoint's
// checkpoint (none in a version 1 savepoint), sorted by source position,
// under the savepoint's topic names. It verifies the file: its size and
// SHA-256 against the manifest, its CRC-32C, its order, and the records
// of each partition against the manifest's counts.
func (r *Reader) Held() ([]HeldRecord, error) {
	h := r.m.Held
	if h == nil {
		return nil, nil
	}
	recs, err := r.readHeld(h)
	if err != nil {
		return nil, wrapErr(r.dir, err)
	}
	return recs, nil
}

func (r *Reader) readHeld(h *Held) ([]HeldRecord, error) {
	b, err := readLimited(filepath.Join(r.dir, h.File), h.Size)
	if errors.Is(err, os.ErrNotExist) {
		return nil, corruptf("held records file %s is missing", h.File)
	}
	if err != nil {
		return nil, err
	}
	if int64(len(b)) != h.Size {
		return nil, corruptf("held records file %s is %d bytes, the manifest says %d: truncated or damaged", h.File, len(b), h.Size)
	}
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != h.SHA256 {
		return nil, corruptf("held records file %s: SHA-256 is %x, the manifest says %s", h.File, sum, h.SHA256)
	}
	recs, err := decodeHeld(b)
	if errors.Is(err, ErrUnknownVersion) {
		return nil, fmt.Errorf("held records file %s: %w", h.File, err)
	}
	if err != nil {
		return nil, corruptf("held records file %s: %v", h.File, err)
	}
	var bytes uint64
	var parts []HeldPartition
	for _, rec := range recs {
		bytes += uint64(len(rec.Record))
		if n := len(parts); n > 0 && parts[n-1].Topic == rec.Topic && parts[n-1].Partition == rec.Partition {
			parts[n-1].Records++
			continue
		}
		parts = append(parts, HeldPartition{Topic: rec.Topic, Partition: rec.Partition, Records: 1})
	}
	if uint64(len(recs)) != h.Records || bytes != h.Bytes || !slices.Equal(parts, h.Partitions) {
		return nil, corruptf("held records file %s holds %d records of %d bytes in %d partitions; the manifest says %d records of %d bytes in %d partitions",
			h.File, len(recs), bytes, len(parts), h.Records, h.Bytes, len(h.Partitions))
	}
	return recs, nil
}

// HeldRecords are the held records a restore planned by plan gives back:
// those of the savepoint's topics whose offsets carry over
// (plan.Topics), under their topics' new names. The records of a topic
// whose offsets are dropped (AllowDroppedState) are dropped with them.
func (r *Reader) HeldRecords(plan *RestorePlan) ([]HeldRecord, error) {
	recs, err := r.Held()
	if err != nil || len(recs) == 0 {
		return nil, err
	}
	rename := map[string]string{}
	for _, t := range plan.Topics {
		rename[t.From] = t.To
	}
	out := recs[:0]
	for _, rec := range recs {
		to, ok := rename[rec.Topic]
		if !ok {
			continue
		}
		rec.Topic = to
		out = append(out, rec)
	}
	slices.SortFunc(out, compareHeldPosition)
	return out, nil
}

// validateHeld checks the manifest's held records: a version 2 manifest
// has them, a version 1 manifest has none; the file is named HeldFile;
// each partition is one the savepoint has an offset for, at most once, in
// order, with at least one record; the counts add up.
func validateHeld(version int, h *Held, offsets []Offset) []error {
	switch {
	case version == 1 && h == nil:
		return nil
	case version == 1:
		return []error{errors.New("held: held records are version 2 (a version 1 savepoint has none)")}
	case h == nil:
		return []error{errors.New("held: missing (version 2 is the format of a savepoint with held records; one without is version 1)")}
	}
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if h.File != HeldFile {
		fail("held.file %q: want %q", h.File, HeldFile)
	}
	if h.Size < int64(minHeldFileSize) {
		fail("held.size %d is smaller than a held records file of one record", h.Size)
	}
	if b, err := hex.DecodeString(h.SHA256); err != nil || len(b) != sha256.Size || strings.ToLower(h.SHA256) != h.SHA256 {
		fail("held.sha256 %q is not 64 lowercase hex digits", h.SHA256)
	}
	if len(h.Partitions) == 0 {
		fail("held.partitions: none (a savepoint with held records names their partitions)")
	}
	read := map[Offset]bool{}
	for _, o := range offsets {
		read[Offset{Topic: o.Topic, Partition: o.Partition}] = true
	}
	var total uint64
	for i, p := range h.Partitions {
		at := fmt.Sprintf("held.partitions[%d] %s/%d", i, p.Topic, p.Partition)
		if i > 0 {
			prev := h.Partitions[i-1]
			if cmp.Or(cmp.Compare(prev.Topic, p.Topic), cmp.Compare(prev.Partition, p.Partition)) >= 0 {
				fail("%s: not after %s/%d (sorted by topic, then partition; once each)", at, prev.Topic, prev.Partition)
			}
		}
		if !read[Offset{Topic: p.Topic, Partition: p.Partition}] {
			fail("%s: a partition the savepoint has no offset of (held records are read already: their partition's offset is past them)", at)
		}
		if p.Records == 0 {
			fail("%s: no records (only partitions with held records are listed)", at)
		}
		total += p.Records
	}
	if total != h.Records {
		fail("held: %d records, but its partitions add up to %d", h.Records, total)
	}
	return errs
}
