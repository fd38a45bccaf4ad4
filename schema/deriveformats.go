package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The derived schema in Protobuf and JSON Schema, and the input's field
// types read from a Protobuf or JSON Schema source (derive.go has the
// rules).
//
// Protobuf: a proto3 message named after the topic, in package
// eoflow.pipeline, a field per value numbered in order: long int64,
// double double, string, bool, bytes, a timestamp or date
// google.protobuf.Timestamp, a decimal string (its exact text: proto3 has
// no decimal, and google.type.Decimal is a string too), a nullable field
// proto3 optional. JSON Schema: draft-07 (Confluent's default), an object
// titled after the topic with a property per value (long integer, double
// and decimal number, a timestamp a string of format date-time, nullable
// ["null", T]), every non-nullable one required, no others allowed.

func (d *derived) protoText() (string, error) {
	if d.passThrough != "" {
		return d.passThrough, nil
	}
	var body strings.Builder
	imports := map[string]bool{}
	for i, f := range d.fields {
		t, imp, err := f.t.protoType()
		if err != nil {
			return "", fmt.Errorf("field %s: %w", f.name, err)
		}
		if imp != "" {
			imports[imp] = true
		}
		opt := ""
		if f.t.nullable && imp == "" {
			opt = "optional "
		}
		fmt.Fprintf(&body, "  %s%s %s = %d;\n", opt, t, f.name, i+1)
	}
	var b strings.Builder
	b.WriteString("syntax = \"proto3\";\npackage " + derivedNamespace + ";\n")
	for _, imp := range sortedImports(imports) {
		fmt.Fprintf(&b, "import %q;\n", imp)
	}
	fmt.Fprintf(&b, "\nmessage %s {\n%s}\n", d.name, body.String())
	return b.String(), nil
}

func sortedImports(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// protoType is t's proto3 type, and the file it needs imported.
func (t vtype) protoType() (string, string, error) {
	switch t.kind {
	case vLong:
		return "int64", "", nil
	case vDouble:
		return "double", "", nil
	case vString, vDecimal:
		return "string", "", nil
	case vBool:
		return "bool", "", nil
	case vBytes:
		return "bytes", "", nil
	case vTimestamp, vDate:
		return "google.protobuf.Timestamp", "google/protobuf/timestamp.proto", nil
	}
	return "", "", fmt.Errorf("a %s has no Protobuf type here", t.describe())
}

func (d *derived) jsonSchemaText() (string, error) {
	if d.passThrough != "" {
		return d.passThrough, nil
	}
	var b bytes.Buffer
	b.WriteString(`{"$schema":"http://json-schema.org/draft-07/schema#","title":`)
	writeJSON(&b, d.name)
	b.WriteString(`,"type":"object","properties":{`)
	for i, f := range d.fields {
		if i > 0 {
			b.WriteByte(',')
		}
		writeJSON(&b, f.name)
		b.WriteByte(':')
		s, err := f.t.jsonSchema()
		if err != nil {
			return "", fmt.Errorf("field %s: %w", f.name, err)
		}
		b.WriteString(s)
	}
	b.WriteString(`},"required":`)
	req := requiredFields(d)
	if req == nil {
		req = []string{}
	}
	writeJSON(&b, req)
	b.WriteString(`,"additionalProperties":false}`)
	return b.String(), nil
}

func writeJSON(b *bytes.Buffer, v any) {
	enc, _ := json.Marshal(v)
	b.Write(enc)
}

func (t vtype) jsonSchema() (string, error) {
	var typ, format string
	switch t.kind {
	case vLong:
		typ = "integer"
	case vDouble, vDecimal:
		typ = "number"
	case vString, vBytes:
		typ = "string"
	case vBool:
		typ = "boolean"
	case vTimestamp, vDate:
		typ, format = "string", "date-time"
	default:
		return "", fmt.Errorf("a %s has no JSON Schema type here", t.describe())
	}
	s := `"` + typ + `"`
	if t.nullable {
		s = `["null","` + typ + `"]`
	}
	out := `{"type":` + s
	if format != "" {
		out += `,"format":"` + format + `"`
	}
	return out + "}", nil
}

// jsonTitle is a JSON Schema's title, if it has one.
func jsonTitle(text string) string {
	var doc struct {
		Title string `json:"title"`
	}
	if json.Unmarshal([]byte(text), &doc) != nil {
		return ""
	}
	return doc.Title
}

// protoFields are the vtypes of the first message of a Protobuf schema.
func protoFields(text string, refs []sr.SubjectSchema) (map[string]vtype, error) {
	pf, err := compileProto(text, refs)
	if err != nil {
		return nil, err
	}
	out := map[string]vtype{}
	fields := pf.file.Messages().Get(0).Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		out[string(fd.Name())] = protoVType(fd)
	}
	return out, nil
}

func protoVType(fd protoreflect.FieldDescriptor) vtype {
	if fd.IsList() || fd.IsMap() {
		return vtype{}
	}
	var t vtype
	switch fd.Kind() {
	case protoreflect.BoolKind:
		t.kind = vBool
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind, protoreflect.Int64Kind, protoreflect.Sint64Kind,
		protoreflect.Sfixed64Kind, protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		t.kind = vLong
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		t.kind = vDouble
	case protoreflect.StringKind, protoreflect.EnumKind:
		t.kind = vString
	case protoreflect.BytesKind:
		t.kind = vBytes
	case protoreflect.MessageKind:
		switch fd.Message().FullName() {
		case "google.protobuf.Timestamp":
			t.kind = vTimestamp
		case "google.protobuf.Int64Value", "google.protobuf.Int32Value", "google.protobuf.UInt32Value":
			t.kind, t.nullable = vLong, true
		case "google.protobuf.DoubleValue", "google.protobuf.FloatValue":
			t.kind, t.nullable = vDouble, true
		case "google.protobuf.StringValue":
			t.kind, t.nullable = vString, true
		case "google.protobuf.BoolValue":
			t.kind, t.nullable = vBool, true
		case "google.type.Decimal", "confluent.type.Decimal":
			// Its scale is in each value, not in the schema: the sum's
			// scale is not known before the first record.
			t.kind = vDecimal
			t.scale = -1
		}
	}
	if fd.HasPresence() && fd.Kind() != protoreflect.MessageKind {
		t.nullable = true
	}
	return t
}

// jsonFields are the vtypes of a JSON Schema's top-level properties.
func jsonFields(text string) map[string]vtype {
	var doc struct {
		Properties map[string]struct {
			Type   any    `json:"type"`
			Format string `json:"format"`
		} `json:"properties"`
	}
	out := map[string]vtype{}
	if json.Unmarshal([]byte(text), &doc) != nil {
		return out
	}
	for name, p := range doc.Properties {
		var t vtype
		types := []string{}
		switch x := p.Type.(type) {
		case string:
			types = append(types, x)
		case []any:
			for _, e := range x {
				if s, ok := e.(string); ok {
					types = append(types, s)
				}
			}
		}
		for _, typ := range types {
			switch typ {
			case "null":
				t.nullable = true
			case "integer":
				t.kind = vLong
			case "number":
				t.kind = vDouble
			case "boolean":
				t.kind = vBool
			case "string":
				t.kind = vString
				if p.Format == "date-time" {
					t.kind = vTimestamp
				}
			}
		}
		out[name] = t
	}
	return out
}
