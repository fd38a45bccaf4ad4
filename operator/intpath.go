package operator

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"unsafe"

	"github.com/eoflow/pipeline/config"
)

// The integer path. Most keyed jobs are one chain: key_by of a top-level
// field, then an aggregate whose values count records or fold top-level
// fields that hold integers (sum(amount), max(latency_ms), last(ts)). The
// general path builds a value per field it reads (a string for the key,
// an interface box for each number), evaluates each argument, decodes the
// key's state into accumulators behind interfaces, adds, and encodes it
// again: about two thirds of such a job's per-record CPU.
//
// The integer path does the same work on the bytes: Chain.Process reads
// the key as a slice of the record's value and the integers into the
// record (intPath.read), and the runtime folds them into the key's state
// through an IntState, which holds the values as int64s, keeps them in
// the store in a native form of its own (below), and writes the same
// encoding (the fast form of statecodec.go) and the same output as
// AggregateState. Whatever it does not know, it declines, and the
// general path takes the record as before: a key that is not a string
// without escapes (a number, a string with an escape), a field that is
// not an integer literal that fits int64, a missing field, invalid JSON,
// a state not in the fast form (a decimal sum, a key of another kind), a
// sum that would overflow. Only the general path explains errors, so a record's
// dead letter is the same whichever path saw it first.
// TestIntPathMatchesGeneral and FuzzIntPath hold the two paths together:
// where the integer path takes a record, it gives the general path's key,
// state encoding, change flag and output, byte for byte.

// maxIntValues is the most values an aggregate may have for the integer
// path (an IntState holds them in an array).
const maxIntValues = 16

// intPath is the compiled integer path of a chain (nil: the chain is not
// of its shape).
type intPath struct {
	key    string   // the key_by field
	fields []string // the fields the values read, each once (at most maxSlots)
	// arg is, per aggregate value, the index of its field in fields (-1:
	// count(), which reads none).
	arg []int8
	// all has a bit per field and keyBit: what a record must have.
	all uint8
}

// equal reports whether p and q read and fold the same way.
func (p *intPath) equal(q *intPath) bool {
	return p.key == q.key && slices.Equal(p.fields, q.fields) && slices.Equal(p.arg, q.arg) && p.all == q.all
}

// keyBit marks the key field among the fields a read has seen.
const keyBit = 1 << maxSlots

// compileIntPath returns the integer path of a chain of steps and agg, or
// nil when the chain is not of its shape: exactly one step, key_by of a
// bare field, then an aggregate (not a window) without a TTL whose values
// are count() or count, sum, min, max, first or last of bare fields other
// than the key.
func compileIntPath(steps []step, agg *Aggregator, window *config.Window) *intPath {
	if len(steps) != 1 || steps[0].kind != config.StepKeyBy || steps[0].expr.field == "" ||
		agg == nil || agg.layout == nil || window != nil || !agg.layout.fast || len(agg.args) > maxIntValues {
		return nil
	}
	p := &intPath{key: steps[0].expr.field, all: keyBit}
	for _, e := range agg.args {
		if e == nil {
			p.arg = append(p.arg, -1)
			continue
		}
		if e.field == "" || e.field == p.key {
			return nil
		}
		j := slices.Index(p.fields, e.field)
		if j < 0 {
			if len(p.fields) == maxSlots {
				return nil
			}
			j = len(p.fields)
			p.fields = append(p.fields, e.field)
			p.all |= 1 << j
		}
		p.arg = append(p.arg, int8(j))
	}
	return p
}

// read reads r's value for the integer path, the way Process would
// decode it, and reports whether it could. On true r is keyed: GroupKey is
// the key field's string, aliasing r.Value (so that no string is made per
// record), and r.ints holds the integers of p.fields. On false r is as it
// was, and Process takes the general path.
func (p *intPath) read(d *decoder, r *Record) bool {
	s := scanner{d: d, data: r.Value}
	if s.objectStart() != nil {
		return false
	}
	s.depth++
	s.skipSpace()
	if s.pos < len(s.data) && s.data[s.pos] == '}' {
		return false // no key
	}
	var (
		seen     uint8
		key      []byte
		keyStart int
		ints     [maxSlots]int64
	)
	for {
		name, err := s.memberKey()
		if err != nil {
			return false
		}
		j := -1
		for k, f := range p.fields {
			if string(name) == f { // compared without allocating
				j = k
				break
			}
		}
		switch {
		case string(name) == p.key:
			s.skipSpace()
			if s.pos >= len(s.data) || s.data[s.pos] != '"' {
				return false // not a string: the general path keys it
			}
			s.pos++
			keyStart = s.pos
			if key, err = s.str(); err != nil {
				return false
			}
			if s.pos-keyStart != len(key)+1 {
				// Escaped: str unescaped a copy, shorter than the text.
				// Without escapes the text is the string itself (UTF-8
				// included), so the key can alias it.
				return false
			}
			seen |= keyBit
		case j >= 0:
			s.skipSpace()
			if s.pos >= len(s.data) || s.data[s.pos] != '-' && (s.data[s.pos] < '0' || s.data[s.pos] > '9') {
				return false
			}
			i, isInt, _, err := s.scanNumber()
			if err != nil || !isInt {
				return false
			}
			ints[j] = i // a repeated member: the last one counts, as in a map
			seen |= 1 << j
		default:
			if s.skipValue() != nil {
				return false
			}
		}
		done, err := s.afterMember('}')
		if err != nil {
			return false
		}
		if done {
			break
		}
	}
	if s.end() != nil || seen != p.all {
		return false
	}
	r.GroupKey, r.Keyed, r.keyKind = "", true, keyString
	if len(key) > 0 {
		r.GroupKey = unsafe.String(&s.data[keyStart], len(key))
	}
	r.ints, r.intsRead = ints, true
	return true
}

// readDecoded is read for a record already decoded (a branch of a job
// graph whose other branches needed its value decoded): the same key and
// integers, read from the decoded fields instead of the bytes. It takes
// what the general path would key and fold alike: a string key (escapes
// undone, as the general path keys it too) and integer fields.
func (p *intPath) readDecoded(r *Record) bool {
	k, ok := r.field(p.key)
	if !ok {
		return false
	}
	key, ok := k.(string)
	if !ok {
		return false
	}
	var ints [maxSlots]int64
	for j, f := range p.fields {
		v, ok := r.field(f)
		if !ok {
			return false
		}
		switch n := v.(type) {
		case int:
			ints[j] = int64(n)
		case int64:
			ints[j] = n
		default:
			return false
		}
	}
	r.GroupKey, r.Keyed, r.keyKind = key, true, keyString
	r.ints, r.intsRead = ints, true
	return true
}

// IntState is an AggregateState whose values all hold integers, as
// int64s: the integer path's state of one key (see the top of this
// file). It reads and writes the same encoding as AggregateState, and
// writes the same output. One is reused for every record.
type IntState struct {
	layout *layout
	vals   [maxIntValues]int64
	// has: bit i says value i holds an integer; an empty min, max, first
	// or last does not, a count or a sum always does.
	has uint32
}

// NewIntState returns an empty IntState for the aggregate's integer
// path, or nil when its chain has none: then records never come read for
// it (Record.intsRead), and AddInts always declines.
func (a *Aggregator) NewIntState() *IntState {
	if a.ints == nil {
		return nil
	}
	return &IntState{layout: a.layout}
}

// Reset makes s the state of a group key not seen before.
func (s *IntState) Reset() {
	s.vals, s.has = [maxIntValues]int64{}, 0
	for i, fn := range s.layout.funcs {
		if fn == config.AggCount || fn == config.AggSum {
			s.has |= 1 << i
		}
	}
}

// The integer path keeps states in the store in a form of its own, the
// native form: a tag byte, the has bits (uint32) and the values (int64
// each), little-endian, fixed in size, so that a record reads and writes
// a state with a few loads and stores instead of parsing and printing its
// encoding. The changelog and the savepoints never see it: the store
// gives every value through AppendChangelog (state.Compact.SetEncoding).
// A restored state arrives as its encoding (the fast form), which Decode
// reads too. nativeTag is a byte no encoding starts with (versions are
// 1 to 3).
const nativeTag = 0xFE

// NativeState reports whether b, a stored state, is in the integer
// path's native form rather than an encoding.
func NativeState(b []byte) bool { return len(b) > 0 && b[0] == nativeTag }

// AppendNative appends s in the native form.
func (s *IntState) AppendNative(b []byte) []byte {
	b = binary.LittleEndian.AppendUint32(append(b, nativeTag), s.has)
	for _, v := range s.vals[:len(s.layout.funcs)] {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	return b
}

// Decode replaces s with the state in b, in the native form or encoded,
// and reports whether it could: false when b is an encoding other than
// the fast form (a decimal sum, a string value, a key that is not a
// string, a damaged state), which only the general codec reads. On false
// s must be Reset or decoded again.
func (s *IntState) Decode(b []byte) bool {
	if NativeState(b) {
		return s.decodeNative(b)
	}
	s.has = 0
	return s.layout.fastValues(b, func(i int, v int64, has bool) {
		s.vals[i] = v
		if has {
			s.has |= 1 << i
		}
	})
}

// decodeNative reads b, a state in the native form of s's layout.
func (s *IntState) decodeNative(b []byte) bool {
	n := len(s.layout.funcs)
	if len(b) != 5+8*n {
		return false
	}
	s.has = binary.LittleEndian.Uint32(b[1:])
	for i := range n {
		s.vals[i] = int64(binary.LittleEndian.Uint64(b[5+8*i:]))
	}
	return s.has>>n == 0
}

// AppendChangelog appends the encoding of a stored state, b: b itself
// when it is an encoding, the fast form of it when it is in the native
// form. It uses s, a state of the same aggregate, as its scratch.
func (s *IntState) AppendChangelog(dst, b []byte) []byte {
	if !NativeState(b) {
		return append(dst, b...)
	}
	if !s.decodeNative(b) {
		// Only AppendNative of this layout writes the native form.
		panic(fmt.Sprintf("operator: a stored state in the native form of another aggregate (%d bytes, %d values)", len(b), len(s.layout.funcs)))
	}
	return s.AppendBinary(dst)
}

// AppendBinary appends s's encoding: AggregateState.AppendBinary's, byte
// for byte.
func (s *IntState) AppendBinary(b []byte) []byte {
	b, _ = s.layout.appendFastValues(b, func(i int) (int64, bool, bool) {
		return s.vals[i], s.has&(1<<i) != 0, true
	})
	return b
}

// AppendOutput appends the output record value for groupKey, a string:
// AggregateState.AppendOutput's, byte for byte.
func (s *IntState) AppendOutput(dst []byte, groupKey string) []byte {
	if out := s.layout.intOut; out != nil {
		if b, ok := out.AppendIntOutput(dst, groupKey, s.vals[:len(s.layout.funcs)], s.has); ok {
			return b
		}
	}
	dst = append(dst, `{"key":`...)
	dst = appendString(dst, groupKey)
	for i := range s.layout.funcs {
		dst = append(dst, s.layout.members[i]...)
		if s.has&(1<<i) == 0 {
			dst = append(dst, "null"...)
		} else {
			dst = strconv.AppendInt(dst, s.vals[i], 10)
		}
	}
	return append(dst, '}')
}

// AddInts is Add for a record the chain read by the integer path: it
// adds r's integers to s and reports whether s changed, as Add would. ok
// false declines, leaving s unchanged: r was not read by the integer path
// (its integers are not there), or a sum would overflow, which only Add
// reports (CodeOverflow). Then Add takes r.
func (a *Aggregator) AddInts(s *IntState, r *Record) (changed, ok bool) {
	if a.ints == nil || !r.intsRead && (r.inputs == nil || !a.intsFromInputs(r)) {
		return false, false
	}
	funcs := a.layout.funcs
	// All or nothing: an overflowing sum is the only way to fail, and it
	// is found before anything changes.
	for i, fn := range funcs {
		if fn == config.AggSum {
			if _, overflow := addInt64(s.vals[i], r.ints[a.ints.arg[i]]); overflow {
				return false, false
			}
		}
	}
	for i, fn := range funcs {
		if fn == config.AggCount {
			s.vals[i]++
			changed = true
			continue
		}
		v, has := r.ints[a.ints.arg[i]], s.has&(1<<i) != 0
		switch fn {
		case config.AggSum:
			changed = changed || v != 0
			s.vals[i] += v
		case config.AggMin: // ties keep the earlier value
			if !has || v < s.vals[i] {
				s.vals[i], s.has, changed = v, s.has|1<<i, true
			}
		case config.AggMax:
			if !has || v > s.vals[i] {
				s.vals[i], s.has, changed = v, s.has|1<<i, true
			}
		case config.AggFirst:
			if !has {
				s.vals[i], s.has, changed = v, s.has|1<<i, true
			}
		case config.AggLast:
			// Changed even when equal, as FirstLastAcc reports it.
			s.vals[i], s.has, changed = v, s.has|1<<i, true
		}
	}
	return changed, true
}
