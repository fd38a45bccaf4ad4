package operator

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"strconv"

	"github.com/eoflow/pipeline/internal/wire"
)

// Decimals. A JSON number with a fraction or an exponent (and any float an
// expression computes) is a float64 in expressions, where binary fractions
// turn 0.1 + 0.2 into 0.30000000000000004. The numeric aggregates (sum,
// min, max, avg) do not add float64s: they take each fractional input as
// the decimal of at most 15 significant digits nearest to it, the
// precision a float64 always keeps (every decimal of up to 15 significant
// digits survives the trip to float64 and back; PostgreSQL's float8 to
// numeric cast uses the same 15 digits). So 112.99 is exactly 112.99,
// 19.99 * 3 is 59.97 (not 59.970000000000006), and 1.5e-2 is 0.015. Then
// they compute exactly:
//
//   - a sum is exact at the largest scale (digits after the point) of its
//     inputs; its coefficient is an int64 while it fits, a big integer
//     beyond, so a decimal sum never overflows (unlike an integer-only sum,
//     which stays an int64 and refuses to overflow: see SumAcc);
//   - min and max compare exactly and keep the winning input;
//   - avg is the exact sum divided by the count, rounded once to 15
//     significant digits, halves away from zero: avg of 1.10 and 2.20 is
//     1.65, of 1, 2 and 2.0 is 1.66666666666667.
//
// Results print as JSON numbers the way encoding/json prints a float64 (the
// ECMAScript rules: no trailing zeros, an exponent below 1e-6 and from
// 1e21), so a decimal result prints exactly like the float64 of the same
// value when it has one.

// decimal is the exact number coef × 10^-scale. The coefficient is small
// while it fits an int64; beyond, big holds it (and small is 0). That is
// the canonical form: big is never an int64 value, so equal decimals of
// one scale are equal structs and encode to equal bytes. A big coefficient
// is never modified once set: copies of a decimal share it.
type decimal struct {
	small int64
	big   *big.Int
	scale uint16
}

const (
	// decimalDigits is the significant digits of a fractional input and
	// of an average.
	decimalDigits = 15
	// maxScale is the most digits after the point a stored decimal can
	// have: those of the smallest float64, 4.94065645841247e-324.
	maxScale = 338
	// maxCoefBytes bounds a big coefficient in a state encoding: sums of
	// float64-range inputs stay far below (about 280 bytes at most).
	maxCoefBytes = 1024
)

// pow10 are the powers of ten that fit a uint64.
var pow10 = func() (p [20]uint64) {
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 10
	}
	return p
}()

var bigTen = big.NewInt(10)

// decimalOfFloat is the decimal of at most 15 significant digits nearest
// to f, a finite float64 (NaN and infinities, which callers refuse before,
// give 0).
func decimalOfFloat(f float64) decimal {
	if f == 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		return decimal{}
	}
	var buf [32]byte
	b := strconv.AppendFloat(buf[:0], f, 'e', decimalDigits-1, 64) // -d.ddddddddddddddde±dd
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	var m uint64
	i := 0
	for ; b[i] != 'e'; i++ {
		if b[i] != '.' {
			m = m*10 + uint64(b[i]-'0')
		}
	}
	exp := 0
	for _, c := range b[i+2:] {
		exp = exp*10 + int(c-'0')
	}
	if b[i+1] == '-' {
		exp = -exp
	}
	exp -= decimalDigits - 1 // f ≈ m × 10^exp
	for m%10 == 0 {
		m /= 10
		exp++
	}
	if exp < 0 {
		c := int64(m) // below 10^15
		if neg {
			c = -c
		}
		return decimal{small: c, scale: uint16(-exp)}
	}
	// An integer, m × 10^exp.
	if exp < len(pow10) {
		if hi, lo := bits.Mul64(m, pow10[exp]); hi == 0 && lo <= math.MaxInt64 {
			c := int64(lo)
			if neg {
				c = -c
			}
			return decimal{small: c}
		}
	}
	z := new(big.Int).Exp(bigTen, big.NewInt(int64(exp)), nil)
	z.Mul(z, new(big.Int).SetUint64(m))
	if neg {
		z.Neg(z)
	}
	return decimal{big: z}
}

// makeDecimal is the canonical decimal of z × 10^-scale (z is then owned
// by the decimal).
func makeDecimal(z *big.Int, scale uint16) decimal {
	if z.IsInt64() {
		return decimal{small: z.Int64(), scale: scale}
	}
	return decimal{big: z, scale: scale}
}

// coef returns a new big integer holding the coefficient times 10^k.
func (d decimal) coef(k uint16) *big.Int {
	z := new(big.Int)
	if d.big != nil {
		z.Set(d.big)
	} else {
		z.SetInt64(d.small)
	}
	if k > 0 {
		z.Mul(z, new(big.Int).Exp(bigTen, big.NewInt(int64(k)), nil))
	}
	return z
}

// scaleSmall returns x × 10^k if that fits an int64.
func scaleSmall(x int64, k uint16) (int64, bool) {
	if k == 0 || x == 0 {
		return x, true
	}
	if k >= 19 {
		return 0, false
	}
	p := int64(pow10[k])
	z := x * p
	return z, z/p == x
}

// add returns d + e, exact, at the larger of their scales.
func (d decimal) add(e decimal) decimal {
	s := max(d.scale, e.scale)
	if d.big == nil && e.big == nil {
		x, ok1 := scaleSmall(d.small, s-d.scale)
		y, ok2 := scaleSmall(e.small, s-e.scale)
		if ok1 && ok2 {
			if z, overflow := addInt64(x, y); !overflow {
				return decimal{small: z, scale: s}
			}
		}
	}
	z := d.coef(s - d.scale)
	return makeDecimal(z.Add(z, e.coef(s-e.scale)), s)
}

// cmp compares d and e exactly: -1, 0 or +1.
func (d decimal) cmp(e decimal) int {
	s := max(d.scale, e.scale)
	if d.big == nil && e.big == nil {
		x, ok1 := scaleSmall(d.small, s-d.scale)
		y, ok2 := scaleSmall(e.small, s-e.scale)
		if ok1 && ok2 {
			return cmpOrdered(x, y)
		}
	}
	return d.coef(s - d.scale).Cmp(e.coef(s - e.scale))
}

func (d decimal) isZero() bool { return d.big == nil && d.small == 0 }

// quo returns d / n rounded to 15 significant digits, halves away from
// zero (n > 0).
func (d decimal) quo(n uint64) decimal {
	if q, ok := d.quoSmall(n); ok {
		return q
	}
	return d.quoBig(n)
}

// quoSmall is quo in 64-bit arithmetic (avg outputs every record, and
// big.Int allocates), for a small coefficient and a count below 2^59; ok
// is false where it does not apply.
func (d decimal) quoSmall(n uint64) (decimal, bool) {
	switch {
	case d.big != nil || n >= 1<<59:
		return decimal{}, false
	case d.small == 0:
		return decimal{}, true
	}
	a := uint64(d.small)
	neg := d.small < 0
	if neg {
		a = -a
	}
	const lo, hi = 1e14, 1e15 // q, the 15 digits, is in [lo, hi)
	q, r := a/n, a%n
	p := 0 // |d| / n ≈ q × 10^-(p + scale)
	var roundUp bool
	if q >= hi {
		// Too many digits: drop t of them. The dropped part is
		// (q mod 10^t + r/n) / 10^t, at least a half when
		// 2 × ((q mod 10^t) × n + r) >= 10^t × n, in 128 bits.
		t := 1
		for q/pow10[t] >= hi {
			t++
		}
		dropped := q % pow10[t]
		q /= pow10[t]
		p = -t
		remHi, remLo := bits.Mul64(dropped, n)
		var c uint64
		remLo, c = bits.Add64(remLo, r, 0)
		remHi += c
		remHi, remLo = remHi<<1|remLo>>63, remLo<<1
		denHi, denLo := bits.Mul64(pow10[t], n)
		roundUp = remHi > denHi || (remHi == denHi && remLo >= denLo)
	} else {
		// More digits, by long division: r < n < 2^59, so 10r fits.
		for q < lo {
			r *= 10
			q = q*10 + r/n
			r %= n
			p++
		}
		roundUp = 2*r >= n
	}
	if roundUp {
		q++
	}
	c := int64(q)
	if neg {
		c = -c
	}
	scale := p + int(d.scale)
	if scale < 0 {
		var ok bool
		if c, ok = scaleSmall(c, uint16(-scale)); !ok {
			return decimal{}, false
		}
		scale = 0
	}
	if scale > math.MaxUint16 {
		return decimal{}, false
	}
	return decimal{small: c, scale: uint16(scale)}, true
}

// quoBig is quo in math/big, for any decimal and count.
func (d decimal) quoBig(n uint64) decimal {
	if d.isZero() {
		return decimal{}
	}
	a := d.coef(0)
	neg := a.Sign() < 0
	a.Abs(a)
	b := new(big.Int).SetUint64(n)
	// |d| / n = a / b × 10^-scale. Find p with q = a × 10^p / b in
	// [10^14, 10^15): then q is the 15 digits and p + scale the scale.
	// The bit lengths put p within one of the right value.
	p := decimalDigits - 1 - int(float64(a.BitLen()-b.BitLen())*math.Log10(2))
	lo := new(big.Int).Exp(bigTen, big.NewInt(decimalDigits-1), nil)
	hi := new(big.Int).Mul(lo, bigTen)
	var q, r, num, den big.Int
	for {
		num.Set(a)
		den.Set(b)
		if p >= 0 {
			num.Mul(&num, new(big.Int).Exp(bigTen, big.NewInt(int64(p)), nil))
		} else {
			den.Mul(&den, new(big.Int).Exp(bigTen, big.NewInt(int64(-p)), nil))
		}
		q.QuoRem(&num, &den, &r)
		switch {
		case q.Cmp(lo) < 0:
			p++
			continue
		case q.Cmp(hi) >= 0:
			p--
			continue
		}
		break
	}
	if r.Lsh(&r, 1).Cmp(&den) >= 0 {
		q.Add(&q, big.NewInt(1))
	}
	if neg {
		q.Neg(&q)
	}
	scale := p + int(d.scale)
	if scale < 0 {
		q.Mul(&q, new(big.Int).Exp(bigTen, big.NewInt(int64(-scale)), nil))
		scale = 0
	}
	// A quotient of a tiny sum by a large count can have more digits
	// after the point than a stored decimal: it is only printed.
	return makeDecimal(&q, uint16(min(scale, math.MaxUint16)))
}

// appendJSON appends d as a JSON number: no trailing zeros, plain from
// 1e-6 to below 1e21 and with an exponent outside, as encoding/json prints
// a float64.
func (d decimal) appendJSON(dst []byte) []byte {
	var buf [24]byte
	var digits []byte
	neg := false
	if d.big != nil {
		neg = d.big.Sign() < 0
		digits = new(big.Int).Abs(d.big).Append(nil, 10)
	} else {
		u := uint64(d.small)
		if d.small < 0 {
			neg, u = true, -u
		}
		digits = strconv.AppendUint(buf[:0], u, 10)
	}
	if d.isZero() {
		return append(dst, '0')
	}
	exp := -int(d.scale)
	for digits[len(digits)-1] == '0' {
		digits = digits[:len(digits)-1]
		exp++
	}
	if neg {
		dst = append(dst, '-')
	}
	return appendDigits(dst, digits, len(digits)+exp)
}

// appendDigits writes 0.digits × 10^n by ECMAScript's Number::toString,
// as encoding/json writes floats.
func appendDigits(dst, digits []byte, n int) []byte {
	k := len(digits)
	switch {
	case k <= n && n <= 21:
		dst = append(dst, digits...)
		for range n - k {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, digits[:n]...)
		dst = append(dst, '.')
		dst = append(dst, digits[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, "0."...)
		for range -n {
			dst = append(dst, '0')
		}
		dst = append(dst, digits...)
	default:
		dst = append(dst, digits[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, digits[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 >= 0 {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, int64(n-1), 10)
	}
	return dst
}

// Decimal kinds in encodings (after kindEmpty, kindInt, kindFloat).
const (
	// kindDecimal: uvarint scale, zig-zag varint coefficient.
	kindDecimal byte = 3
	// kindBigDecimal: uvarint scale, sign byte (0 positive, 1
	// negative), uvarint length and the big-endian magnitude, without
	// leading zeros, beyond int64.
	kindBigDecimal byte = 4
)

// appendDecimal appends the kind byte and the encoding of d.
func appendDecimal(b []byte, d decimal) []byte {
	if d.big == nil {
		b = binary.AppendUvarint(append(b, kindDecimal), uint64(d.scale))
		return binary.AppendVarint(b, d.small)
	}
	b = binary.AppendUvarint(append(b, kindBigDecimal), uint64(d.scale))
	sign := byte(0)
	if d.big.Sign() < 0 {
		sign = 1
	}
	mag := new(big.Int).Abs(d.big).Bytes()
	b = binary.AppendUvarint(append(b, sign), uint64(len(mag)))
	return append(b, mag...)
}

// readDecimal reads the encoding of a decimal of kind k (kindDecimal or
// kindBigDecimal), rejecting what appendDecimal never writes.
func readDecimal(r *wire.Reader, k byte) decimal {
	scale := r.Uvarint("decimal scale")
	if r.Err() == nil && scale > maxScale {
		r.Fail("decimal scale", fmt.Sprintf("decimal scale %d beyond %d", scale, maxScale))
	}
	if k == kindDecimal {
		return decimal{small: r.Varint("decimal coefficient"), scale: uint16(scale)}
	}
	sign := r.Byte("decimal sign")
	if r.Err() == nil && sign > 1 {
		r.Fail("decimal sign", fmt.Sprintf("bad decimal sign %d", sign))
	}
	mag := r.Bytes("decimal magnitude")
	switch {
	case r.Err() != nil:
		return decimal{}
	case len(mag) > maxCoefBytes:
		r.Fail("decimal magnitude", fmt.Sprintf("decimal of %d bytes", len(mag)))
		return decimal{}
	case len(mag) == 0 || mag[0] == 0:
		r.Fail("decimal magnitude", "non-canonical decimal")
		return decimal{}
	}
	z := new(big.Int).SetBytes(mag)
	if sign == 1 {
		z.Neg(z)
	}
	if z.IsInt64() {
		r.Fail("decimal magnitude", "non-canonical decimal")
		return decimal{}
	}
	return decimal{big: z, scale: uint16(scale)}
}
