package savepoint

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"

	"github.com/eoflow/pipeline/internal/wire"
	"github.com/eoflow/pipeline/state"
)

// A data file holds one aggregate's entries of one key-group range, in
// key-group then key order, as blocks of entries each with its own
// CRC-32C, between a header and a trailer that are checksummed too. Format
// version 1 (all integers uvarints, minimally encoded, unless noted):
//
//	header:
//	  8 bytes   magic 89 'P' 'S' 'P' 0d 0a 1a 0a
//	  1 byte    data format version (1)
//	  string    operator id
//	  uvarint   key groups of the job
//	  uvarint   first key group of the range
//	  uvarint   end of the range (exclusive); first < end <= key groups
//	  4 bytes   CRC-32C (Castagnoli) of the header bytes before it, big-endian
//	blocks, each:
//	  uvarint   n, the number of entries (>= 1)
//	  uvarint   length of the body in bytes (<= 64 MiB)
//	  body      n × (uvarint key group, string key, string value)
//	  4 bytes   CRC-32C of n, length and body
//	trailer:
//	  1 byte    0 (a block of no entries ends the blocks)
//	  uvarint   entries in the file
//	  uvarint   bytes: the sum of every key's and value's length
//	  4 bytes   CRC-32C of the trailer bytes before it
//	end of file
//
// where string = uvarint length + bytes. Values are the bytes the
// operator's state.Codec wrote: what the changelog holds for the key.
//
// Why this shape: blocks keep a checksum's cost at 4 bytes per ~64 KiB
// instead of per entry, and let a reader verify a block before it hands
// out any entry of it. The magic is PNG's trick: the high-bit byte and
// the CR LF / LF pair make a 7-bit or newline-converting copy fail at the
// first 8 bytes, not somewhere in the middle. The trailer is what makes a
// file cut exactly at a block boundary detectably short. Every field is
// canonical (minimal varints, strictly increasing entries, no trailing
// bytes), so decoding and re-encoding with the same block boundaries gives
// the same bytes; FuzzReadEntries holds the decoder to that.

// dataMagic starts every data file.
var dataMagic = [8]byte{0x89, 'P', 'S', 'P', '\r', '\n', 0x1a, '\n'}

const (
	// dataVersion is the data file format written and read.
	dataVersion = 1
	// defaultBlockSize is the body size after which the writer ends a
	// block: large enough that the 9 bytes of framing vanish, small enough
	// that a bit flip condemns little and a reader's buffer stays small.
	defaultBlockSize = 64 << 10
	// maxBlockLen bounds a block body. One entry must fit in a block; a
	// changelog value is a Kafka record, far smaller than this.
	maxBlockLen = 64 << 20
	// maxOperatorIDLen bounds the id in the header (ids are short names).
	maxOperatorIDLen = 64 << 10
	// minDataFileSize is a header with a one-byte id and a trailer with no
	// entries.
	minDataFileSize = len(dataMagic) + 1 + 2 + 3 + 4 + 1 + 2 + 4
)

// castagnoli is immutable after initialisation: a lookup table, not state.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// dataHeader is what a data file says it holds.
type dataHeader struct {
	Operator  string
	KeyGroups int
	Range     state.Range
}

func (h dataHeader) check() error {
	switch {
	case h.Operator == "":
		return errors.New("empty operator id")
	case len(h.Operator) > maxOperatorIDLen:
		return fmt.Errorf("operator id of %d bytes, longer than %d", len(h.Operator), maxOperatorIDLen)
	case state.CheckKeyGroups(h.KeyGroups) != nil:
		return fmt.Errorf("key groups %d out of range 1..%d", h.KeyGroups, state.MaxKeyGroups)
	case h.Range.Start >= h.Range.End || int(h.Range.End) > h.KeyGroups:
		return fmt.Errorf("key-group range %v is empty or does not fit %d key groups", h.Range, h.KeyGroups)
	}
	return nil
}

// dataEncoder writes one data file. Errors stick: after one, every call
// returns it.
type dataEncoder struct {
	w      io.Writer
	hdr    dataHeader
	target int // end a block once its body reaches this many bytes

	block   []byte // body of the open block
	n       int    // entries in the open block
	entries uint64
	bytes   uint64
	lastKG  state.KeyGroup
	lastKey []byte // a copy: the caller's slices may be reused
	started bool
	err     error

	// onBlock, if set, is called after each block is written with the
	// entries and bytes it held (for progress reports).
	onBlock func(entries int, bytes uint64)
	blockB  uint64 // key+value bytes of the open block
}

// newDataEncoder writes the header of a file holding hdr's entries.
func newDataEncoder(w io.Writer, hdr dataHeader, target int) (*dataEncoder, error) {
	if err := hdr.check(); err != nil {
		return nil, fmt.Errorf("savepoint data file: %w", err)
	}
	b := append([]byte(nil), dataMagic[:]...)
	b = append(b, dataVersion)
	b = appendString(b, hdr.Operator)
	b = binary.AppendUvarint(b, uint64(hdr.KeyGroups))
	b = binary.AppendUvarint(b, uint64(hdr.Range.Start))
	b = binary.AppendUvarint(b, uint64(hdr.Range.End))
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	if _, err := w.Write(b); err != nil {
		return nil, err
	}
	return &dataEncoder{w: w, hdr: hdr, target: target}, nil
}

// add appends one entry. Entries must come in strictly increasing (key
// group, key) order, inside the header's range, each in the key group its
// key hashes to: what state.Store.All yields. value must not be nil (nil
// is a tombstone; a savepoint holds live values only).
func (e *dataEncoder) add(kg state.KeyGroup, key, value []byte) error {
	if e.err != nil {
		return e.err
	}
	switch {
	case value == nil:
		return fmt.Errorf("%w: operator %q, key %q: nil value (a tombstone); a savepoint holds live values only", ErrInvalidEntry, e.hdr.Operator, key)
	case !e.hdr.Range.Contains(kg):
		return fmt.Errorf("%w: operator %q, key %q: key group %d is outside this part's range %v", ErrInvalidEntry, e.hdr.Operator, key, kg, e.hdr.Range)
	case e.started && (kg < e.lastKG || kg == e.lastKG && bytes.Compare(key, e.lastKey) <= 0):
		return fmt.Errorf("%w: operator %q, key %q in key group %d: not after key %q in key group %d (entries must come in key-group then key order, each key once, as Store.All yields them)",
			ErrInvalidEntry, e.hdr.Operator, key, kg, e.lastKey, e.lastKG)
	}
	if want := state.KeyGroupOf(key, e.hdr.KeyGroups); want != kg {
		return fmt.Errorf("%w: operator %q, key %q: given key group %d, but the key belongs to group %d of %d",
			ErrInvalidEntry, e.hdr.Operator, key, kg, want, e.hdr.KeyGroups)
	}
	size := wire.UvarintLen(uint64(kg)) + wire.UvarintLen(uint64(len(key))) + len(key) + wire.UvarintLen(uint64(len(value))) + len(value)
	if size > maxBlockLen {
		return fmt.Errorf("%w: operator %q, key %q: entry of %d bytes exceeds the %d-byte block limit", ErrInvalidEntry, e.hdr.Operator, key, size, maxBlockLen)
	}
	if len(e.block)+size > maxBlockLen {
		if err := e.flush(); err != nil {
			return err
		}
	}
	e.block = binary.AppendUvarint(e.block, uint64(kg))
	e.block = appendString(e.block, key)
	e.block = appendString(e.block, value)
	e.n++
	e.entries++
	e.bytes += uint64(len(key) + len(value))
	e.blockB += uint64(len(key) + len(value))
	e.lastKG, e.lastKey, e.started = kg, append(e.lastKey[:0], key...), true
	if len(e.block) >= e.target {
		return e.flush()
	}
	return nil
}

// flush writes the open block, if it holds any entry.
func (e *dataEncoder) flush() error {
	if e.err != nil || e.n == 0 {
		return e.err
	}
	var frame [2 * binary.MaxVarintLen64]byte
	f := binary.AppendUvarint(frame[:0], uint64(e.n))
	f = binary.AppendUvarint(f, uint64(len(e.block)))
	sum := crc32.Update(crc32.Checksum(f, castagnoli), castagnoli, e.block)
	if _, e.err = e.w.Write(f); e.err == nil {
		if _, e.err = e.w.Write(e.block); e.err == nil {
			_, e.err = e.w.Write(binary.BigEndian.AppendUint32(nil, sum))
		}
	}
	if e.err != nil {
		return e.err
	}
	if e.onBlock != nil {
		e.onBlock(e.n, e.blockB)
	}
	e.n, e.blockB = 0, 0
	if cap(e.block) > 4*max(e.target, defaultBlockSize) {
		e.block = nil // one huge entry: do not keep its buffer
	} else {
		e.block = e.block[:0]
	}
	return nil
}

// finish writes the last block and the trailer.
func (e *dataEncoder) finish() error {
	if err := e.flush(); err != nil {
		return err
	}
	t := []byte{0}
	t = binary.AppendUvarint(t, e.entries)
	t = binary.AppendUvarint(t, e.bytes)
	t = binary.BigEndian.AppendUint32(t, crc32.Checksum(t, castagnoli))
	if _, e.err = e.w.Write(t); e.err != nil {
		return e.err
	}
	// Sticky from now on: an entry after the trailer would be lost.
	e.err = errors.New("savepoint data file already finished")
	return nil
}

// dataDecoder reads one data file, verifying as it goes. Every error it
// returns wraps ErrCorrupt (or ErrUnknownVersion, or the reader's I/O
// error), names the file and the byte offset; it never panics.
type dataDecoder struct {
	r    *bufio.Reader
	name string // for messages
	off  int64  // bytes consumed
	hdr  dataHeader

	raw     []byte // bytes of the header or frame being read, for its CRC
	body    []byte
	lastKG  state.KeyGroup
	lastKey []byte
	started bool
	entries uint64
	bytes   uint64

	// blocks, when recordBlocks is set, are the entry counts of the blocks
	// read so far (FuzzReadEntries re-encodes with the same boundaries).
	recordBlocks bool
	blocks       []int
}

// newDataDecoder reads and verifies the header of the data file r.
func newDataDecoder(r io.Reader, name string) (*dataDecoder, error) {
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, 64<<10)
	}
	d := &dataDecoder{r: br, name: name}
	magic, err := d.read(len(dataMagic), "header")
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(magic, dataMagic[:]) {
		return nil, d.corrupt(0, "does not start with the savepoint data magic (89 50 53 50 0d 0a 1a 0a): not a data file, or damaged in transfer (text mode?)")
	}
	v, err := d.read(1, "header")
	if err != nil {
		return nil, err
	}
	if v[0] != dataVersion {
		return nil, fmt.Errorf("data file %s: %w %d, this build reads version %d (written by a newer pipeline)", name, ErrUnknownVersion, v[0], dataVersion)
	}
	at := d.off
	idLen, err := d.uvarint("operator id length")
	if err != nil {
		return nil, err
	}
	if idLen == 0 || idLen > maxOperatorIDLen {
		return nil, d.corrupt(at, fmt.Sprintf("operator id length %d out of range 1..%d", idLen, maxOperatorIDLen))
	}
	id, err := d.read(int(idLen), "header")
	if err != nil {
		return nil, err
	}
	d.hdr.Operator = string(id)
	var f [3]uint64
	for i, field := range []string{"key groups", "range start", "range end"} {
		if f[i], err = d.uvarint(field); err != nil {
			return nil, err
		}
		if f[i] > state.MaxKeyGroups {
			return nil, d.corrupt(d.off, fmt.Sprintf("%s %d exceeds %d", field, f[i], state.MaxKeyGroups))
		}
	}
	d.hdr.KeyGroups = int(f[0])
	d.hdr.Range = state.Range{Start: state.KeyGroup(f[1]), End: state.KeyGroup(f[2])}
	if err := d.checkCRC("header", false); err != nil {
		return nil, err
	}
	if err := d.hdr.check(); err != nil {
		return nil, d.corrupt(0, "header: "+err.Error())
	}
	return d, nil
}

// each calls fn for every entry, in file order, then verifies the trailer
// and the end of the file. key and value are valid only during the call
// (value is never nil). It stops at fn's first error and returns it.
func (d *dataDecoder) each(fn func(kg state.KeyGroup, key, value []byte) error) error {
	for {
		d.raw = d.raw[:0]
		at := d.off
		n, err := d.uvarint("block entry count")
		if err != nil {
			return err
		}
		if n == 0 {
			return d.trailer(at)
		}
		length, err := d.uvarint("block length")
		if err != nil {
			return err
		}
		if length > maxBlockLen {
			return d.corrupt(at, fmt.Sprintf("block length %d exceeds %d", length, maxBlockLen))
		}
		// Every entry takes at least 3 bytes: this bounds n by the bytes
		// the block claims, before they are read.
		if n > length/3 {
			return d.corrupt(at, fmt.Sprintf("block of %d bytes cannot hold %d entries", length, n))
		}
		if err := d.readBody(int(length)); err != nil {
			return err
		}
		if err := d.checkCRC(fmt.Sprintf("block at byte %d", at), true); err != nil {
			return err
		}
		if err := d.entriesOf(at, int(n), fn); err != nil {
			return err
		}
		if d.recordBlocks {
			d.blocks = append(d.blocks, int(n))
		}
	}
}

// entriesOf parses the verified body of the block at byte at.
func (d *dataDecoder) entriesOf(at int64, n int, fn func(kg state.KeyGroup, key, value []byte) error) error {
	r := wire.NewReader(d.body)
	for i := range n {
		g := r.Uvarint("key group")
		key := r.Bytes("key")
		value := r.Bytes("value")
		if err := r.Err(); err != nil {
			var e *wire.Error
			errors.As(err, &e)
			return d.corrupt(at, fmt.Sprintf("block body byte %d: entry %d: %s does not fit the block (%s)", e.Offset, i, e.What, e.Msg))
		}
		kg := state.KeyGroup(g)
		switch {
		case g >= uint64(d.hdr.Range.End) || kg < d.hdr.Range.Start:
			return d.corrupt(at, fmt.Sprintf("entry %d: key group %d outside the file's range %v", i, g, d.hdr.Range))
		case d.started && (kg < d.lastKG || kg == d.lastKG && bytes.Compare(key, d.lastKey) <= 0):
			return d.corrupt(at, fmt.Sprintf("entry %d: key %q of key group %d is not after key %q of key group %d", i, key, kg, d.lastKey, d.lastKG))
		case state.KeyGroupOf(key, d.hdr.KeyGroups) != kg:
			return d.corrupt(at, fmt.Sprintf("entry %d: key %q is stored in key group %d but belongs to group %d of %d", i, key, kg, state.KeyGroupOf(key, d.hdr.KeyGroups), d.hdr.KeyGroups))
		}
		d.lastKG, d.lastKey, d.started = kg, append(d.lastKey[:0], key...), true
		d.entries++
		d.bytes += uint64(len(key) + len(value))
		if err := fn(kg, key, value); err != nil {
			return err
		}
	}
	if left := r.Len(); left != 0 {
		return d.corrupt(at, fmt.Sprintf("%d bytes left in the block after its %d entries", left, n))
	}
	return nil
}

// trailer reads the trailer that starts at byte at (its 0 byte is read).
func (d *dataDecoder) trailer(at int64) error {
	entries, err := d.uvarint("trailer entry count")
	if err != nil {
		return err
	}
	size, err := d.uvarint("trailer byte count")
	if err != nil {
		return err
	}
	if err := d.checkCRC("trailer", false); err != nil {
		return err
	}
	if entries != d.entries || size != d.bytes {
		return d.corrupt(at, fmt.Sprintf("trailer says %d entries of %d bytes, the file holds %d of %d", entries, size, d.entries, d.bytes))
	}
	if _, err := d.r.ReadByte(); err != io.EOF {
		if err != nil {
			return fmt.Errorf("data file %s: %w", d.name, err)
		}
		return d.corrupt(d.off, "bytes after the trailer")
	}
	return nil
}

// read reads n bytes (n is bounded by the caller) into d.raw and returns
// them.
func (d *dataDecoder) read(n int, inside string) ([]byte, error) {
	start := len(d.raw)
	d.raw = slices.Grow(d.raw, n)
	m, err := io.ReadFull(d.r, d.raw[start:start+n])
	d.off += int64(m)
	d.raw = d.raw[:start+m]
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		return nil, d.truncated(inside)
	case err != nil:
		return nil, fmt.Errorf("data file %s: %w", d.name, err)
	}
	return d.raw[start:], nil
}

// readBody reads a block body of n bytes into d.body, growing the buffer
// only as bytes arrive: a corrupt length must not allocate 64 MiB.
func (d *dataDecoder) readBody(n int) error {
	d.body = d.body[:0]
	for len(d.body) < n {
		chunk := min(n-len(d.body), 1<<20)
		d.body = slices.Grow(d.body, chunk)
		m, err := io.ReadFull(d.r, d.body[len(d.body):len(d.body)+chunk])
		d.off += int64(m)
		d.body = d.body[:len(d.body)+m]
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return d.truncated("block")
		}
		if err != nil {
			return fmt.Errorf("data file %s: %w", d.name, err)
		}
	}
	return nil
}

// uvarint reads a minimally encoded uvarint (wire.ReadUvarint: the rule
// of every binary format here), appending its bytes to d.raw.
func (d *dataDecoder) uvarint(field string) (uint64, error) {
	at := d.off
	x, err := wire.ReadUvarint(d)
	switch {
	case err == nil:
		return x, nil
	case errors.Is(err, wire.ErrTruncated):
		return 0, d.truncated(field)
	case errors.Is(err, wire.ErrOverflow), errors.Is(err, wire.ErrNotMinimal):
		// A trailing zero group is a second encoding of the same number,
		// which canonical files never hold.
		return 0, d.corrupt(at, field+": "+err.Error())
	}
	return 0, fmt.Errorf("data file %s: %w", d.name, err)
}

// ReadByte reads one byte of a header, frame or trailer, counting it and
// keeping it in d.raw for the CRC (io.ByteReader, for wire.ReadUvarint).
func (d *dataDecoder) ReadByte() (byte, error) {
	c, err := d.r.ReadByte()
	if err != nil {
		return 0, err
	}
	d.off++
	d.raw = append(d.raw, c)
	return c, nil
}

// checkCRC reads the 4-byte CRC that follows d.raw (and d.body, for a
// block) and compares.
func (d *dataDecoder) checkCRC(what string, withBody bool) error {
	at := d.off
	var b [4]byte
	m, err := io.ReadFull(d.r, b[:])
	d.off += int64(m)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return d.truncated(what + " checksum")
	}
	if err != nil {
		return fmt.Errorf("data file %s: %w", d.name, err)
	}
	got := crc32.Checksum(d.raw, castagnoli)
	if withBody {
		got = crc32.Update(got, castagnoli, d.body)
	}
	if want := binary.BigEndian.Uint32(b[:]); got != want {
		return d.corrupt(at, fmt.Sprintf("%s: CRC-32C is %08x, the file says %08x (damaged)", what, got, want))
	}
	return nil
}

func (d *dataDecoder) corrupt(at int64, msg string) error {
	return corruptf("data file %s, byte %d: %s", d.name, at, msg)
}

func (d *dataDecoder) truncated(what string) error {
	return corruptf("data file %s: truncated at byte %d, inside the %s", d.name, d.off, what)
}

func appendString[T string | []byte](dst []byte, s T) []byte { return wire.AppendBytes(dst, s) }
