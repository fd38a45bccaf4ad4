package operator

import (
	"bytes"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Output encoding. Compact JSON with a deterministic byte sequence for a
// given value, so a replay after a crash writes byte-identical outputs:
// objects a map step built keep the configured field order, aggregate
// outputs put "key" first and then the values in configured order, and any
// other object (nested, or from an expression) has its keys sorted, as
// encoding/json does. Numbers print as encoding/json prints them (ints as
// ints; floats in the shortest form that round-trips, exponent only below
// 1e-6 or from 1e21). Strings are escaped as encoding/json does, except
// that <, > and & are left alone: the output is data, not HTML.

// AppendJSON appends the compact JSON encoding of v, a value in the operator
// value domain (nil, bool, string, ints, finite float64, []any,
// map[string]any). Other values are normalized first; one that cannot be
// represented is an error with CodeType.
func AppendJSON(dst []byte, v any) ([]byte, error) {
	if !canonical(v) {
		n, err := normalize(v)
		if err != nil {
			return dst, err
		}
		v = n
	}
	return appendValue(dst, v), nil
}

// appendValue encodes a canonical value.
func appendValue(dst []byte, v any) []byte { return appendValueMode(dst, v, false) }

// appendTyped encodes a canonical value so that decoding gives back the
// same Go types: a float with an integral value is written with ".0"
// (100.0, -0.0), which would otherwise decode as an int. State encodings
// use it, so a restored first()/last() prints exactly as before the
// restore (-0 stays -0, not 0).
func appendTyped(dst []byte, v any) []byte { return appendValueMode(dst, v, true) }

func appendValueMode(dst []byte, v any, typed bool) []byte {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...)
	case bool:
		return strconv.AppendBool(dst, x)
	case string:
		return appendString(dst, x)
	case int:
		return strconv.AppendInt(dst, int64(x), 10)
	case int64:
		return strconv.AppendInt(dst, x, 10)
	case Decimal:
		return x.appendJSON(dst)
	case float64:
		start := len(dst)
		dst = appendFloat(dst, x)
		if typed && !bytes.ContainsAny(dst[start:], ".e") {
			dst = append(dst, ".0"...)
		}
		return dst
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendValueMode(dst, e, typed)
		}
		return append(dst, ']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, k)
			dst = append(dst, ':')
			dst = appendValueMode(dst, x[k], typed)
		}
		return append(dst, '}')
	}
	// Unreachable for canonical values; encode something valid rather than
	// panic on a programming error in a hot path.
	return append(dst, "null"...)
}

// appendFloat formats like encoding/json: the ES6 number-to-string rules.
func appendFloat(dst []byte, f float64) []byte {
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		n := len(dst)
		if n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

const hexDigits = "0123456789abcdef"

// appendString quotes s; each invalid UTF-8 byte becomes U+FFFD.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			// U+FFFD itself, not the escape encoding/json writes: a string
			// that went through a state encoding and back holds U+FFFD,
			// and its output must be the same bytes as before.
			dst = append(dst, s[start:i]...)
			dst = append(dst, "\uFFFD"...)
			i += size
			start = i
			continue
		}
		// U+2028 and U+2029 are valid JSON but end lines in JavaScript;
		// encoding/json escapes them, so do we.
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendCompact appends src, a JSON text already validated by the decoder,
// without insignificant whitespace, keeping its field order and number
// spelling. Invalid UTF-8 inside strings becomes U+FFFD so the output is
// always valid UTF-8, as the decoded value was.
func appendCompact(dst, src []byte) []byte {
	inString := false
	for i := 0; i < len(src); {
		c := src[i]
		if inString {
			switch {
			case c == '\\':
				// An escape is two bytes at least (\uXXXX: the hex digits
				// are plain ASCII and copied on the next iterations).
				dst = append(dst, c)
				if i+1 < len(src) {
					dst = append(dst, src[i+1])
				}
				i += 2
				continue
			case c == '"':
				inString = false
			case c >= utf8.RuneSelf:
				r, size := utf8.DecodeRune(src[i:])
				if r == utf8.RuneError && size == 1 {
					dst = append(dst, "\uFFFD"...)
				} else {
					dst = append(dst, src[i:i+size]...)
				}
				i += size
				continue
			}
			dst = append(dst, c)
			i++
			continue
		}
		switch c {
		case ' ', '\t', '\n', '\r':
		case '"':
			inString = true
			dst = append(dst, c)
		default:
			dst = append(dst, c)
		}
		i++
	}
	return dst
}
