package operator

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/internal/wire"
)

// The join record (config.FormatJoinRecord): a record as the input of a
// join holds it, written to the internal topic through which a group-mode
// job repartitions the join's stream by its join key
// (config/joinrepartition.go), and read back on the far side as exactly
// that record. The Kafka record's key is the join key and its header
// config.JoinKeyHeader the record's own key bytes; its value is:
//
//	byte     joinRecordMagic (never the first byte of JSON text)
//	byte     joinRecordVersion (1)
//	uvarint  flags (jrFields, jrOrder, jrKey, jrChanged, jrTombstone, jrDecimals)
//	bytes    the record's format (config.Format: json, raw, avro, ...)
//	nbytes   its value as it was read (0: none)
//	value    its decoded key                    (jrKey)
//	uvarint  its decoded value's field count    } (jrFields)
//	  bytes, value  each field's name and value } in the value's order when jrOrder, else by name
//
// bytes is a uvarint length and the bytes, nbytes the length plus one (0
// for nil). A value is a tag byte and its encoding, one tag per type of
// the value domain (value.go) and of what the schema decoders give
// (package schema): so an int stays an int and an int64 an int64, a
// float64 its bits (NaN included), a Decimal its coefficient and scale, a
// time its instant and zone, bytes bytes, a duration a duration.
//
// A record read as plain JSON or raw and unchanged crosses as its bytes
// alone: the far side decodes them as the near side did; plain JSON
// with its key undecoded crosses as nothing but its bytes, no framing,
// as the release before this encoding wrote every record (JSON), so
// that its processes still read the most common record during a rolling
// upgrade. Any other (a
// schema registry format, a Debezium envelope, a value a map step built)
// crosses decoded too: the far side needs no schema registry and cannot
// see it otherwise than the near side did, and its value bytes are still
// there for a sink that writes the input as it was read. JSON could not
// carry it: a timestamp, bytes or a decimal would come back as a string
// or a float. A value that does not start with joinRecordMagic is JSON.
const (
	joinRecordMagic   byte = 0xE7
	joinRecordVersion byte = 1

	jrFields    = 1 << 0
	jrOrder     = 1 << 1
	jrKey       = 1 << 2
	jrChanged   = 1 << 3
	jrTombstone = 1 << 4
	jrDecimals  = 1 << 5
	jrFlags     = 1<<6 - 1
)

// Value tags.
const (
	jvNull byte = iota + 1
	jvFalse
	jvTrue
	jvInt
	jvInt64
	jvFloat
	jvString
	jvBytes
	jvTime      // UTC: varint Unix seconds, uvarint nanoseconds
	jvZonedTime // the same, then the zone's name (bytes) and offset (varint seconds)
	jvDuration  // varint nanoseconds
	jvDecimal   // appendDecimal
	jvArray     // uvarint count, values
	jvObject    // uvarint count, (bytes name, value) by name
)

const (
	// joinRecStep names the encoding's place in an error.
	joinRecStep  = "the join's repartition topic"
	joinRecDepth = maxDepth
)

// AppendJoinRecord appends r's encoding as a join record (see above): the
// value of its record in the join's repartition topic. An error is a
// value of a type the encoding has no tag for (CodeType): a dead letter,
// never a changed value.
func (r *Record) AppendJoinRecord(dst []byte) ([]byte, *RecordError) {
	var flags uint64
	var fields map[string]any
	plain := !r.changed && !r.tombstone && r.order == nil && (isJSON(r.Format) || r.Format == config.FormatRaw)
	if !plain {
		var rerr *RecordError
		if fields, rerr = r.wholeFields(); rerr != nil {
			return dst, rerr
		}
		flags |= jrFields
		if r.order != nil {
			flags |= jrOrder
		}
	}
	if plain && isJSON(r.Format) && !r.keyDecoded {
		// JSON as it was read: what the release before wrote, which
		// its processes still read during a rolling upgrade.
		return append(dst, r.Value...), nil
	}
	if r.keyDecoded {
		flags |= jrKey
	}
	if r.changed {
		flags |= jrChanged
	}
	if r.tombstone {
		flags |= jrTombstone
	}
	if r.decimals {
		flags |= jrDecimals
	}
	dst = append(dst, joinRecordMagic, joinRecordVersion)
	dst = binary.AppendUvarint(dst, flags)
	dst = wire.AppendBytes(dst, string(r.Format))
	dst = appendNullable(dst, r.Value)
	var err error
	if flags&jrKey != 0 {
		if dst, err = appendJoinValue(dst, r.key, 0); err != nil {
			return dst, &RecordError{Step: joinRecStep, Code: CodeType, Reason: "the key: " + err.Error()}
		}
	}
	if flags&jrFields == 0 {
		return dst, nil
	}
	names := r.order
	if names == nil {
		names = make([]string, 0, len(fields))
		for k := range fields {
			names = append(names, k)
		}
		slices.Sort(names)
	} else if len(names) != len(fields) {
		// Unreachable: a value's order names each of its fields once.
		return dst, &RecordError{Step: joinRecStep, Code: CodeType, Reason: fmt.Sprintf("the value has %d fields, its order %d", len(fields), len(names))}
	}
	dst = binary.AppendUvarint(dst, uint64(len(names)))
	for _, k := range names {
		v, ok := fields[k]
		if !ok {
			return dst, &RecordError{Step: joinRecStep, Code: CodeType, Reason: fmt.Sprintf("field %q of the value's order is not in it", k)}
		}
		dst = wire.AppendBytes(dst, k)
		if dst, err = appendJoinValue(dst, v, 0); err != nil {
			return dst, &RecordError{Step: joinRecStep, Code: CodeType, Reason: fmt.Sprintf("field %q: %v", k, err)}
		}
	}
	return dst, nil
}

// wholeFields is r's decoded value, every field of it, however much of it
// the chain decoded.
func (r *Record) wholeFields() (map[string]any, *RecordError) {
	if !r.decoded {
		var d decoder
		if err := r.decode(&d, joinRecStep); err != nil {
			return nil, err
		}
	}
	if r.inSlots || r.partial != nil {
		if err := r.decodeAll(joinRecStep); err != nil {
			return nil, err
		}
		r.env(nil)
	}
	return r.fields, nil
}

func appendNullable(dst, b []byte) []byte {
	if b == nil {
		return append(dst, 0)
	}
	dst = binary.AppendUvarint(dst, uint64(len(b))+1)
	return append(dst, b...)
}

// appendJoinValue appends v's tag and encoding.
func appendJoinValue(dst []byte, v any, depth int) ([]byte, error) {
	if depth > joinRecDepth {
		return dst, fmt.Errorf("nested more than %d deep", joinRecDepth)
	}
	switch x := v.(type) {
	case nil:
		return append(dst, jvNull), nil
	case bool:
		if x {
			return append(dst, jvTrue), nil
		}
		return append(dst, jvFalse), nil
	case int:
		return binary.AppendVarint(append(dst, jvInt), int64(x)), nil
	case int64:
		return binary.AppendVarint(append(dst, jvInt64), x), nil
	case float64:
		return binary.LittleEndian.AppendUint64(append(dst, jvFloat), math.Float64bits(x)), nil
	case string:
		return wire.AppendBytes(append(dst, jvString), x), nil
	case []byte:
		return wire.AppendBytes(append(dst, jvBytes), x), nil
	case time.Time:
		name, off := x.Zone()
		tag := jvTime
		if x.Location() != time.UTC {
			tag = jvZonedTime
		}
		dst = binary.AppendVarint(append(dst, tag), x.Unix())
		dst = binary.AppendUvarint(dst, uint64(x.Nanosecond()))
		if tag == jvZonedTime {
			dst = wire.AppendBytes(dst, name)
			dst = binary.AppendVarint(dst, int64(off))
		}
		return dst, nil
	case time.Duration:
		return binary.AppendVarint(append(dst, jvDuration), int64(x)), nil
	case Decimal:
		return appendDecimal(append(dst, jvDecimal), x.d), nil
	case []any:
		dst = binary.AppendUvarint(append(dst, jvArray), uint64(len(x)))
		var err error
		for _, e := range x {
			if dst, err = appendJoinValue(dst, e, depth+1); err != nil {
				return dst, err
			}
		}
		return dst, nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		dst = binary.AppendUvarint(append(dst, jvObject), uint64(len(x)))
		var err error
		for _, k := range keys {
			dst = wire.AppendBytes(dst, k)
			if dst, err = appendJoinValue(dst, x[k], depth+1); err != nil {
				return dst, err
			}
		}
		return dst, nil
	}
	return dst, fmt.Errorf("a %T has no encoding in a join record", v)
}

// decodeJoinRecord makes r, read from a join's repartition topic in
// config.FormatJoinRecord, the record it was on the near side: its value
// bytes and format, and its decoded key and value, or (a plain JSON or
// raw record) decodes its bytes as the near side did.
func (r *Record) decodeJoinRecord(d *decoder, step string, need *fieldSet) *RecordError {
	if len(r.Value) == 0 || r.Value[0] != joinRecordMagic {
		// Plain JSON (and all the release before wrote).
		r.Format = config.FormatJSON
		return r.decodeFields(d, step, need)
	}
	rd := wire.NewReader(r.Value)
	fail := func(msg string) *RecordError {
		return &RecordError{Step: step, Code: CodeDecode, Reason: "a record of " + joinRecStep + ": " + msg}
	}
	rd.Byte("magic")
	if v := rd.Byte("version"); rd.Err() == nil && v != joinRecordVersion {
		return fail(fmt.Sprintf("version %d; this build reads %d", v, joinRecordVersion))
	}
	flags := rd.Uvarint("flags")
	format := config.Format(rd.String("format"))
	value := readNullable(&rd, "value")
	if rd.Err() != nil {
		return fail(rd.Err().Error())
	}
	switch {
	case flags&^jrFlags != 0:
		return fail(fmt.Sprintf("unknown flags %#x", flags&^jrFlags))
	case !isJSON(format) && format != config.FormatRaw && !format.Registered():
		return fail(fmt.Sprintf("unknown format %q", format))
	}
	var key any
	if flags&jrKey != 0 {
		key = readJoinValue(&rd, 0)
	}
	var fields map[string]any
	var order []string
	if flags&jrFields != 0 {
		n := rd.Count("field count")
		fields = make(map[string]any, n)
		if flags&jrOrder != 0 {
			order = make([]string, 0, n)
		}
		for range n {
			k := rd.String("field name")
			v := readJoinValue(&rd, 0)
			if rd.Err() != nil {
				break
			}
			if _, dup := fields[k]; dup {
				return fail(fmt.Sprintf("field %q twice", k))
			}
			fields[k] = v
			if order != nil {
				order = append(order, k)
			}
		}
	}
	if err := rd.End("join record"); err != nil {
		return fail(err.Error())
	}
	r.Value, r.Format = value, format
	if flags&jrKey != 0 {
		r.key, r.keyDecoded = key, true
	}
	r.changed, r.tombstone, r.decimals = flags&jrChanged != 0, flags&jrTombstone != 0, flags&jrDecimals != 0
	if flags&jrFields == 0 {
		return r.decodeFields(d, step, need)
	}
	r.fields, r.order, r.partial, r.decoded = fields, order, nil, true
	return nil
}

func readNullable(rd *wire.Reader, what string) []byte {
	n := rd.Uvarint(what)
	if rd.Err() != nil || n == 0 {
		return nil
	}
	if n-1 > uint64(rd.Len()) {
		rd.Fail(what, fmt.Sprintf("%d bytes, %d left", n-1, rd.Len()))
		return nil
	}
	return rd.Fixed(what, int(n-1))
}

// readJoinValue reads what appendJoinValue wrote (nil after an error,
// which rd keeps).
func readJoinValue(rd *wire.Reader, depth int) any {
	if depth > joinRecDepth {
		rd.FailHere("value", fmt.Sprintf("nested more than %d deep", joinRecDepth))
		return nil
	}
	tag := rd.Byte("value tag")
	if rd.Err() != nil {
		return nil
	}
	switch tag {
	case jvNull:
		return nil
	case jvFalse:
		return false
	case jvTrue:
		return true
	case jvInt:
		return int(rd.Varint("int"))
	case jvInt64:
		return rd.Varint("int64")
	case jvFloat:
		return math.Float64frombits(rd.Uint64LE("float"))
	case jvString:
		return rd.String("string")
	case jvBytes:
		return slices.Clone(rd.Bytes("bytes"))
	case jvTime, jvZonedTime:
		sec := rd.Varint("time")
		ns := rd.Uvarint("time nanoseconds")
		if rd.Err() == nil && ns >= uint64(time.Second) {
			rd.Fail("time nanoseconds", fmt.Sprintf("%d nanoseconds", ns))
		}
		t := time.Unix(sec, int64(ns)).UTC()
		if tag == jvZonedTime {
			name := rd.String("zone")
			off := rd.Varint("zone offset")
			t = t.In(time.FixedZone(name, int(off)))
		}
		return t
	case jvDuration:
		return time.Duration(rd.Varint("duration"))
	case jvDecimal:
		k := rd.Byte("decimal kind")
		if rd.Err() == nil && k != kindDecimal && k != kindBigDecimal {
			rd.Fail("decimal kind", fmt.Sprintf("kind %d", k))
			return nil
		}
		return Decimal{readDecimal(rd, k)}
	case jvArray:
		n := rd.Count("array length")
		a := make([]any, 0, n)
		for range n {
			a = append(a, readJoinValue(rd, depth+1))
			if rd.Err() != nil {
				return nil
			}
		}
		return a
	case jvObject:
		n := rd.Count("object size")
		m := make(map[string]any, n)
		for range n {
			k := rd.String("object key")
			m[k] = readJoinValue(rd, depth+1)
			if rd.Err() != nil {
				return nil
			}
		}
		return m
	}
	rd.Fail("value tag", fmt.Sprintf("unknown tag %d", tag))
	return nil
}

// AppendJoinValue is AppendJoinRecord without the decoded key: what a
// keyed operator that reads the record's value alone (an interval join:
// engine/shufflecodec.go) needs of it, so that plain JSON crosses as its
// bytes alone whatever its key format. SetJoinRecord reads it back.
func (r *Record) AppendJoinValue(dst []byte) ([]byte, *RecordError) {
	key, decoded := r.key, r.keyDecoded
	r.key, r.keyDecoded = nil, false
	dst, err := r.AppendJoinRecord(dst)
	r.key, r.keyDecoded = key, decoded
	return dst, err
}

// JoinRecordFramed reports whether b, written by AppendJoinRecord or
// AppendJoinValue, is framed (a record decoded, of a schema format, an
// envelope or a map step, or raw) rather than a plain JSON value as it
// was read, which a reader of JSON reads as well.
func JoinRecordFramed(b []byte) bool { return len(b) > 0 && b[0] == joinRecordMagic }

// SetJoinRecord makes r the record b encodes (AppendJoinRecord or
// AppendJoinValue), decoded: its value bytes and format, its fields and
// their order, whether a step changed it and whether it is a delete, as
// the near side's record was, so that AppendValue writes what it wrote
// there. step names the reader in an error (CodeDecode: b is damaged).
// r's other fields are the caller's.
func (r *Record) SetJoinRecord(b []byte, step string) *RecordError {
	r.Value, r.Format = b, config.FormatJoinRecord
	r.fields, r.order, r.partial, r.decoded, r.changed, r.tombstone = nil, nil, nil, false, false, false
	var d decoder
	return r.decodeJoinRecord(&d, step, nil)
}
