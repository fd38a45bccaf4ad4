package config

import "fmt"

// File is the file name the Config was parsed from, as given to Parse.
func (c *Config) File() string { return c.file }

// Position reports where the value at path was written, e.g.
// "steps[1].filter", "sinks[0].topic", "steps[2].aggregate.values.sum",
// "kafka.brokers[1]". For a key written with no value it is the key's
// position. ok is false for a path the file did not write (a default).
func (c *Config) Position(path string) (line, col int, ok bool) {
	if at, ok := c.where.value[path]; ok {
		return at.line, at.col, true
	}
	if at, ok := c.where.key[path]; ok {
		return at.line, at.col, true
	}
	return 0, 0, false
}

// Errorf builds an Error at path for a problem found after loading, such
// as an expression that does not compile:
//
//	config.yaml:12:13: steps[1].filter: unknown name "amout"
//
// A path the file did not write is placed at the nearest written field
// that contains it (the section or list item it belongs in). A Config not
// made by Parse has no positions: the Error then has none either.
func (c *Config) Errorf(path, format string, args ...any) *Error {
	e := &Error{File: c.file, Path: path, Msg: fmt.Sprintf(format, args...)}
	if c.where.value != nil {
		at := c.where.near(path)
		e.Line, e.Col = at.line, at.col
	}
	return e
}
