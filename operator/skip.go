package operator

import (
	"encoding/binary"
	"math"
	"math/bits"
	"strconv"
	"unicode/utf8"
)

// The fast way past JSON nothing reads. A pass-through job validates every
// record and builds nothing of it, and a keyed job skips the fields it does
// not read (the benchmark's 43-byte pad): the scanner spent ~270 ns per
// 100-byte record on that, in a method call and a store of s.pos per token.
// skipFast walks the same grammar in one loop over locals. It only answers
// "valid, and where it ends": on anything it does not accept, the scanner
// runs again from the same place and says why (or, for nesting deeper than
// skipFast's own limit, accepts it). So the error messages and offsets stay
// the scanner's, and FuzzSkipFast holds the two to the same answers.

// maxFastDepth is the nesting skipFast follows: one bit per open container
// in a uint64. Deeper values go to the scanner.
const maxFastDepth = 64

// skipFast reads the JSON value at data[pos:], after optional whitespace,
// and returns the offset just past it (trailing whitespace not included),
// whether it skipped any whitespace, and ok. ok is false when the value is
// not valid as the scanner reads it, or nests deeper than min(budget,
// maxFastDepth) containers: the caller then asks the scanner. Invariant:
// ok implies the scanner's skipValue accepts the same bytes, up to the same
// offset, at a depth that leaves budget levels to maxDepth.
func skipFast(data []byte, pos, budget int) (end int, spaced, ok bool) {
	limit := min(budget, maxFastDepth)
	var objects uint64 // bit d-1 set: the container at depth d is an object
	depth := 0
	wantValue := true // else a value just ended
	for {
		if !wantValue && depth == 0 {
			return pos, spaced, true
		}
		pos = skipSpaces(data, pos, &spaced)
		if pos >= len(data) {
			return 0, false, false
		}
		c := data[pos]
		if !wantValue {
			inObject := objects>>(depth-1)&1 == 1
			switch {
			case c == ',':
				pos++
				if inObject {
					if pos, spaced, ok = skipMemberKey(data, pos, spaced); !ok {
						return 0, false, false
					}
				}
				wantValue = true
			case inObject && c == '}', !inObject && c == ']':
				pos++
				depth--
			default:
				return 0, false, false
			}
			continue
		}
		switch {
		case c == '"':
			if pos, ok = skipString(data, pos+1); !ok {
				return 0, false, false
			}
			wantValue = false
		case c == '{' || c == '[':
			if depth++; depth > limit {
				return 0, false, false
			}
			pos++
			close := byte(']')
			if c == '{' {
				objects |= 1 << (depth - 1)
				close = '}'
			} else {
				objects &^= 1 << (depth - 1)
			}
			pos = skipSpaces(data, pos, &spaced)
			if pos < len(data) && data[pos] == close {
				pos++
				depth--
				wantValue = false
				continue
			}
			if c == '{' {
				if pos, spaced, ok = skipMemberKey(data, pos, spaced); !ok {
					return 0, false, false
				}
			}
		case c == '-' || c >= '0' && c <= '9':
			if pos, ok = skipNumber(data, pos); !ok {
				return 0, false, false
			}
			wantValue = false
		case c == 't' || c == 'f' || c == 'n':
			if pos, ok = skipWord(data, pos, literal(c)); !ok {
				return 0, false, false
			}
			wantValue = false
		default:
			return 0, false, false
		}
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// skipSpaces returns the offset of the first byte at or after pos that is
// not JSON whitespace, setting *spaced if it skipped any.
func skipSpaces(data []byte, pos int, spaced *bool) int {
	start := pos
	for pos < len(data) && isSpace(data[pos]) {
		pos++
	}
	if pos > start {
		*spaced = true
	}
	return pos
}

// skipMemberKey reads an object member's key string and the ':' after it,
// with the whitespace around them.
func skipMemberKey(data []byte, pos int, spaced bool) (int, bool, bool) {
	pos = skipSpaces(data, pos, &spaced)
	if pos >= len(data) || data[pos] != '"' {
		return 0, false, false
	}
	pos, ok := skipString(data, pos+1)
	if !ok {
		return 0, false, false
	}
	pos = skipSpaces(data, pos, &spaced)
	if pos >= len(data) || data[pos] != ':' {
		return 0, false, false
	}
	return pos + 1, spaced, true
}

// skipString reads a string body after its opening quote, accepting what
// scanner.str accepts: escapes as JSON has them (any \uXXXX, lone
// surrogates included), no control characters, valid UTF-8 only.
func skipString(data []byte, pos int) (int, bool) {
	for {
		for pos+8 <= len(data) {
			if m := plainASCII8(binary.LittleEndian.Uint64(data[pos:])); m != 0 {
				pos += bits.TrailingZeros64(m) >> 3
				break
			}
			pos += 8
		}
		if pos >= len(data) {
			return 0, false
		}
		switch c := data[pos]; {
		case c == '"':
			return pos + 1, true
		case c == '\\':
			if pos+1 >= len(data) {
				return 0, false
			}
			switch data[pos+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				pos += 2
			case 'u':
				if pos+6 > len(data) {
					return 0, false
				}
				for _, h := range data[pos+2 : pos+6] {
					if !isHex(h) {
						return 0, false
					}
				}
				pos += 6
			default:
				return 0, false
			}
		case c < 0x20:
			return 0, false
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(data[pos:])
			if r == utf8.RuneError && size == 1 {
				return 0, false
			}
			pos += size
		default:
			pos++ // a plain byte that ended an eight-byte run early
		}
	}
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// skipNumber reads a number as scanner.scanNumber does, refusing one
// beyond float64's range as it does.
func skipNumber(data []byte, pos int) (int, bool) {
	start := pos
	if data[pos] == '-' {
		pos++
	}
	if pos >= len(data) {
		return 0, false
	}
	intStart := pos
	switch c := data[pos]; {
	case c == '0':
		pos++
	case c >= '1' && c <= '9':
		for pos < len(data) && data[pos] >= '0' && data[pos] <= '9' {
			pos++
		}
	default:
		return 0, false
	}
	intDigits := pos - intStart
	var ok bool
	if pos < len(data) && data[pos] == '.' {
		if pos, ok = skipDigits(data, pos+1); !ok {
			return 0, false
		}
	}
	exponent := pos < len(data) && (data[pos] == 'e' || data[pos] == 'E')
	if exponent {
		pos++
		if pos < len(data) && (data[pos] == '+' || data[pos] == '-') {
			pos++
		}
		if pos, ok = skipDigits(data, pos); !ok {
			return 0, false
		}
	}
	if !exponent && intDigits <= 300 {
		return pos, true // below 1e300: a finite float64 at most
	}
	f, err := strconv.ParseFloat(string(data[start:pos]), 64)
	if err != nil && (math.IsInf(f, 0) || math.IsNaN(f)) {
		return 0, false
	}
	return pos, true
}

// skipDigits reads one or more decimal digits.
func skipDigits(data []byte, pos int) (int, bool) {
	start := pos
	for pos < len(data) && data[pos] >= '0' && data[pos] <= '9' {
		pos++
	}
	return pos, pos > start
}

// literal is the JSON word that starts with c: 't', 'f' or 'n'.
func literal(c byte) string {
	switch c {
	case 't':
		return "true"
	case 'f':
		return "false"
	}
	return "null"
}

// skipWord reads the literal word (true, false, null).
func skipWord(data []byte, pos int, word string) (int, bool) {
	if len(data)-pos < len(word) || string(data[pos:pos+len(word)]) != word {
		return 0, false
	}
	return pos + len(word), true
}
