package jobtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"
)

// valueKind is what an expected value compares as.
type valueKind int

const (
	valueNull  valueKind = 1 + iota // a null value (a tombstone)
	valueBytes                      // exactly these bytes
	valueJSON                       // JSON equal to this, whatever the spacing and field order
)

// Value is an expected record value, or one to write. A value written in
// the test file as a string is its bytes; as any other YAML value, its
// JSON, which compares semantically: objects whatever their field order,
// numbers as exact decimals (1.50 equals 1.5, 1e2 equals 100).
type Value struct {
	kind valueKind
	// text is the bytes: exact (valueBytes), or the JSON in the order the
	// file wrote it, compact (valueJSON).
	text []byte
	// parsed is the JSON, numbers as json.Number (valueJSON).
	parsed any
}

func bytesValue(b []byte) Value {
	if b == nil {
		b = []byte{}
	}
	return Value{kind: valueBytes, text: b}
}

// jsonValue is the JSON text b as a Value.
func jsonValue(b []byte) (Value, error) {
	v, err := parseJSON(b)
	if err != nil {
		return Value{}, err
	}
	return Value{kind: valueJSON, text: b, parsed: v}, nil
}

// Bytes is what the value writes as a record value; nil for null.
func (v Value) Bytes() []byte {
	if v.kind == valueNull {
		return nil
	}
	return v.text
}

// Matches reports whether a record value b (nil: null) is this value.
func (v Value) Matches(b []byte) bool {
	switch v.kind {
	case valueNull:
		return b == nil
	case valueBytes:
		return b != nil && bytes.Equal(v.text, b)
	case valueJSON:
		if b == nil {
			return false
		}
		got, err := parseJSON(b)
		return err == nil && jsonEqual(v.parsed, got)
	}
	return false
}

// String shows the value in a diff.
func (v Value) String() string {
	if v.kind == valueNull {
		return "null value"
	}
	return showBytes(v.text)
}

// showBytes shows a record's key or value: as it is when it is printable
// text, quoted with escapes otherwise (bytes that are not UTF-8, control
// characters), so a diff never hides a difference.
func showBytes(b []byte) string {
	if b == nil {
		return "null value"
	}
	if len(b) == 0 {
		return `""`
	}
	if utf8.Valid(b) && printable(b) {
		return string(b)
	}
	return strconv.Quote(string(b))
}

func printable(b []byte) bool {
	for _, r := range string(b) {
		if r < ' ' || r == 0x7f || !strconv.IsPrint(r) && r != ' ' {
			return false
		}
	}
	return true
}

// parseJSON parses one JSON value, numbers as json.Number; anything after
// it but white space is an error.
func parseJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one JSON value")
	}
	return v, nil
}

// jsonEqual compares two parsed JSON values: numbers by their exact
// decimal value, objects whatever their field order.
func jsonEqual(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, av := range a {
			bv, ok := b[k]
			if !ok || !jsonEqual(av, bv) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !jsonEqual(a[i], b[i]) {
				return false
			}
		}
		return true
	case json.Number:
		b, ok := b.(json.Number)
		return ok && numberEqual(a, b)
	case string:
		b, ok := b.(string)
		return ok && a == b
	case bool:
		b, ok := b.(bool)
		return ok && a == b
	case nil:
		return b == nil
	}
	return false
}

// numberEqual compares two JSON numbers as exact decimals.
func numberEqual(a, b json.Number) bool {
	if a == b {
		return true
	}
	var x, y big.Rat
	if _, ok := x.SetString(string(a)); !ok {
		return false
	}
	if _, ok := y.SetString(string(b)); !ok {
		return false
	}
	return x.Cmp(&y) == 0
}

// fieldDiff says which fields of a written JSON object differ from the
// expected one (at most three, in the order the file writes them, then
// the extra ones), so a diff of two long objects names what differs; ""
// when either is not an object.
func fieldDiff(v Value, b []byte) string {
	want, ok := v.parsed.(map[string]any)
	if v.kind != valueJSON || !ok || b == nil {
		return ""
	}
	parsed, err := parseJSON(b)
	got, ok := parsed.(map[string]any)
	if err != nil || !ok {
		return ""
	}
	var parts []string
	for _, k := range objectKeys(v.text) {
		g, present := got[k]
		switch {
		case !present:
			parts = append(parts, fmt.Sprintf("no field %s (expected %s)", k, showJSON(want[k])))
		case !jsonEqual(want[k], g):
			parts = append(parts, fmt.Sprintf("%s is %s, expected %s", k, showJSON(g), showJSON(want[k])))
		}
	}
	for _, k := range objectKeys(b) {
		if _, expected := want[k]; !expected {
			parts = append(parts, fmt.Sprintf("field %s (%s) not expected", k, showJSON(got[k])))
		}
	}
	if len(parts) > 3 {
		parts = append(parts[:3], fmt.Sprintf("%d more", len(parts)-3))
	}
	return strings.Join(parts, ", ")
}

// objectKeys are the keys of the JSON object text, in order.
func objectKeys(text []byte) []string {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return keys
		}
		k, _ := t.(string)
		keys = append(keys, k)
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return keys
		}
	}
	return keys
}

func showJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
