package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// Error is one problem in a configuration file, at the place it was written.
// It prints as FILE:LINE:COL: path.to.field: message, the form editors and
// terminals turn into a link. Line and Col are 1-based; Line 0 means the
// position is unknown (some YAML syntax errors carry none), and the
// position is then left out. Path is empty for problems of the file as a
// whole (YAML syntax, interpolation).
type Error struct {
	File string
	Line int
	Col  int
	Path string
	Msg  string
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(":")
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, "%d:%d:", e.Line, e.Col)
	}
	if b.Len() > 0 {
		b.WriteString(" ")
	}
	if e.Path != "" {
		path := e.Path
		if strings.ContainsFunc(path, unicode.IsControl) {
			// A key is user text: keep one problem on one line.
			path = strconv.Quote(path)
		}
		b.WriteString(path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in one file. Parse returns it (as error)
// sorted by position; callers get at it with errors.As.
type Errors []*Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap lets errors.As find a single *Error in the list.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// Sort orders the problems by line, then column, keeping the order in which
// problems at the same place were found. Problems found elsewhere (say,
// expression compile errors) can be appended and sorted again.
func (es Errors) Sort() {
	slices.SortStableFunc(es, func(a, b *Error) int {
		if a.Line != b.Line {
			return a.Line - b.Line
		}
		return a.Col - b.Col
	})
}

// pos is a 1-based line and column (in characters, as the YAML parser and
// editors count them) in the original, uninterpolated file.
type pos struct{ line, col int }

// positions remember where each path of a loaded Config was written, so
// problems found later still point into the file.
type positions struct {
	// value is where a path's value starts (for a mapping, its first key).
	value map[string]pos
	// key is where the key naming a path was written; sequence items
	// have none.
	key map[string]pos
}

func newPositions() positions {
	return positions{value: map[string]pos{}, key: map[string]pos{}}
}

// near is the best place to report a problem at path: where its value was
// written; failing that, its key (the value was null); failing that, the
// nearest written ancestor's key or value (the field is missing and
// belongs there); failing that, the start of the file.
func (p positions) near(path string) pos {
	if at, ok := p.value[path]; ok {
		return at
	}
	if at, ok := p.key[path]; ok {
		return at
	}
	for path = parent(path); path != ""; path = parent(path) {
		if at, ok := p.key[path]; ok {
			return at
		}
		if at, ok := p.value[path]; ok {
			return at
		}
	}
	return pos{1, 1}
}

// parent is the path one level up: "sinks[0].topic" -> "sinks[0]" ->
// "sinks" -> "".
func parent(path string) string {
	i := strings.LastIndexAny(path, ".[")
	if i < 0 {
		return ""
	}
	return path[:i]
}

// isWithin reports whether path is at or below ancestor; "" is above all.
func isWithin(path, ancestor string) bool {
	if ancestor == "" || path == ancestor {
		return true
	}
	if !strings.HasPrefix(path, ancestor) {
		return false
	}
	c := path[len(ancestor)]
	return c == '.' || c == '['
}
