package operator

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Group mode's shuffle (engine/shufflecodec.go) runs the stateless steps
// where a record is read and sends the keyed operator only what it reads:
// the group key (with its JSON kind) and, for an aggregate or a window,
// the values of its aggregate evaluated on the record (AppendInputs). The
// keyed side makes a Record of them (SetShuffled), and Add takes the
// values as they came instead of evaluating the expressions again.
//
// The values are encoded one after another, each a tag and its bytes:
//
//	0 absent (count(), which reads nothing)   1 null   2 false   3 true
//	4 int (varint)   5 int64 (varint)   6 float64 (8 bytes, IEEE 754, NaN and ±Inf kept)
//	7 string (uvarint length, bytes)   8 Decimal (uvarint length, its JSON text)
//	9 array or object (uvarint length, typed JSON: what first()/last() state holds)
//
// A value that is not yet in the value domain (a time, an unsigned
// integer) is normalized first, as Add would; a value that cannot be
// (normalize fails) is AppendInputs' error, a dead letter where the record
// was read.
const (
	inAbsent byte = iota
	inNull
	inFalse
	inTrue
	inInt
	inInt64
	inFloat
	inString
	inDecimal
	inJSON
)

// AppendInputs evaluates the aggregate's values on r, after the stateless
// steps, and appends their encoding to dst (see above).
func (a *Aggregator) AppendInputs(dst []byte, r *Record) ([]byte, *RecordError) {
	if r.intsRead && a.ints != nil {
		// The chain read r by the integer path: its integers are the
		// values, and nothing else of r is decoded (nor needs to be).
		for i, e := range a.args {
			if e == nil {
				dst = append(dst, inAbsent)
				continue
			}
			dst = binary.AppendVarint(append(dst, inInt), r.ints[a.ints.arg[i]])
		}
		return dst, nil
	}
	if err := r.decode(&a.dec, a.path); err != nil {
		return dst, err
	}
	for i, e := range a.args {
		if e == nil {
			dst = append(dst, inAbsent)
			continue
		}
		out, err := e.run(&a.vm, r)
		if err != nil {
			return dst, err
		}
		v := r.detach(out)
		if f, ok := v.(float64); !ok || !(math.IsNaN(f) || math.IsInf(f, 0)) {
			// NaN and infinities go as they are: Add's check fails on
			// them with its own error.
			n, nerr := normalize(v)
			if nerr != nil {
				return dst, nerr.withStep(a.valuePath(i))
			}
			v = n
		}
		dst = appendInput(dst, v)
	}
	return dst, nil
}

func appendInput(dst []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(dst, inNull)
	case bool:
		if x {
			return append(dst, inTrue)
		}
		return append(dst, inFalse)
	case int:
		return binary.AppendVarint(append(dst, inInt), int64(x))
	case int64:
		return binary.AppendVarint(append(dst, inInt64), x)
	case float64:
		return binary.LittleEndian.AppendUint64(append(dst, inFloat), math.Float64bits(x))
	case string:
		dst = binary.AppendUvarint(append(dst, inString), uint64(len(x)))
		return append(dst, x...)
	case Decimal:
		return appendLenPrefixed(append(dst, inDecimal), x.appendJSON)
	default:
		return appendLenPrefixed(append(dst, inJSON), func(b []byte) []byte { return appendTyped(b, x) })
	}
}

// appendLenPrefixed appends what enc appends, behind its uvarint length.
func appendLenPrefixed(dst []byte, enc func([]byte) []byte) []byte {
	var small [64]byte
	body := enc(small[:0])
	dst = binary.AppendUvarint(dst, uint64(len(body)))
	return append(dst, body...)
}

// errInputs: the encoded values are not what AppendInputs writes.
var errInputs = errors.New("malformed aggregate values")

// decodeInputs decodes b, the encoded values of a's arguments, into vals.
func (a *Aggregator) decodeInputs(b []byte, vals []any) ([]any, error) {
	for i := range a.args {
		if len(b) == 0 {
			return vals, fmt.Errorf("%w: %d of %d values", errInputs, i, len(a.args))
		}
		tag := b[0]
		b = b[1:]
		if (tag == inAbsent) != (a.args[i] == nil) {
			return vals, fmt.Errorf("%w: value %d: tag %d", errInputs, i, tag)
		}
		var v any
		switch tag {
		case inAbsent, inNull:
		case inFalse, inTrue:
			v = tag == inTrue
		case inInt, inInt64:
			n, k := binary.Varint(b)
			if k <= 0 {
				return vals, fmt.Errorf("%w: value %d: bad integer", errInputs, i)
			}
			b = b[k:]
			if tag == inInt {
				v = int(n)
			} else {
				v = n
			}
		case inFloat:
			if len(b) < 8 {
				return vals, fmt.Errorf("%w: value %d: short float", errInputs, i)
			}
			v, b = math.Float64frombits(binary.LittleEndian.Uint64(b)), b[8:]
		case inString, inDecimal, inJSON:
			n, k := binary.Uvarint(b)
			if k <= 0 || n > uint64(len(b)-k) {
				return vals, fmt.Errorf("%w: value %d: bad length", errInputs, i)
			}
			body := b[k : k+int(n)]
			b = b[k+int(n):]
			switch tag {
			case inString:
				v = string(body)
			case inDecimal:
				d, err := ParseDecimal(string(body))
				if err != nil {
					return vals, fmt.Errorf("%w: value %d: %v", errInputs, i, err)
				}
				v = d
			default:
				var err error
				if v, err = a.dec.decodeValue(body); err != nil {
					return vals, fmt.Errorf("%w: value %d: %v", errInputs, i, err)
				}
			}
		default:
			return vals, fmt.Errorf("%w: value %d: unknown tag %d", errInputs, i, tag)
		}
		vals = append(vals, v)
	}
	if len(b) != 0 {
		return vals, fmt.Errorf("%w: %d bytes after the last value", errInputs, len(b))
	}
	return vals, nil
}

// intsFromInputs reads r's shuffled values (SetShuffled) into r.ints for
// the integer path, as the chain's reading would have (intpath.go), and
// reports whether it could: a string group key, and an integer for every
// value but count(). Otherwise Add takes the values.
func (a *Aggregator) intsFromInputs(r *Record) bool {
	if r.keyKind != keyString {
		return false
	}
	b := r.inputs
	for i, e := range a.args {
		if len(b) == 0 {
			return false
		}
		tag := b[0]
		b = b[1:]
		if e == nil {
			if tag != inAbsent {
				return false
			}
			continue
		}
		if tag != inInt && tag != inInt64 {
			return false
		}
		n, k := binary.Varint(b)
		if k <= 0 {
			return false
		}
		b = b[k:]
		r.ints[a.ints.arg[i]] = n
	}
	if len(b) != 0 {
		return false
	}
	r.intsRead = true
	return true
}

// KeyKind is the JSON type of a record's group key (a string, a number or
// a bool), which its text alone does not tell; the shuffle carries it.
type KeyKind = keyKind

// GroupKeyKind is the JSON type of r's group key, after a key_by step.
func (r *Record) GroupKeyKind() KeyKind { return r.keyKind }

// ValidKeyKind reports whether k is a kind a key_by step gives.
func ValidKeyKind(k KeyKind) bool { return k <= keyBool }

// SetShuffled makes r the record a keyed operator reads on the far side
// of group mode's shuffle: its group key and kind, and inputs, the
// encoding of its aggregate's values (AppendInputs; nil for an interval
// join, which reads r's value). r's value, metadata and join side are the
// caller's to set.
func (r *Record) SetShuffled(groupKey string, kind KeyKind, inputs []byte) {
	r.GroupKey, r.Keyed, r.keyKind, r.inputs = groupKey, true, kind, inputs
}
