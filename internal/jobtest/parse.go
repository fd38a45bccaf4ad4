package jobtest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/sink"
)

var sprintf = fmt.Sprintf

// The keys each mapping of a test file may hold.
var (
	fileKeys     = []string{"job", "env", "schemas", "cases"}
	caseKeys     = []string{"name", "env", "schemas", "input", "expect", "compare"}
	inputKeys    = []string{"value", "key", "partition", "timestamp", "headers", "schema_version"}
	expectedKeys = []string{"value", "key", "partition", "timestamp", "headers", "code"}
	sideKeys     = []string{"value", "key"}
	specKeys     = []string{"format", "file", "schema", "message"}
	specFormats  = []string{string(config.FormatAvro), string(config.FormatProtobuf), string(config.FormatJSONSchema)}
)

// maxPartition bounds the partition an input record names: a test needs
// a few, and each one named is created.
const maxPartition = 1023

// Parse reads a test file's content; filename labels positions. On any
// problem it returns config.Errors holding every problem found, sorted by
// position.
func Parse(filename string, data []byte) (*File, error) {
	root, err := config.ParseDocument(filename, data)
	if err != nil {
		return nil, config.Errors{err.(*config.Error)}
	}
	p := &parser{file: filename}
	f := &File{Path: filename}
	p.document(root, f)
	if len(p.errs) > 0 {
		p.errs.Sort()
		return nil, p.errs
	}
	return f, nil
}

type parser struct {
	file string
	errs config.Errors
}

func at(n *yaml.Node) Pos { return Pos{Line: n.Line, Col: n.Column} }

func (p *parser) fail(n *yaml.Node, path, format string, args ...any) {
	p.errs = append(p.errs, errorAt(p.file, at(n), path, format, args...))
}

// resolve follows aliases; a cycle or a chain too long is an error.
func (p *parser) resolve(n *yaml.Node, path string) *yaml.Node {
	for range 32 {
		if n.Kind != yaml.AliasNode {
			return n
		}
		n = n.Alias
	}
	p.fail(n, path, "aliases nest too deep")
	return nil
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

// mapping checks that n is a mapping with string keys, each written once
// and (allowed not nil) each one of allowed, and calls each for every good
// key in the order written.
func (p *parser) mapping(n *yaml.Node, path string, allowed []string, each func(key string, k, v *yaml.Node)) {
	if n.Kind != yaml.MappingNode {
		p.fail(n, path, "want a mapping, got %s", describe(n))
		return
	}
	first := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := p.resolve(n.Content[i], path)
		if k == nil {
			continue
		}
		if k.Kind != yaml.ScalarNode {
			p.fail(n.Content[i], path, "a key must be a string, got %s", describe(k))
			continue
		}
		key, kpath := k.Value, join(path, k.Value)
		switch line, dup := first[key]; {
		case k.ShortTag() == "!!merge":
			p.fail(k, path, "merge keys (<<) are not supported; write the entries out")
			continue
		case dup:
			p.fail(k, kpath, "written twice (first at line %d); keep one", line)
			continue
		case allowed != nil && !slices.Contains(allowed, key):
			p.fail(k, kpath, "unknown field%s", config.Suggestion(key, allowed))
			continue
		}
		first[key] = k.Line
		v := p.resolve(n.Content[i+1], kpath)
		if v == nil {
			continue
		}
		each(key, k, v)
	}
}

// sequence checks that n is a list and calls each for every item.
func (p *parser) sequence(n *yaml.Node, path string, each func(i int, item *yaml.Node)) {
	if n.Kind != yaml.SequenceNode {
		p.fail(n, path, "want a list, got %s", describe(n))
		return
	}
	for i, item := range n.Content {
		if item = p.resolve(item, index(path, i)); item != nil {
			each(i, item)
		}
	}
}

func (p *parser) str(n *yaml.Node, path string) (string, bool) {
	if n.Kind != yaml.ScalarNode || isNull(n) {
		p.fail(n, path, "want a string, got %s", describe(n))
		return "", false
	}
	return n.Value, true
}

func (p *parser) document(root *yaml.Node, f *File) {
	if root == nil || len(root.Content) == 0 || isNull(root.Content[0]) {
		p.errs = append(p.errs, &config.Error{File: p.file, Line: 1, Col: 1, Msg: "the file is empty: want cases: with at least one case"})
		return
	}
	top := p.resolve(root.Content[0], "")
	if top == nil {
		return
	}
	var casesNode *yaml.Node
	p.mapping(top, "", fileKeys, func(key string, _, v *yaml.Node) {
		switch key {
		case "job":
			f.Job, _ = p.str(v, "job")
		case "env":
			f.Env = p.env(v, "env", nil)
		case "schemas":
			f.Schemas = p.schemas(v, "schemas", nil)
		case "cases":
			casesNode = v
		}
	})
	if top.Kind != yaml.MappingNode {
		return
	}
	if casesNode == nil {
		p.fail(top, "cases", "required: the list of cases")
		return
	}
	names := map[string]int{}
	p.sequence(casesNode, "cases", func(i int, n *yaml.Node) {
		c := p.testCase(n, index("cases", i), f.Env, f.Schemas)
		if c == nil {
			return
		}
		if line, dup := names[c.Name]; dup && c.Name != "" {
			p.fail(n, c.Path+".name", "a second case named %q (the first is at line %d): names pick cases (--run) and name them in reports", c.Name, line)
		}
		names[c.Name] = c.At.Line
		f.Cases = append(f.Cases, c)
	})
	if casesNode.Kind == yaml.SequenceNode && len(casesNode.Content) == 0 {
		p.fail(casesNode, "cases", "no cases: give at least one")
	}
}

var varName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// env reads a mapping of variables over base (a copy).
func (p *parser) env(n *yaml.Node, path string, base map[string]string) map[string]string {
	env := make(map[string]string, len(base))
	for k, v := range base {
		env[k] = v
	}
	p.mapping(n, path, nil, func(key string, k, v *yaml.Node) {
		kpath := join(path, key)
		if !varName.MatchString(key) {
			p.fail(k, kpath, "not a variable name: letters, digits and _, not starting with a digit")
			return
		}
		switch {
		case isNull(v):
			env[key] = ""
		case v.Kind == yaml.ScalarNode:
			if strings.ContainsAny(v.Value, "\r\n") {
				p.fail(v, kpath, "a variable's value must be one line (it is substituted into the job file as text)")
				return
			}
			env[key] = v.Value
		default:
			p.fail(v, kpath, "want a value written as text (a string, number or boolean), got %s", describe(v))
		}
	})
	return env
}

func (p *parser) testCase(n *yaml.Node, path string, fileEnv map[string]string, fileSchemas []*TopicSchemas) *Case {
	if n.Kind != yaml.MappingNode {
		p.fail(n, path, "want a case (a mapping with name, input and expect), got %s", describe(n))
		return nil
	}
	c := &Case{At: at(n), Path: path, Compare: PerKey, Env: fileEnv, Schemas: fileSchemas}
	var input, expect *yaml.Node
	named := false
	p.mapping(n, path, caseKeys, func(key string, _, v *yaml.Node) {
		kpath := join(path, key)
		switch key {
		case "name":
			named = true
			var ok bool
			if c.Name, ok = p.str(v, kpath); ok && strings.TrimSpace(c.Name) == "" {
				p.fail(v, kpath, "empty: give the case a name")
			}
		case "env":
			c.Env = p.env(v, kpath, fileEnv)
		case "schemas":
			c.Schemas = p.schemas(v, kpath, fileSchemas)
		case "input":
			input = v
		case "expect":
			expect = v
		case "compare":
			if v.Kind == yaml.MappingNode {
				// A rule per topic, and the default for the others.
				c.CompareTopic, c.CompareAt = map[string]Rule{}, map[string]Pos{}
				p.mapping(v, kpath, nil, func(topic string, k, rv *yaml.Node) {
					if r, ok := p.rule(rv, join(kpath, topic)); ok {
						if topic == "default" {
							c.Compare = r
						} else {
							c.CompareTopic[topic], c.CompareAt[topic] = r, at(k)
						}
					}
				})
				break
			}
			if r, ok := p.rule(v, kpath); ok {
				c.Compare = r
			}
		}
	})
	if !named {
		p.fail(n, join(path, "name"), "required: name the case")
	}
	if input != nil && !isNull(input) {
		p.mapping(input, join(path, "input"), nil, func(topic string, k, v *yaml.Node) {
			t := &TopicInput{Topic: topic, At: at(k), Path: join(join(path, "input"), topic)}
			if !isNull(v) {
				p.sequence(v, t.Path, func(i int, item *yaml.Node) {
					if r := p.inputRecord(item, index(t.Path, i)); r != nil {
						t.Records = append(t.Records, r)
					}
				})
			}
			c.Input = append(c.Input, t)
		})
	}
	if expect != nil && !isNull(expect) {
		p.mapping(expect, join(path, "expect"), nil, func(name string, k, v *yaml.Node) {
			t := &TopicExpect{Name: name, At: at(k), Path: join(join(path, "expect"), name)}
			if !isNull(v) {
				p.sequence(v, t.Path, func(i int, item *yaml.Node) {
					if r := p.expected(item, index(t.Path, i)); r != nil {
						t.Records = append(t.Records, r)
					}
				})
			}
			if c.RuleFor(name) == LastPerKey {
				p.uniqueKeys(t)
			}
			c.Expect = append(c.Expect, t)
		})
	}
	return c
}

// rule reads a comparison rule.
func (p *parser) rule(n *yaml.Node, path string) (Rule, bool) {
	s, ok := p.str(n, path)
	if !ok {
		return "", false
	}
	if !slices.Contains(rules, s) {
		p.fail(n, path, "unknown rule %q%s", s, config.Suggestion(s, rules))
		return "", false
	}
	return Rule(s), true
}

// uniqueKeys refuses a key listed twice where each key has one value.
func (p *parser) uniqueKeys(t *TopicExpect) {
	first := map[string]int{}
	for i, r := range t.Records {
		k := groupKey(r.Key)
		if line, dup := first[k]; dup {
			p.errs = append(p.errs, errorAt(p.file, r.At, index(t.Path, i),
				"%s is listed twice (first at line %d): compare: last_per_key expects one value per key, the last one written", keyLabel(r.Key), line))
			continue
		}
		first[k] = r.At.Line
	}
}

// fullForm reports whether a list item is a record written out ({value:
// ..., key: ...}) rather than the shorthand, a value alone: a mapping with
// a value key is the full form, anything else is a value.
func fullForm(n *yaml.Node) bool {
	if n.Kind != yaml.MappingNode {
		return false
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; k.Kind == yaml.ScalarNode && k.Value == "value" {
			return true
		}
	}
	return false
}

func (p *parser) inputRecord(n *yaml.Node, path string) *InputRecord {
	r := &InputRecord{At: at(n)}
	if !fullForm(n) {
		v, ok := p.value(n, path)
		if !ok {
			return nil
		}
		r.Value, r.value = v.Bytes(), writtenValue(n, path, v)
		return r
	}
	ok := true
	p.mapping(n, path, inputKeys, func(key string, _, v *yaml.Node) {
		kpath := join(path, key)
		switch key {
		case "value":
			val, good := p.value(v, kpath)
			ok = ok && good
			r.Value, r.value = val.Bytes(), writtenValue(v, kpath, val)
		case "key":
			var good bool
			r.Key, r.key, good = p.inputKey(v, kpath)
			ok = ok && good
		case "schema_version":
			if v.Kind == yaml.ScalarNode && v.ShortTag() == "!!int" {
				if n, err := strconv.Atoi(v.Value); err == nil && n >= 1 {
					r.SchemaVersion, r.SchemaVersionAt = n, at(v)
					return
				}
			}
			p.fail(v, kpath, "want a version: 1 for the first schema the topic lists, 2 for the second, ...; got %s", describe(v))
			ok = false
		case "partition":
			part, good := p.partition(v, kpath)
			ok = ok && good
			r.Partition = part
		case "timestamp":
			r.Timestamp, _ = p.timestamp(v, kpath)
		case "headers":
			r.Headers = p.headers(v, kpath)
		}
	})
	if !ok {
		return nil
	}
	return r
}

func (p *parser) expected(n *yaml.Node, path string) *Expected {
	r := &Expected{At: at(n), Where: fmt.Sprintf("%s:%d:%d", p.file, n.Line, n.Column)}
	if !fullForm(n) {
		v, ok := p.value(n, path)
		if !ok {
			return nil
		}
		r.Value = v
		return r
	}
	ok := true
	p.mapping(n, path, expectedKeys, func(key string, k, v *yaml.Node) {
		kpath := join(path, key)
		switch key {
		case "value":
			val, good := p.value(v, kpath)
			ok = ok && good
			r.Value = val
		case "key":
			r.Key, _ = p.key(v, kpath)
		case "partition":
			r.Partition, r.HasPartition = p.partition(v, kpath)
		case "timestamp":
			r.Timestamp, r.HasTimestamp = p.timestamp(v, kpath)
		case "headers":
			r.Headers = append(r.Headers, p.headers(v, kpath)...)
		case "code":
			if code, good := p.str(v, kpath); good {
				r.Headers = append(r.Headers, Header{Key: sink.HeaderCode, Value: []byte(code)})
				r.CodeAt = at(k)
			}
		}
	})
	if !ok {
		return nil
	}
	return r
}

// writtenValue keeps value v, written at n, for a schema to write.
func writtenValue(n *yaml.Node, path string, v Value) written {
	w := written{node: n, path: path}
	switch {
	case v.kind == valueNull:
	case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!binary":
		w.binary = true
	case v.kind == valueBytes:
		w.text = true
		var buf bytes.Buffer
		writeString(&buf, n.Value)
		w.js = buf.Bytes()
	default:
		w.js = v.text
	}
	return w
}

// inputKey reads an input record's key: as text (key), and as written,
// for a key schema to write. A key written as a mapping or a list has
// no text: only a key schema can write it (bind says so).
func (p *parser) inputKey(n *yaml.Node, path string) ([]byte, written, bool) {
	w := written{node: n, path: path}
	if n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode {
		var buf bytes.Buffer
		if !p.writeJSON(&buf, n, path, 0) {
			return nil, w, false
		}
		w.js = buf.Bytes()
		return nil, w, true
	}
	k, ok := p.key(n, path)
	switch {
	case !ok || isNull(n):
	case n.ShortTag() == "!!binary":
		w.binary = true
	default:
		var buf bytes.Buffer
		if !p.writeJSON(&buf, n, path, 0) {
			return nil, w, false
		}
		w.js, w.text = buf.Bytes(), n.ShortTag() == "!!str" || n.ShortTag() == "!!timestamp"
	}
	return k, w, ok
}

// key reads a record key: its text (a number's as written), nil for null.
func (p *parser) key(n *yaml.Node, path string) ([]byte, bool) {
	switch {
	case isNull(n):
		return nil, true
	case n.Kind != yaml.ScalarNode:
		p.fail(n, path, "want a key written as text, got %s", describe(n))
		return nil, false
	case n.ShortTag() == "!!binary":
		b, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(n.Value), ""))
		if err != nil {
			p.fail(n, path, "!!binary: not base64: %v", err)
			return nil, false
		}
		return b, true
	}
	return []byte(n.Value), true
}

func (p *parser) partition(n *yaml.Node, path string) (int32, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
		p.fail(n, path, "want a partition number, got %s", describe(n))
		return 0, false
	}
	v, err := strconv.ParseInt(n.Value, 0, 64)
	if err != nil || v < 0 || v > maxPartition {
		p.fail(n, path, "want a partition from 0 to %d, got %s", maxPartition, n.Value)
		return 0, false
	}
	return int32(v), true
}

// timestamp reads RFC 3339 text or epoch milliseconds.
func (p *parser) timestamp(n *yaml.Node, path string) (time.Time, bool) {
	if n.Kind == yaml.ScalarNode && !isNull(n) {
		if n.ShortTag() == "!!int" {
			if ms, err := strconv.ParseInt(n.Value, 0, 64); err == nil && ms >= 0 {
				return time.UnixMilli(ms).UTC(), true
			}
		} else if t, err := time.Parse(time.RFC3339Nano, n.Value); err == nil {
			return t.UTC(), true
		}
	}
	p.fail(n, path, "want an RFC 3339 time (2026-12-04T10:00:00Z) or epoch milliseconds, got %s", describe(n))
	return time.Time{}, false
}

func (p *parser) headers(n *yaml.Node, path string) []Header {
	var hs []Header
	p.mapping(n, path, nil, func(key string, _, v *yaml.Node) {
		b, ok := p.key(v, join(path, key))
		if ok {
			hs = append(hs, Header{Key: key, Value: b})
		}
	})
	return hs
}

// value reads a record value: a string (or !!binary) is its bytes, null
// is a null value, anything else is written as its JSON.
func (p *parser) value(n *yaml.Node, path string) (Value, bool) {
	if n.Kind == yaml.ScalarNode {
		switch n.ShortTag() {
		case "!!null":
			return Value{kind: valueNull}, true
		case "!!str", "!!timestamp":
			return bytesValue([]byte(n.Value)), true
		case "!!binary":
			b, ok := p.key(n, path)
			return bytesValue(b), ok
		}
	}
	var buf bytes.Buffer
	if !p.writeJSON(&buf, n, path, 0) {
		return Value{}, false
	}
	v, err := jsonValue(buf.Bytes())
	if err != nil {
		// writeJSON writes valid JSON: this is a bug, not the user's.
		p.fail(n, path, "internal error: the value's JSON does not parse: %v", err)
		return Value{}, false
	}
	return v, true
}

// maxDepth bounds the nesting of a value.
const maxDepth = 100

var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// writeJSON writes n as JSON: mappings as objects in the order written,
// strings (and times) as strings, numbers as written when JSON allows it.
func (p *parser) writeJSON(buf *bytes.Buffer, n *yaml.Node, path string, depth int) bool {
	if depth > maxDepth {
		p.fail(n, path, "nested more than %d deep", maxDepth)
		return false
	}
	if n = p.resolve(n, path); n == nil {
		return false
	}
	switch n.Kind {
	case yaml.MappingNode:
		buf.WriteByte('{')
		ok, first := true, true
		p.mapping(n, path, nil, func(key string, _, v *yaml.Node) {
			if !first {
				buf.WriteByte(',')
			}
			first = false
			writeString(buf, key)
			buf.WriteByte(':')
			ok = p.writeJSON(buf, v, join(path, key), depth+1) && ok
		})
		buf.WriteByte('}')
		return ok && !p.failedWithin(path)
	case yaml.SequenceNode:
		buf.WriteByte('[')
		ok := true
		for i, item := range n.Content {
			if i > 0 {
				buf.WriteByte(',')
			}
			ok = p.writeJSON(buf, item, index(path, i), depth+1) && ok
		}
		buf.WriteByte(']')
		return ok
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			buf.WriteString("null")
		case "!!bool":
			var b bool
			if err := n.Decode(&b); err != nil {
				p.fail(n, path, "not a boolean: %v", err)
				return false
			}
			buf.WriteString(strconv.FormatBool(b))
		case "!!int", "!!float":
			s, ok := number(n)
			if !ok {
				p.fail(n, path, "%s is not a number JSON can hold", n.Value)
				return false
			}
			buf.WriteString(s)
		default:
			writeString(buf, n.Value)
		}
		return true
	}
	p.fail(n, path, "want a value, got %s", describe(n))
	return false
}

// failedWithin reports whether a problem was recorded at or below path
// (mapping reports its own without returning false).
func (p *parser) failedWithin(path string) bool {
	for _, e := range p.errs {
		if e.Path == path || strings.HasPrefix(e.Path, path+".") || strings.HasPrefix(e.Path, path+"[") {
			return true
		}
	}
	return false
}

// number is a YAML number as a JSON number: as written when JSON reads it
// so (exact, whatever its size), else through int64 or float64 (0x1F,
// 1_000, +1.5).
func number(n *yaml.Node) (string, bool) {
	if jsonNumber.MatchString(n.Value) {
		return n.Value, true
	}
	if n.ShortTag() == "!!int" {
		var i int64
		if n.Decode(&i) == nil {
			return strconv.FormatInt(i, 10), true
		}
		var u uint64
		if n.Decode(&u) == nil {
			return strconv.FormatUint(u, 10), true
		}
		return "", false
	}
	var f float64
	if n.Decode(&f) != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return "", false
	}
	return strconv.FormatFloat(f, 'g', -1, 64), true
}

func writeString(buf *bytes.Buffer, s string) {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)           // a string always encodes
	buf.Truncate(buf.Len() - 1) // Encode's newline
}

// describe names a node's kind for messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if isNull(n) {
			return "nothing (null)"
		}
		return strconv.Quote(n.Value)
	}
	return "an alias"
}

// schemas reads a mapping of topic: schemas over base (a case's over the
// file's: a topic the case gives replaces the file's).
//
//	numbers: number.avsc                      # a file: version 1 of numbers-value
//	numbers: [number.avsc, number-v2.avsc]    # versions 1 and 2
//	payments: {file: payment.proto, message: Payment}
//	orders: {value: order.avsc, key: {schema: '"string"'}}
func (p *parser) schemas(n *yaml.Node, path string, base []*TopicSchemas) []*TopicSchemas {
	out := slices.Clone(base)
	p.mapping(n, path, nil, func(topic string, k, v *yaml.Node) {
		ts := &TopicSchemas{Topic: topic, At: at(k), Path: join(path, topic)}
		if hasKey(v, sideKeys...) {
			p.mapping(v, ts.Path, sideKeys, func(side string, _, sv *yaml.Node) {
				if side == "value" {
					ts.Value = p.versions(sv, join(ts.Path, side))
				} else {
					ts.Key = p.versions(sv, join(ts.Path, side))
				}
			})
		} else {
			ts.Value = p.versions(v, ts.Path)
		}
		if i := slices.IndexFunc(out, func(o *TopicSchemas) bool { return o.Topic == topic }); i >= 0 {
			out[i] = ts
		} else {
			out = append(out, ts)
		}
	})
	return out
}

// hasKey reports whether n is a mapping with one of keys.
func hasKey(n *yaml.Node, keys ...string) bool {
	if n.Kind != yaml.MappingNode {
		return false
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; k.Kind == yaml.ScalarNode && slices.Contains(keys, k.Value) {
			return true
		}
	}
	return false
}

// versions reads one schema, or a list of them: the versions of a
// subject, in order.
func (p *parser) versions(n *yaml.Node, path string) []*SchemaSpec {
	if n.Kind != yaml.SequenceNode {
		if s := p.spec(n, path); s != nil {
			return []*SchemaSpec{s}
		}
		return nil
	}
	if len(n.Content) == 0 {
		p.fail(n, path, "no schema: give one, or a list of the versions in order")
	}
	var out []*SchemaSpec
	p.sequence(n, path, func(i int, item *yaml.Node) {
		if s := p.spec(item, index(path, i)); s != nil {
			out = append(out, s)
		}
	})
	return out
}

// spec reads one schema: a file name, or a mapping with file: or schema:.
func (p *parser) spec(n *yaml.Node, path string) *SchemaSpec {
	s := &SchemaSpec{At: at(n), Path: path}
	switch {
	case n.Kind == yaml.ScalarNode && !isNull(n):
		s.File = n.Value
		return s
	case n.Kind != yaml.MappingNode:
		p.fail(n, path, "want a schema: a file name, or a mapping with file: or schema:, got %s", describe(n))
		return nil
	}
	ok := true
	p.mapping(n, path, specKeys, func(key string, _, v *yaml.Node) {
		kpath := join(path, key)
		text, good := p.str(v, kpath)
		if !good {
			ok = false
			return
		}
		switch key {
		case "format":
			if !slices.Contains(specFormats, text) {
				p.fail(v, kpath, "unknown format %q: want one with a schema%s", text, config.Suggestion(text, specFormats))
				ok = false
			}
			s.Format = config.Format(text)
		case "file":
			s.File = text
		case "schema":
			s.Text = text
		case "message":
			s.Message = text
		}
	})
	switch {
	case !ok:
		return nil
	case s.File == "" && s.Text == "":
		p.fail(n, path, "give the schema's file: or the schema: itself")
		return nil
	case s.File != "" && s.Text != "":
		p.fail(n, path, "file: and schema: both given: keep one")
		return nil
	}
	return s
}
