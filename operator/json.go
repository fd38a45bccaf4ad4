package operator

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"maps"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// The JSON decoder below exists for two reasons encoding/json cannot serve:
//
//   - integers must stay exact: "9007199254740993" must arrive as the int
//     9007199254740993, not as a float64 and not as a json.Number string that
//     every expression would have to convert per use;
//   - it is the hot path: one record, one map, one box per number, one string
//     per string value, and object keys interned across records.
//
// It accepts exactly the JSON that encoding/json accepts and produces the same
// values as json.Decoder with UseNumber after converting each json.Number (a
// differential fuzz test, FuzzDecodeJSON, holds it to that), with two
// differences: a number beyond float64's range is an error here, because no
// expression could use it, and so is invalid UTF-8 (below).
//
// Values: nil, bool, string, int (int64 where int is 32 bits), float64,
// []any, map[string]any. An integer literal (no fraction, no exponent) that
// fits int64 is an integer; any other number is a float64. Duplicate keys:
// the last one wins, as in encoding/json.
//
// Invalid UTF-8: a string (a value or an object key, read or skipped)
// holding bytes that are not UTF-8 is an error naming the byte and its
// offset, where encoding/json silently replaces them with U+FFFD. RFC 8259
// requires UTF-8, and a silent replacement changes a record's text (and
// its group key) without a trace. An escaped lone surrogate (\ud800) is
// valid JSON text and still becomes U+FFFD, as in encoding/json.

// maxDepth bounds nesting so hostile input cannot exhaust the stack; it is
// the limit encoding/json uses.
const maxDepth = 10000

const (
	maxInterned    = 1024 // keys remembered per decoder
	maxInternedLen = 64   // longer keys are not worth remembering

	// Short string values (a country, a status, an event type) repeat
	// across records. Boxing a string into an interface allocates twice
	// (bytes and header); the cache keeps the boxed value. It is
	// direct-mapped: each value has one slot, chosen by a hash of its
	// bytes, and a new value simply takes the slot over. So values that
	// stop recurring make room again, and a field with more distinct
	// values than slots (a key per user) costs a hash and an overwrite per
	// miss, where a map would be filled and cleared over and over.
	maxCachedValues   = 4096 // slots, a power of two
	maxCachedValueLen = 16
	// cacheAfter is how many short strings a decoder boxes before it
	// allocates the cache (96 KB), so that one-shot decoders (a state
	// restore, Expr.Eval) never do.
	cacheAfter = 64
	// A field with far more values than slots (a key per user) misses
	// nearly always, and a miss costs a hash and a slot that is a cache
	// miss of the CPU's own. When fewer than one lookup in eight hit over
	// cacheWindow lookups, the next cacheBypass strings are boxed
	// without looking; then the cache is tried again.
	cacheWindow = 4096
	cacheBypass = 16 * cacheWindow
)

// decoder holds what survives from one record to the next. Not safe for
// concurrent use: every Chain and Aggregator owns one.
type decoder struct {
	keys   map[string]string // interned object keys
	values []cachedValue     // boxed short string values, maxCachedValues slots
	boxed  int               // short strings boxed before values existed
	seed   maphash.Seed      // of the slot hash
	// lookups and hits count cache lookups over the current window of
	// cacheWindow; bypass is how many more strings skip the cache after
	// a window that hardly ever hit.
	lookups, hits, bypass int
	scratch               []byte     // unescaped strings
	hint                  int        // field count of the last top-level object
	maps                  *fieldMaps // where top-level maps come from, if set
	// spaced: the scanner skipped whitespace between tokens since it was
	// last cleared. A valid value parsed without is already compact: its
	// output is its bytes (Record.AppendValue).
	spaced bool
	// inputs decode the topics that need more than Record.Format
	// (Chain.SetInputs); inInput: decoding through one now.
	inputs  Inputs
	inInput bool
	// exact: a number with a fraction or exponent decodes as the Decimal
	// its text spells (DecodeJSONObjectExact).
	exact bool
}

// cachedValue is one slot of decoder.values: a boxed string and its hash.
type cachedValue struct {
	// h is the value's slot hash: a miss (most lookups of a field with
	// more values than slots) is told by it without reading the cached
	// string's bytes, a cache miss of their own.
	h uint64
	v any // a string
}

// scanner is one parse of one input.
type scanner struct {
	d     *decoder
	data  []byte
	pos   int
	depth int
	// slow: skipFast refused a value of this input, so skipValue no
	// longer tries it.
	slow bool
}

type syntaxError struct {
	msg string
	off int
}

func (e *syntaxError) Error() string {
	return e.msg + " at offset " + strconv.Itoa(e.off)
}

var errNotObject = errors.New("value is not a JSON object")

// decodeObject parses data, which must hold exactly one JSON object.
func (d *decoder) decodeObject(data []byte) (map[string]any, error) {
	return d.decodeFields(data, nil)
}

// decodeFields is decodeObject building only the top-level fields in need
// (every field when need is nil). The rest is still parsed, to the same
// errors at the same offsets, but nothing of it is built: whether a value
// decodes does not depend on what is read of it.
func (d *decoder) decodeFields(data []byte, need *fieldSet) (map[string]any, error) {
	s := scanner{d: d, data: data}
	if err := s.objectStart(); err != nil {
		return nil, err
	}
	reused := d.maps.get()
	m, err := s.object(d.hint, reused, need)
	if err == nil {
		err = s.end()
	}
	if err != nil {
		d.maps.put(reused)
		return nil, err
	}
	d.hint = len(m)
	return m, nil
}

// objectStart reads up to and including the '{' of a top-level object,
// or says why the data is not one.
func (s *scanner) objectStart() error {
	s.skipSpace()
	data := s.data
	if s.pos == len(data) {
		if len(data) == 0 {
			return errors.New("empty value, want a JSON object")
		}
		return errors.New("blank value, want a JSON object")
	}
	if data[s.pos] != '{' {
		// Say what it is when it is valid JSON of another kind: that is the
		// common mistake (a bare number or array on the topic).
		if _, err := s.d.decodeValue(data); err == nil {
			return fmt.Errorf("%w (got %s)", errNotObject, kindName(data[s.pos]))
		}
		return &syntaxError{"invalid character " + quoteChar(data[s.pos]) + " looking for beginning of value", s.pos}
	}
	s.pos++
	return nil
}

// fieldSet is the set of top-level fields a chain reads. A set made from
// another by adding fields (Chain.AlsoRead) remembers it as its parent, so
// that what the parent covers, it covers too.
type fieldSet struct {
	names  map[string]string // each name to itself: the key to build with
	parent *fieldSet
	// slots lists the names, sorted, when they are few enough
	// (maxSlots) for a record to hold their values in Record.slots
	// instead of a map; nil otherwise.
	slots []string
}

// maxSlots is the most fields a record decodes into slots. A keyed sum
// reads two or three; a map per record (its assignments, lookups and
// hashing) was ~10% of the CPU of one.
const maxSlots = 4

func newFieldSet(parent *fieldSet, names ...[]string) *fieldSet {
	f := &fieldSet{names: map[string]string{}, parent: parent}
	if parent != nil {
		for n := range parent.names {
			f.names[n] = n
		}
	}
	for _, ns := range names {
		for _, n := range ns {
			f.names[n] = n
		}
	}
	if len(f.names) <= maxSlots {
		// Not nil even when empty: a chain that reads no field decodes
		// into no slots.
		f.slots = append(make([]string, 0, len(f.names)), slices.Sorted(maps.Keys(f.names))...)
	}
	return f
}

// slotOf is the slot of name in f, -1 if it has none.
func slotOf[T string | []byte](f *fieldSet, name T) int {
	for i, n := range f.slots {
		if n == string(name) { // compared without allocating
			return i
		}
	}
	return -1
}

// lookup returns the member name to build for name, and whether it is in
// the set: one lookup both tells and interns.
func (f *fieldSet) lookup(name []byte) (string, bool) {
	k, ok := f.names[string(name)] // no allocation for the lookup
	return k, ok
}

// covers reports whether every field e reads is in f.
func (f *fieldSet) covers(e *Expr) bool {
	for p := f; p != nil; p = p.parent {
		if e.within == p {
			return true // checked when the chain was compiled
		}
	}
	if e.env {
		return false
	}
	for _, n := range e.reads {
		if _, ok := f.names[n]; !ok {
			return false
		}
	}
	return true
}

// decodeSlots is decodeFields for a set with slots: the values of its
// fields go to slots[i] (bit i of the returned mask says the field was
// there), the rest is parsed to the same errors and not built.
func (d *decoder) decodeSlots(data []byte, need *fieldSet, slots *[maxSlots]any) (uint8, error) {
	if len(need.slots) == 0 && d.validObject(data) {
		return 0, nil // nothing to build: valid is all there is to know
	}
	return d.scanSlots(&scanner{d: d, data: data}, need, slots)
}

// scanSlots is decodeSlots by the scanner s, which is at the start of
// the data.
func (d *decoder) scanSlots(s *scanner, need *fieldSet, slots *[maxSlots]any) (uint8, error) {
	if err := s.objectStart(); err != nil {
		return 0, err
	}
	var has uint8
	s.depth++
	s.skipSpace()
	if s.pos < len(s.data) && s.data[s.pos] == '}' {
		s.pos++
		s.depth--
		return 0, s.end()
	}
	for {
		kb, err := s.memberKey()
		if err != nil {
			return 0, err
		}
		if i := slotOf(need, kb); i >= 0 {
			v, err := s.value()
			if err != nil {
				return 0, err
			}
			slots[i] = v // a repeated member: the last one counts, as in a map
			has |= 1 << i
		} else if err := s.skipValue(); err != nil {
			return 0, err
		}
		done, err := s.afterMember('}')
		if err != nil {
			return 0, err
		}
		if done {
			return has, s.end()
		}
	}
}

// validObject reports whether data is one valid JSON object, as
// decodeSlots would parse it, by skipFast. False may also mean nesting
// deeper than skipFast follows: the scanner then decides.
func (d *decoder) validObject(data []byte) bool {
	var around bool // whitespace before or after the object
	pos := skipSpaces(data, 0, &around)
	if pos == len(data) || data[pos] != '{' {
		return false
	}
	end, inside, ok := skipFast(data, pos, maxDepth)
	if !ok || skipSpaces(data, end, &around) != len(data) {
		return false
	}
	d.spaced = d.spaced || inside || around
	return true
}

// decodeValue parses data, which must hold exactly one JSON value of any
// kind.
func (d *decoder) decodeValue(data []byte) (any, error) {
	s := scanner{d: d, data: data}
	v, err := s.value()
	if err != nil {
		return nil, err
	}
	if err := s.end(); err != nil {
		return nil, err
	}
	return v, nil
}

func (s *scanner) end() error {
	s.skipSpace()
	if s.pos != len(s.data) {
		return &syntaxError{"invalid character " + quoteChar(s.data[s.pos]) + " after top-level value", s.pos}
	}
	return nil
}

func kindName(c byte) string {
	switch c {
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	}
	return "number"
}

func quoteChar(c byte) string {
	if c == '\'' {
		return `'\''`
	}
	if c == '"' {
		return `'"'`
	}
	s := strconv.Quote(string(rune(c)))
	if c >= utf8.RuneSelf {
		s = fmt.Sprintf(`"\x%02x"`, c)
	}
	return "'" + s[1:len(s)-1] + "'"
}

func (s *scanner) errEOF() error {
	return &syntaxError{"unexpected end of JSON input", s.pos}
}

func (s *scanner) errChar(context string) error {
	if s.pos >= len(s.data) {
		return s.errEOF()
	}
	return &syntaxError{"invalid character " + quoteChar(s.data[s.pos]) + " " + context, s.pos}
}

func (s *scanner) skipSpace() {
	// Compact JSON has no space between tokens: one test and out.
	if s.pos < len(s.data) && s.data[s.pos] > ' ' {
		return
	}
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
			s.d.spaced = true
		default:
			return
		}
	}
}

func (s *scanner) value() (any, error) {
	s.skipSpace()
	if s.pos >= len(s.data) {
		return nil, s.errEOF()
	}
	switch c := s.data[s.pos]; {
	case c == '{':
		s.pos++
		return s.object(0, nil, nil)
	case c == '[':
		s.pos++
		return s.array()
	case c == '"':
		s.pos++
		b, err := s.str()
		if err != nil {
			return nil, err
		}
		return s.d.boxString(b), nil
	case c == 't':
		return true, s.literal("true")
	case c == 'f':
		return false, s.literal("false")
	case c == 'n':
		return nil, s.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	}
	return nil, s.errChar("looking for beginning of value")
}

func (s *scanner) literal(word string) error {
	for i := 0; i < len(word); i++ {
		if s.pos >= len(s.data) {
			return s.errEOF()
		}
		if s.data[s.pos] != word[i] {
			return s.errChar("in literal " + word)
		}
		s.pos++
	}
	return nil
}

// object parses the members after '{' into m, a new map if nil, building
// only the members in need (all when need is nil) and skipping the others.
func (s *scanner) object(hint int, m map[string]any, need *fieldSet) (map[string]any, error) {
	if s.depth++; s.depth > maxDepth {
		return nil, &syntaxError{"exceeded max depth", s.pos}
	}
	if m == nil {
		m = make(map[string]any, hint)
	}
	s.skipSpace()
	if s.pos < len(s.data) && s.data[s.pos] == '}' {
		s.pos++
		s.depth--
		return m, nil
	}
	for {
		kb, err := s.memberKey()
		if err != nil {
			return nil, err
		}
		build := true
		var key string
		if need == nil {
			key = s.d.intern(kb)
		} else {
			key, build = need.lookup(kb)
		}
		if build {
			v, err := s.value()
			if err != nil {
				return nil, err
			}
			m[key] = v
		} else if err := s.skipValue(); err != nil {
			return nil, err
		}
		done, err := s.afterMember('}')
		if err != nil {
			return nil, err
		}
		if done {
			return m, nil
		}
	}
}

// memberKey reads an object member's key and the ':' after it.
func (s *scanner) memberKey() ([]byte, error) {
	s.skipSpace()
	if s.pos >= len(s.data) {
		return nil, s.errEOF()
	}
	if s.data[s.pos] != '"' {
		return nil, s.errChar("looking for beginning of object key string")
	}
	s.pos++
	kb, err := s.str()
	if err != nil {
		return nil, err
	}
	s.skipSpace()
	if s.pos >= len(s.data) {
		return nil, s.errEOF()
	}
	if s.data[s.pos] != ':' {
		return nil, s.errChar("after object key")
	}
	s.pos++
	return kb, nil
}

// afterMember reads what follows a member of an object (end '}') or an
// element of an array (end ']'): ',' before the next one, or the end,
// which closes the container (done).
func (s *scanner) afterMember(end byte) (done bool, err error) {
	s.skipSpace()
	if s.pos >= len(s.data) {
		return false, s.errEOF()
	}
	switch s.data[s.pos] {
	case ',':
		s.pos++
		return false, nil
	case end:
		s.pos++
		s.depth--
		return true, nil
	}
	if end == '}' {
		return false, s.errChar("after object key:value pair")
	}
	return false, s.errChar("after array element")
}

// skipValue parses a value as value does, to the same errors, building
// nothing.
func (s *scanner) skipValue() error {
	s.skipSpace()
	if s.pos >= len(s.data) {
		return s.errEOF()
	}
	switch c := s.data[s.pos]; {
	case c == '{' || c == '[':
		// A container is skipped in one loop (skipFast) unless it is
		// invalid or deeper than that goes: then by the scanner alone,
		// which says why, and from then on for this input, so that nested
		// values are not walked again and again. A scalar is no faster
		// there: the scanner skips it.
		if !s.slow {
			if end, spaced, ok := skipFast(s.data, s.pos, maxDepth-s.depth); ok {
				s.pos = end
				s.d.spaced = s.d.spaced || spaced
				return nil
			}
			s.slow = true
		}
		s.pos++
		if c == '{' {
			return s.skipContainer('}')
		}
		return s.skipContainer(']')
	case c == '"':
		s.pos++
		_, err := s.str()
		return err
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		_, _, _, err := s.scanNumber()
		return err
	}
	return s.errChar("looking for beginning of value")
}

// skipContainer skips the members after '{' (end '}') or the elements
// after '[' (end ']'), exactly as object and array parse them.
func (s *scanner) skipContainer(end byte) error {
	if s.depth++; s.depth > maxDepth {
		return &syntaxError{"exceeded max depth", s.pos}
	}
	s.skipSpace()
	if s.pos < len(s.data) && s.data[s.pos] == end {
		s.pos++
		s.depth--
		return nil
	}
	for {
		if end == '}' {
			if _, err := s.memberKey(); err != nil {
				return err
			}
		}
		if err := s.skipValue(); err != nil {
			return err
		}
		if done, err := s.afterMember(end); done || err != nil {
			return err
		}
	}
}

// array parses the elements after '['.
func (s *scanner) array() ([]any, error) {
	if s.depth++; s.depth > maxDepth {
		return nil, &syntaxError{"exceeded max depth", s.pos}
	}
	a := []any{}
	s.skipSpace()
	if s.pos < len(s.data) && s.data[s.pos] == ']' {
		s.pos++
		s.depth--
		return a, nil
	}
	for {
		v, err := s.value()
		if err != nil {
			return nil, err
		}
		a = append(a, v)
		done, err := s.afterMember(']')
		if err != nil {
			return nil, err
		}
		if done {
			return a, nil
		}
	}
}

// intern returns b as a string, reusing the string of an earlier record when
// the key was seen before: records of one topic share their field names.
func (d *decoder) intern(b []byte) string {
	if len(b) > maxInternedLen {
		return string(b)
	}
	if k, ok := d.keys[string(b)]; ok { // no allocation for the lookup
		return k
	}
	k := string(b)
	if d.keys == nil {
		d.keys = make(map[string]string)
	}
	if len(d.keys) < maxInterned {
		d.keys[k] = k
	}
	return k
}

// boxString returns b as a string in an interface, shared with earlier
// records for short values.
func (d *decoder) boxString(b []byte) any {
	if len(b) > maxCachedValueLen {
		return string(b)
	}
	if d.values == nil {
		if d.boxed++; d.boxed <= cacheAfter {
			return string(b)
		}
		d.values = make([]cachedValue, maxCachedValues)
		d.seed = maphash.MakeSeed()
	}
	if d.bypass > 0 {
		d.bypass--
		return string(b)
	}
	if d.lookups++; d.lookups == cacheWindow {
		if d.hits < cacheWindow/8 {
			d.bypass = cacheBypass
		}
		d.lookups, d.hits = 0, 0
	}
	h := maphash.Bytes(d.seed, b)
	slot := &d.values[h&(maxCachedValues-1)]
	if slot.h == h && slot.v != nil && slot.v.(string) == string(b) { // compared without allocating
		d.hits++
		return slot.v
	}
	slot.h, slot.v = h, string(b)
	return slot.v
}

// str parses a string body after the opening quote. The result aliases the
// input or the decoder's scratch buffer: copy it before the next call.
func (s *scanner) str() ([]byte, error) {
	start := s.pos
	// Fast path: plain ASCII with no escapes is returned in place. Eight
	// bytes at a time while none of them needs a look (padding, ids and
	// names are long runs of plain ASCII), then byte by byte; in locals,
	// which stay in registers.
	data, pos := s.data, s.pos
	for pos+8 <= len(data) {
		if m := plainASCII8(binary.LittleEndian.Uint64(data[pos:])); m != 0 {
			pos += bits.TrailingZeros64(m) >> 3 // the first byte to look at
			break
		}
		pos += 8
	}
	for pos < len(data) {
		c := data[pos]
		if c == '"' {
			s.pos = pos + 1
			return data[start:pos], nil
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			break
		}
		pos++
	}
	s.pos = pos
	buf := append(s.d.scratch[:0], s.data[start:s.pos]...)
	defer func() { s.d.scratch = buf[:0] }()
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		switch {
		case c == '"':
			s.pos++
			return buf, nil
		case c < 0x20:
			return nil, s.errChar("in string literal")
		case c == '\\':
			s.pos++
			if s.pos >= len(s.data) {
				return nil, s.errEOF()
			}
			e := s.data[s.pos]
			s.pos++
			switch e {
			case '"', '\\', '/':
				buf = append(buf, e)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				r, ok := s.hex4()
				if !ok {
					return nil, s.errChar("in \\u hexadecimal character escape")
				}
				if utf16.IsSurrogate(r) {
					// A valid pair becomes one rune; anything else becomes
					// U+FFFD and the next escape is read on its own, as
					// encoding/json does.
					if s.pos+1 < len(s.data) && s.data[s.pos] == '\\' && s.data[s.pos+1] == 'u' {
						save := s.pos
						s.pos += 2
						r2, ok := s.hex4()
						if ok {
							if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
								buf = utf8.AppendRune(buf, dec)
								break
							}
						}
						s.pos = save
					}
					r = utf8.RuneError
				}
				buf = utf8.AppendRune(buf, r)
			default:
				s.pos--
				return nil, s.errChar("in string escape code")
			}
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			s.pos++
		default:
			r, size := utf8.DecodeRune(s.data[s.pos:])
			if r == utf8.RuneError && size == 1 {
				// encoding/json would substitute U+FFFD and carry on; a
				// record whose text is not what its producer wrote is bad
				// input, to be seen on the dead-letter topic.
				return nil, &syntaxError{fmt.Sprintf("invalid UTF-8 byte 0x%02x in string", s.data[s.pos]), s.pos}
			}
			buf = append(buf, s.data[s.pos:s.pos+size]...)
			s.pos += size
		}
	}
	return nil, s.errEOF()
}

// plainASCII8 flags the bytes of x (eight bytes of a string body, the
// first in the low byte) that end the fast path of str: a quote, a
// backslash, a control character (< 0x20) or a non-ASCII byte (>= 0x80).
// Only the lowest flag is exact (a borrow can flag a byte above a flagged
// one), which is all str uses: zero means none of the eight.
func plainASCII8(x uint64) uint64 {
	const (
		ones = 0x0101010101010101
		high = 0x8080808080808080
	)
	quote := x ^ (ones * '"')
	backslash := x ^ (ones * '\\')
	zeroByte := func(v uint64) uint64 { return (v - ones) & ^v & high }
	control := (x - ones*0x20) & ^x & high
	return zeroByte(quote) | zeroByte(backslash) | control | x&high
}

// hex4 reads four hex digits.
func (s *scanner) hex4() (rune, bool) {
	if s.pos+4 > len(s.data) {
		return 0, false
	}
	var r rune
	for i := 0; i < 4; i++ {
		c := s.data[s.pos]
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
		s.pos++
	}
	return r, true
}

// number parses a JSON number: an exact integer when the literal has no
// fraction or exponent and fits int64, a float64 otherwise.
func (s *scanner) number() (any, error) {
	start := s.pos
	i, isInt, f, err := s.scanNumber()
	if err != nil {
		return nil, err
	}
	if isInt {
		return boxInt(i), nil
	}
	if s.d.exact {
		d, err := ParseDecimal(string(s.data[start:s.pos]))
		if err != nil {
			return nil, &syntaxError{err.Error(), start}
		}
		return d, nil
	}
	return f, nil
}

// scanNumber reads a number: the int64 when it is an integer literal that
// fits, else the float64 (an error beyond float64's range).
func (s *scanner) scanNumber() (i int64, isInt bool, f float64, err error) {
	start := s.pos
	neg := false
	if s.data[s.pos] == '-' {
		neg = true
		s.pos++
	}
	if s.pos >= len(s.data) {
		return 0, false, 0, s.errEOF()
	}
	var mag uint64
	exact := true // still an integer that fits uint64
	switch c := s.data[s.pos]; {
	case c == '0':
		s.pos++
	case c >= '1' && c <= '9':
		// Nineteen digits always fit uint64 (10^19-1 < 2^64): only the
		// digits after them need the overflow test. Locals, not s.pos,
		// keep the loop in registers.
		data, pos := s.data, s.pos
		for n := 0; pos < len(data) && n < 19; n++ {
			d := data[pos] - '0'
			if d > 9 {
				break
			}
			mag = mag*10 + uint64(d)
			pos++
		}
		for ; pos < len(data) && data[pos] >= '0' && data[pos] <= '9'; pos++ {
			d := uint64(data[pos] - '0')
			if mag > (math.MaxUint64-d)/10 {
				exact = false
			} else if exact {
				mag = mag*10 + d
			}
		}
		s.pos = pos
	default:
		return 0, false, 0, s.errChar("in numeric literal")
	}
	integer := true
	if s.pos < len(s.data) && s.data[s.pos] == '.' {
		integer = false
		s.pos++
		if !s.digits() {
			return 0, false, 0, s.errChar("after decimal point in numeric literal")
		}
	}
	if s.pos < len(s.data) && (s.data[s.pos] == 'e' || s.data[s.pos] == 'E') {
		integer = false
		s.pos++
		if s.pos < len(s.data) && (s.data[s.pos] == '+' || s.data[s.pos] == '-') {
			s.pos++
		}
		if !s.digits() {
			return 0, false, 0, s.errChar("in exponent of numeric literal")
		}
	}
	if integer && exact {
		if neg && mag <= 1<<63 {
			return -int64(mag), true, 0, nil // -(1<<63) wraps to MinInt64, exactly right
		}
		if !neg && mag <= math.MaxInt64 {
			return int64(mag), true, 0, nil
		}
	}
	text := s.data[start:s.pos]
	f, perr := strconv.ParseFloat(string(text), 64)
	if perr != nil && (math.IsInf(f, 0) || math.IsNaN(f)) {
		return 0, false, 0, &syntaxError{"number " + string(text) + " is out of range", start}
	}
	return 0, false, f, nil
}

// digits consumes one or more decimal digits.
func (s *scanner) digits() bool {
	start := s.pos
	for s.pos < len(s.data) && s.data[s.pos] >= '0' && s.data[s.pos] <= '9' {
		s.pos++
	}
	return s.pos > start
}

// boxInt is how an exact JSON integer enters the value domain: as int, the
// type expr's arithmetic (and %) works on, or as int64 where int is 32 bits.
func boxInt(i int64) any {
	if strconv.IntSize == 64 || (i >= math.MinInt32 && i <= math.MaxInt32) {
		return int(i)
	}
	return i
}
