package schema

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/big"
	"strings"
	"time"

	"github.com/bufbuild/protocompile"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/eoflow/pipeline/operator"
)

// Protobuf. protocompile compiles a schema's .proto text or serialized
// FileDescriptorProto (with the files it imports: the schemas it
// references, the well-known types, and Confluent's confluent/meta.proto
// and confluent/type/decimal.proto), the Confluent framing's message
// indexes pick the message, and dynamicpb decodes and encodes it. This
// file maps messages onto the operator's value domain and back.
//
// Values read: a message is an object of every field, in declaration
// order (a proto3 scalar that was not set is its zero value, as
// Protobuf's own readers give it; a field with presence that was not set
// is null); int64, sint64, sfixed64 and uint32 are exact integers, a
// uint64 beyond int64 an exact decimal; enums are their value's name;
// bytes are bytes; repeated fields lists; maps objects. The well-known
// types read as what they mean: google.protobuf.Timestamp a time,
// Duration a duration, the wrappers (Int64Value, StringValue, ...) their
// value or null, Struct, Value and ListValue JSON values;
// google.type.Decimal and confluent.type.Decimal exact decimals;
// google.type.Date a time at midnight UTC.

// confluentProtos are the imports Confluent's registry resolves without a
// reference.
var confluentProtos = map[string]string{
	"confluent/meta.proto": `syntax = "proto3";
package confluent;
import "google/protobuf/descriptor.proto";
message Meta { string doc = 1; map<string, string> params = 2; repeated string tags = 3; }
extend google.protobuf.FileOptions { Meta file_meta = 1088; }
extend google.protobuf.MessageOptions { Meta message_meta = 1088; }
extend google.protobuf.FieldOptions { Meta field_meta = 1088; }
extend google.protobuf.EnumOptions { Meta enum_meta = 1088; }
extend google.protobuf.EnumValueOptions { Meta enum_value_meta = 1088; }
`,
	"confluent/type/decimal.proto": `syntax = "proto3";
package confluent.type;
message Decimal { bytes value = 1; uint32 precision = 2; int32 scale = 3; }
`,
	"google/type/decimal.proto": `syntax = "proto3";
package google.type;
message Decimal { string value = 1; }
`,
	"google/type/date.proto": `syntax = "proto3";
package google.type;
message Date { int32 year = 1; int32 month = 2; int32 day = 3; }
`,
}

// protoFile is a compiled .proto schema.
type protoFile struct {
	file protoreflect.FileDescriptor
	// decimals: some message of the file may read as a Decimal (a
	// decimal message, a uint64 beyond int64).
	decimals bool
}

// compileProto compiles text (named main) with the schemas it references.
// Each may be .proto text or the registry's serialized form, a
// FileDescriptorProto in base64: Confluent's Python serializer registers
// that form (the descriptor protoc embeds in the generated code), and a
// registry that keeps a schema as it was given (srfake) hands it back
// so, where Confluent's registry hands back text unless asked for
// format=serialized.
func compileProto(text string, refs []sr.SubjectSchema) (*protoFile, error) {
	const main = "schema.proto"
	files := map[string]string{main: text}
	for name, src := range confluentProtos {
		files[name] = src
	}
	for _, r := range refs {
		files[r.Subject] = r.Schema.Schema // Subject holds the reference's import name
	}
	resolve := func(path string) (protocompile.SearchResult, error) {
		src, ok := files[path]
		if !ok {
			return protocompile.SearchResult{}, fmt.Errorf("%s: %w", path, fs.ErrNotExist)
		}
		if fdp, ok := serializedProto(src); ok {
			fdp.Name = proto.String(path) // the name it is imported by, not the producer's file name
			defaultJSONNames(fdp.MessageType)
			return protocompile.SearchResult{Proto: fdp}, nil
		}
		return protocompile.SearchResult{Source: strings.NewReader(src)}, nil
	}
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(protocompile.ResolverFunc(resolve))}
	out, err := c.Compile(context.Background(), main)
	if err != nil {
		return nil, err
	}
	fd := out[0]
	if fd.Messages().Len() == 0 {
		return nil, errors.New("the schema has no message")
	}
	return &protoFile{file: fd, decimals: hasDecimals(fd)}, nil
}

// hasDecimals says whether a message of file, or one their fields hold,
// has a field that reads as a Decimal.
func hasDecimals(file protoreflect.FileDescriptor) bool {
	seen := map[protoreflect.FullName]bool{}
	var visit func(md protoreflect.MessageDescriptor) bool
	anyOf := func(msgs protoreflect.MessageDescriptors) bool {
		for i := range msgs.Len() {
			if visit(msgs.Get(i)) {
				return true
			}
		}
		return false
	}
	visit = func(md protoreflect.MessageDescriptor) bool {
		if seen[md.FullName()] {
			return false
		}
		seen[md.FullName()] = true
		switch md.FullName() {
		case "google.type.Decimal", "confluent.type.Decimal":
			return true
		}
		fields := md.Fields()
		for i := range fields.Len() {
			fd := fields.Get(i)
			if fd.IsMap() {
				fd = fd.MapValue()
			}
			switch fd.Kind() {
			case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
				return true
			case protoreflect.MessageKind, protoreflect.GroupKind:
				if visit(fd.Message()) {
					return true
				}
			}
		}
		return anyOf(md.Messages())
	}
	return anyOf(file.Messages())
}

// defaultJSONNames gives each field of msgs (and of the messages they
// nest) that has no json_name the one protoc derives from its name.
// protoc leaves json_name out of the descriptors it embeds in generated
// code, which are what Confluent's serializers register, and protocompile
// takes a field without one for a field whose custom JSON name is "": two
// such fields in a message conflict, and the schema would not compile.
func defaultJSONNames(msgs []*descriptorpb.DescriptorProto) {
	for _, m := range msgs {
		for _, f := range m.GetField() {
			if f.JsonName == nil {
				f.JsonName = proto.String(jsonName(f.GetName()))
			}
		}
		defaultJSONNames(m.GetNestedType())
	}
}

// jsonName is protoc's default JSON name of a field: its name with each
// underscore dropped and the letter after it in upper case
// (foo_bar_baz: fooBarBaz).
func jsonName(field string) string {
	var b strings.Builder
	upper := false
	for i := range len(field) {
		c := field[i]
		switch {
		case c == '_':
			upper = true
			continue
		case upper && 'a' <= c && c <= 'z':
			c -= 'a' - 'A'
		}
		upper = false
		b.WriteByte(c)
	}
	return b.String()
}

// serializedProto is the FileDescriptorProto text holds in the
// registry's serialized form (base64), if it is in that form. .proto
// text never is: it needs characters base64 does not have (';', '{').
func serializedProto(text string) (*descriptorpb.FileDescriptorProto, bool) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(text))
	if err != nil || len(b) == 0 {
		return nil, false
	}
	fdp := new(descriptorpb.FileDescriptorProto)
	if (proto.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, fdp) != nil {
		return nil, false
	}
	return fdp, true
}

// message is the message that indexes name (the Confluent framing's
// path of indexes: [0] is the first top-level message).
func (p *protoFile) message(indexes []int) (protoreflect.MessageDescriptor, error) {
	msgs := p.file.Messages()
	var md protoreflect.MessageDescriptor
	for _, i := range indexes {
		if i < 0 || i >= msgs.Len() {
			return nil, fmt.Errorf("message index %v: the schema has no such message", indexes)
		}
		md = msgs.Get(i)
		msgs = md.Messages()
	}
	if md == nil {
		return nil, errors.New("no message index")
	}
	return md, nil
}

// indexesOf is the index path of md in its file.
func indexesOf(md protoreflect.MessageDescriptor) []int {
	var path []int
	for d := protoreflect.Descriptor(md); d != nil; d = d.Parent() {
		if m, ok := d.(protoreflect.MessageDescriptor); ok {
			path = append([]int{m.Index()}, path...)
			continue
		}
		break
	}
	return path
}

// decodeValue reads a message as any value (a key may be a well-known
// type).
func (p *protoFile) decodeValue(b []byte) (any, error) {
	indexes, rest, err := header.DecodeIndex(b, 64)
	if err != nil {
		return nil, fmt.Errorf("the message indexes: %w", err)
	}
	md, err := p.message(indexes)
	if err != nil {
		return nil, err
	}
	msg := dynamicpb.NewMessage(md)
	if err := (proto.UnmarshalOptions{RecursionLimit: 10000}).Unmarshal(rest, msg); err != nil {
		return nil, fmt.Errorf("message %s: %w", md.FullName(), err)
	}
	return protoValue(msg), nil
}

// decode reads framed bytes after the schema id: the message indexes,
// then the message.
func (p *protoFile) decode(b []byte) (map[string]any, []string, error) {
	indexes, rest, err := header.DecodeIndex(b, 64)
	if err != nil {
		return nil, nil, fmt.Errorf("the message indexes: %w", err)
	}
	md, err := p.message(indexes)
	if err != nil {
		return nil, nil, err
	}
	msg := dynamicpb.NewMessage(md)
	if err := (proto.UnmarshalOptions{RecursionLimit: 10000}).Unmarshal(rest, msg); err != nil {
		return nil, nil, fmt.Errorf("message %s: %w", md.FullName(), err)
	}
	m, ok := protoValue(msg).(map[string]any)
	if !ok {
		return nil, nil, fmt.Errorf("message %s is a well-known type, not a record", md.FullName())
	}
	return m, fieldNames(md), nil
}

func fieldNames(md protoreflect.MessageDescriptor) []string {
	names := make([]string, md.Fields().Len())
	for i := range names {
		names[i] = string(md.Fields().Get(i).Name())
	}
	return names
}

// protoValue is a message as a value.
func protoValue(m protoreflect.Message) any {
	md := m.Descriptor()
	if v, ok := wellKnown(m); ok {
		return v
	}
	fields := md.Fields()
	out := make(map[string]any, fields.Len())
	for i := range fields.Len() {
		fd := fields.Get(i)
		name := string(fd.Name())
		switch {
		case fd.IsList():
			l := m.Get(fd).List()
			a := make([]any, l.Len())
			for j := range a {
				a[j] = scalarValue(fd, l.Get(j))
			}
			out[name] = a
		case fd.IsMap():
			mp := m.Get(fd).Map()
			o := make(map[string]any, mp.Len())
			mp.Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
				o[k.String()] = scalarValue(fd.MapValue(), v)
				return true
			})
			out[name] = o
		case fd.HasPresence() && !m.Has(fd):
			out[name] = nil
		default:
			out[name] = scalarValue(fd, m.Get(fd))
		}
	}
	return out
}

func scalarValue(fd protoreflect.FieldDescriptor, v protoreflect.Value) any {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return v.Bool()
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return int(v.Int())
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return v.Int()
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return int(v.Uint())
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		u := v.Uint()
		if u <= math.MaxInt64 {
			return int64(u)
		}
		d, _ := operator.NewDecimal(new(big.Int).SetUint64(u), 0)
		return d
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		return v.Float()
	case protoreflect.StringKind:
		return v.String()
	case protoreflect.BytesKind:
		return append([]byte(nil), v.Bytes()...)
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return string(ev.Name())
		}
		return int(v.Enum())
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return protoValue(v.Message())
	}
	return nil
}

// wellKnown reads the messages that stand for a value.
func wellKnown(m protoreflect.Message) (any, bool) {
	md := m.Descriptor()
	field := func(name string) protoreflect.Value { return m.Get(md.Fields().ByName(protoreflect.Name(name))) }
	switch md.FullName() {
	case "google.protobuf.Timestamp":
		return time.Unix(field("seconds").Int(), field("nanos").Int()).UTC(), true
	case "google.protobuf.Duration":
		return time.Duration(field("seconds").Int())*time.Second + time.Duration(field("nanos").Int()), true
	case "google.protobuf.DoubleValue", "google.protobuf.FloatValue", "google.protobuf.Int64Value", "google.protobuf.UInt64Value",
		"google.protobuf.Int32Value", "google.protobuf.UInt32Value", "google.protobuf.BoolValue", "google.protobuf.StringValue", "google.protobuf.BytesValue":
		fd := md.Fields().ByName("value")
		return scalarValue(fd, m.Get(fd)), true
	case "google.protobuf.Struct":
		fd := md.Fields().ByName("fields")
		o := map[string]any{}
		m.Get(fd).Map().Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
			o[k.String()] = protoValue(v.Message())
			return true
		})
		return o, true
	case "google.protobuf.ListValue":
		l := field("values").List()
		a := make([]any, l.Len())
		for i := range a {
			a[i] = protoValue(l.Get(i).Message())
		}
		return a, true
	case "google.protobuf.Value":
		od := md.Oneofs().ByName("kind")
		set := m.WhichOneof(od)
		if set == nil || set.Name() == "null_value" {
			return nil, true
		}
		v := m.Get(set)
		switch set.Name() {
		case "number_value":
			return v.Float(), true
		case "string_value":
			return v.String(), true
		case "bool_value":
			return v.Bool(), true
		}
		return protoValue(v.Message()), true
	case "google.type.Decimal":
		if d, err := operator.ParseDecimal(field("value").String()); err == nil {
			return d, true
		}
		return field("value").String(), true
	case "confluent.type.Decimal":
		b := field("value").Bytes()
		z := new(big.Int).SetBytes(b)
		if len(b) > 0 && b[0]&0x80 != 0 {
			z.Sub(z, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
		}
		if d, err := operator.NewDecimal(z, int(field("scale").Int())); err == nil {
			return d, true
		}
		return nil, true
	case "google.type.Date":
		return time.Date(int(field("year").Int()), time.Month(field("month").Int()), int(field("day").Int()), 0, 0, 0, 0, time.UTC), true
	}
	return nil, false
}

// protoMessage builds a message of md from an object.
func protoMessage(md protoreflect.MessageDescriptor, fields map[string]any) (*dynamicpb.Message, error) {
	msg := dynamicpb.NewMessage(md)
	for i := range md.Fields().Len() {
		fd := md.Fields().Get(i)
		v, ok := fields[string(fd.Name())]
		if !ok || v == nil {
			continue // unset: its default (or absent, with presence)
		}
		if err := setField(msg, fd, v); err != nil {
			return nil, fieldError(string(fd.Name()), err)
		}
	}
	return msg, nil
}

func setField(msg *dynamicpb.Message, fd protoreflect.FieldDescriptor, v any) error {
	switch {
	case fd.IsList():
		a, ok := v.([]any)
		if !ok {
			return fmt.Errorf("want a list, got %s", kindOf(v))
		}
		l := msg.Mutable(fd).List()
		for i, e := range a {
			pv, err := protoScalar(msg, fd, e)
			if err != nil {
				return indexError(i, err)
			}
			l.Append(pv)
		}
		return nil
	case fd.IsMap():
		o, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("want an object, got %s", kindOf(v))
		}
		mp := msg.Mutable(fd).Map()
		for _, k := range sortedKeys(o) {
			key, err := protoMapKey(fd.MapKey(), k)
			if err != nil {
				return err
			}
			pv, err := protoScalar(msg, fd.MapValue(), o[k])
			if err != nil {
				return keyError(k, err)
			}
			mp.Set(key, pv)
		}
		return nil
	}
	pv, err := protoScalar(msg, fd, v)
	if err != nil {
		return err
	}
	msg.Set(fd, pv)
	return nil
}

func protoMapKey(fd protoreflect.FieldDescriptor, k string) (protoreflect.MapKey, error) {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(k).MapKey(), nil
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(k == "true").MapKey(), nil
	}
	v, err := protoScalar(nil, fd, k)
	if err != nil {
		return protoreflect.MapKey{}, fmt.Errorf("map key %q: %w", k, err)
	}
	return v.MapKey(), nil
}

// protoScalar is v as a value of field fd (msg: its message, for a
// message-typed field's new value).
func protoScalar(msg *dynamicpb.Message, fd protoreflect.FieldDescriptor, v any) (protoreflect.Value, error) {
	bad := func(want string) (protoreflect.Value, error) {
		return protoreflect.Value{}, fmt.Errorf("want %s, got %s", want, kindOf(v))
	}
	switch fd.Kind() {
	case protoreflect.BoolKind:
		if b, ok := v.(bool); ok {
			return protoreflect.ValueOfBool(b), nil
		}
		return bad("a boolean")
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		if i, ok := intOf(v); ok && i >= math.MinInt32 && i <= math.MaxInt32 {
			return protoreflect.ValueOfInt32(int32(i)), nil
		}
		return bad("an int32")
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		if i, ok := intOf(v); ok {
			return protoreflect.ValueOfInt64(i), nil
		}
		return bad("an int64")
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		if i, ok := intOf(v); ok && i >= 0 && i <= math.MaxUint32 {
			return protoreflect.ValueOfUint32(uint32(i)), nil
		}
		return bad("a uint32")
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		if i, ok := intOf(v); ok && i >= 0 {
			return protoreflect.ValueOfUint64(uint64(i)), nil
		}
		if d, ok := v.(operator.Decimal); ok {
			if z := d.Unscaled(); d.Scale() == 0 && z.Sign() >= 0 && z.IsUint64() {
				return protoreflect.ValueOfUint64(z.Uint64()), nil
			}
		}
		return bad("a uint64")
	case protoreflect.FloatKind:
		if f, ok := floatOf(v); ok {
			return protoreflect.ValueOfFloat32(float32(f)), nil
		}
		return bad("a float")
	case protoreflect.DoubleKind:
		if f, ok := floatOf(v); ok {
			return protoreflect.ValueOfFloat64(f), nil
		}
		return bad("a double")
	case protoreflect.StringKind:
		if s, ok := stringOf(v); ok {
			return protoreflect.ValueOfString(s), nil
		}
		return bad("a string")
	case protoreflect.BytesKind:
		if b, ok := bytesOf(v); ok {
			return protoreflect.ValueOfBytes(b), nil
		}
		return bad("bytes")
	case protoreflect.EnumKind:
		if s, ok := v.(string); ok {
			if ev := fd.Enum().Values().ByName(protoreflect.Name(s)); ev != nil {
				return protoreflect.ValueOfEnum(ev.Number()), nil
			}
			return protoreflect.Value{}, fmt.Errorf("%q is not a value of enum %s", s, fd.Enum().FullName())
		}
		if i, ok := intOf(v); ok && i >= math.MinInt32 && i <= math.MaxInt32 {
			return protoreflect.ValueOfEnum(protoreflect.EnumNumber(i)), nil
		}
		return bad("an enum value")
	case protoreflect.MessageKind, protoreflect.GroupKind:
		md := fd.Message()
		if m, ok, err := wellKnownMessage(md, v); ok || err != nil {
			if err != nil {
				return protoreflect.Value{}, err
			}
			return protoreflect.ValueOfMessage(m), nil
		}
		o, ok := v.(map[string]any)
		if !ok {
			return bad("an object for message " + string(md.FullName()))
		}
		m, err := protoMessage(md, o)
		if err != nil {
			return protoreflect.Value{}, err
		}
		return protoreflect.ValueOfMessage(m), nil
	}
	return bad("a value")
}

// wellKnownMessage builds a well-known message from the value it stands
// for; ok false for other messages.
func wellKnownMessage(md protoreflect.MessageDescriptor, v any) (*dynamicpb.Message, bool, error) {
	m := dynamicpb.NewMessage(md)
	set := func(name string, pv protoreflect.Value) { m.Set(md.Fields().ByName(protoreflect.Name(name)), pv) }
	switch md.FullName() {
	case "google.protobuf.Timestamp":
		t, ok := timeOf(v)
		if !ok {
			return nil, true, fmt.Errorf("want a timestamp, got %s", kindOf(v))
		}
		set("seconds", protoreflect.ValueOfInt64(t.Unix()))
		set("nanos", protoreflect.ValueOfInt32(int32(t.Nanosecond())))
		return m, true, nil
	case "google.protobuf.Duration":
		d, ok := v.(time.Duration)
		if !ok {
			return nil, true, fmt.Errorf("want a duration, got %s", kindOf(v))
		}
		set("seconds", protoreflect.ValueOfInt64(int64(d/time.Second)))
		set("nanos", protoreflect.ValueOfInt32(int32(d%time.Second)))
		return m, true, nil
	case "google.protobuf.DoubleValue", "google.protobuf.FloatValue", "google.protobuf.Int64Value", "google.protobuf.UInt64Value",
		"google.protobuf.Int32Value", "google.protobuf.UInt32Value", "google.protobuf.BoolValue", "google.protobuf.StringValue", "google.protobuf.BytesValue":
		fd := md.Fields().ByName("value")
		pv, err := protoScalar(m, fd, v)
		if err != nil {
			return nil, true, err
		}
		m.Set(fd, pv)
		return m, true, nil
	case "google.type.Decimal":
		d, ok := operator.DecimalValue(v)
		if !ok {
			return nil, true, fmt.Errorf("want a decimal, got %s", kindOf(v))
		}
		set("value", protoreflect.ValueOfString(d.String()))
		return m, true, nil
	case "confluent.type.Decimal":
		d, ok := operator.DecimalValue(v)
		if !ok {
			return nil, true, fmt.Errorf("want a decimal, got %s", kindOf(v))
		}
		set("value", protoreflect.ValueOfBytes(unscaledBytes(d.Unscaled())))
		set("precision", protoreflect.ValueOfUint32(uint32(len(new(big.Int).Abs(d.Unscaled()).String()))))
		set("scale", protoreflect.ValueOfInt32(int32(d.Scale())))
		return m, true, nil
	}
	return nil, false, nil
}

// protoWriter writes one message of a compiled schema.
type protoWriter struct {
	file    *protoFile
	md      protoreflect.MessageDescriptor
	indexes []int
}

func (p *protoFile) writer() (*protoWriter, error) {
	md := p.file.Messages().Get(0)
	return &protoWriter{file: p, md: md, indexes: indexesOf(md)}, nil
}

// appendObject appends the message indexes and the message of fields.
func (w *protoWriter) appendObject(dst []byte, fields map[string]any) ([]byte, error) {
	msg, err := protoMessage(w.md, fields)
	if err != nil {
		return dst, err
	}
	// The indexes go after the id; AppendEncode wrote the id already.
	dst = appendIndexes(dst, w.indexes)
	return (proto.MarshalOptions{Deterministic: true}).MarshalAppend(dst, msg)
}

// appendIndexes appends the Confluent framing's message indexes.
func appendIndexes(dst []byte, indexes []int) []byte {
	b, _ := header.AppendEncode(nil, 0, indexes)
	return append(dst, b[5:]...)
}
