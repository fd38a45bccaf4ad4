package schema

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/operator"
)

// Values given as JSON, written in a schema format as a producer's
// serializer writes them, and framed values read back as JSON: what
// `pipeline test` (internal/jobtest) writes to the topics a job reads and
// how it shows what the job wrote. Both go through the same code as the
// job's own sinks and sources, so a test writes and reads exactly what
// the job would meet.

// Writer writes values of one schema, given as JSON text, in its format:
// the bytes after the schema id of the Confluent framing. Safe for
// concurrent use.
type Writer struct {
	format config.Format
	schema sr.Schema
	avro   *avroWriter
	proto  *protoWriter
	json   *jsonFile
}

// NewWriter compiles text, a schema of format (avro, protobuf or
// json_schema, without references), for writing. message names the
// Protobuf message to write (its full or its own name, nested ones too;
// "" is the file's first), and is for Protobuf only.
func NewWriter(format config.Format, text, message string) (*Writer, error) {
	w := &Writer{format: format, schema: sr.Schema{Schema: text, Type: formatType(format)}}
	if message != "" && format != config.FormatProtobuf {
		return nil, fmt.Errorf("a message name is for Protobuf schemas, not %s", format)
	}
	switch format {
	case config.FormatAvro:
		s, err := avro.Parse(text)
		if err != nil {
			return nil, fmt.Errorf("not an Avro schema: %w", err)
		}
		if w.avro, err = compileAvroWriter(s); err != nil {
			return nil, err
		}
	case config.FormatProtobuf:
		pf, err := compileProto(text, nil)
		if err != nil {
			return nil, fmt.Errorf("not a Protobuf schema: %w", err)
		}
		md := pf.file.Messages().Get(0)
		if message != "" {
			if md = findMessage(pf.file.Messages(), message); md == nil {
				return nil, fmt.Errorf("no message %s in the schema; its messages: %s", message, strings.Join(messageNames(pf.file.Messages()), ", "))
			}
		}
		w.proto = &protoWriter{file: pf, md: md, indexes: indexesOf(md)}
	case config.FormatJSONSchema:
		jf, err := compileJSONSchema(text, nil)
		if err != nil {
			return nil, fmt.Errorf("not a JSON Schema: %w", err)
		}
		w.json = jf
	default:
		return nil, fmt.Errorf("format %s has no schema: want avro, protobuf or json_schema", format)
	}
	return w, nil
}

// findMessage is the message named name (full or short) among msgs and
// the messages nested in them, depth first.
func findMessage(msgs protoreflect.MessageDescriptors, name string) protoreflect.MessageDescriptor {
	for i := range msgs.Len() {
		md := msgs.Get(i)
		if string(md.FullName()) == name || string(md.Name()) == name {
			return md
		}
		if n := findMessage(md.Messages(), name); n != nil {
			return n
		}
	}
	return nil
}

func messageNames(msgs protoreflect.MessageDescriptors) []string {
	var names []string
	for i := range msgs.Len() {
		names = append(names, string(msgs.Get(i).FullName()))
		names = append(names, messageNames(msgs.Get(i).Messages())...)
	}
	return names
}

// Schema is the schema to register.
func (w *Writer) Schema() sr.Schema { return w.schema }

// Encode is the value js (JSON text, its numbers read exactly: 0.10 is
// the decimal 0.10) in the writer's schema, as it follows the schema id
// in the Confluent framing (for Protobuf, the message indexes, then the
// message). A value the schema does not take is an error ValuePath
// locates: a field of the wrong type, a field missing that has no
// default, or, for Avro and Protobuf, a field the schema does not have
// (the encoders drop it; a test that names it means it). That one is
// found first: a misspelt field is also a field missing.
func (w *Writer) Encode(js []byte) ([]byte, error) {
	if w.json != nil {
		if err := w.json.validate(js); err != nil {
			return nil, err
		}
		return slices.Clone(js), nil
	}
	v, err := exactValue(js)
	if err != nil {
		return nil, err
	}
	if w.avro != nil {
		if err := avroUnknown(w.avro.schema, v); err != nil {
			return nil, err
		}
		aw := avro.NewWriter(nil, 0, avro.WithWriterConfig(avroConfig))
		if err := w.avro.write(aw, v); err != nil {
			return nil, err
		}
		return slices.Clone(aw.Buffer()), nil
	}
	o, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("want an object for message %s, got %s", w.proto.md.FullName(), kindOf(v))
	}
	if err := protoUnknown(w.proto.md, o); err != nil {
		return nil, err
	}
	msg, err := protoMessage(w.proto.md, o)
	if err != nil {
		return nil, err
	}
	return (proto.MarshalOptions{Deterministic: true}).MarshalAppend(appendIndexes(nil, w.proto.indexes), msg)
}

// exactValue is JSON text in the value domain, every number exact.
func exactValue(js []byte) (any, error) {
	wrapped := make([]byte, 0, len(js)+6)
	wrapped = append(append(append(wrapped, `{"v":`...), js...), '}')
	m, err := operator.DecodeJSONObjectExact(wrapped)
	if err != nil {
		return nil, err
	}
	return m["v"], nil
}

// noSuchField is a field of an object that its record or message does
// not have.
func noSuchField(name string, have []string) error {
	return fieldError(name, fmt.Errorf("the schema has no such field%s", config.Suggestion(name, have)))
}

// avroUnknown finds a field of v that its record in s does not have.
func avroUnknown(s avro.Schema, v any) error {
	switch s := deref(s).(type) {
	case *avro.RecordSchema:
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		byName := map[string]avro.Schema{}
		var names []string
		for _, f := range s.Fields() {
			byName[f.Name()] = f.Type()
			names = append(names, f.Name())
		}
		for _, k := range sortedKeys(m) {
			t, ok := byName[k]
			if !ok {
				return noSuchField(k, names)
			}
			if err := avroUnknown(t, m[k]); err != nil {
				return fieldError(k, err)
			}
		}
	case *avro.ArraySchema:
		a, _ := v.([]any)
		for i, e := range a {
			if err := avroUnknown(s.Items(), e); err != nil {
				return indexError(i, err)
			}
		}
	case *avro.MapSchema:
		m, _ := v.(map[string]any)
		for _, k := range sortedKeys(m) {
			if err := avroUnknown(s.Values(), m[k]); err != nil {
				return keyError(k, err)
			}
		}
	case *avro.UnionSchema:
		// An object takes a union's record branch when it has one alone.
		var only avro.Schema
		for _, t := range s.Types() {
			if rs, ok := deref(t).(*avro.RecordSchema); ok {
				if only != nil {
					return nil
				}
				only = rs
			}
		}
		if only != nil {
			return avroUnknown(only, v)
		}
	}
	return nil
}

// protoUnknown finds a field of m that message md does not have.
func protoUnknown(md protoreflect.MessageDescriptor, m map[string]any) error {
	fields := md.Fields()
	for _, k := range sortedKeys(m) {
		fd := fields.ByName(protoreflect.Name(k))
		if fd == nil {
			return noSuchField(k, fieldNames(md))
		}
		if fd.Message() == nil || fd.IsMap() && fd.MapValue().Message() == nil {
			continue
		}
		var err error
		switch {
		case fd.IsMap():
			o, _ := m[k].(map[string]any)
			for _, mk := range sortedKeys(o) {
				if sub, ok := o[mk].(map[string]any); ok && !wellKnownName(fd.MapValue().Message()) {
					if e := protoUnknown(fd.MapValue().Message(), sub); e != nil {
						err = keyError(mk, e)
						break
					}
				}
			}
		case fd.IsList():
			a, _ := m[k].([]any)
			for i, e := range a {
				if sub, ok := e.(map[string]any); ok && !wellKnownName(fd.Message()) {
					if e := protoUnknown(fd.Message(), sub); e != nil {
						err = indexError(i, e)
						break
					}
				}
			}
		default:
			if sub, ok := m[k].(map[string]any); ok && !wellKnownName(fd.Message()) {
				err = protoUnknown(fd.Message(), sub)
			}
		}
		if err != nil {
			return fieldError(k, err)
		}
	}
	return nil
}

// wellKnownName reports whether md is a message written from the value
// it stands for (a Timestamp from a time, a Struct from an object).
func wellKnownName(md protoreflect.MessageDescriptor) bool {
	name := string(md.FullName())
	return strings.HasPrefix(name, "google.protobuf.") || name == "google.type.Decimal" || name == "confluent.type.Decimal" || name == "google.type.Date"
}

// JSON reads framed (a value or key in the Confluent wire format) with
// the schema its id names, fetched from the registry, and returns it as
// JSON: an object's fields in the schema's order, decimals as exact
// numbers, times as RFC 3339 text in UTC, bytes as base64 (as a json
// sink writes a record it read in a schema format). ok is false when the
// bytes are not framed, name an id the registry does not have, or do not
// read with their schema; err is the registry's absence (ErrUnavailable)
// or ctx's.
func (r *Registry) JSON(ctx context.Context, framed []byte) (js []byte, v any, ok bool, err error) {
	id, rest, ferr := header.DecodeID(framed)
	if ferr != nil {
		return nil, nil, false, nil
	}
	if err := r.fetch(ctx, id); err != nil {
		return nil, nil, false, err
	}
	e := r.cached(id)
	if e == nil || e.err != nil {
		return nil, nil, false, nil
	}
	var order []string
	switch e.schema.Type {
	case sr.TypeAvro:
		v, err = e.avro.decodeValue(rest)
		order = e.avro.fields
	case sr.TypeProtobuf:
		if indexes, _, ierr := header.DecodeIndex(rest, 64); ierr == nil {
			if md, merr := e.proto.message(indexes); merr == nil {
				order = fieldNames(md)
			}
		}
		v, err = e.proto.decodeValue(rest)
	case sr.TypeJSON:
		v, err = e.json.decodeValue(rest)
	default:
		return nil, nil, false, nil
	}
	if err != nil {
		return nil, nil, false, nil
	}
	js, err = appendReadJSON(nil, v, order)
	if err != nil {
		return nil, nil, false, nil
	}
	return js, v, true, nil
}

// appendReadJSON appends the JSON of a value read from a schema format;
// order is the top-level object's field order (nil: sorted).
func appendReadJSON(dst []byte, v any, order []string) ([]byte, error) {
	m, ok := v.(map[string]any)
	if !ok || order == nil {
		return operator.AppendJSON(dst, jsonReady(v))
	}
	dst = append(dst, '{')
	n := 0
	for _, k := range order {
		fv, ok := m[k]
		if !ok {
			continue
		}
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
		var err error
		if dst, err = operator.AppendJSON(dst, k); err != nil {
			return dst, err
		}
		dst = append(dst, ':')
		if dst, err = operator.AppendJSON(dst, jsonReady(fv)); err != nil {
			return dst, err
		}
	}
	return append(dst, '}'), nil
}

// jsonReady turns bytes, which JSON has no form for, into the base64
// text a json sink writes for them (operator.AppendJSON writes times as
// RFC 3339 text in UTC and durations as their text itself).
func jsonReady(v any) any {
	switch x := v.(type) {
	case []byte:
		return base64.StdEncoding.EncodeToString(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonReady(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = jsonReady(e)
		}
		return out
	}
	return v
}

// pathError is a problem at one place inside a value: a record's field,
// a list's item or a map's entry. Its text is the place then the
// problem ("field amount: want a decimal, got ...", "[2]: ..."), and
// ValuePath recovers the places.
type pathError struct {
	elem, text string
	err        error
}

func (e *pathError) Error() string { return e.text + ": " + e.err.Error() }
func (e *pathError) Unwrap() error { return e.err }

// errNoDefault is a record field a value lacks that has no default.
var errNoDefault = errors.New("missing, and the schema gives it no default")

func fieldError(name string, err error) error {
	return &pathError{elem: name, text: "field " + name, err: err}
}

func indexError(i int, err error) error {
	return &pathError{elem: strconv.Itoa(i), text: fmt.Sprintf("[%d]", i), err: err}
}

func keyError(k string, err error) error {
	return &pathError{elem: k, text: fmt.Sprintf("[%q]", k), err: err}
}

// ValuePath splits an error of Writer.Encode into where in the value it
// is, outermost first (field names, and list indexes and map keys as
// text), and what it says there. A JSON Schema error's place is its
// instance location.
func ValuePath(err error) (path []string, msg string) {
	for {
		var pe *pathError
		if !errors.As(err, &pe) {
			break
		}
		path = append(path, pe.elem)
		err = pe.err
	}
	var ve *jsonLocationError
	if errors.As(err, &ve) {
		return append(path, ve.at...), ve.msg
	}
	return path, err.Error()
}
