package schema

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"
	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/eoflow/pipeline/config"
)

// Derivation: the schema of what a step writes, from the configuration
// and the types of the input's fields (the latest schema of each source
// topic's <topic>-value subject). For an aggregate or a window: the key,
// named "key", typed as its key_by (string when that is not a field of
// known type), then each value in order:
//
//	count()                     long
//	sum(x)                      long for int and long x, decimal(38, s) for decimal(p, s) x, double for float and double x
//	min(x), max(x)              x's type (int widened to long, decimal(p, s) to decimal(38, s))
//	avg(x)                      decimal(38, max(s, 6)), rounded half away from zero (SQL Server's AVG)
//	first(x), last(x)           x's type, nullable
//	window_start, window_end    timestamp-millis
//
// A job without an aggregate writes its input, unchanged (the latest
// schema of its input, when the source reads the sink's format) or as
// a map step made it (each field typed by its expression). An
// expression whose type cannot be told (arithmetic on decimals, a
// function) refuses the derivation, naming it: give the sink a
// schema_file then.

// vkind is a value type, in no format yet.
type vkind uint8

const (
	vUnknown vkind = iota
	vLong
	vDouble
	vString
	vBool
	vDecimal
	vTimestamp
	vDate
	vBytes
	vAvro // a type of the input's Avro schema, copied as it is
)

type vtype struct {
	kind             vkind
	precision, scale int
	nullable         bool
	avro             avro.Schema // vAvro
}

// derivedField is one field of a derived record.
type derivedField struct {
	name string
	t    vtype
}

// derived is a derived record schema.
type derived struct {
	name   string // the record's name, from the topic
	fields []derivedField
	// passThrough: the input's own schema, as its text (not derived).
	passThrough string
}

// errUnderivable wraps a derivation that cannot be done.
var errUnderivable = errors.New("cannot derive the sink's schema")

// inputFields are the types of the input's top-level fields.
type inputFields struct {
	fields map[string]vtype
	// avro is the input's record schema, when it is Avro.
	avro avro.Schema
	// text is the input's schema text and its format.
	text   string
	format config.Format
	// known: the input's fields have known types (a schema format).
	known bool
}

// inputTypes reads the latest schema of the first schema-format source's
// first topic (<topic>-value).
func (s *Set) inputTypes(ctx context.Context) (inputFields, error) {
	in := inputFields{fields: map[string]vtype{}}
	for _, src := range s.cfg.Sources {
		if !src.Format.Registered() || len(src.Topics) == 0 {
			continue
		}
		subject := src.Topics[0] + "-value"
		var (
			latest sr.Schema
			refs   []sr.SubjectSchema
			logged bool
		)
		for {
			err := s.reg.do(ctx, "lookup", func(ctx context.Context) error {
				ss, err := s.reg.cl.SchemaByVersion(ctx, subject, -1)
				if err != nil {
					return err
				}
				refs = nil
				if err := s.reg.references(ctx, ss.Schema, map[string]bool{}, &refs); err != nil {
					return err
				}
				latest = ss.Schema
				return nil
			})
			if err == nil {
				break
			}
			if !notFound(err) {
				return in, fmt.Errorf("reading the schema of subject %s: %w", subject, err)
			}
			// Nothing was produced to the input yet: its schema is what
			// the sink's derives from, so wait for it.
			if !logged {
				s.log.Info("waiting for the input's schema to derive the sink's from: no schema under the subject yet", "subject", subject)
				logged = true
			}
			select {
			case <-ctx.Done():
				return in, ctx.Err()
			case <-time.After(time.Second):
			}
		}
		in.text, in.format, in.known = latest.Schema, src.Format, true
		if src.Format == config.FormatAvro {
			as, err := parseAvro(latest.Schema, refs)
			if err != nil {
				return in, fmt.Errorf("subject %s: %w", subject, err)
			}
			in.avro = as
			if rs, ok := deref(as).(*avro.RecordSchema); ok {
				for _, f := range rs.Fields() {
					in.fields[f.Name()] = avroVType(f.Type())
				}
			}
		}
		if src.Format == config.FormatProtobuf {
			fields, err := protoFields(latest.Schema, refs)
			if err != nil {
				return in, fmt.Errorf("subject %s: %w", subject, err)
			}
			in.fields = fields
		}
		if src.Format == config.FormatJSONSchema {
			in.fields = jsonFields(latest.Schema)
		}
		if src.Envelope == config.EnvelopeDebezium {
			// Expressions read after.x: the nested lookups find them.
			in.text = ""
		}
		return in, nil
	}
	return in, nil
}

// avroVType is the vtype of an Avro schema.
func avroVType(s avro.Schema) vtype {
	s = deref(s)
	switch s := s.(type) {
	case *avro.UnionSchema:
		types := s.Types()
		if len(types) == 2 && s.Nullable() {
			_, i := s.Indices()
			t := avroVType(types[i])
			t.nullable = true
			return t
		}
	case *avro.PrimitiveSchema:
		switch lt := logical(s); s.Type() {
		case avro.Long:
			switch lt {
			case avro.TimestampMillis, avro.TimestampMicros, avro.LocalTimestampMillis, avro.LocalTimestampMicros:
				return vtype{kind: vTimestamp}
			case "":
				return vtype{kind: vLong}
			}
		case avro.Int:
			switch lt {
			case avro.Date:
				return vtype{kind: vDate}
			case "":
				return vtype{kind: vLong}
			}
		case avro.Double, avro.Float:
			return vtype{kind: vDouble}
		case avro.String:
			return vtype{kind: vString}
		case avro.Boolean:
			return vtype{kind: vBool}
		case avro.Bytes:
			if dl, ok := s.Logical().(*avro.DecimalLogicalSchema); ok {
				return vtype{kind: vDecimal, precision: dl.Precision(), scale: dl.Scale()}
			}
			return vtype{kind: vBytes}
		}
	case *avro.FixedSchema:
		if dl, ok := s.Logical().(*avro.DecimalLogicalSchema); ok {
			return vtype{kind: vDecimal, precision: dl.Precision(), scale: dl.Scale()}
		}
	}
	return vtype{kind: vAvro, avro: s}
}

// fieldOf is the vtype of a (dotted) field path of the input.
func (in inputFields) fieldOf(path []string) vtype {
	t, ok := in.fields[path[0]]
	if !ok {
		return vtype{}
	}
	for _, p := range path[1:] {
		if t.kind != vAvro {
			return vtype{}
		}
		rs, ok := deref(t.avro).(*avro.RecordSchema)
		if !ok {
			return vtype{}
		}
		var found bool
		for _, f := range rs.Fields() {
			if f.Name() == p {
				nullable := t.nullable
				t, found = avroVType(f.Type()), true
				t.nullable = t.nullable || nullable
				break
			}
		}
		if !found {
			return vtype{}
		}
	}
	return t
}

// deriveFor derives the record sink k writes.
func (s *Set) deriveFor(ctx context.Context, k config.Sink, path string) (*derived, error) {
	in, err := s.inputTypes(ctx)
	if err != nil {
		return nil, err
	}
	env := func(p []string) vtype { return in.fieldOf(p) }
	d := &derived{name: recordName(k.Topic)}
	var (
		keyBy string
		agg   []config.AggregateValue
		win   bool
		maps  bool
	)
	for _, st := range s.cfg.Steps {
		switch st.Kind() {
		case config.StepKeyBy:
			keyBy = st.KeyBy
		case config.StepMap:
			maps = true
			fields := map[string]vtype{}
			var order []derivedField
			for _, f := range st.Map {
				t := exprType(f.Expr, env)
				fields[f.Name] = t
				order = append(order, derivedField{name: f.Name, t: t})
			}
			env = func(p []string) vtype {
				if len(p) == 1 {
					return fields[p[0]]
				}
				return vtype{}
			}
			d.fields = order
		case config.StepAggregate:
			agg = st.Aggregate.Values
		case config.StepWindow:
			agg, win = st.Window.Values, true
		}
	}
	if agg == nil {
		switch {
		case maps:
			for _, f := range d.fields {
				if f.t.kind == vUnknown {
					return nil, fmt.Errorf("%w for %s: the type of map field %q cannot be told from its expression; give %s.schema_file", errUnderivable, k.Topic, f.name, path)
				}
			}
			return d, nil
		case in.known && in.text != "" && in.format == k.Format:
			return &derived{name: d.name, passThrough: in.text}, nil
		}
		return nil, fmt.Errorf("%w for %s: the job writes its input, whose schema is not in %s; give %s.schema_file", errUnderivable, k.Topic, k.Format, path)
	}
	key := vtype{kind: vString}
	if t := exprType(keyBy, env); t.kind != vUnknown && t.kind != vAvro {
		key = t
		key.nullable = false
	}
	d.fields = []derivedField{{name: "key", t: key}}
	if win {
		d.fields = append(d.fields, derivedField{name: "window_start", t: vtype{kind: vTimestamp}}, derivedField{name: "window_end", t: vtype{kind: vTimestamp}})
	}
	for _, v := range agg {
		arg := exprType(v.Arg, env)
		t, err := aggregateType(v.Func, arg)
		if err != nil {
			return nil, fmt.Errorf("%w for %s: value %s, %s(%s): %v; give %s.schema_file", errUnderivable, k.Topic, v.Name, v.Func, v.Arg, err, path)
		}
		d.fields = append(d.fields, derivedField{name: v.Name, t: t})
	}
	return d, nil
}

// aggregateType is the output type of fn over arg.
func aggregateType(fn config.AggregateFunc, arg vtype) (vtype, error) {
	arg.nullable = false
	switch fn {
	case config.AggCount:
		return vtype{kind: vLong}, nil
	case config.AggAvg:
		switch arg.kind {
		case vLong, vDouble:
			return vtype{kind: vDecimal, precision: 38, scale: 6}, nil
		case vDecimal:
			return vtype{kind: vDecimal, precision: 38, scale: max(arg.scale, 6)}, nil
		}
	case config.AggSum, config.AggMin, config.AggMax:
		switch arg.kind {
		case vLong, vDouble:
			return arg, nil
		case vDecimal:
			return vtype{kind: vDecimal, precision: 38, scale: arg.scale}, nil
		}
	case config.AggFirst, config.AggLast:
		if arg.kind != vUnknown {
			arg.nullable = true
			return arg, nil
		}
	}
	if arg.kind == vUnknown {
		return vtype{}, errors.New("the argument's type cannot be told (it is not a field of the input's schema)")
	}
	return vtype{}, fmt.Errorf("%s of a %s", fn, arg.describe())
}

func (t vtype) describe() string {
	switch t.kind {
	case vString:
		return "string"
	case vBool:
		return "boolean"
	case vTimestamp:
		return "timestamp"
	case vDate:
		return "date"
	case vBytes:
		return "bytes"
	case vAvro:
		return string(t.avro.Type())
	}
	return "value"
}

// exprType is the type of an expression, or vUnknown.
func exprType(src string, env func([]string) vtype) vtype {
	if strings.TrimSpace(src) == "" {
		return vtype{}
	}
	tree, err := parser.Parse(src)
	if err != nil {
		return vtype{}
	}
	return nodeType(tree.Node, env)
}

func nodeType(n ast.Node, env func([]string) vtype) vtype {
	switch n := n.(type) {
	case *ast.IdentifierNode:
		switch n.Value {
		case "_key", "_topic":
			return vtype{kind: vString}
		case "_partition", "_offset":
			return vtype{kind: vLong}
		case "_timestamp":
			return vtype{kind: vTimestamp}
		}
		return env([]string{n.Value})
	case *ast.MemberNode:
		if p := memberPath(n); p != nil {
			return env(p)
		}
	case *ast.IntegerNode:
		return vtype{kind: vLong}
	case *ast.FloatNode:
		return vtype{kind: vDouble}
	case *ast.StringNode:
		return vtype{kind: vString}
	case *ast.BoolNode:
		return vtype{kind: vBool}
	case *ast.BuiltinNode:
		switch n.Name {
		case "float":
			return vtype{kind: vDouble}
		case "int", "len", "count":
			return vtype{kind: vLong}
		case "string", "upper", "lower", "trim", "join":
			return vtype{kind: vString}
		}
	case *ast.UnaryNode:
		t := nodeType(n.Node, env)
		switch n.Operator {
		case "!", "not":
			return vtype{kind: vBool}
		case "-", "+":
			if t.kind == vLong || t.kind == vDouble {
				return t
			}
		}
	case *ast.BinaryNode:
		switch n.Operator {
		case "==", "!=", "<", ">", "<=", ">=", "and", "or", "&&", "||", "in", "not in", "contains", "startsWith", "endsWith", "matches":
			return vtype{kind: vBool}
		case "??":
			t := nodeType(n.Left, env)
			t.nullable = false
			return t
		case "+", "-", "*", "%":
			l, r := nodeType(n.Left, env), nodeType(n.Right, env)
			switch {
			case l.kind == vLong && r.kind == vLong:
				return vtype{kind: vLong}
			case n.Operator == "+" && l.kind == vString && r.kind == vString:
				return vtype{kind: vString}
			case (l.kind == vDouble || l.kind == vLong) && (r.kind == vDouble || r.kind == vLong) && n.Operator != "%":
				return vtype{kind: vDouble}
			}
		case "/":
			l, r := nodeType(n.Left, env), nodeType(n.Right, env)
			if (l.kind == vDouble || l.kind == vLong) && (r.kind == vDouble || r.kind == vLong) {
				return vtype{kind: vDouble}
			}
		}
	case *ast.ConditionalNode:
		a, b := nodeType(n.Exp1, env), nodeType(n.Exp2, env)
		if a.kind == b.kind && a.kind != vUnknown && a.kind != vAvro {
			a.nullable = a.nullable || b.nullable
			return a
		}
	}
	return vtype{}
}

// memberPath is a.b.c as a path, or nil for any other member expression.
func memberPath(n *ast.MemberNode) []string {
	prop, ok := n.Property.(*ast.StringNode)
	if !ok {
		return nil
	}
	var base []string
	switch b := n.Node.(type) {
	case *ast.IdentifierNode:
		base = []string{b.Value}
	case *ast.MemberNode:
		base = memberPath(b)
	case *ast.ChainNode:
		if m, ok := b.Node.(*ast.MemberNode); ok {
			base = memberPath(m)
		}
	}
	if base == nil {
		return nil
	}
	return append(base, prop.Value)
}

// recordName makes an Avro name of a topic: letters, digits and _, not
// starting with a digit.
func recordName(topic string) string {
	var b strings.Builder
	for i, r := range topic {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r == '_':
			b.WriteRune(r)
		case r >= '0' && r <= '9':
			if i == 0 {
				b.WriteByte('_')
			}
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// derivedNamespace is the namespace of derived records.
const derivedNamespace = "eoflow.pipeline"

// text is d as a schema of format f.
func (d *derived) text(f config.Format) (string, error) {
	switch f {
	case config.FormatAvro:
		return d.avroText()
	case config.FormatProtobuf:
		return d.protoText()
	case config.FormatJSONSchema:
		return d.jsonSchemaText()
	}
	return "", fmt.Errorf("deriving a %s schema is not supported", f)
}

// avroText is d as an Avro schema.
func (d *derived) avroText() (string, error) {
	if d.passThrough != "" {
		return d.passThrough, nil
	}
	type field struct {
		Name    string           `json:"name"`
		Type    any              `json:"type"`
		Default *json.RawMessage `json:"default,omitempty"`
	}
	type record struct {
		Type      string  `json:"type"`
		Name      string  `json:"name"`
		Namespace string  `json:"namespace"`
		Fields    []field `json:"fields"`
	}
	null := json.RawMessage("null")
	rec := record{Type: "record", Name: d.name, Namespace: derivedNamespace}
	for _, f := range d.fields {
		t, err := f.t.avroJSON()
		if err != nil {
			return "", fmt.Errorf("field %s: %w", f.name, err)
		}
		fd := field{Name: f.name, Type: t}
		if f.t.nullable {
			fd.Default = &null
		}
		rec.Fields = append(rec.Fields, fd)
	}
	b, err := json.Marshal(rec)
	return string(b), err
}

// avroLogical is a logical type's schema, its keys in the usual order.
type avroLogical struct {
	Type        string `json:"type"`
	LogicalType string `json:"logicalType"`
	Precision   int    `json:"precision,omitempty"`
	Scale       *int   `json:"scale,omitempty"`
}

func (t vtype) avroJSON() (any, error) {
	var s any
	switch t.kind {
	case vLong:
		s = "long"
	case vDouble:
		s = "double"
	case vString:
		s = "string"
	case vBool:
		s = "boolean"
	case vBytes:
		s = "bytes"
	case vDecimal:
		if t.scale < 0 {
			return nil, errors.New("a Protobuf decimal's scale is in each value, not in its schema: an Avro decimal needs one")
		}
		scale := t.scale
		s = avroLogical{Type: "bytes", LogicalType: "decimal", Precision: t.precision, Scale: &scale}
	case vTimestamp:
		s = avroLogical{Type: "long", LogicalType: "timestamp-millis"}
	case vDate:
		s = avroLogical{Type: "int", LogicalType: "date"}
	case vAvro:
		b, err := json.Marshal(t.avro)
		if err != nil {
			return nil, err
		}
		s = json.RawMessage(b)
		if t.avro.Type() == avro.Union {
			return s, nil // null is a branch already, or cannot be one
		}
	default:
		return nil, errors.New("unknown type")
	}
	if t.nullable {
		return []any{"null", s}, nil
	}
	return s, nil
}
