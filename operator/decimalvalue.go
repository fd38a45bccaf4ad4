package operator

import (
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// Decimal is an exact decimal number in the value domain: what a decimal
// of a schema format decodes to (Avro's decimal logical type, a
// Protobuf or JSON Schema decimal), so that it reaches the aggregates
// without a trip through float64. sum, min, max and avg take it exactly,
// like every decimal they compute with (decimal.go); an output's JSON
// prints it as a number (112.90 prints 112.9, as any decimal result);
// a key_by of it is its JSON text. Expressions see it as itself:
// comparisons and arithmetic with numbers work (see decimalOps), and
// float(x) is its nearest float64.
//
// The zero value is 0 (scale 0). A Decimal is immutable.
type Decimal struct{ d decimal }

// MaxDecimalScale is the most digits after the point a Decimal has.
const MaxDecimalScale = maxScale

var errDecimalScale = fmt.Errorf("decimal scale beyond %d", MaxDecimalScale)

// NewDecimal is unscaled × 10^-scale; scale is 0 to MaxDecimalScale.
// unscaled is not kept.
func NewDecimal(unscaled *big.Int, scale int) (Decimal, error) {
	if scale < 0 || scale > maxScale {
		return Decimal{}, errDecimalScale
	}
	if unscaled.BitLen() > 8*maxCoefBytes {
		return Decimal{}, errors.New("decimal of more than 1024 bytes")
	}
	return Decimal{makeDecimal(new(big.Int).Set(unscaled), uint16(scale))}, nil
}

// DecimalOfInt64 is unscaled × 10^-scale; scale is 0 to MaxDecimalScale.
func DecimalOfInt64(unscaled int64, scale int) (Decimal, error) {
	if scale < 0 || scale > maxScale {
		return Decimal{}, errDecimalScale
	}
	return Decimal{decimal{small: unscaled, scale: uint16(scale)}}, nil
}

// ParseDecimal reads decimal text as JSON writes numbers: an optional
// sign, digits, an optional point and digits, an optional exponent
// ("-112.90", "3", "1.5e-7"). The scale is the digits after the point
// less the exponent, at least 0.
func ParseDecimal(s string) (Decimal, error) {
	t := strings.TrimPrefix(strings.TrimPrefix(s, "-"), "+")
	exp := 0
	if i := strings.IndexAny(t, "eE"); i >= 0 {
		e, err := strconv.Atoi(strings.TrimPrefix(t[i+1:], "+"))
		if err != nil || e < -maxScale || e > maxScale {
			return Decimal{}, fmt.Errorf("%q is not a decimal number", s)
		}
		t, exp = t[:i], e
	}
	whole, frac, _ := strings.Cut(t, ".")
	if whole+frac == "" || strings.Trim(whole+frac, "0123456789") != "" {
		return Decimal{}, fmt.Errorf("%q is not a decimal number", s)
	}
	z, _ := new(big.Int).SetString(whole+frac, 10)
	if strings.HasPrefix(s, "-") {
		z.Neg(z)
	}
	scale := len(frac) - exp
	if scale < 0 {
		z.Mul(z, new(big.Int).Exp(bigTen, big.NewInt(int64(-scale)), nil))
		scale = 0
	}
	return NewDecimal(z, scale)
}

// DecodeJSONObject decodes a JSON object as the chain decodes a
// record's value (exact integers, other numbers float64, UTF-8 checked).
func DecodeJSONObject(b []byte) (map[string]any, error) {
	var d decoder
	return d.decodeObject(b)
}

// DecodeJSONValue decodes any JSON value as the chain decodes a key in
// key_format json.
func DecodeJSONValue(b []byte) (any, error) {
	var d decoder
	return d.decodeValue(b)
}

// DecodeJSONObjectExact decodes a JSON object as the chain does, except
// that a number with a fraction or an exponent is the exact Decimal its
// text spells, not a float64: for an encoder that writes a job's JSON
// output (whose decimals print exactly) in another format.
func DecodeJSONObjectExact(b []byte) (map[string]any, error) {
	d := decoder{exact: true}
	return d.decodeObject(b)
}

// Scale is the number of digits after the point.
func (x Decimal) Scale() int { return int(x.d.scale) }

// Unscaled is the coefficient: x is Unscaled() × 10^-Scale(). It returns
// a new big.Int.
func (x Decimal) Unscaled() *big.Int { return x.d.coef(0) }

// Rescale is x with scale digits after the point, if that is exact (no
// digit other than 0 is dropped).
func (x Decimal) Rescale(scale int) (Decimal, bool) {
	if scale < 0 || scale > maxScale {
		return Decimal{}, false
	}
	s := uint16(scale)
	if s >= x.d.scale {
		if v, ok := scaleSmall(x.d.small, s-x.d.scale); ok && x.d.big == nil {
			return Decimal{decimal{small: v, scale: s}}, true
		}
		return Decimal{makeDecimal(x.d.coef(s-x.d.scale), s)}, true
	}
	z := x.d.coef(0)
	div := new(big.Int).Exp(bigTen, big.NewInt(int64(x.d.scale-s)), nil)
	q, r := new(big.Int).QuoRem(z, div, new(big.Int))
	if r.Sign() != 0 {
		return Decimal{}, false
	}
	return Decimal{makeDecimal(q, s)}, true
}

// Round is x rounded to scale digits after the point, halves away from
// zero, as SQL's ROUND.
func (x Decimal) Round(scale int) Decimal {
	if r, ok := x.Rescale(scale); ok {
		return r
	}
	s := uint16(scale)
	z := x.d.coef(0)
	div := new(big.Int).Exp(bigTen, big.NewInt(int64(x.d.scale-s)), nil)
	q, r := new(big.Int).QuoRem(z, div, new(big.Int))
	if r.Abs(r).Lsh(r, 1).Cmp(div) >= 0 {
		if z.Sign() < 0 {
			q.Sub(q, big.NewInt(1))
		} else {
			q.Add(q, big.NewInt(1))
		}
	}
	return Decimal{makeDecimal(q, s)}
}

// Cmp compares x and y exactly: -1, 0 or +1.
func (x Decimal) Cmp(y Decimal) int { return x.d.cmp(y.d) }

// Float64 is the float64 nearest to x.
func (x Decimal) Float64() float64 {
	f, _ := strconv.ParseFloat(x.String(), 64)
	return f
}

// String is x in plain notation with all its Scale() digits after the
// point: "112.90", "-0.05", "3".
func (x Decimal) String() string {
	z := x.d.coef(0)
	neg := z.Sign() < 0
	digits := z.Abs(z).String()
	if s := int(x.d.scale); s > 0 {
		if len(digits) <= s {
			digits = strings.Repeat("0", s-len(digits)+1) + digits
		}
		digits = digits[:len(digits)-s] + "." + digits[len(digits)-s:]
	}
	if neg {
		return "-" + digits
	}
	return digits
}

// appendJSON is x as a JSON number, as every decimal result prints.
func (x Decimal) appendJSON(dst []byte) []byte { return x.d.appendJSON(dst) }

// DecimalValue is v as a Decimal, for an encoder writing a decimal field:
// a Decimal, an integer, or a float64 as its decimal of 15 significant
// digits (what a restored first() or last() of a decimal holds).
func DecimalValue(v any) (Decimal, bool) {
	if x, ok := v.(Decimal); ok {
		return x, true
	}
	n, ok := toNumber(v)
	if !ok {
		return Decimal{}, false
	}
	return Decimal{n.decimal()}, true
}

// Int64 is x as an int64 when it is a whole number that fits.
func (x Decimal) Int64() (int64, bool) {
	r, ok := x.Rescale(0)
	if !ok || r.d.big != nil {
		return 0, false
	}
	return r.d.small, true
}
