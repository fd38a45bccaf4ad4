package operator

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"strconv"

	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/internal/wire"
)

// Accumulator is the running state of one aggregate function for one group
// key. Implementations: *CountAcc, *SumAcc, *MinMaxAcc, *AvgAcc,
// *FirstLastAcc.
//
// Check and Add take an expression result. Add either applies the value
// or, when Check would fail, returns the same *RecordError and leaves the
// accumulator unchanged; so an AggregateState can check every named value of
// a record before adding any (all or nothing per record).
//
// The binary encoding is what the state changelog stores:
//
//	byte  encoding version (1)
//	byte  function tag: count 1, sum 2, min 3, max 4, avg 5, first 6, last 7
//	...   payload, per function (documented on each type)
//
// Integers are minimally encoded varints (zig-zag for signed), decimals a
// scale and a coefficient (appendDecimal), floats (only in encodings from
// before decimals) 8 bytes little endian IEEE 754, JSON values compact JSON
// behind a uvarint length. UnmarshalBinary reads through internal/wire and
// rejects unknown versions, tags of another function, non-minimal varints,
// lengths beyond the input, trailing bytes and impossible values with an
// error that names the field and its byte offset; it never panics.
type Accumulator interface {
	Func() config.AggregateFunc
	Check(v any) *RecordError
	Add(v any) (changed bool, err *RecordError)
	// Result is the JSON value to output: int64, json.Number (the exact
	// text of a decimal), float64 (avg of integers), or for first and last
	// any JSON value. nil before the first Add (except count: 0).
	Result() any
	AppendBinary(b []byte) ([]byte, error)
	// appendResult appends the JSON of Result without boxing it: the
	// output of every record goes through here.
	appendResult(dst []byte) []byte
	MarshalBinary() ([]byte, error)
	UnmarshalBinary(b []byte) error
}

var (
	_ Accumulator = (*CountAcc)(nil)
	_ Accumulator = (*SumAcc)(nil)
	_ Accumulator = (*MinMaxAcc)(nil)
	_ Accumulator = (*AvgAcc)(nil)
	_ Accumulator = (*FirstLastAcc)(nil)
)

// accVersion is the accumulator encoding version.
const accVersion = 1

// funcTag is the stable byte for each function in the encoding (ok false
// for an unknown function). A switch, not a map: every record's state is
// encoded and decoded with it.
func funcTag(fn config.AggregateFunc) (tag byte, ok bool) {
	switch fn {
	case config.AggCount:
		return 1, true
	case config.AggSum:
		return 2, true
	case config.AggMin:
		return 3, true
	case config.AggMax:
		return 4, true
	case config.AggAvg:
		return 5, true
	case config.AggFirst:
		return 6, true
	case config.AggLast:
		return 7, true
	}
	return 0, false
}

// NewAccumulator returns an empty accumulator for fn.
func NewAccumulator(fn config.AggregateFunc) (Accumulator, error) {
	switch fn {
	case config.AggCount:
		return &CountAcc{}, nil
	case config.AggSum:
		return &SumAcc{}, nil
	case config.AggMin, config.AggMax:
		return &MinMaxAcc{max: fn == config.AggMax}, nil
	case config.AggAvg:
		return &AvgAcc{}, nil
	case config.AggFirst, config.AggLast:
		return &FirstLastAcc{last: fn == config.AggLast}, nil
	}
	return nil, fmt.Errorf("unknown aggregate function %q", fn)
}

// Numeric functions take numbers only: summing strings or nulls is a
// mistake to report (CodeType), not something to guess a meaning for.
func numberArg(fn config.AggregateFunc, v any) (number, *RecordError) {
	n, ok := toNumber(v)
	if !ok {
		if f, isF := v.(float64); isF {
			return n, &RecordError{Code: CodeType, Reason: string(fn) + "() of a non-finite number " + strconv.FormatFloat(f, 'g', -1, 64)}
		}
		return n, &RecordError{Code: CodeType, Reason: string(fn) + "() needs a number, got " + typeName(v)}
	}
	return n, nil
}

// header starts an encoding.
func header(b []byte, fn config.AggregateFunc) []byte {
	tag, _ := funcTag(fn)
	return append(b, accVersion, tag)
}

// openAcc checks the header of an accumulator encoding and returns a
// reader of its payload. Accumulator encodings are read through
// internal/wire under the rules of every binary format of the project:
// varints must be minimal (every build has written them with
// binary.AppendUvarint and AppendVarint, so no stored state has another
// encoding), lengths are checked against the bytes left, and errors say
// what was read at which byte.
func openAcc(b []byte, fn config.AggregateFunc) wire.Reader {
	r := wire.NewReader(b)
	if v := r.Byte("version"); r.Err() == nil && v != accVersion {
		r.Fail("version", fmt.Sprintf("unknown accumulator encoding version %d", v))
	}
	want, _ := funcTag(fn)
	if t := r.Byte("function tag"); r.Err() == nil && t != want {
		r.Fail("function tag", fmt.Sprintf("encoding of function tag %d, want %s (tag %d)", t, fn, want))
	}
	return r
}

// closeState reports the first problem, or trailing bytes.
func closeState(r *wire.Reader, fn config.AggregateFunc) error {
	if err := r.End("end"); err != nil {
		return fmt.Errorf("decode %s state: %w", fn, err)
	}
	return nil
}

// readFloat reads a float64 of an encoding from before decimals: 8 bytes
// little endian, finite.
func readFloat(r *wire.Reader, what string) float64 {
	f := math.Float64frombits(r.Uint64LE(what))
	if r.Err() == nil && (math.IsNaN(f) || math.IsInf(f, 0)) {
		r.Fail(what, "non-finite float")
	}
	return f
}

// Number kinds in encodings; kindDecimal and kindBigDecimal follow.
const (
	kindEmpty byte = 0
	kindInt   byte = 1
	kindFloat byte = 2 // written before decimals, read as a decimal
)

// CountAcc counts records. Payload: uvarint count.
type CountAcc struct{ n int64 }

func (a *CountAcc) Func() config.AggregateFunc { return config.AggCount }
func (a *CountAcc) Check(any) *RecordError     { return nil }
func (a *CountAcc) Add(any) (bool, *RecordError) {
	a.n++
	return true, nil
}
func (a *CountAcc) Result() any                    { return a.n }
func (a *CountAcc) appendResult(dst []byte) []byte { return strconv.AppendInt(dst, a.n, 10) }
func (a *CountAcc) AppendBinary(b []byte) ([]byte, error) {
	return binary.AppendUvarint(header(b, config.AggCount), uint64(a.n)), nil
}
func (a *CountAcc) MarshalBinary() ([]byte, error) { return a.AppendBinary(nil) }
func (a *CountAcc) UnmarshalBinary(b []byte) error {
	r := openAcc(b, config.AggCount)
	n := r.Uvarint("count")
	if r.Err() == nil && n > math.MaxInt64 {
		r.Fail("count", fmt.Sprintf("count %d out of range", n))
	}
	if err := closeState(&r, config.AggCount); err != nil {
		return err
	}
	a.n = int64(n)
	return nil
}

// SumAcc sums numbers: an exact int64 while every input is an integer, an
// exact decimal from the first fractional input on (see decimal).
//
// An integer sum that would leave int64 is refused with CodeOverflow (the
// record goes to the dead-letter topic, the sum stays exact): silently
// switching to an approximation would make an "exact" job's results wrong
// at a point nobody notices. A user who wants to sum beyond int64 writes
// sum(float(x)): a decimal sum cannot overflow, though each input then
// counts with 15 significant digits.
//
// Payload: kind byte, then 1 (int): zig-zag varint; 3 or 4: the decimal
// (see appendDecimal). Kind 2 (float: 8 bytes), written before decimals,
// is read as the decimal of the float (decimalOfFloat).
type SumAcc struct {
	i int64 // the sum while every input is an integer
	// d is the sum from the first fractional input on (nil before): a
	// pointer, so that the state of an integer sum, kept per key, is no
	// larger than before decimals.
	d *decimal
}

func (a *SumAcc) Func() config.AggregateFunc { return config.AggSum }

func (a *SumAcc) overflow(n int64) *RecordError {
	return &RecordError{Code: CodeOverflow, Reason: "sum() overflows int64 (" + strconv.FormatInt(a.i, 10) + " + " + strconv.FormatInt(n, 10) + "); use sum(float(x)) for a decimal sum of 15-digit values"}
}

func (a *SumAcc) Check(v any) *RecordError {
	n, err := numberArg(config.AggSum, v)
	if err != nil {
		return err
	}
	if a.d == nil && !n.isFloat {
		if _, overflow := addInt64(a.i, n.i); overflow {
			return a.overflow(n.i)
		}
	}
	return nil
}

func (a *SumAcc) Add(v any) (bool, *RecordError) {
	n, err := numberArg(config.AggSum, v)
	if err != nil {
		return false, err
	}
	if a.d == nil && !n.isFloat { // the integer path: every record of most jobs
		s, overflow := addInt64(a.i, n.i)
		if overflow {
			return false, a.overflow(n.i)
		}
		changed := s != a.i
		a.i = s
		return changed, nil
	}
	d := promote(a.d, a.i).add(n.decimal())
	if a.d == nil {
		// Not &d: d would then live on the heap on every call.
		a.i, a.d = 0, new(decimal)
		*a.d = d
		return true, nil
	}
	changed := d != *a.d
	*a.d = d
	return changed, nil
}

// promote is d, or the integer i as a decimal when d is nil.
func promote(d *decimal, i int64) decimal {
	if d != nil {
		return *d
	}
	return decimal{small: i}
}

func (a *SumAcc) Result() any {
	if a.d != nil {
		return json.Number(a.d.appendJSON(nil))
	}
	return a.i
}

func (a *SumAcc) appendResult(dst []byte) []byte {
	if a.d != nil {
		return a.d.appendJSON(dst)
	}
	return strconv.AppendInt(dst, a.i, 10)
}

func (a *SumAcc) AppendBinary(b []byte) ([]byte, error) {
	b = header(b, config.AggSum)
	if a.d != nil {
		return appendDecimal(b, *a.d), nil
	}
	return binary.AppendVarint(append(b, kindInt), a.i), nil
}
func (a *SumAcc) MarshalBinary() ([]byte, error) { return a.AppendBinary(nil) }
func (a *SumAcc) UnmarshalBinary(b []byte) error {
	r := openAcc(b, config.AggSum)
	var v SumAcc
	switch k := readExact(&r, &v.i, &v.d); {
	case r.Err() == nil && k == kindEmpty:
		r.Fail("kind", "empty sum")
	}
	if err := closeState(&r, config.AggSum); err != nil {
		return err
	}
	*a = v
	return nil
}

// decimal is n as a decimal: an integer exactly, a float by
// decimalOfFloat.
func (n number) decimal() decimal {
	if n.isDec {
		return n.d
	}
	if n.isFloat {
		return decimalOfFloat(n.f)
	}
	return decimal{small: n.i}
}

func addInt64(a, b int64) (int64, bool) {
	s := a + b
	// Overflow iff both operands have the same sign and the sum's differs.
	return s, (a >= 0) == (b >= 0) && (s >= 0) != (a >= 0)
}

// readExact reads a kind byte and an integer (into i) or a decimal (into
// a new *d); a float of an encoding from before decimals becomes a
// decimal. It returns the kind read.
func readExact(r *wire.Reader, i *int64, d **decimal) byte {
	switch k := r.Byte("kind"); k {
	case kindEmpty:
		return k
	case kindInt:
		*i = r.Varint("int")
		return k
	case kindFloat:
		v := decimalOfFloat(readFloat(r, "float"))
		*d = &v
		return k
	case kindDecimal, kindBigDecimal:
		v := readDecimal(r, k)
		*d = &v
		return k
	default:
		if r.Err() == nil {
			r.Fail("kind", fmt.Sprintf("unknown number kind %d", k))
		}
		return k
	}
}

// MinMaxAcc keeps the smallest (min) or largest (max) number. Integers
// stay int64; a fractional input counts as its decimal (see decimal), and
// integers and decimals are compared exactly. The winner keeps its own
// type; ties keep the earlier value.
//
// Payload: kind byte (0 empty, 1 int, 3 or 4 decimal) and the value; kind
// 2 (float), written before decimals, is read as the float's decimal.
type MinMaxAcc struct {
	max bool
	has bool
	i   int64    // the value when an integer
	d   *decimal // the value when a decimal (nil otherwise)
}

func (a *MinMaxAcc) Func() config.AggregateFunc {
	if a.max {
		return config.AggMax
	}
	return config.AggMin
}

func (a *MinMaxAcc) Check(v any) *RecordError {
	_, err := numberArg(a.Func(), v)
	return err
}

func (a *MinMaxAcc) Add(v any) (bool, *RecordError) {
	n, err := numberArg(a.Func(), v)
	if err != nil {
		return false, err
	}
	if !n.isFloat && a.d == nil {
		if a.has {
			c := cmpOrdered(n.i, a.i)
			if (a.max && c <= 0) || (!a.max && c >= 0) {
				return false, nil
			}
		}
		a.has, a.i = true, n.i
		return true, nil
	}
	d := n.decimal()
	if a.has {
		c := d.cmp(promote(a.d, a.i))
		if (a.max && c <= 0) || (!a.max && c >= 0) {
			return false, nil
		}
	}
	a.has, a.i = true, n.i
	switch {
	case !n.isFloat:
		a.d = nil
	default:
		if a.d == nil {
			a.d = new(decimal) // not &d: see SumAcc.Add
		}
		a.i, *a.d = 0, d
	}
	return true, nil
}

func (a *MinMaxAcc) Result() any {
	switch {
	case !a.has:
		return nil
	case a.d != nil:
		return json.Number(a.d.appendJSON(nil))
	}
	return a.i
}

func (a *MinMaxAcc) appendResult(dst []byte) []byte {
	switch {
	case !a.has:
		return append(dst, "null"...)
	case a.d != nil:
		return a.d.appendJSON(dst)
	}
	return strconv.AppendInt(dst, a.i, 10)
}

func (a *MinMaxAcc) AppendBinary(b []byte) ([]byte, error) {
	b = header(b, a.Func())
	switch {
	case !a.has:
		return append(b, kindEmpty), nil
	case a.d != nil:
		return appendDecimal(b, *a.d), nil
	}
	return binary.AppendVarint(append(b, kindInt), a.i), nil
}
func (a *MinMaxAcc) MarshalBinary() ([]byte, error) { return a.AppendBinary(nil) }
func (a *MinMaxAcc) UnmarshalBinary(b []byte) error {
	fn := a.Func()
	r := openAcc(b, fn)
	v := MinMaxAcc{max: a.max}
	v.has = readExact(&r, &v.i, &v.d) != kindEmpty
	if err := closeState(&r, fn); err != nil {
		return err
	}
	*a = v
	return nil
}

// AvgAcc averages numbers. While every input is an integer the sum is kept
// exactly in 128 bits, so it cannot overflow (an average of nanosecond
// timestamps overflows an int64 sum after five records) and the result is
// the exact quotient rounded once to float64 (printed without a fraction
// when it has none). From the first fractional input on, the sum is an
// exact decimal (the integer sum promoted) and the result is the quotient
// rounded to 15 significant digits (see decimal). null before the first
// value.
//
// Payload: uvarint count, kind byte, then for ints the 128-bit sum as a
// zig-zag varint (high half) and a uvarint (low half), for decimals the
// decimal (kinds 3, 4). Kind 2 (a float64 sum, 8 bytes), written before
// decimals, is read as the float's decimal.
type AvgAcc struct {
	n  uint64
	hi int64    // 128-bit two's complement sum: hi<<64 + lo
	lo uint64   //
	d  *decimal // the sum from the first fractional input on (nil before)
}

func (a *AvgAcc) Func() config.AggregateFunc { return config.AggAvg }

func (a *AvgAcc) Check(v any) *RecordError {
	_, err := numberArg(config.AggAvg, v)
	return err
}

func (a *AvgAcc) Add(v any) (bool, *RecordError) {
	n, err := numberArg(config.AggAvg, v)
	if err != nil {
		return false, err
	}
	a.n++
	if a.d != nil || n.isFloat {
		d := a.decimal().add(n.decimal())
		if a.d == nil {
			a.d = new(decimal)
		}
		*a.d, a.hi, a.lo = d, 0, 0
		return true, nil
	}
	var carry uint64
	a.lo, carry = bits.Add64(a.lo, uint64(n.i), 0)
	ext := int64(0)
	if n.i < 0 {
		ext = -1 // sign extension of n.i into the high half
	}
	a.hi += ext + int64(carry)
	return true, nil
}

// decimal is the sum as a decimal, a 128-bit integer sum promoted.
func (a *AvgAcc) decimal() decimal {
	if a.d != nil {
		return *a.d
	}
	if (a.hi == 0 && a.lo <= math.MaxInt64) || (a.hi == -1 && a.lo > math.MaxInt64) {
		return decimal{small: int64(a.lo)}
	}
	neg, hi, lo := a.magnitude()
	z := new(big.Int).SetUint64(hi)
	z.Lsh(z, 64).Or(z, new(big.Int).SetUint64(lo))
	if neg {
		z.Neg(z)
	}
	return decimal{big: z}
}

// magnitude returns the sign and absolute value of the 128-bit sum.
func (a *AvgAcc) magnitude() (neg bool, hi, lo uint64) {
	hi, lo = uint64(a.hi), a.lo
	if a.hi < 0 {
		var borrow uint64
		lo, borrow = bits.Sub64(0, lo, 0)
		hi, _ = bits.Sub64(0, hi, borrow)
		return true, hi, lo
	}
	return false, hi, lo
}

// intResult is the average of an integer sum, rounded once to float64.
func (a *AvgAcc) intResult() float64 {
	neg, hi, lo := a.magnitude()
	// |sum| / n = q + rem/n, computed exactly in integers; q < 2^64 because
	// every term is at most 2^63 in magnitude.
	qhi := hi / a.n
	q, rem := bits.Div64(hi%a.n, lo, a.n)
	f := float64(qhi)*0x1p64 + float64(q) + float64(rem)/float64(a.n)
	if neg {
		f = -f
	}
	return f
}

func (a *AvgAcc) Result() any {
	switch {
	case a.n == 0:
		return nil
	case a.d != nil:
		return json.Number(a.d.quo(a.n).appendJSON(nil))
	}
	return a.intResult()
}

func (a *AvgAcc) appendResult(dst []byte) []byte {
	switch {
	case a.n == 0:
		return append(dst, "null"...)
	case a.d != nil:
		return a.d.quo(a.n).appendJSON(dst)
	}
	return appendFloat(dst, a.intResult())
}

func (a *AvgAcc) AppendBinary(b []byte) ([]byte, error) {
	b = binary.AppendUvarint(header(b, config.AggAvg), a.n)
	if a.d != nil {
		return appendDecimal(b, *a.d), nil
	}
	b = binary.AppendVarint(append(b, kindInt), a.hi)
	return binary.AppendUvarint(b, a.lo), nil
}
func (a *AvgAcc) MarshalBinary() ([]byte, error) { return a.AppendBinary(nil) }
func (a *AvgAcc) UnmarshalBinary(b []byte) error {
	r := openAcc(b, config.AggAvg)
	var v AvgAcc
	v.n = r.Uvarint("count")
	switch k := r.Byte("kind"); k {
	case kindInt:
		v.hi = r.Varint("sum high")
		v.lo = r.Uvarint("sum low")
	case kindFloat:
		d := decimalOfFloat(readFloat(&r, "sum"))
		v.d = &d
	case kindDecimal, kindBigDecimal:
		d := readDecimal(&r, k)
		v.d = &d
	default:
		if r.Err() == nil {
			r.Fail("kind", fmt.Sprintf("unknown number kind %d", k))
		}
	}
	if r.Err() == nil && v.n == 0 && (v.d != nil || v.hi != 0 || v.lo != 0) {
		r.Fail("sum", "non-zero sum of no values")
	}
	if err := closeState(&r, config.AggAvg); err != nil {
		return err
	}
	*a = v
	return nil
}

// FirstLastAcc keeps the first or the last value (any JSON value, null
// included).
//
// Payload: byte 0 (empty) or 1 followed by the compact JSON of the value
// behind a uvarint length.
type FirstLastAcc struct {
	last bool
	has  bool
	// An integer value (the commonest: a timestamp, an id) is kept in i,
	// with intKind saying whether it is an int or an int64, instead of
	// boxed in v: decoding a stored state (which the running aggregate
	// does for every record) then allocates nothing.
	intKind byte
	i       int64
	v       any
}

const (
	intNone byte = iota
	intInt
	intInt64
)

// value is the kept value.
func (a *FirstLastAcc) value() any {
	switch a.intKind {
	case intInt:
		return int(a.i)
	case intInt64:
		return a.i
	}
	return a.v
}

// set keeps v, a canonical value that shares nothing with a record.
func (a *FirstLastAcc) set(v any) {
	switch x := v.(type) {
	case int:
		a.intKind, a.i, a.v = intInt, int64(x), nil
	case int64:
		a.intKind, a.i, a.v = intInt64, x, nil
	default:
		a.intKind, a.i, a.v = intNone, 0, x
	}
}

func (a *FirstLastAcc) Func() config.AggregateFunc {
	if a.last {
		return config.AggLast
	}
	return config.AggFirst
}

func (a *FirstLastAcc) Check(v any) *RecordError {
	if a.has && !a.last {
		return nil // first keeps its value whatever comes
	}
	_, err := normalize(v)
	return err
}

func (a *FirstLastAcc) Add(v any) (bool, *RecordError) {
	if a.has && !a.last {
		return false, nil
	}
	n, err := normalize(v)
	if err != nil {
		return false, err
	}
	// State outlives the record: it must not share containers with it.
	a.has = true
	a.set(deepCopy(n))
	// "last" changes even when the new value equals the old: comparing
	// arbitrary JSON values costs more than the extra emit.
	return true, nil
}

func (a *FirstLastAcc) Result() any { return a.value() }
func (a *FirstLastAcc) appendResult(dst []byte) []byte {
	if a.intKind != intNone {
		return strconv.AppendInt(dst, a.i, 10)
	}
	return appendValue(dst, a.v)
}

func (a *FirstLastAcc) AppendBinary(b []byte) ([]byte, error) {
	b = header(b, a.Func())
	if !a.has {
		return append(b, 0), nil
	}
	b = append(b, 1)
	// A short value (a number, a timestamp, a short string) is encoded on
	// the stack, then appended behind its length; a longer one behind a
	// placeholder length, re-encoded and shifted once the size is known.
	var small [32]byte
	if a.intKind != intNone {
		// appendTyped's encoding of an integer, without boxing it.
		enc := strconv.AppendInt(small[:0], a.i, 10)
		b = binary.AppendUvarint(b, uint64(len(enc)))
		return append(b, enc...), nil
	}
	if enc := appendTyped(small[:0], a.v); len(enc) <= len(small) {
		b = binary.AppendUvarint(b, uint64(len(enc)))
		return append(b, enc...), nil
	}
	start := len(b)
	b = appendTyped(b, a.v)
	n := len(b) - start
	var lenBuf [binary.MaxVarintLen64]byte
	l := binary.PutUvarint(lenBuf[:], uint64(n))
	b = append(b, lenBuf[:l]...)
	copy(b[start+l:], b[start:start+n])
	copy(b[start:], lenBuf[:l])
	return b, nil
}
func (a *FirstLastAcc) MarshalBinary() ([]byte, error) { return a.AppendBinary(nil) }
func (a *FirstLastAcc) UnmarshalBinary(b []byte) error {
	fn := a.Func()
	r := openAcc(b, fn)
	var (
		has   bool
		v     any
		i     int64
		isInt bool
	)
	switch h := r.Byte("presence"); {
	case r.Err() != nil:
	case h == 0:
	case h == 1:
		has = true
		js := r.Bytes("value")
		if r.Err() != nil {
			break
		}
		if i, isInt = parseSmallInt(js); isInt {
			break // what the decoder would give, an int, without boxing it
		}
		var d decoder
		var err error
		if v, err = d.decodeValue(js); err != nil {
			r.Fail("value", err.Error())
		}
	default:
		r.Fail("presence", fmt.Sprintf("bad presence byte %d", h))
	}
	if err := closeState(&r, fn); err != nil {
		return err
	}
	a.has = has
	if isInt {
		a.intKind, a.i, a.v = intInt, i, nil
	} else {
		a.set(v)
	}
	return nil
}

// parseSmallInt parses b if it is a JSON integer of at most 18 digits in
// canonical form (no leading zero, no "-0"), which the decoder reads as an
// int; anything else is left to the decoder.
func parseSmallInt(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	digits := b
	if neg {
		digits = b[1:]
	}
	if len(digits) == 0 || len(digits) > 18 || digits[0] == '0' && (len(digits) > 1 || neg) {
		return 0, false
	}
	var n int64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

var errStateMismatch = errors.New("state does not match the aggregate's configuration")
