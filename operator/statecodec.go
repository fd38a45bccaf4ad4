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
		acc := into.accs[i]
		switch fn {
		case config.AggCount:
			c, ok := exactUvarint(payload)
			if !ok || c > math.MaxInt64 {
				return false
			}
			acc.(*CountAcc).n = int64(c)
		case config.AggSum:
			if len(payload) < 2 || payload[0] != kindInt {
				return false
			}
			v, ok := exactVarint(payload[1:])
			if !ok {
				return false
			}
			*acc.(*SumAcc) = SumAcc{i: v}
		case config.AggMin, config.AggMax:
			a := acc.(*MinMaxAcc)
			switch {
			case len(payload) == 1 && payload[0] == kindEmpty:
				*a = MinMaxAcc{max: a.max}
			case len(payload) >= 2 && payload[0] == kindInt:
				v, ok := exactVarint(payload[1:])
				if !ok {
					return false
				}
				*a = MinMaxAcc{max: a.max, has: true, i: v}
			default:
				return false
			}
		case config.AggFirst, config.AggLast:
			a := acc.(*FirstLastAcc)
			switch {
			case len(payload) == 1 && payload[0] == 0:
				*a = FirstLastAcc{last: a.last}
			case len(payload) >= 2 && payload[0] == 1 && payload[1] < 0x80 && int(payload[1]) == len(payload)-2:
				// a one-byte length (values this short always have one)
				v, ok := parseSmallInt(payload[2:])
				if !ok {
					return false
				}
				*a = FirstLastAcc{last: a.last, has: true, intKind: intInt, i: v}
			default:
				return false
			}
		default:
			return false
		}
	}
	if len(b) != 0 {
		return false
	}
	into.keyKind = keyString
	return true
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
	if !l.fast || s.keyKind != keyString {
		return b, false
	}
	start := len(b)
	b = append(b, l.header...)
	for i, fn := range l.funcs {
		b = append(b, l.prefixes[i]...)
		lenAt := len(b)
		b = append(b, 0, accVersion, l.tags[i])
		switch fn {
		case config.AggCount:
			b = binary.AppendUvarint(b, uint64(s.accs[i].(*CountAcc).n))
		case config.AggSum:
			a := s.accs[i].(*SumAcc)
			if a.d != nil {
				return b[:start], false
			}
			b = binary.AppendVarint(append(b, kindInt), a.i)
		case config.AggMin, config.AggMax:
			a := s.accs[i].(*MinMaxAcc)
			switch {
			case !a.has:
				b = append(b, kindEmpty)
			case a.d != nil:
				return b[:start], false
			default:
				b = binary.AppendVarint(append(b, kindInt), a.i)
			}
		case config.AggFirst, config.AggLast:
			a := s.accs[i].(*FirstLastAcc)
			switch {
			case !a.has:
				b = append(b, 0)
			case a.intKind == intNone:
				return b[:start], false
			default:
				b = append(b, 1, 0)
				at := len(b)
				b = strconv.AppendInt(b, a.i, 10) // at most 20 bytes
				b[at-1] = byte(len(b) - at)
			}
		}
		b[lenAt] = byte(len(b) - lenAt - 1) // at most 2 + 1 + 1 + 20
	}
	return b, true
}
