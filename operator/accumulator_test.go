package operator

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/eoflow/pipeline/config"
)

const (
	p53  = 1 << 53
	maxI = math.MaxInt64
	minI = math.MinInt64
)

func TestAccumulators(t *testing.T) {
	tests := []struct {
		name   string
		fn     config.AggregateFunc
		inputs []any
		want   any    // Result, compared with DeepEqual (type matters)
		json   string // its JSON
		// failAt is the index of an input that must be refused with
		// failCode (the result is then of the inputs before it).
		failAt   int
		failCode Code
	}{
		{name: "count empty", fn: config.AggCount, want: int64(0), json: "0"},
		{name: "count", fn: config.AggCount, inputs: []any{nil, "x", 1.5}, want: int64(3), json: "3"},

		{name: "sum empty", fn: config.AggSum, want: int64(0), json: "0"},
		{name: "sum ints", fn: config.AggSum, inputs: []any{1, 2, int64(3), -10}, want: int64(-4), json: "-4"},
		{name: "sum exact above 2^53", fn: config.AggSum, inputs: []any{p53, 1, 1, 1}, want: int64(p53 + 3), json: "9007199254740995"},
		{name: "sum exact to max int64", fn: config.AggSum, inputs: []any{maxI - 5, 2, 3}, want: int64(maxI), json: "9223372036854775807"},
		{name: "sum exact to min int64", fn: config.AggSum, inputs: []any{minI + 5, -5}, want: int64(minI), json: "-9223372036854775808"},
		{name: "sum overflow refused", fn: config.AggSum, inputs: []any{maxI - 1, 1, 1}, failAt: 2, failCode: CodeOverflow, want: int64(maxI), json: "9223372036854775807"},
		{name: "sum negative overflow refused", fn: config.AggSum, inputs: []any{minI, -1}, failAt: 1, failCode: CodeOverflow, want: int64(minI), json: "-9223372036854775808"},
		{name: "sum back from the edge", fn: config.AggSum, inputs: []any{maxI, -1, 1}, want: int64(maxI), json: "9223372036854775807"},
		{name: "sum switches to decimal", fn: config.AggSum, inputs: []any{1, 0.5, 2}, want: json.Number("3.5"), json: "3.5"},
		{name: "sum of money exact", fn: config.AggSum, inputs: []any{112.99, 0.01}, want: json.Number("113"), json: "113"},
		{name: "sum of tenths exact", fn: config.AggSum, inputs: []any{0.1, 0.2}, want: json.Number("0.3"), json: "0.3"},
		{name: "sum keeps the larger scale", fn: config.AggSum, inputs: []any{1.5, 2.25, -0.75}, want: json.Number("3"), json: "3"},
		{name: "sum of exponent forms", fn: config.AggSum, inputs: []any{1e3, 1.5e-2, 2}, want: json.Number("1002.015"), json: "1002.015"},
		{name: "sum of a computed float", fn: config.AggSum, inputs: []any{19.99 * 3, 0.01}, want: json.Number("59.98"), json: "59.98"},
		{name: "sum decimal beyond int64 exact", fn: config.AggSum, inputs: []any{maxI, 0.5, maxI}, want: json.Number("18446744073709551614.5"), json: "18446744073709551614.5"},
		{name: "sum decimal back into int64", fn: config.AggSum, inputs: []any{maxI, 0.5, maxI, -0.5, minI, minI}, want: json.Number("-2"), json: "-2"},
		{name: "sum of huge floats never overflows", fn: config.AggSum, inputs: []any{math.MaxFloat64, math.MaxFloat64}, want: json.Number("3.59538626972464e+308"), json: "3.59538626972464e+308"},
		{name: "sum of tiny floats", fn: config.AggSum, inputs: []any{5e-324, 1e-300}, want: json.Number("1.00000000000000000000000494065645841247e-300"), json: "1.00000000000000000000000494065645841247e-300"},
		{name: "sum of string refused", fn: config.AggSum, inputs: []any{1, "2"}, failAt: 1, failCode: CodeType, want: int64(1), json: "1"},
		{name: "sum of null refused", fn: config.AggSum, inputs: []any{nil}, failAt: 0, failCode: CodeType, want: int64(0), json: "0"},
		{name: "sum of NaN refused", fn: config.AggSum, inputs: []any{math.NaN()}, failAt: 0, failCode: CodeType, want: int64(0), json: "0"},
		{name: "sum uint64 beyond int64 is a decimal", fn: config.AggSum, inputs: []any{uint64(1 << 63)}, want: json.Number("9223372036854780000"), json: "9223372036854780000"},

		{name: "min empty", fn: config.AggMin, want: nil, json: "null"},
		{name: "min ints", fn: config.AggMin, inputs: []any{3, -2, 5}, want: int64(-2), json: "-2"},
		{name: "min exact near 2^63", fn: config.AggMin, inputs: []any{maxI, maxI - 1, 9.3e18}, want: int64(maxI - 1), json: "9223372036854775806"},
		{name: "min int beats close float", fn: config.AggMin, inputs: []any{1e30, p53 + 1, 9.007199254741e15}, want: int64(p53 + 1), json: "9007199254740993"},
		{name: "min float counts with 15 digits", fn: config.AggMin, inputs: []any{p53 + 1, float64(p53)}, want: json.Number("9007199254740990"), json: "9007199254740990"},
		{name: "min of a computed float", fn: config.AggMin, inputs: []any{113.1 - 0.11, 200}, want: json.Number("112.99"), json: "112.99"},
		{name: "min decimal then int", fn: config.AggMin, inputs: []any{0.5, -1, 0.25, -1.0}, want: int64(-1), json: "-1"},
		{name: "min tie keeps first", fn: config.AggMin, inputs: []any{2, 2.0}, want: int64(2), json: "2"},
		{name: "min refuses bool", fn: config.AggMin, inputs: []any{1, true}, failAt: 1, failCode: CodeType, want: int64(1), json: "1"},
		{name: "max", fn: config.AggMax, inputs: []any{minI, -1.5, 7, 6.9}, want: int64(7), json: "7"},
		{name: "max exact near 2^63", fn: config.AggMax, inputs: []any{9.2e18, maxI, 9.223372036854775e18}, want: int64(maxI), json: "9223372036854775807"},
		{name: "max float above int64", fn: config.AggMax, inputs: []any{maxI, 0x1p63}, want: json.Number("9223372036854780000"), json: "9223372036854780000"},
		{name: "max of decimals of other scales", fn: config.AggMax, inputs: []any{1.5, 1.25, 1.75, 1.7}, want: json.Number("1.75"), json: "1.75"},
		{name: "max tiny", fn: config.AggMax, inputs: []any{-1e-300, -5e-324}, want: json.Number("-4.94065645841247e-324"), json: "-4.94065645841247e-324"},

		{name: "avg empty", fn: config.AggAvg, want: nil, json: "null"},
		{name: "avg ints", fn: config.AggAvg, inputs: []any{1, 2}, want: 1.5, json: "1.5"},
		{name: "avg integral", fn: config.AggAvg, inputs: []any{2, 4}, want: 3.0, json: "3"},
		{name: "avg no int64 overflow", fn: config.AggAvg, inputs: []any{maxI, maxI, maxI}, want: float64(maxI), json: "9223372036854776000"},
		{name: "avg of min int64", fn: config.AggAvg, inputs: []any{minI, minI}, want: float64(minI), json: "-9223372036854776000"},
		{name: "avg mixed signs exact", fn: config.AggAvg, inputs: []any{maxI, minI, 1}, want: 0.0, json: "0"},
		{name: "avg exact above 2^53", fn: config.AggAvg, inputs: []any{p53 + 1, p53 + 3}, want: float64(p53 + 2), json: "9007199254740994"},
		{name: "avg decimal", fn: config.AggAvg, inputs: []any{1, 2.5}, want: json.Number("1.75"), json: "1.75"},
		{name: "avg of money", fn: config.AggAvg, inputs: []any{1.10, 2.20}, want: json.Number("1.65"), json: "1.65"},
		{name: "avg 15 digits", fn: config.AggAvg, inputs: []any{1, 2, 2.0}, want: json.Number("1.66666666666667"), json: "1.66666666666667"},
		{name: "avg half away from zero", fn: config.AggAvg, inputs: []any{1.00000000000001, 1.00000000000002}, want: json.Number("1.00000000000002"), json: "1.00000000000002"},
		{name: "avg negative half away from zero", fn: config.AggAvg, inputs: []any{-1.00000000000001, -1.00000000000002}, want: json.Number("-1.00000000000002"), json: "-1.00000000000002"},
		{name: "avg promotes a 128-bit sum", fn: config.AggAvg, inputs: []any{maxI, maxI, 0.5}, want: json.Number("6148914691236520000"), json: "6148914691236520000"},
		{name: "avg of equal inputs is the input", fn: config.AggAvg, inputs: []any{0.07, 0.07, 0.07}, want: json.Number("0.07"), json: "0.07"},
		{name: "avg tiny", fn: config.AggAvg, inputs: []any{5e-324, 0.0, 0.0}, want: json.Number("1.64688548613749e-324"), json: "1.64688548613749e-324"},
		{name: "avg refuses string", fn: config.AggAvg, inputs: []any{1, "x"}, failAt: 1, failCode: CodeType, want: 1.0, json: "1"},
		{name: "avg of huge floats", fn: config.AggAvg, inputs: []any{math.MaxFloat64, math.MaxFloat64}, want: json.Number("1.79769313486232e+308"), json: "1.79769313486232e+308"},

		{name: "first empty", fn: config.AggFirst, want: nil, json: "null"},
		{name: "first", fn: config.AggFirst, inputs: []any{map[string]any{"a": []any{1}}, 2}, want: map[string]any{"a": []any{1}}, json: `{"a":[1]}`},
		{name: "first null is a value", fn: config.AggFirst, inputs: []any{nil, 2}, want: nil, json: "null"},
		{name: "first ignores later bad values", fn: config.AggFirst, inputs: []any{1, math.NaN()}, want: 1, json: "1"},
		{name: "last", fn: config.AggLast, inputs: []any{1, "x", []string{"a"}}, want: []any{"a"}, json: `["a"]`},
		{name: "last refuses NaN", fn: config.AggLast, inputs: []any{1, math.Inf(1)}, failAt: 1, failCode: CodeType, want: 1, json: "1"},
		{name: "last big int exact", fn: config.AggLast, inputs: []any{maxI}, want: maxI, json: "9223372036854775807"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			acc, err := NewAccumulator(tt.fn)
			if err != nil {
				t.Fatal(err)
			}
			failAt := -1
			if tt.failCode != "" {
				failAt = tt.failAt
			}
			for i, in := range tt.inputs {
				before, _ := acc.MarshalBinary()
				cerr := acc.Check(in)
				_, aerr := acc.Add(in)
				after, _ := acc.MarshalBinary()
				if i != failAt {
					if cerr != nil || aerr != nil {
						t.Fatalf("input %d (%v): Check %v, Add %v", i, in, cerr, aerr)
					}
					continue
				}
				if cerr == nil || aerr == nil || cerr.Code != tt.failCode || aerr.Code != tt.failCode {
					t.Fatalf("input %d (%v): Check %v, Add %v; want code %s", i, in, cerr, aerr, tt.failCode)
				}
				if !bytes.Equal(before, after) {
					t.Fatalf("a refused value changed the state")
				}
				break
			}
			if got := acc.Result(); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Result = %#v (%T), want %#v (%T)", got, got, tt.want, tt.want)
			}
			if got := string(acc.appendResult(nil)); got != tt.json {
				t.Fatalf("JSON = %s, want %s", got, tt.json)
			}
			// Round trip: same result, same encoding, same JSON.
			enc, err := acc.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			back, _ := NewAccumulator(tt.fn)
			if err := back.UnmarshalBinary(enc); err != nil {
				t.Fatalf("UnmarshalBinary(%x): %v", enc, err)
			}
			if !reflect.DeepEqual(back.Result(), acc.Result()) {
				t.Fatalf("restored Result = %#v, want %#v", back.Result(), acc.Result())
			}
			if got := string(back.appendResult(nil)); got != tt.json {
				t.Fatalf("restored JSON = %s, want %s", got, tt.json)
			}
			again, _ := back.MarshalBinary()
			if !bytes.Equal(again, enc) {
				t.Fatalf("re-encoding differs: %x vs %x", again, enc)
			}
		})
	}
}

func TestChangedReporting(t *testing.T) {
	tests := []struct {
		fn     config.AggregateFunc
		inputs []any
		want   []bool
	}{
		{config.AggCount, []any{1, 1}, []bool{true, true}},
		{config.AggSum, []any{1, 0, 2}, []bool{true, false, true}},
		{config.AggMin, []any{5, 6, 4, 4}, []bool{true, false, true, false}},
		{config.AggMax, []any{5, 6, 4}, []bool{true, true, false}},
		{config.AggAvg, []any{1, 1}, []bool{true, true}},
		{config.AggFirst, []any{1, 2}, []bool{true, false}},
		{config.AggLast, []any{1, 2}, []bool{true, true}},
	}
	for _, tt := range tests {
		acc, _ := NewAccumulator(tt.fn)
		for i, in := range tt.inputs {
			ch, err := acc.Add(in)
			if err != nil || ch != tt.want[i] {
				t.Errorf("%s: Add(%v) #%d changed=%v err=%v, want %v", tt.fn, in, i, ch, err, tt.want[i])
			}
		}
	}
}

func TestAccumulatorCorruptInput(t *testing.T) {
	enc := func(fn config.AggregateFunc, ins ...any) []byte {
		a, _ := NewAccumulator(fn)
		for _, in := range ins {
			a.Add(in)
		}
		b, _ := a.MarshalBinary()
		return b
	}
	tests := []struct {
		name string
		fn   config.AggregateFunc
		in   []byte
		want string
	}{
		{"empty", config.AggCount, nil, "truncated"},
		{"version", config.AggCount, []byte{9, 1, 0}, "unknown accumulator encoding version 9"},
		{"other function", config.AggSum, enc(config.AggCount, 1), "want sum"},
		{"trailing", config.AggCount, append(enc(config.AggCount, 1), 0), "1 trailing bytes"},
		{"bad varint", config.AggSum, []byte{1, 2, 1, 0xff}, "decode sum state: byte 3: int: truncated"},
		{"non-minimal varint", config.AggCount, []byte{1, 1, 0x81, 0x00}, "decode count state: byte 2: count: varint not minimally encoded"},
		{"non-minimal zero", config.AggSum, []byte{1, 2, 1, 0x80, 0x00}, "byte 3: int: varint not minimally encoded"},
		{"count overflow", config.AggCount, []byte{1, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, "out of range"},
		{"NaN", config.AggSum, []byte{1, 2, 2, 0, 0, 0, 0, 0, 0, 0xf8, 0x7f}, "non-finite"},
		{"number kind", config.AggMin, []byte{1, 3, 7}, "unknown number kind 7"},
		{"empty sum", config.AggSum, []byte{1, 2, 0}, "empty sum"},
		{"avg sum without count", config.AggAvg, []byte{1, 5, 0, 1, 2, 0}, "non-zero sum of no values"},
		{"decimal scale", config.AggSum, []byte{1, 2, 3, 0xd3, 0x02, 2}, "decimal scale 339 beyond 338"},
		{"decimal sign", config.AggSum, []byte{1, 2, 4, 0, 2, 9, 0x80, 0, 0, 0, 0, 0, 0, 0, 0}, "bad decimal sign 2"},
		{"big decimal in int64", config.AggMin, []byte{1, 3, 4, 0, 0, 1, 7}, "non-canonical decimal"},
		{"big decimal leading zero", config.AggMax, []byte{1, 4, 4, 0, 0, 10, 0, 0x80, 0, 0, 0, 0, 0, 0, 0, 0}, "non-canonical decimal"},
		{"big decimal -2^63", config.AggSum, []byte{1, 2, 4, 0, 1, 8, 0x80, 0, 0, 0, 0, 0, 0, 0}, "non-canonical decimal"},
		{"big decimal length", config.AggAvg, append([]byte{1, 5, 1, 4, 0, 0, 0x81, 0x10}, bytes.Repeat([]byte{1}, 2049)...), "decimal of 2049 bytes"},
		{"first length", config.AggFirst, []byte{1, 6, 1, 10, '1'}, "decode first state: byte 3: value: length 10 exceeds the 1 bytes left"},
		{"first JSON", config.AggFirst, []byte{1, 6, 1, 1, '{'}, "value: unexpected end"},
		{"first presence", config.AggFirst, []byte{1, 6, 2}, "bad presence byte"},
	}
	for _, tt := range tests {
		a, _ := NewAccumulator(tt.fn)
		good, _ := a.MarshalBinary()
		err := a.UnmarshalBinary(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want it to contain %q", tt.name, err, tt.want)
		}
		if now, _ := a.MarshalBinary(); !bytes.Equal(now, good) {
			t.Errorf("%s: a failed UnmarshalBinary changed the accumulator", tt.name)
		}
	}
}

// Restored floats keep their type, so outputs after a restore are
// byte-identical to outputs before it.
func TestFirstKeepsFloatType(t *testing.T) {
	for _, v := range []any{math.Copysign(0, -1), 100.0, []any{2.0}, map[string]any{"a": 1e21}} {
		a, _ := NewAccumulator(config.AggFirst)
		a.Add(v)
		enc, _ := a.MarshalBinary()
		b, _ := NewAccumulator(config.AggFirst)
		if err := b.UnmarshalBinary(enc); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a.Result(), b.Result()) {
			t.Fatalf("%#v restored as %#v", a.Result(), b.Result())
		}
	}
}

// FuzzAccumulatorDecode feeds every accumulator arbitrary bytes. It must
// never panic, a failed decode must leave the accumulator as it was, and
// what it accepts must be canonical: it re-encodes to the input byte for
// byte, except for the one legacy form (kind 2, a float written before
// decimals), whose re-encoding is the decimal and decodes to the same
// result, and for first and last, whose value is JSON text read by the
// JSON decoder (spacing and number spelling are not checked): there the
// re-encoding must decode to the same result and re-encode to itself.
func FuzzAccumulatorDecode(f *testing.F) {
	funcs := []config.AggregateFunc{config.AggCount, config.AggSum, config.AggMin, config.AggMax, config.AggAvg, config.AggFirst, config.AggLast}
	for i, fn := range funcs {
		a, _ := NewAccumulator(fn)
		empty, _ := a.MarshalBinary()
		f.Add(uint8(i), empty)
		for _, v := range []any{int64(-3), 2.5, "x", nil} {
			if err := a.Check(v); err == nil {
				a.Add(v)
			}
		}
		full, _ := a.MarshalBinary()
		f.Add(uint8(i), full)
	}
	f.Add(uint8(1), []byte{1, 2, 2, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f}) // a legacy float sum
	f.Add(uint8(0), []byte{1, 1, 0x81, 0x00})                      // a non-minimal count
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		fn := funcs[int(which)%len(funcs)]
		a, _ := NewAccumulator(fn)
		before, _ := a.MarshalBinary()
		if err := a.UnmarshalBinary(data); err != nil {
			if after, _ := a.MarshalBinary(); !bytes.Equal(after, before) {
				t.Fatalf("a failed decode of %x changed the accumulator", data)
			}
			return
		}
		enc, err := a.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded %x but cannot encode: %v", data, err)
		}
		if bytes.Equal(enc, data) {
			return
		}
		if _, json := a.(*FirstLastAcc); !json && !bytes.Contains(data[2:], []byte{kindFloat}) {
			t.Fatalf("accepted a non-canonical encoding\n  in: %x\n out: %x", data, enc)
		}
		b, _ := NewAccumulator(fn)
		if err := b.UnmarshalBinary(enc); err != nil {
			t.Fatalf("re-encoding %x of %x does not decode: %v", enc, data, err)
		}
		again, _ := b.MarshalBinary()
		if !bytes.Equal(again, enc) || string(b.appendResult(nil)) != string(a.appendResult(nil)) {
			t.Fatalf("legacy %x: re-encoding not stable (%x, %x)", data, enc, again)
		}
	})
}

// TestParseSmallIntAgreesWithTheDecoder: the fast path of first()/last()
// decoding gives exactly what the JSON decoder gives (an int of the same
// value) whenever it takes a value, and leaves everything else to it.
func TestParseSmallIntAgreesWithTheDecoder(t *testing.T) {
	inputs := []string{"0", "-0", "7", "-7", "00", "01", "-01", "123456789012345678", "-123456789012345678",
		"1234567890123456789", "9223372036854775807", "1.0", "1e3", "-", "", "12a", " 1", "1 ", "+1", "1764688091000"}
	for _, in := range inputs {
		var d decoder
		want, err := d.decodeValue([]byte(in))
		got, ok := parseSmallInt([]byte(in))
		if !ok {
			continue
		}
		if err != nil {
			t.Fatalf("%q: fast path took %d, the decoder refuses it: %v", in, got, err)
		}
		if w, isInt := want.(int); !isInt || int64(w) != got {
			t.Fatalf("%q: fast path %d, decoder %#v", in, got, want)
		}
	}
	for _, in := range []string{"0", "-7", "1764688091000", "123456789012345678"} {
		if _, ok := parseSmallInt([]byte(in)); !ok {
			t.Fatalf("%q: not taken by the fast path", in)
		}
	}
}
