package operator

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestDecodeObject(t *testing.T) {
	tests := []struct {
		in      string
		want    map[string]any
		wantErr string
	}{
		{in: `{}`, want: map[string]any{}},
		{in: ` {"n": 1} `, want: map[string]any{"n": 1}},
		{in: `{"a":-0,"b":0,"c":1.5,"d":1e2,"e":-12}`, want: map[string]any{"a": 0, "b": 0, "c": 1.5, "d": 100.0, "e": -12}},
		// Exact at and beyond 2^53, up to the int64 limits.
		{in: `{"a":9007199254740993}`, want: map[string]any{"a": 9007199254740993}},
		{in: `{"a":9223372036854775807,"b":-9223372036854775808}`, want: map[string]any{"a": math.MaxInt64, "b": math.MinInt64}},
		// Beyond int64: a float64, as the value of a JSON number.
		{in: `{"a":9223372036854775808}`, want: map[string]any{"a": 9223372036854775808.0}},
		{in: `{"a":-9223372036854775809}`, want: map[string]any{"a": -9223372036854775809.0}},
		{in: `{"a":123456789012345678901234567890}`, want: map[string]any{"a": 1.2345678901234568e29}},
		// Around the nineteen digits scanned without an overflow test: the
		// largest of 19 digits, the largest uint64 (20) and one past it.
		{in: `{"a":1234567890123456789,"b":9999999999999999999}`, want: map[string]any{"a": 1234567890123456789, "b": 9999999999999999999.0}},
		{in: `{"a":18446744073709551615,"b":-18446744073709551616}`, want: map[string]any{"a": 18446744073709551615.0, "b": -18446744073709551616.0}},
		{in: `{"a":-9223372036854775808.5,"b":10000000000000000000e-1}`, want: map[string]any{"a": -9223372036854775808.5, "b": 1e18}},
		{in: `{"a":1.0}`, want: map[string]any{"a": 1.0}},
		{in: `{"s":"h\u00e9\"\\\/\b\f\n\r\t","u":"😀","p":"\ud83d\ude00"}`, want: map[string]any{"s": "hé\"\\/\b\f\n\r\t", "u": "😀", "p": "😀"}},
		{in: `{"lone":"\ud800x"}`, want: map[string]any{"lone": "\ufffdx"}},
		// Invalid UTF-8 is refused (encoding/json would substitute U+FFFD),
		// in values, in keys, and in members a partial decoding skips.
		{in: `{"bad":"` + "\xff" + `"}`, wantErr: "invalid UTF-8 byte 0xff in string at offset 8"},
		{in: `{"ok":"é","bad":"x` + "\xc3\x28" + `"}`, wantErr: "invalid UTF-8 byte 0xc3 in string at offset 19"},
		{in: `{"` + "\xed\xa0\x80" + `":1}`, wantErr: "invalid UTF-8 byte 0xed in string at offset 2"},
		{in: `{"a":["` + "\xe2\x82" + `"]}`, wantErr: "invalid UTF-8 byte 0xe2 in string at offset 7"},
		{in: `{"n":null,"t":true,"f":false,"a":[1,"x",[]],"o":{"k":{}}}`, want: map[string]any{"n": nil, "t": true, "f": false, "a": []any{1, "x", []any{}}, "o": map[string]any{"k": map[string]any{}}}},
		{in: `{"a":1,"a":2}`, want: map[string]any{"a": 2}},
		{in: ``, wantErr: "empty value"},
		{in: `  `, wantErr: "blank value"},
		{in: `5`, wantErr: "not a JSON object (got number)"},
		{in: `[1]`, wantErr: "not a JSON object (got array)"},
		{in: `null`, wantErr: "not a JSON object (got null)"},
		{in: `hello`, wantErr: "invalid character 'h' looking for beginning of value at offset 0"},
		{in: `{"a":1`, wantErr: "unexpected end of JSON input"},
		{in: `{"a":1}x`, wantErr: "invalid character 'x' after top-level value at offset 7"},
		{in: `{"a":01}`, wantErr: "invalid character '1' after object key:value pair"},
		{in: `{"a":1.}`, wantErr: "after decimal point"},
		{in: `{"a":1e400}`, wantErr: "number 1e400 is out of range"},
		{in: `{"a":"x` + "\n" + `"}`, wantErr: "in string literal"},
		{in: `{"a":"\x"}`, wantErr: "in string escape code"},
		{in: `{"a":"\u12"}`, wantErr: "hexadecimal"},
		{in: `{a:1}`, wantErr: "looking for beginning of object key string"},
		{in: `{"a":tru}`, wantErr: "in literal true"},
		{in: strings.Repeat(`{"a":`, maxDepth+1), wantErr: "exceeded max depth"},
	}
	for _, tt := range tests {
		t.Run(tt.in[:min(len(tt.in), 40)], func(t *testing.T) {
			var d decoder
			got, err := d.decodeObject([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %#v, want %#v", got, tt.want)
			}
		})
	}
}

// TestDecodeMatchesEncodingJSON pins the decoder to encoding/json with
// UseNumber on the seed inputs; FuzzDecodeJSON does the same on anything.
func TestDecodeMatchesEncodingJSON(t *testing.T) {
	for _, in := range decodeSeeds {
		checkDecodeAgainstStdlib(t, []byte(in))
	}
}

var decodeSeeds = []string{
	`{"n":1}`, `{"a":[1,2.5,"x",null,true,{"b":-0}]}`, `{"big":18446744073709551616}`,
	`{"s":"\ud83d\ude00\ud83d"}`, "{\"s\":\"\xed\xa0\x80\"}", `{"e":1E+2,"f":-0.0e-0}`, `[]`, `"x"`, ``, `{"a" : 1 , "b":{}}`,
	`{"a":1e400}`, `{"\u0000":"\u001f"}`, `{"a":"\ud800\u0041"}`, `{"a":"\udc00\ud800\udc00"}`,
}

// checkDecodeAgainstStdlib fails t if the decoder and encoding/json disagree
// about data: both must accept or reject it, and agree on the value (with
// each json.Number converted as the decoder converts numbers). The
// allowed differences: numbers beyond float64 range are errors here, and so
// is invalid UTF-8.
func checkDecodeAgainstStdlib(t *testing.T, data []byte) {
	t.Helper()
	var d decoder
	got, err := d.decodeValue(data)

	var want any
	var stdErr error
	if !json.Valid(data) { // one value, nothing after it
		stdErr = fmt.Errorf("invalid JSON")
	} else {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		stdErr = dec.Decode(&want)
	}
	if stdErr != nil {
		if err == nil {
			t.Fatalf("%q: decoder accepted %#v, encoding/json: %v", data, got, stdErr)
		}
		return
	}
	// encoding/json takes invalid UTF-8 inside strings (the only place it
	// can be in a valid text) and substitutes U+FFFD; the decoder refuses
	// it. So exactly the valid texts that are not UTF-8 must fail, with
	// that reason.
	if !utf8.Valid(data) {
		if err == nil || !strings.Contains(err.Error(), "invalid UTF-8 byte") {
			t.Fatalf("%q: invalid UTF-8 in a string: decoder gave %#v, %v; want an invalid UTF-8 error", data, got, err)
		}
		return
	}
	if err != nil {
		if strings.Contains(err.Error(), "out of range") {
			return
		}
		t.Fatalf("%q: decoder: %v, encoding/json accepted %#v", data, err, want)
	}
	want = convertNumbers(want)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: decoder %#v, encoding/json %#v", data, got, want)
	}
	// The decoded value re-encodes to JSON that decodes to the same value
	// and type (appendTyped keeps 100.0 a float).
	enc := appendTyped(nil, got)
	again, err := d.decodeValue(enc)
	if err != nil || !reflect.DeepEqual(again, got) {
		t.Fatalf("%q: re-encoded as %q, decoded back as %#v (%v)", data, enc, again, err)
	}
}

func convertNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		s := string(x)
		if !strings.ContainsAny(s, ".eE") {
			if i, err := strconv.ParseInt(s, 10, 64); err == nil {
				return boxInt(i)
			}
		}
		f, _ := strconv.ParseFloat(s, 64)
		return f
	case []any:
		for i := range x {
			x[i] = convertNumbers(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = convertNumbers(x[k])
		}
	}
	return v
}

func FuzzDecodeJSON(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecodeAgainstStdlib(t, data)
	})
}

func TestInternKeys(t *testing.T) {
	var d decoder
	a, _ := d.decodeObject([]byte(`{"amount":1}`))
	b, _ := d.decodeObject([]byte(`{"amount":2}`))
	var ka, kb string
	for k := range a {
		ka = k
	}
	for k := range b {
		kb = k
	}
	if ka != "amount" || kb != "amount" || strings.Clone(ka) == "" {
		t.Fatal("bad keys")
	}
	if len(d.keys) != 1 {
		t.Fatalf("interned %d keys, want 1", len(d.keys))
	}
}

// TestStringValueCache decodes more distinct short values than the cache
// has slots, each several times and interleaved with a recurring one, and
// checks that every value is its own text (a slot taken over must never
// answer for another value) and that a recurring value is boxed once.
func TestStringValueCache(t *testing.T) {
	var d decoder
	for round := range 3 {
		for i := range 3 * maxCachedValues {
			want := "k" + strconv.Itoa(i)
			m, err := d.decodeObject([]byte(`{"k":"` + want + `","c":"DE","e":""}`))
			if err != nil {
				t.Fatal(err)
			}
			if m["k"] != want || m["c"] != "DE" || m["e"] != "" {
				t.Fatalf("round %d: decoded %v, want k=%s c=DE e=\"\"", round, m, want)
			}
		}
	}
	if d.values == nil {
		t.Fatal("cache never allocated")
	}
	data := []byte(`{"c":"DE"}`)
	d.decodeObject(data)
	// One map (header and group); the boxed "DE" comes from the cache.
	if n := testing.AllocsPerRun(100, func() { d.decodeObject(data) }); n > 2 {
		t.Errorf("decoding a cached value: %v allocations, want at most 2 (the map)", n)
	}
	var fresh decoder
	for range cacheAfter {
		fresh.decodeValue([]byte(`"x"`))
	}
	if fresh.values != nil {
		t.Errorf("a decoder that boxed %d strings allocated the cache", cacheAfter)
	}
}

// TestStringValueCacheStepsAside: a field whose values hardly ever recur
// makes the decoder box strings without the cache for a while, with the
// same results, then try the cache again, where a recurring value is
// boxed once more and then shared.
func TestStringValueCacheStepsAside(t *testing.T) {
	var d decoder
	value := func(s string) any {
		v, err := d.decodeValue([]byte(`"` + s + `"`))
		if err != nil || v != s {
			t.Fatalf("decoded %v, %v; want %s", v, err, s)
		}
		return v
	}
	for i := range cacheAfter + cacheWindow {
		value("u" + strconv.Itoa(i))
	}
	if d.bypass != cacheBypass {
		t.Fatalf("after %d distinct values: bypass %d, want %d", cacheWindow, d.bypass, cacheBypass)
	}
	during := testing.AllocsPerRun(100, func() { value("DE") })
	for i := range cacheBypass - 101 {
		value("u" + strconv.Itoa(i%10)) // recurring, but not looked up
	}
	if d.bypass != 0 || d.lookups != 0 {
		t.Fatalf("bypass %d, lookups %d after the bypass", d.bypass, d.lookups)
	}
	value("DE")
	if after := testing.AllocsPerRun(100, func() { value("DE") }); after >= during {
		t.Errorf("a recurring value: %v allocations after the bypass, %v during it; want it from the cache after", after, during)
	}
}

func TestAppendJSON(t *testing.T) {
	tests := []struct {
		in   any
		want string
	}{
		{nil, `null`},
		{true, `true`},
		{int(-3), `-3`},
		{int64(math.MaxInt64), `9223372036854775807`},
		{2.0, `2`},
		{1.5, `1.5`},
		{1e21, `1e+21`},
		{1e-7, `1e-7`},
		{0.000001, `0.000001`},
		{math.Copysign(0, -1), `-0`},
		{"a\"b\\c\n\x01<>&\u2028\xff", "\"a\\\"b\\\\c\\n\\u0001<>&\\u2028\uFFFD\""},
		{[]any{1, "x", nil}, `[1,"x",null]`},
		{map[string]any{"b": 1, "a": map[string]any{"d": 2, "c": []any{}}}, `{"a":{"c":[],"d":2},"b":1}`},
		{[]string{"x", "y"}, `["x","y"]`},
		{uint64(math.MaxUint64), `18446744073709552000`},
		{map[any][]any{true: {1}}, `{"true":[1]}`},
	}
	for _, tt := range tests {
		got, err := AppendJSON(nil, tt.in)
		if err != nil {
			t.Fatalf("%#v: %v", tt.in, err)
		}
		if string(got) != tt.want {
			t.Errorf("AppendJSON(%#v) = %s, want %s", tt.in, got, tt.want)
		}
		// Every encoding is valid JSON.
		if !json.Valid(got) {
			t.Errorf("AppendJSON(%#v) = %s: invalid JSON", tt.in, got)
		}
	}
	for _, bad := range []any{math.NaN(), math.Inf(1), []any{math.Inf(-1)}, func() {}, struct{}{}} {
		if _, err := AppendJSON(nil, bad); err == nil {
			t.Errorf("AppendJSON(%T) succeeded, want an error", bad)
		}
	}
}

func TestAppendCompact(t *testing.T) {
	in := " {\n \"a\" : [ 1 , 2.50 ],\t\"s\": \"x y \\\" \\\\\" , \"u\":\"\xff\" } "
	got := string(appendCompact(nil, []byte(in)))
	want := "{\"a\":[1,2.50],\"s\":\"x y \\\" \\\\\",\"u\":\"\uFFFD\"}"
	if got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

// partialSeeds are objects whose skipped members must fail exactly as
// decoded ones do: every kind of error inside a member the chain does not
// read, at every depth.
var partialSeeds = []string{
	`{"k":"a","pad":"xxxx","n":1}`, ` { "k" : "a" , "skip" : {"x":[1,{"y":null}]} , "n" : 2 } `,
	`{"k":"a","skip":1e400}`, `{"k":"a","skip":[1,2,]}`, `{"k":"a","skip":{"a":1,}}`, `{"k":"a","skip":{"a" 1}}`,
	`{"k":"a","skip":"\x"}`, "{\"k\":\"a\",\"skip\":\"\x01\"}", `{"k":"a","skip":"\u12"}`, `{"k":"a","skip":tru}`,
	`{"k":"a","skip":-}`, `{"k":"a","skip":01}`, `{"k":"a","skip":1.}`, `{"k":"a","skip":1e}`, `{"k":"a","skip":[`,
	`{"k":"a","skip":{"`, `{"k":"a","skip":` + strings.Repeat("[", maxDepth+1), `{"k":"a","skip":{}}x`, `{"k":"a","skip"}`,
	`{"k":"a","k":"b","skip":1,"skip":[]}`, `{"\u006b":"escaped key","n":9223372036854775808}`, `{"k":"a","skip":}`,
	`{"k":"a","skip":[1 2]}`, `{"k":"a","skip":{1:2}}`, `{"k":"a",,}`, `{"k":"a","skip":"` + "\xff" + `"}`,
}

// checkPartialDecode fails t unless decoding only the fields in need gives
// the same error, or the full decoding's values of exactly those fields.
func checkPartialDecode(t *testing.T, data []byte, need []string) {
	t.Helper()
	var full, part decoder
	want, werr := full.decodeObject(data)
	got, gerr := part.decodeFields(data, newFieldSet(nil, need))
	if (werr == nil) != (gerr == nil) || (werr != nil && werr.Error() != gerr.Error()) {
		t.Fatalf("%q need %q: error %v, decoding everything: %v", data, need, gerr, werr)
	}
	if werr != nil {
		return
	}
	for k, v := range got {
		if !slices.Contains(need, k) {
			t.Fatalf("%q need %q: built %q too", data, need, k)
		}
		if w, ok := want[k]; !ok || !reflect.DeepEqual(v, w) {
			t.Fatalf("%q need %q: %s = %#v, decoding everything: %#v", data, need, k, v, w)
		}
	}
	for _, k := range need {
		if _, ok := want[k]; ok {
			if _, ok := got[k]; !ok {
				t.Fatalf("%q need %q: %s missing", data, need, k)
			}
		}
	}
}

func TestDecodeFieldsMatchesFull(t *testing.T) {
	for _, in := range append(append([]string{}, decodeSeeds...), partialSeeds...) {
		for _, need := range [][]string{nil, {"k"}, {"n"}, {"k", "n"}, {"skip"}, {"k", "skip", "n", "a", "s"}} {
			checkPartialDecode(t, []byte(in), need)
		}
	}
}

// FuzzDecodeFields holds the partial decoding to the full one: the same
// errors, the same values for the fields built. mask picks which of the
// value's fields (and of a few common names) are needed.
func FuzzDecodeFields(f *testing.F) {
	for _, s := range append(append([]string{}, decodeSeeds...), partialSeeds...) {
		f.Add([]byte(s), uint8(1))
		f.Add([]byte(s), uint8(0xaa))
	}
	f.Fuzz(func(t *testing.T, data []byte, mask uint8) {
		var d decoder
		m, _ := d.decodeObject(data)
		names := []string{"k", "n", "skip"}
		for name := range m {
			names = append(names, name)
		}
		slices.Sort(names)
		var need []string
		for i, n := range names {
			if mask&(1<<(i%8)) != 0 {
				need = append(need, n)
			}
		}
		checkPartialDecode(t, data, need)
	})
}

// TestPlainASCII8 checks the eight-byte test of str's fast path against
// a byte-by-byte one: it is zero exactly when no byte needs a look, and
// its lowest flag is the first byte that does. Every byte value is tried
// at every position, among random plain bytes and behind other special
// ones.
func TestPlainASCII8(t *testing.T) {
	special := func(c byte) bool { return c == '"' || c == '\\' || c < 0x20 || c >= 0x80 }
	first := func(b []byte) int {
		for i, c := range b {
			if special(c) {
				return i
			}
		}
		return 8
	}
	rng := rand.New(rand.NewPCG(5, 6))
	check := func(b []byte) {
		m := plainASCII8(binary.LittleEndian.Uint64(b))
		got := 8
		if m != 0 {
			got = bits.TrailingZeros64(m) >> 3
		}
		if want := first(b); got != want {
			t.Fatalf("% x: first special byte %d, plainASCII8 says %d", b, want, got)
		}
	}
	b := make([]byte, 8)
	for pos := range 8 {
		for c := range 256 {
			for range 8 {
				for i := range b {
					b[i] = byte(0x20 + rng.IntN(0x5f)) // plain, or a quote or backslash sometimes
				}
				b[pos] = byte(c)
				check(b)
				for i := pos + 1; i < 8; i++ { // specials above the first
					if rng.IntN(2) == 0 {
						b[i] = []byte{0, 1, '"', '\\', 0x1f, 0x80, 0xff, 0x21}[rng.IntN(8)]
					}
				}
				check(b)
			}
		}
	}
}
