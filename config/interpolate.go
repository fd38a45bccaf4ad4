package config

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Interpolation runs on the raw text, before YAML parsing, so that a value
// can come from the environment anywhere (a whole list of brokers, a
// number, an enum). Its rules, the same as POSIX shells and docker compose
// for the forms supported:
//
//	${VAR}            the value of VAR; empty when VAR is unset
//	${VAR:-default}   the value of VAR; default when VAR is unset or empty
//	$$                a literal $
//
// Any other $ is kept as written. A default is literal text up to the
// first }; it cannot contain ${. A value (or default) must fit on one line:
// substitutions never add lines, so every line number the YAML parser
// reports is a line of the file as written. Columns do move; colMap moves
// them back.

// shift records one substitution on a line: newLen characters at column
// newCol of the interpolated text stand for origLen characters at origCol
// of the file.
type shift struct{ newCol, newLen, origCol, origLen int }

// colMap holds the substitutions of each line (1-based), in column order.
type colMap map[int][]shift

// orig maps a column of the interpolated text back to the file: a column
// inside a substituted value maps to its ${, a column after it moves by
// the difference in length.
func (m colMap) orig(line, col int) int {
	delta := 0
	for _, s := range m[line] {
		if col < s.newCol {
			break
		}
		if col < s.newCol+s.newLen {
			return s.origCol
		}
		delta = (s.origCol + s.origLen) - (s.newCol + s.newLen)
	}
	return col + delta
}

// interpolate expands data, reporting every bad reference, bad value,
// invalid UTF-8 sequence and character YAML forbids, at its line and
// column. The problems carry no file name; the caller adds it. A bad
// reference is kept as written, and only its line is affected; the last
// result, readable, is false when a character is bad: the file is then not
// text YAML can read at all.
func interpolate(data []byte, lookupEnv func(string) (string, bool)) ([]byte, colMap, Errors, bool) {
	var (
		out       bytes.Buffer
		cols      = colMap{}
		errs      Errors
		line, col = 1, 1 // position in data
		newCol    = 1    // column in out on the same line
		readable  = true
	)
	fail := func(line, col int, format string, args ...any) {
		errs = append(errs, &Error{Line: line, Col: col, Msg: fmt.Sprintf(format, args...)})
	}
	// One bad character per line is enough to find it; a binary or
	// UTF-16 file would otherwise give one problem per byte.
	badCharLine := 0
	badChar := func(line, col int, format string, args ...any) {
		readable = false
		if line != badCharLine {
			badCharLine = line
			fail(line, col, format, args...)
		}
	}
	out.Grow(len(data))
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			badChar(line, col, "invalid UTF-8 (the file must be UTF-8 text)")
		case r == '$' && i+1 < len(data) && data[i+1] == '$':
			out.WriteByte('$')
			cols[line] = append(cols[line], shift{newCol: newCol, newLen: 1, origCol: col, origLen: 2})
			i, col, newCol = i+2, col+2, newCol+1
			continue
		case r == '$' && i+1 < len(data) && data[i+1] == '{':
			raw, value, ok, msg := reference(data[i:], lookupEnv)
			if msg != "" {
				fail(line, col, "%s", msg)
			}
			if !ok {
				// Keep the text as written and go on, to report every
				// problem of the file at once.
				out.WriteString(raw)
				n := utf8.RuneCountInString(raw)
				i, col, newCol = i+len(raw), col+n, newCol+n
				continue
			}
			out.WriteString(value)
			n, rawN := utf8.RuneCountInString(value), utf8.RuneCountInString(raw)
			cols[line] = append(cols[line], shift{newCol: newCol, newLen: n, origCol: col, origLen: rawN})
			i, col, newCol = i+len(raw), col+rawN, newCol+n
			continue
		case isBreak(r):
			out.WriteRune(r)
			i += size
			if r == '\r' && i < len(data) && data[i] == '\n' {
				out.WriteByte('\n')
				i++
			}
			line, col, newCol = line+1, 1, 1
			continue
		case !yamlAllowed(r):
			badChar(line, col, "character %U is not allowed in YAML", r)
		}
		out.Write(data[i : i+size])
		i, col, newCol = i+size, col+1, newCol+1
	}
	return out.Bytes(), cols, errs, readable
}

// reference reads the ${...} at the start of text. raw is the text it
// spans (just "${" when unterminated), value its expansion, ok whether the
// reference is usable, msg the problem if any.
func reference(text []byte, lookupEnv func(string) (string, bool)) (raw, value string, ok bool, msg string) {
	end := -1
	for j := 2; j < len(text); {
		r, size := utf8.DecodeRune(text[j:])
		if r == '}' {
			end = j
			break
		}
		if isBreak(r) {
			break
		}
		j += size
	}
	if end < 0 {
		return "${", "", false, "unterminated ${: missing } on the same line (write $$ for a literal $)"
	}
	raw = string(text[:end+1])
	inner := raw[2:end]
	name, def, hasDef := strings.Cut(inner, ":-")
	if !validVarName(name) {
		return raw, "", false, fmt.Sprintf("bad variable reference %s: the name must be letters, digits and _, not starting with a digit; the forms are ${VAR} and ${VAR:-default}", raw)
	}
	if strings.Contains(def, "${") {
		return raw, "", false, fmt.Sprintf("bad variable reference %s: a default cannot contain ${", raw)
	}
	value, set := lookupEnv(name)
	if hasDef && (!set || value == "") {
		value = def
	}
	if !utf8.ValidString(value) {
		return raw, "", false, fmt.Sprintf("the value of %s is not valid UTF-8", name)
	}
	for _, r := range value {
		switch {
		case isBreak(r):
			return raw, "", false, fmt.Sprintf("the value of %s contains a line break; values must fit on one line", name)
		case !yamlAllowed(r):
			return raw, "", false, fmt.Sprintf("the value of %s contains %U, which YAML does not allow", name, r)
		}
	}
	return raw, value, true, ""
}

func validVarName(s string) bool {
	if s == "" || ('0' <= s[0] && s[0] <= '9') {
		return false
	}
	for _, c := range []byte(s) {
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// isBreak reports the characters YAML counts as line breaks.
func isBreak(r rune) bool {
	return r == '\n' || r == '\r' || r == 0x85 || r == 0x2028 || r == 0x2029
}

// yamlAllowed is the YAML 1.2 printable set (as the parser enforces it
// without saying where): checked here so the problem gets a position.
func yamlAllowed(r rune) bool {
	switch {
	case r == 0x09 || r == 0x0A || r == 0x0D:
	case r >= 0x20 && r <= 0x7E:
	case r == 0x85:
	case r >= 0xA0 && r <= 0xD7FF:
	case r >= 0xE000 && r <= 0xFFFD:
	case r >= 0x10000 && r <= 0x10FFFF:
	default:
		return false
	}
	return true
}
