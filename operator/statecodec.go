package operator

import (
	"encoding/binary"
	"math"
	"strconv"

	"github.com/eoflow/pipeline/config"
)

// The running aggregate keeps each key's state as its changelog encoding
// and decodes and re-encodes it for every record (state.Compact). The
// general codec (AppendBinary, unmarshal) goes through a wire.Reader, an
// interface call per value and a length shuffle; for the states nearly
// every job has — a string group key, no TTL, and values that are integers
// (count, an integer sum/min/max, an integer first/last such as a
// timestamp) — the encoding is a fixed sequence of known bytes around a
// few varints. The fast codec below reads and writes exactly that
// sequence, in the same format, byte for byte; anything else (another key
// kind, a TTL, a decimal, a string value, values reordered in the
// configuration, any irregular or corrupt input) goes to the general codec,
// which alone produces errors. TestFastCodecMatchesGeneral holds the two
// together.

// fastFunc says whether the fast codec knows fn's integer states.
func fastFunc(fn config.AggregateFunc) bool {
	switch fn {
	case config.AggCount, config.AggSum, config.AggMin, config.AggMax, config.AggFirst, config.AggLast:
		return true
	}
	return false
}

// decodeFast decodes b into into when b is the fast form of l's states
// and reports whether it did; on false, into may be partly written and
// the general codec must decode b (it overwrites every value).
func (l *layout) decodeFast(b []byte, into *AggregateState) bool {
	ok := l.fastValues(b, func(i int, v int64, has bool) {
		switch a := into.accs[i].(type) {
		case *CountAcc:
			a.n = v
		case *SumAcc:
			*a = SumAcc{i: v}
		case *MinMaxAcc:
			*a = MinMaxAcc{max: a.max, has: has, i: v}
		case *FirstLastAcc:
			*a = FirstLastAcc{last: a.last}
			if has {
				a.has, a.intKind, a.i = true, intInt, v
			}
		}
	})
	if ok {
		into.keyKind = keyString
	}
	return ok
}

// fastValues walks b, a state in the fast form of l, and gives set each
// value's integer in order (has false: an empty min, max, first or last;
// count and sum always have one). It reports whether b is in the fast
// form; on false set may have seen some of the values. It is the one
// reader of the fast form: decodeFast and IntState.Decode both use it.
func (l *layout) fastValues(b []byte, set func(i int, v int64, has bool)) bool {
	if !l.fast || len(b) < len(l.header) || string(b[:len(l.header)]) != string(l.header) {
		return false
	}
	b = b[len(l.header):]
	for i, fn := range l.funcs {
		p := l.prefixes[i]
		// name, a one-byte length (< 0x80), version, function tag
		if len(b) < len(p)+3 || string(b[:len(p)]) != string(p) {
			return false
		}
		b = b[len(p):]
		n := int(b[0])
		if n >= 0x80 || n < 2 || len(b) < 1+n || b[1] != accVersion || b[2] != l.tags[i] {
			return false
		}
		payload := b[3 : 1+n]
		b = b[1+n:]
		switch fn {
		case config.AggCount:
			c, ok := exactUvarint(payload)
			if !ok || c > math.MaxInt64 {
				return false
			}
			set(i, int64(c), true)
		case config.AggSum:
			if len(payload) < 2 || payload[0] != kindInt {
				return false
			}
			v, ok := exactVarint(payload[1:])
			if !ok {
				return false
			}
			set(i, v, true)
		case config.AggMin, config.AggMax:
			switch {
			case len(payload) == 1 && payload[0] == kindEmpty:
				set(i, 0, false)
			case len(payload) >= 2 && payload[0] == kindInt:
				v, ok := exactVarint(payload[1:])
				if !ok {
					return false
				}
				set(i, v, true)
			default:
				return false
			}
		case config.AggFirst, config.AggLast:
			switch {
			case len(payload) == 1 && payload[0] == 0:
				set(i, 0, false)
			case len(payload) >= 2 && payload[0] == 1 && payload[1] < 0x80 && int(payload[1]) == len(payload)-2:
				// a one-byte length (values this short always have one)
				v, ok := parseSmallInt(payload[2:])
				if !ok {
					return false
				}
				set(i, v, true)
			default:
				return false
			}
		default:
			return false
		}
	}
	return len(b) == 0
}

// exactUvarint reads b as exactly one minimally encoded uvarint, the only
// form the general codec accepts.
func exactUvarint(b []byte) (uint64, bool) {
	v, n := binary.Uvarint(b)
	if n <= 0 || n != len(b) || n > 1 && b[n-1] == 0 {
		return 0, false
	}
	return v, true
}

// exactVarint is exactUvarint for a zig-zag varint.
func exactVarint(b []byte) (int64, bool) {
	u, ok := exactUvarint(b)
	return int64(u>>1) ^ -int64(u&1), ok
}

// appendFast appends the encoding of s when it has the fast form and
// reports whether it did; on false b is returned unchanged (in length).
func (l *layout) appendFast(b []byte, s *AggregateState) ([]byte, bool) {
	if s.keyKind != keyString {
		return b, false
	}
	return l.appendFastValues(b, func(i int) (v int64, has, ok bool) {
		switch a := s.accs[i].(type) {
		case *CountAcc:
			return a.n, true, true
		case *SumAcc:
			return a.i, true, a.d == nil
		case *MinMaxAcc:
			return a.i, a.has, !a.has || a.d == nil
		case *FirstLastAcc:
			return a.i, a.has, !a.has || a.intKind != intNone
		}
		return 0, false, false
	})
}

// appendFastValues appends the fast form of the state whose value i is
// get(i): its integer, whether it has one (see fastValues), and ok false
// when it is not an integer (a decimal sum, a string last value), which
// the fast form cannot hold. On false b is returned unchanged (in
// length). It is the one writer of the fast form: appendFast and
// IntState.AppendBinary both use it.
func (l *layout) appendFastValues(b []byte, get func(i int) (v int64, has, ok bool)) ([]byte, bool) {
	if !l.fast {
		return b, false
	}
	start := len(b)
	b = append(b, l.header...)
	for i, fn := range l.funcs {
		v, has, ok := get(i)
		if !ok {
			return b[:start], false
		}
		b = append(b, l.prefixes[i]...)
		lenAt := len(b)
		b = append(b, 0, accVersion, l.tags[i])
		switch fn {
		case config.AggCount:
			b = binary.AppendUvarint(b, uint64(v))
		case config.AggSum:
			b = binary.AppendVarint(append(b, kindInt), v)
		case config.AggMin, config.AggMax:
			if !has {
				b = append(b, kindEmpty)
			} else {
				b = binary.AppendVarint(append(b, kindInt), v)
			}
		case config.AggFirst, config.AggLast:
			if !has {
				b = append(b, 0)
			} else {
				b = append(b, 1, 0)
				at := len(b)
				b = strconv.AppendInt(b, v, 10) // at most 20 bytes
				b[at-1] = byte(len(b) - at)
			}
		}
		b[lenAt] = byte(len(b) - lenAt - 1) // at most 2 + 1 + 1 + 20
	}
	return b, true
}
