package operator

import (
	"strings"
	"testing"
)

// nesting is the deepest container nesting of a JSON text (strings
// skipped), for telling the values skipFast must accept from those it may
// leave to the scanner.
func nesting(data []byte) int {
	depth, deepest, inString := 0, 0, false
	for i := 0; i < len(data); i++ {
		switch c := data[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}

// checkSkipFast holds skipFast and validObject to the scanner's answers
// on data: whatever the fast path accepts, the scanner accepts up to the
// same offset with the same whitespace seen; whatever the scanner accepts
// within the fast path's nesting, the fast path accepts too.
func checkSkipFast(t *testing.T, data []byte) {
	t.Helper()
	shallow := nesting(data) <= maxFastDepth

	// A whole record with nothing to build: validObject against the
	// scanner's decodeSlots.
	var fast decoder
	fastOK := fast.validObject(data)
	var slow decoder
	_, slowErr := slow.scanSlots(&scanner{d: &slow, data: data, slow: true}, newFieldSet(nil), &[maxSlots]any{})
	if fastOK && slowErr != nil {
		t.Fatalf("validObject accepts %q, the scanner says %v", data, slowErr)
	}
	if slowErr == nil && shallow && !fastOK {
		t.Fatalf("validObject refuses %q, which the scanner accepts", data)
	}
	if fastOK && fast.spaced != slow.spaced {
		t.Fatalf("%q: validObject saw whitespace %v, the scanner %v", data, fast.spaced, slow.spaced)
	}

	// One value, of any kind, with the depth budget full and nearly spent.
	for _, budget := range []int{maxDepth, 2} {
		end, spaced, ok := skipFast(data, 0, budget)
		var d decoder
		s := scanner{d: &d, data: data, slow: true, depth: maxDepth - budget}
		slowErr := s.skipValue()
		if ok && (slowErr != nil || s.pos != end || d.spaced != spaced) {
			t.Fatalf("budget %d: skipFast accepts %q up to %d (spaced %v); the scanner: %v, up to %d (spaced %v)",
				budget, data, end, spaced, slowErr, s.pos, d.spaced)
		}
		if slowErr == nil && shallow && !ok {
			t.Fatalf("budget %d: skipFast refuses %q, which the scanner accepts", budget, data)
		}
	}
}

var skipSeeds = []string{
	`{"key":"k27232","amount":246,"ts":1796410610984,"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`,
	` { "a" : [ 1 , -2.5e+3 , true , false , null , { } , [ ] ] } `,
	"{\"a\":\t\n\r1}", `{"a":1} x`, `{"a":1}{}`, `{"a":}`, `{"a" 1}`, `{,}`, `{"a":1,}`, `[1,]`, `[1 2]`,
	`{"s":"\u00e9\ud83d\ude00\ud800\"\\\/\b\f\n\r\t"}`, `{"s":"\u00g0"}`, `{"s":"\x"}`, `{"s":"` + "\x01" + `"}`,
	`{"s":"` + "\xff" + `"}`, `{"s":"` + "\xed\xa0\x80" + `"}`, `{"s":"` + "\xef\xbf\xbd" + `é😀"}`, `{"s":"abc`,
	`-`, `-0`, `01`, `1.`, `1.5`, `1e`, `1e+`, `1E-7`, `-0.0e0`, `1e400`, `-1e400`, `1e-400`,
	`123456789012345678901234567890`, strings.Repeat("9", 310), "1." + strings.Repeat("9", 400),
	`tru`, `true`, `fals`, `nul`, `nulll`, `"x"`, `"`, ``, ` `, `{`, `}`, `[`, `]`,
	strings.Repeat("[", 64) + strings.Repeat("]", 64),
	strings.Repeat("[", 65) + strings.Repeat("]", 65),
	`{"a":` + strings.Repeat(`{"b":`, 70) + `1` + strings.Repeat("}", 70) + `}`,
	strings.Repeat("[", 3) + strings.Repeat("]", 3),
}

func TestSkipFastMatchesScanner(t *testing.T) {
	for _, s := range append(skipSeeds, decodeSeeds...) {
		checkSkipFast(t, []byte(s))
	}
}

func FuzzSkipFast(f *testing.F) {
	for _, s := range append(skipSeeds, decodeSeeds...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkSkipFast(t, data)
	})
}
