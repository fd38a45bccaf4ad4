package keyed

import (
	"encoding/binary"
	"errors"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/internal/mutant"
	"github.com/eoflow/pipeline/operator"
	"github.com/eoflow/pipeline/schema"
)

// Sink is one sink that reads an operator, compiled.
type Sink struct {
	Topic string
	// Key is the record key (nil: the group key, or the input's key).
	Key    *operator.Expr
	Format config.Format
	// Enc writes a schema registry format (nil: json or raw).
	Enc *schema.Sink
	// Upsert: the sink is a changelog of the aggregate it reads, and a
	// deleted key gets a tombstone (sinks[].upsert).
	Upsert bool
	// CarryKey: the sink writes a join's repartition topic, keyed by the
	// join key, and each record carries the input's own key in header
	// config.JoinKeyHeader, for the join's side to read it back. Its
	// Format is config.FormatJoinRecord: the value is the input record
	// whole (operator.Record.AppendJoinRecord).
	CarryKey bool
	// CarryTime: the job has event time, which crosses that topic too:
	// each record carries its input's event time and the watermark of
	// the input's partition just before it (config.JoinTimeHeader,
	// AppendJoinTime).
	CarryTime bool
}

// Sinks are the sinks that read an operator: each of its results is one
// output record per sink, built in memory handed out in chunks (Buf).
type Sinks []*Sink

// Outputs builds the output record of every sink from buf's memory, with
// timestamp ts. key is the default record key (the group key for an
// aggregate, the input key otherwise); value is the value for every sink
// (an aggregate's output, already encoded), or nil to encode op's value in
// each sink's format. at and wm are the input's event time and its
// partition's watermark before it, for a sink that carries them
// (CarryTime).
func (ss Sinks) Outputs(buf *Buf, ts time.Time, op *operator.Record, key, value []byte, at, wm int64) ([]*kgo.Record, *operator.RecordError) {
	out := buf.records(len(ss))
	for _, s := range ss {
		v := value
		if s.Format == config.FormatJoinRecord {
			// A join's repartition topic: the record crosses whole.
			b, rerr := op.AppendJoinRecord(buf.start())
			if rerr != nil {
				return nil, rerr
			}
			v = buf.cut(b)
		} else if s.Enc != nil {
			var b []byte
			var rerr *operator.RecordError
			if value != nil {
				b, rerr = s.Enc.AppendJSON(buf.start(), value)
			} else {
				b, rerr = s.Enc.AppendRecord(buf.start(), op)
			}
			if rerr != nil {
				return nil, rerr
			}
			v = nil // a Debezium delete: a tombstone
			if len(b) > 0 {
				v = buf.cut(b)
			}
		} else if v == nil {
			v, _ = op.Unchanged(s.Format) // the input's bytes: never written to
		}
		if v == nil && s.Enc == nil {
			b, rerr := op.AppendValue(buf.start(), s.Format)
			if rerr != nil {
				return nil, rerr
			}
			if len(b) > 0 {
				v = buf.cut(b)
			} // else nil, as append(nil, empty...) always gave: a raw
			// sink writes an empty input value as a null one.
		}
		k := key
		if s.Key != nil {
			ks, rerr := s.Key.EvalKey(op)
			if rerr != nil {
				return nil, rerr
			}
			k = buf.cut(append(buf.start(), ks...))
		}
		r := buf.record()
		r.Topic, r.Key, r.Value, r.Timestamp = s.Topic, k, v, ts
		if s.CarryKey {
			r.Headers = []kgo.RecordHeader{{Key: config.JoinKeyHeader, Value: key}}
			if s.CarryTime {
				t := buf.cut(AppendJoinTime(buf.start(), at, wm))
				r.Headers = append(r.Headers, kgo.RecordHeader{Key: config.JoinTimeHeader, Value: t})
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// Keyed is the output of a keyed operator for every sink: value
// (encoded in buf) keyed by groupKey, with timestamp ts, unless a sink's
// key expression, which reads the output object, says otherwise.
func (ss Sinks) Keyed(buf *Buf, ts time.Time, groupKey string, value []byte) ([]*kgo.Record, *operator.RecordError) {
	key := buf.cut(append(buf.start(), groupKey...))
	var view *operator.Record
	for _, s := range ss {
		if s.Key != nil {
			view = &operator.Record{Value: value, Timestamp: ts, Format: config.FormatJSON}
			break
		}
	}
	return ss.Outputs(buf, ts, view, key, value, 0, 0)
}

// AppendJoinTime appends the value of header config.JoinTimeHeader: a
// version byte, then event time at and watermark wm as varints.
func AppendJoinTime(dst []byte, at, wm int64) []byte {
	dst = append(dst, joinTimeVersion)
	dst = binary.AppendVarint(dst, at)
	return binary.AppendVarint(dst, wm)
}

// ParseJoinTime reads a value AppendJoinTime wrote.
func ParseJoinTime(b []byte) (at, wm int64, err error) {
	if len(b) == 0 || b[0] != joinTimeVersion {
		return 0, 0, errors.New("unknown version")
	}
	b = b[1:]
	at, n := binary.Varint(b)
	if n <= 0 {
		return 0, 0, errors.New("bad event time")
	}
	wm, m := binary.Varint(b[n:])
	if m <= 0 || n+m != len(b) {
		return 0, 0, errors.New("bad watermark")
	}
	return at, wm, nil
}

const joinTimeVersion = 1

// Tombstones are the tombstones of keys, deleted from an aggregate's
// state at time ts, for the sinks that are upserts (none: no record).
func (ss Sinks) Tombstones(buf *Buf, ts time.Time, keys []string) []*kgo.Record {
	var out []*kgo.Record
	for _, s := range ss {
		if !s.Upsert || mutant.On("upsert-no-tombstone") {
			// (The mutant's bug: a deleted key keeps its last value in
			// the compacted topic, and a job reading it as a table
			// joins with it for ever.)
			continue
		}
		for _, k := range keys {
			r := buf.record()
			r.Topic, r.Key, r.Timestamp = s.Topic, buf.cut(append(buf.start(), k...)), ts
			out = append(out, r)
		}
	}
	return out
}

// Buf hands out the memory of output records in chunks: the bytes of
// their keys and values, the kgo.Records, and the slices of them that
// process returns. One allocation serves hundreds of records instead of
// four per record. A piece is cut from its chunk with its capacity limited
// to its length (an append to it reallocates) and is never handed out
// again: the producer owns a record until Kafka has it, so a chunk is
// collected once all of its records are.
type Buf struct {
	bytes []byte
	recs  []kgo.Record
	ptrs  []*kgo.Record
	// reuse, if set, is the next record handed out, zeroed: an input
	// record nothing reads any more (a pass-through's, once its value and
	// key are taken), so that a record copied through costs no new one.
	reuse *kgo.Record
}

const (
	outBytesChunk = 32 << 10
	// outBytesMin is the room start guarantees before a new chunk: more
	// than most encodings need, so few outgrow their chunk (one that does
	// is simply reallocated by append).
	outBytesMin    = 1 << 10
	outRecordChunk = 128
)

// start returns where the next encoding goes: append to it, then cut.
func (b *Buf) start() []byte {
	if cap(b.bytes)-len(b.bytes) < outBytesMin {
		b.bytes = make([]byte, 0, outBytesChunk)
	}
	return b.bytes[len(b.bytes):]
}

// cut takes enc, appended to start(), as one piece. Never nil, even when
// empty.
func (b *Buf) cut(enc []byte) []byte {
	n := len(enc)
	rest := b.bytes[len(b.bytes):]
	if unsafe.SliceData(enc) == unsafe.SliceData(rest) && n <= cap(rest) {
		b.bytes = b.bytes[:len(b.bytes)+n] // still in the chunk: taken
	} // else append outgrew the chunk and gave enc an array of its own
	return enc[:n:n]
}

// record returns a zeroed record.
func (b *Buf) record() *kgo.Record {
	if r := b.reuse; r != nil {
		b.reuse = nil
		*r = kgo.Record{}
		return r
	}
	if len(b.recs) == 0 {
		b.recs = make([]kgo.Record, outRecordChunk)
	}
	r := &b.recs[0]
	b.recs = b.recs[1:]
	return r
}

// records returns an empty slice with room for n records.
func (b *Buf) records(n int) []*kgo.Record {
	if len(b.ptrs) < n {
		b.ptrs = make([]*kgo.Record, max(n, outRecordChunk))
	}
	s := b.ptrs[:0:n]
	b.ptrs = b.ptrs[n:]
	return s
}
