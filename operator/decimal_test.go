package operator

import (
	"encoding/binary"
	"encoding/hex"
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/eoflow/pipeline/config"
)

func TestDecimalOfFloat(t *testing.T) {
	tests := []struct {
		f    float64
		want string
	}{
		{0, "0"}, {math.Copysign(0, -1), "0"}, {1, "1"}, {-2.5, "-2.5"}, {112.99, "112.99"},
		{0.1 + 0.2, "0.3"}, {19.99 * 3, "59.97"}, {113.1 - 0.11, "112.99"}, {1e3, "1000"}, {1.5e-2, "0.015"},
		{1.0 / 3, "0.333333333333333"}, {2.0 / 3, "0.666666666666667"}, {123456789012345678, "123456789012346000"},
		{1e21, "1e+21"}, {1e20, "100000000000000000000"}, {1e-7, "1e-7"}, {0.000001, "0.000001"},
		{1e300, "1e+300"}, {math.MaxFloat64, "1.79769313486232e+308"}, {5e-324, "4.94065645841247e-324"},
		{1000000000000005, "1000000000000000"}, {1000000000000015, "1000000000000020"}, // ties to even
		{0x1p63, "9223372036854780000"}, {-0x1p63, "-9223372036854780000"},
	}
	for _, tt := range tests {
		if got := string(decimalOfFloat(tt.f).appendJSON(nil)); got != tt.want {
			t.Errorf("decimalOfFloat(%v) = %s, want %s", tt.f, got, tt.want)
		}
	}
	// Every decimal of up to 15 significant digits comes back exactly.
	rng := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		digits := rng.Int64N(1e15)
		exp := rng.IntN(60) - 40
		text := strconv.FormatInt(digits, 10) + "e" + strconv.Itoa(exp)
		f, _ := strconv.ParseFloat(text, 64)
		want, _ := new(big.Rat).SetString(text)
		if got := ratOf(t, decimalOfFloat(f).appendJSON(nil)); got.Cmp(want) != 0 {
			t.Fatalf("%s: decimal %s", text, got.FloatString(40))
		}
	}
}

// ratOf parses a JSON number exactly.
func ratOf(t testing.TB, js []byte) *big.Rat {
	t.Helper()
	r, ok := new(big.Rat).SetString(string(js))
	if !ok {
		t.Fatalf("not a number: %s", js)
	}
	return r
}

// round15 is r rounded to 15 significant digits; halfEven picks how a tie
// goes (else away from zero). It is the reference the decimals are checked
// against, computed in math/big.Rat only.
func round15(r *big.Rat, halfEven bool) *big.Rat {
	if r.Sign() == 0 {
		return new(big.Rat)
	}
	neg := r.Sign() < 0
	a := new(big.Rat).Abs(r)
	// Find e with 10^14 <= a × 10^e < 10^15.
	lo, hi := big.NewRat(1e14, 1), big.NewRat(1e15, 1)
	e := 0
	scaled := new(big.Rat).Set(a)
	ten := big.NewRat(10, 1)
	tenth := big.NewRat(1, 10)
	for scaled.Cmp(lo) < 0 {
		scaled.Mul(scaled, ten)
		e++
	}
	for scaled.Cmp(hi) >= 0 {
		scaled.Mul(scaled, tenth)
		e--
	}
	q, rem := new(big.Int).QuoRem(scaled.Num(), scaled.Denom(), new(big.Int))
	twice := new(big.Int).Lsh(rem, 1)
	switch c := twice.Cmp(scaled.Denom()); {
	case c > 0, c == 0 && (!halfEven || q.Bit(0) == 1):
		q.Add(q, big.NewInt(1))
	}
	out := new(big.Rat).SetInt(q)
	p := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(abs(e))), nil))
	if e > 0 {
		out.Quo(out, p)
	} else {
		out.Mul(out, p)
	}
	if neg {
		out.Neg(out)
	}
	return out
}

func abs(i int) int {
	if i < 0 {
		return -i
	}
	return i
}

// checkAgainstRat adds the inputs to sum, min, max and avg accumulators
// and holds every result to math/big.Rat: an integer is itself, a float
// its exact value rounded to 15 significant digits (ties to even); sums,
// min and max are exact, a decimal avg is the exact mean rounded to 15
// digits (ties away from zero). An integer-only sum that leaves int64 must
// be refused with CodeOverflow and change nothing.
func checkAgainstRat(t *testing.T, inputs []any) {
	t.Helper()
	accs := map[config.AggregateFunc]Accumulator{}
	for _, fn := range []config.AggregateFunc{config.AggSum, config.AggMin, config.AggMax, config.AggAvg} {
		accs[fn], _ = NewAccumulator(fn)
	}
	sum, avgSum := new(big.Rat), new(big.Rat)
	var mn, mx *big.Rat
	sumDecimal, avgDecimal := false, false
	n := 0
	for _, in := range inputs {
		num, _ := toNumber(in)
		v := new(big.Rat)
		if num.isFloat {
			v = round15(new(big.Rat).SetFloat64(num.f), true)
		} else {
			v.SetInt64(num.i)
		}
		next := new(big.Rat).Add(sum, v)
		_, err := accs[config.AggSum].Add(in)
		switch {
		case !sumDecimal && !num.isFloat && !next.Num().IsInt64():
			if err == nil || err.Code != CodeOverflow {
				t.Fatalf("%v: integer sum %s: error %v, want overflow", inputs, next.RatString(), err)
			}
		case err != nil:
			t.Fatalf("%v: sum refused %v: %v", inputs, in, err)
		default:
			sum, sumDecimal = next, sumDecimal || num.isFloat
		}
		if _, err := accs[config.AggAvg].Add(in); err != nil {
			t.Fatalf("avg refused %v: %v", in, err)
		}
		avgSum.Add(avgSum, v)
		avgDecimal = avgDecimal || num.isFloat
		n++
		for fn, acc := range map[config.AggregateFunc]Accumulator{config.AggMin: accs[config.AggMin], config.AggMax: accs[config.AggMax]} {
			if _, err := acc.Add(in); err != nil {
				t.Fatalf("%s refused %v: %v", fn, in, err)
			}
		}
		if mn == nil || v.Cmp(mn) < 0 {
			mn = v
		}
		if mx == nil || v.Cmp(mx) > 0 {
			mx = v
		}
		for fn, want := range map[config.AggregateFunc]*big.Rat{config.AggSum: sum, config.AggMin: mn, config.AggMax: mx} {
			if got := ratOf(t, accs[fn].appendResult(nil)); got.Cmp(want) != 0 {
				t.Fatalf("%v: %s = %s, want %s", inputs, fn, got.RatString(), want.RatString())
			}
		}
		if avgDecimal {
			want := round15(new(big.Rat).Quo(avgSum, big.NewRat(int64(n), 1)), false)
			if got := ratOf(t, accs[config.AggAvg].appendResult(nil)); got.Cmp(want) != 0 {
				t.Fatalf("%v: avg = %s, want %s", inputs, got.RatString(), want.RatString())
			}
		}
	}
	// The states survive their encoding.
	for fn, acc := range accs {
		enc, _ := acc.MarshalBinary()
		back, _ := NewAccumulator(fn)
		if err := back.UnmarshalBinary(enc); err != nil {
			t.Fatalf("%s %x: %v", fn, enc, err)
		}
		if a, b := string(acc.appendResult(nil)), string(back.appendResult(nil)); a != b {
			t.Fatalf("%s restored as %s, was %s", fn, b, a)
		}
	}
}

// numbersOf turns fuzz bytes into numbers of every shape: small and huge
// integers, money amounts, floats of any exponent.
func numbersOf(data []byte) []any {
	var out []any
	for len(data) >= 9 {
		kind, bits := data[0], binary.LittleEndian.Uint64(data[1:9])
		data = data[9:]
		switch kind % 5 {
		case 0:
			out = append(out, int64(bits))
		case 1:
			out = append(out, int64(bits)>>40)
		case 2: // money: cents
			out = append(out, float64(int64(bits)>>44)/100)
		case 3:
			if f := math.Float64frombits(bits); !math.IsNaN(f) && !math.IsInf(f, 0) {
				out = append(out, f)
			}
		case 4: // a float of a few digits at any scale
			f, _ := strconv.ParseFloat(strconv.Itoa(int(bits%100000))+"e"+strconv.Itoa(int(int8(bits>>32))), 64)
			if !math.IsInf(f, 0) {
				out = append(out, f)
			}
		}
	}
	return out
}

func TestDecimalAggregatesMatchRat(t *testing.T) {
	for _, in := range [][]any{
		{1.10, 2.20}, {0.1, 0.2, 0.3}, {112.99, 0.01, -0.5}, {math.MaxInt64, 0.5, math.MaxInt64}, {math.MaxInt64, 1},
		{1e300, -1e300, 5e-324}, {1, 2, 2.0}, {-1.00000000000001, -1.00000000000002},
	} {
		checkAgainstRat(t, in)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		data := make([]byte, 9*(1+rng.IntN(8)))
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		checkAgainstRat(t, numbersOf(data))
	}
}

// FuzzDecimalAggregates is TestDecimalAggregatesMatchRat on any input.
func FuzzDecimalAggregates(f *testing.F) {
	f.Add([]byte("\x02\x00\x00\x00\x00\x00\x10\x00\x00\x03\x9a\x99\x99\x99\x99\x99\xb9\x3f"))
	f.Add([]byte("\x00\xff\xff\xff\xff\xff\xff\xff\x7f\x04\x05\x00\x00\x00\x80\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkAgainstRat(t, numbersOf(data))
	})
}

// TestStateEncodingsGolden pins accumulator encodings. Those of integer
// states, and of float states, were written by the code before decimals
// (commit 6d33136): integer states must still decode and re-encode byte for
// byte; a float state decodes as the decimal of its float and re-encodes
// as that decimal. The decimal encodings are pinned from here on.
func TestStateEncodingsGolden(t *testing.T) {
	tests := []struct {
		name string
		fn   config.AggregateFunc
		enc  string // hex
		json string // its result now
		// reenc is the encoding after a decode ("" when enc itself)
		reenc string
	}{
		// Integer states, unchanged.
		{"count", config.AggCount, "010103", "3", ""},
		{"sum empty", config.AggSum, "01020100", "0", ""},
		{"sum ints", config.AggSum, "0102010d", "-7", ""},
		{"sum max int64", config.AggSum, "010201feffffffffffffffff01", "9223372036854775807", ""},
		{"sum min int64", config.AggSum, "010201ffffffffffffffffff01", "-9223372036854775808", ""},
		{"min empty", config.AggMin, "010300", "null", ""},
		{"min ints", config.AggMin, "01030103", "-2", ""},
		{"max int", config.AggMax, "010401feffffffffffffffff01", "9223372036854775807", ""},
		{"avg empty", config.AggAvg, "010500010000", "null", ""},
		{"avg ints", config.AggAvg, "010502010003", "1.5", ""},
		{"avg ints big", config.AggAvg, "0105030100f9ffffffffffffffff01", "6148914691236517000", ""},
		{"avg ints negative", config.AggAvg, "0105020101f9ffffffffffffffff01", "-3.5", ""},
		{"first", config.AggFirst, "01060103322e35", "2.5", ""},
		{"last", config.AggLast, "010701097b2261223a2278227d", `{"a":"x"}`, ""},
		// Float states from before decimals (112.99 + 0.01 = 113 as a
		// float; 0.1 + 0.2; 1e300; min 113.1 - 0.11; max 1.5; avg of 1.1
		// and 2.2, which printed 1.6500000000000001).
		{"sum float", config.AggSum, "0102020000000000405c40", "113", "01020300e201"},
		{"sum float artifact", config.AggSum, "010202343333333333d33f", "0.3", "0102030106"},
		{"sum float big", config.AggSum, "0102029c7500883ce4377e", "1e+300",
			"01020400007d17e43c8800759ba59c08e14c7cd7aad86a4a458109f91c21c571dbe84d52d936f44abe8a3d5b48c100959d9d0b6cc856b3adc93b67aea8f8e067d2c8d04bc177f7b4287a6e3fcda36fa3b3342eaeb442e15d450952f4dd1000000000000000000000000000000000000000000000000000000000000000000000000000"},
		{"min float", config.AggMin, "0103028fc2f5285c3f5c40", "112.99", "01030302c6b001"},
		{"max float", config.AggMax, "010402000000000000f83f", "1.5", "010403011e"},
		{"avg floats", config.AggAvg, "010502026766666666660a40", "1.65", "010502030142"},
		// Decimal states: kind 3 (scale, coefficient), kind 4 (scale, sign,
		// magnitude).
		{"sum decimal", config.AggSum, "01020302c6b001", "112.99", ""},
		{"sum big decimal", config.AggSum, "010204010109010000000000000001", "-1844674407370955161.7", ""},
		{"min decimal", config.AggMin, "0103030e0b", "-6e-14", ""},
		{"avg decimal", config.AggAvg, "0105030302a606", "1.34333333333333", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			enc, _ := hex.DecodeString(tt.enc)
			acc, _ := NewAccumulator(tt.fn)
			if err := acc.UnmarshalBinary(enc); err != nil {
				t.Fatal(err)
			}
			if got := string(acc.appendResult(nil)); got != tt.json {
				t.Fatalf("result %s, want %s", got, tt.json)
			}
			want := tt.reenc
			if want == "" {
				want = tt.enc
			}
			if got, _ := acc.MarshalBinary(); hex.EncodeToString(got) != want {
				t.Fatalf("re-encoded as %x, want %s", got, want)
			}
		})
	}
}

// TestStateBlockSize: decimals live behind a pointer, so the state of a
// key of the reference job (count and an integer sum), allocated per key,
// is no larger than before decimals and key kinds (96 bytes).
func TestStateBlockSize(t *testing.T) {
	c := mustCompile(t, paritySteps("")...)
	if got := c.Aggregator().layout.block.Size(); got > 96 {
		t.Fatalf("state block of count and sum: %d bytes, want at most 96", got)
	}
}

// TestQuoSmallMatchesBig holds the 64-bit average to the math/big one.
func TestQuoSmallMatchesBig(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 200000 {
		d := decimal{small: rng.Int64() >> rng.IntN(64), scale: uint16(rng.IntN(40))}
		if i%2 == 0 {
			d.small = -d.small
		}
		n := uint64(1) + rng.Uint64N(1<<uint(1+rng.IntN(58)))
		got, ok := d.quoSmall(n)
		if !ok {
			continue
		}
		if want := d.quoBig(n); got.cmp(want) != 0 {
			t.Fatalf("%+v / %d: %s, want %s", d, n, got.appendJSON(nil), want.appendJSON(nil))
		}
	}
	for _, c := range []struct {
		d decimal
		n uint64
	}{
		{decimal{small: math.MaxInt64}, 1}, {decimal{small: math.MinInt64}, 1}, {decimal{small: math.MinInt64, scale: 3}, 7},
		{decimal{small: 1}, 1<<59 - 1}, {decimal{small: 999999999999999}, 1}, {decimal{small: 9999999999999995}, 1},
		{decimal{small: -9999999999999995, scale: 20}, 1}, {decimal{small: 1000000000000005}, 1}, {decimal{small: 5}, 3},
	} {
		got, ok := c.d.quoSmall(c.n)
		if want := c.d.quoBig(c.n); ok && got.cmp(want) != 0 {
			t.Fatalf("%+v / %d: %s, want %s", c.d, c.n, got.appendJSON(nil), want.appendJSON(nil))
		}
	}
}
