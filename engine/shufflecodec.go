package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/operator"
	"github.com/eoflow/pipeline/window"
)

// The repartition record (group mode's shuffle, router.shuffleOut). The
// stateless steps run once, where a record is read; what crosses the
// repartition topic is what the keyed side needs of the result, in one
// binary value (the Kafka record has no key and no headers):
//
//	byte     shuffleMagic
//	byte     shuffleVersion (1)
//	uvarint  flags (shuffleTimed, shuffleWatermark, shuffleInterval, shuffleNoJoinKey, shuffleRightSide)
//	uvarint  target: the index of the keyed operator (plan.targets)
//	bytes    source topic      } where the input was read: its dead letters and
//	varint   source partition  } late records name it, an interval join orders
//	varint   source offset     } its buffers by it
//	varint   input timestamp, Unix ms
//	varint   event time, Unix ms            (shuffleTimed)
//	varint   partition watermark before it  (shuffleWatermark)
//	bytes    group key
//	byte     its JSON kind (operator.KeyKind)
//	bytes    body: an aggregate's or a window's values, evaluated
//	         (operator.Aggregator.AppendInputs); an interval join's record
//	         as JSON (shuffleInterval; version 3: a join record)
//	nbytes   input key      } the input as read, for the dead letters and
//	nbytes   input value    } late records the keyed side writes: they
//	uvarint  header count   } carry it exactly as single mode's do
//	  bytes, nbytes  each header's key and value
//
// bytes is a uvarint length and the bytes; nbytes the same with the
// length plus one, 0 for nil (a tombstone's value, a null key). A record
// that does not parse is a dead letter of the keyed side with the reason,
// never a silent drop. A later format takes the next version; a reader
// refuses versions it does not know.
//
// Version 2 is a bundle: the records of many inputs bound for one
// repartition partition in one Kafka record, so that the Kafka client's
// cost per record (produce, compress, fetch, decompress; most of what the
// shuffle cost, bench/results/2026-12-06-shuffle.md) is paid once per
// bundle:
//
//	byte     shuffleMagic
//	byte     shuffleBundleVersion (2)
//	then, to the value's end, one or more frames:
//	bytes    a version-1 record as above, whole
//
// Each frame keeps its own key group, times and source position, so a
// keyed side handles a bundle as its frames one after another, in order.
// A bundle whose framing does not parse is one dead letter (the bundle);
// a frame that does not parse is a dead letter of its own (the frame as
// its value), and the bundle's other frames go on. The source side fills
// a bundle with the inputs of one poll (router.addFrame) up to
// maxBundleBytes and sends it before the next barrier: a bundle never
// spans two epochs. Version-1 records alone (written before bundles)
// are still read.
//
// Version 3 is version 1 whose body is an interval join's record as a
// join record (operator.Record.AppendJoinValue, operator/joinrecord.go),
// framed: a record decoded from a schema registry format or an envelope,
// one a map step built, or a raw one. JSON would lose what such a record
// holds for the join's output and dead letters (a Debezium delete is a
// tombstone, with no value; JSON has no tombstone), so the interval join
// in group mode would write other records than in single mode. The keyed
// side reads the body back (SetJoinRecord) as the record single mode's
// operator reads. A plain JSON record's join record is its bytes, as
// read: it still goes in a version-1 frame, which the release before
// reads too (its body is JSON, as before). A frame is version 3 only when
// its body needs it, so during a rolling upgrade the release before
// refuses those frames alone, each a dead letter of its keyed side with
// the reason "version 3, this process reads versions 1 and 2 (run every
// process of the job on one version)", and reads the rest as before;
// bundles stay version 2 (their frames say which version each is).
const (
	shuffleMagic         byte = 0xE5
	shuffleVersion       byte = 1
	shuffleBundleVersion byte = 2
	// shuffleJoinRecordVersion: version 1, the interval join's body a
	// framed join record.
	shuffleJoinRecordVersion byte = 3

	// maxBundleBytes bounds a bundle's value, well under the 1 MiB a
	// Kafka record batch may hold by default (the repartition topic is
	// created with the brokers' defaults); an input whose frame alone is
	// larger is a bundle of one.
	maxBundleBytes = 64 << 10

	shuffleTimed     = 1 << 0
	shuffleWatermark = 1 << 1
	shuffleInterval  = 1 << 2
	shuffleNoJoinKey = 1 << 3
	shuffleRightSide = 1 << 4
	shuffleFlags     = 1<<5 - 1
)

// shuffled is one repartition record, decoded.
type shuffled struct {
	target int
	// in is the input as read: key, value, headers, timestamp, and where.
	in       kgo.Record
	at, wm   int64 // wm is window.NoWatermark without one
	timed    bool
	groupKey string
	kind     operator.KeyKind
	// body: the aggregate's values, or (interval) the record as a join
	// record (operator.Record.AppendJoinValue): its plain JSON bytes, or
	// framed (version 3).
	body      []byte
	interval  bool
	noJoinKey bool
	joinSide  operator.JoinSide
}

// appendShuffled appends s's encoding to dst.
func appendShuffled(dst []byte, s *shuffled) []byte {
	var flags uint64
	if s.timed {
		flags |= shuffleTimed
		if s.wm != window.NoWatermark {
			flags |= shuffleWatermark
		}
	}
	if s.interval {
		flags |= shuffleInterval
		if s.noJoinKey {
			flags |= shuffleNoJoinKey
		}
		if s.joinSide == operator.SideRight {
			flags |= shuffleRightSide
		}
	}
	version := shuffleVersion
	if s.interval && operator.JoinRecordFramed(s.body) {
		version = shuffleJoinRecordVersion
	}
	dst = append(dst, shuffleMagic, version)
	dst = binary.AppendUvarint(dst, flags)
	dst = binary.AppendUvarint(dst, uint64(s.target))
	dst = appendBytes(dst, []byte(s.in.Topic))
	dst = binary.AppendVarint(dst, int64(s.in.Partition))
	dst = binary.AppendVarint(dst, s.in.Offset)
	dst = binary.AppendVarint(dst, s.in.Timestamp.UnixMilli())
	if flags&shuffleTimed != 0 {
		dst = binary.AppendVarint(dst, s.at)
	}
	if flags&shuffleWatermark != 0 {
		dst = binary.AppendVarint(dst, s.wm)
	}
	dst = appendBytes(dst, []byte(s.groupKey))
	dst = append(dst, byte(s.kind))
	dst = appendBytes(dst, s.body)
	dst = appendNullable(dst, s.in.Key)
	dst = appendNullable(dst, s.in.Value)
	dst = binary.AppendUvarint(dst, uint64(len(s.in.Headers)))
	for _, h := range s.in.Headers {
		dst = appendBytes(dst, []byte(h.Key))
		dst = appendNullable(dst, h.Value)
	}
	return dst
}

func appendBytes(dst, b []byte) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(b))), b...)
}

func appendNullable(dst, b []byte) []byte {
	if b == nil {
		return append(dst, 0)
	}
	return append(binary.AppendUvarint(dst, uint64(len(b))+1), b...)
}

// errShuffled: a repartition record that is not this format.
var errShuffled = errors.New("malformed repartition record")

// shuffleReader reads a repartition record's fields in order; the first
// failure sticks, naming the field.
type shuffleReader struct {
	b   []byte
	err error
}

func (r *shuffleReader) fail(field, why string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s: %s", errShuffled, field, why)
	}
	r.b = nil
}

func (r *shuffleReader) uvarint(field string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(field, "truncated or overlong varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *shuffleReader) varint(field string) int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail(field, "truncated or overlong varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *shuffleReader) byte(field string) byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) == 0 {
		r.fail(field, "truncated")
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *shuffleReader) take(field string, n uint64) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.fail(field, fmt.Sprintf("length %d beyond the record's end", n))
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *shuffleReader) bytes(field string) []byte { return r.take(field, r.uvarint(field)) }

func (r *shuffleReader) nullable(field string) []byte {
	n := r.uvarint(field)
	if n == 0 || r.err != nil {
		return nil
	}
	return r.take(field, n-1)
}

// decodeShuffled decodes v, a repartition record's value, into s. The
// slices of s alias v; the source topic is s's own (kept from the record
// s held before when it is the same: most are).
func decodeShuffled(v []byte, s *shuffled) error {
	prevTopic := s.in.Topic
	switch {
	case len(v) < 2 || v[0] != shuffleMagic:
		return fmt.Errorf("%w: not written by a source side of this version (no magic byte)", errShuffled)
	case v[1] == shuffleBundleVersion:
		return fmt.Errorf("%w: a bundle inside a bundle", errShuffled)
	case v[1] != shuffleVersion && v[1] != shuffleJoinRecordVersion:
		return fmt.Errorf("%w: version %d, this process reads versions %d to %d (run every process of the job on one version)", errShuffled, v[1], shuffleVersion, shuffleJoinRecordVersion)
	}
	version := v[1]
	r := shuffleReader{b: v[2:]}
	flags := r.uvarint("flags")
	if flags&^shuffleFlags != 0 {
		r.fail("flags", fmt.Sprintf("unknown flags %#x", flags&^shuffleFlags))
	}
	if flags&shuffleWatermark != 0 && flags&shuffleTimed == 0 {
		r.fail("flags", "a watermark without an event time")
	}
	if flags&(shuffleNoJoinKey|shuffleRightSide) != 0 && flags&shuffleInterval == 0 {
		r.fail("flags", "a join side without an interval join")
	}
	*s = shuffled{wm: window.NoWatermark}
	target := r.uvarint("target")
	if target > 1<<16 {
		r.fail("target", fmt.Sprintf("%d out of range", target))
	}
	s.target = int(target)
	if topic := r.bytes("source topic"); string(topic) == prevTopic {
		s.in.Topic = prevTopic
	} else {
		s.in.Topic = string(topic)
	}
	part := r.varint("source partition")
	if part < 0 || part > 1<<31-1 {
		r.fail("source partition", fmt.Sprintf("%d out of range", part))
	}
	s.in.Partition = int32(part)
	s.in.Offset = r.varint("source offset")
	s.in.Timestamp = time.UnixMilli(r.varint("timestamp"))
	if flags&shuffleTimed != 0 {
		s.timed, s.at = true, r.varint("event time")
	}
	if flags&shuffleWatermark != 0 {
		s.wm = r.varint("watermark")
	}
	s.groupKey = string(r.bytes("group key"))
	s.kind = operator.KeyKind(r.byte("key kind"))
	if r.err == nil && !operator.ValidKeyKind(s.kind) {
		r.fail("key kind", fmt.Sprintf("unknown kind %d", s.kind))
	}
	s.body = r.bytes("body")
	s.interval = flags&shuffleInterval != 0
	// Each version's body is its own: a framed join record in version 3
	// alone, never read as JSON, nor JSON as one.
	if r.err == nil && (version == shuffleJoinRecordVersion) != (s.interval && operator.JoinRecordFramed(s.body)) {
		r.fail("body", fmt.Sprintf("not the body of a version-%d record", version))
	}
	s.noJoinKey = flags&shuffleNoJoinKey != 0
	if s.interval {
		s.joinSide = operator.SideLeft
		if flags&shuffleRightSide != 0 {
			s.joinSide = operator.SideRight
		}
	}
	s.in.Key = r.nullable("input key")
	s.in.Value = r.nullable("input value")
	n := r.uvarint("header count")
	if n > uint64(len(r.b)) { // each header takes two bytes at least
		r.fail("header count", fmt.Sprintf("%d headers in %d bytes", n, len(r.b)))
	}
	if n > 0 && r.err == nil {
		s.in.Headers = make([]kgo.RecordHeader, 0, n)
		for range n {
			k := r.bytes("header key")
			s.in.Headers = append(s.in.Headers, kgo.RecordHeader{Key: string(k), Value: r.nullable("header value")})
		}
	}
	if r.err == nil && len(r.b) > 0 {
		r.fail("end", fmt.Sprintf("%d bytes after the last field", len(r.b)))
	}
	return r.err
}

// appendFrame appends frame, a version-1 repartition record, to bundle,
// starting the bundle when it is empty.
func appendFrame(bundle, frame []byte) []byte {
	if len(bundle) == 0 {
		bundle = append(bundle, shuffleMagic, shuffleBundleVersion)
	}
	return appendBytes(bundle, frame)
}

// shuffleFrames appends to frames the repartition records in v, a
// repartition record's value, and returns them: the frames of a bundle
// (version 2), in order, or v itself for anything else (decodeShuffled
// decodes it, or says why not). Only a bundle's framing is checked here:
// one that does not parse, to its last byte, is refused whole, with
// nothing taken from it. The frames alias v.
func shuffleFrames(v []byte, frames [][]byte) ([][]byte, error) {
	if !isBundle(v) {
		return append(frames, v), nil
	}
	r := shuffleReader{b: v[2:]}
	if len(r.b) == 0 {
		r.fail("bundle", "no frames")
	}
	start := len(frames)
	for len(r.b) > 0 && r.err == nil {
		if f := r.bytes("bundle frame"); r.err == nil {
			frames = append(frames, f)
		}
	}
	if r.err != nil {
		n := len(frames) - start
		clear(frames[start:])
		return frames[:start], fmt.Errorf("%w (after %d whole frames)", r.err, n)
	}
	return frames, nil
}

// isBundle reports whether v, a repartition record's value, is a bundle
// (version 2).
func isBundle(v []byte) bool {
	return len(v) >= 2 && v[0] == shuffleMagic && v[1] == shuffleBundleVersion
}
