package schema

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/operator"
)

// ErrRefused wraps a sink schema the registry refused, or one that cannot
// be had (not derivable, not registered with auto_register off): the
// job cannot start, and restarting cannot help.
var ErrRefused = errors.New("the sink's schema was refused")

// Sink writes one sink's values in a schema format: the framing (the
// schema id the sink registered or looked up) and the encoding. Prepare
// gives it its schema; then it is read-only and safe for concurrent use.
type Sink struct {
	set   *Set
	index int
	cfg   config.Sink

	id      int
	subject string
	text    string
	avro    *avroWriter
	fast    *fastPlan // the one-pass JSON to Avro (avrofast.go), nil when not plain
	proto   *protoWriter
	json    *jsonFile
	// round are the fields written with avg: a decimal rounded to the
	// schema's scale, half away from zero, rather than refused.
	round map[string]bool
}

// Prepare gives every schema sink its schema, before the job writes
// anything: the derived one, schema_file's or the registered
// subject+version, registered under its subject unless auto_register is
// false, after the registry checked it is compatible with the subject's
// latest. While the registry gives no answer it waits (ctx ends the
// wait). An error wrapping ErrRefused means the job cannot start.
func (s *Set) Prepare(ctx context.Context) error {
	if s == nil {
		return nil
	}
	for _, k := range s.sinks {
		if k == nil {
			continue
		}
		if err := k.prepare(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (k *Sink) path() string { return fmt.Sprintf("sinks[%d]", k.index) }

func (k *Sink) prepare(ctx context.Context) error {
	reg := k.set.reg
	k.round = map[string]bool{}
	for _, st := range k.set.cfg.Steps {
		vals := []config.AggregateValue(nil)
		if st.Aggregate != nil {
			vals = st.Aggregate.Values
		}
		if st.Window != nil {
			vals = st.Window.Values
		}
		for _, v := range vals {
			if v.Func == config.AggAvg {
				k.round[v.Name] = true
			}
		}
	}
	typ := formatType(k.cfg.Format)
	switch {
	case k.cfg.Subject != "":
		version := k.cfg.Version
		if version == 0 {
			version = -1
		}
		var ss sr.SubjectSchema
		err := reg.do(ctx, "lookup", func(ctx context.Context) (err error) {
			ss, err = reg.cl.SchemaByVersion(ctx, k.cfg.Subject, version)
			return err
		})
		if err != nil {
			return fmt.Errorf("%w: %s: subject %s version %s: %w", ErrRefused, k.path(), k.cfg.Subject, versionText(k.cfg.Version), err)
		}
		if ss.Type != typ {
			return fmt.Errorf("%w: %s: subject %s holds a %s schema, the sink writes %s", ErrRefused, k.path(), k.cfg.Subject, ss.Type, k.cfg.Format)
		}
		k.id, k.subject, k.text = ss.ID, ss.Subject, ss.Schema.Schema
		return k.compile(ctx, ss.Schema)
	case k.cfg.SchemaFile != "":
		b, err := os.ReadFile(k.cfg.SchemaFile)
		if err != nil {
			return fmt.Errorf("%w: %s.schema_file: %w", ErrRefused, k.path(), err)
		}
		k.text = string(b)
	default:
		d, err := k.set.deriveFor(ctx, k.cfg, k.path())
		if err != nil {
			if errors.Is(err, errUnderivable) {
				return fmt.Errorf("%w: %w", ErrRefused, err)
			}
			return err
		}
		if k.text, err = d.text(k.cfg.Format); err != nil {
			return fmt.Errorf("%w: %s: the derived schema: %w", ErrRefused, k.path(), err)
		}
	}
	schema := sr.Schema{Schema: k.text, Type: typ}
	if err := k.compile(ctx, schema); err != nil {
		return err
	}
	subject, err := k.subjectName()
	if err != nil {
		return err
	}
	k.subject = subject
	if !k.cfg.AutoRegister {
		var ss sr.SubjectSchema
		err := reg.do(ctx, "lookup", func(ctx context.Context) (err error) {
			ss, err = reg.cl.LookupSchema(ctx, subject, schema)
			return err
		})
		if err != nil {
			if notFound(err) {
				return fmt.Errorf("%w: %s: the schema is not registered under subject %s, and auto_register is false: register it, or set auto_register: true\n%s", ErrRefused, k.path(), subject, k.text)
			}
			return fmt.Errorf("%w: %s: looking the schema up under subject %s: %w", ErrRefused, k.path(), subject, err)
		}
		k.id = ss.ID
		k.set.log.Info("sink schema found", "sink", k.path(), "topic", k.cfg.Topic, "subject", subject, "id", k.id)
		return nil
	}
	var compat sr.CheckCompatibilityResult
	err = reg.do(ctx, "lookup", func(ctx context.Context) (err error) {
		compat, err = reg.cl.CheckCompatibility(sr.WithParams(ctx, sr.Verbose), subject, -1, schema)
		return err
	})
	switch {
	case err != nil && notFound(err):
		// A new subject: nothing to be compatible with.
	case err != nil:
		return fmt.Errorf("%w: %s: checking the schema's compatibility under subject %s: %w", ErrRefused, k.path(), subject, err)
	case !compat.Is:
		reason := strings.Join(compat.Messages, "; ")
		if reason == "" {
			reason = "the registry gave no reason"
		}
		return fmt.Errorf("%w: %s: the schema the job writes is incompatible with the latest of subject %s under its compatibility level; nothing was written. The registry says: %s\nthe schema:\n%s",
			ErrRefused, k.path(), subject, reason, k.text)
	}
	err = reg.do(ctx, "register", func(ctx context.Context) (err error) {
		k.id, err = reg.cl.RegisterSchema(ctx, subject, schema, -1, -1)
		return err
	})
	if err != nil {
		return fmt.Errorf("%w: %s: registering the schema under subject %s: %w", ErrRefused, k.path(), subject, err)
	}
	k.set.log.Info("sink schema registered", "sink", k.path(), "topic", k.cfg.Topic, "subject", subject, "id", k.id)
	return nil
}

func versionText(v int) string {
	if v == 0 {
		return "latest"
	}
	return fmt.Sprint(v)
}

// compile compiles the sink's schema for writing.
func (k *Sink) compile(ctx context.Context, s sr.Schema) error {
	var refs []sr.SubjectSchema
	if len(s.References) > 0 {
		if err := k.set.reg.do(ctx, "lookup", func(ctx context.Context) error {
			refs = nil
			return k.set.reg.references(ctx, s, map[string]bool{}, &refs)
		}); err != nil {
			return fmt.Errorf("%w: %s: the schema's references: %w", ErrRefused, k.path(), err)
		}
	}
	switch k.cfg.Format {
	case config.FormatAvro:
		as, err := parseAvro(s.Schema, refs)
		if err != nil {
			return fmt.Errorf("%w: %s: the schema: %w", ErrRefused, k.path(), err)
		}
		if _, ok := deref(as).(*avro.RecordSchema); !ok {
			return fmt.Errorf("%w: %s: the schema is a %s, not a record: the job writes objects", ErrRefused, k.path(), as.Type())
		}
		aw, err := compileAvroWriter(as)
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrRefused, k.path(), err)
		}
		k.avro, k.fast = aw, compileFast(aw)
		return nil
	case config.FormatProtobuf:
		pf, err := compileProto(s.Schema, refs)
		if err != nil {
			return fmt.Errorf("%w: %s: the schema: %w", ErrRefused, k.path(), err)
		}
		if k.proto, err = pf.writer(); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrRefused, k.path(), err)
		}
		return nil
	case config.FormatJSONSchema:
		jf, err := compileJSONSchema(s.Schema, refs)
		if err != nil {
			return fmt.Errorf("%w: %s: the schema: %w", ErrRefused, k.path(), err)
		}
		k.json = jf
		return nil
	}
	return fmt.Errorf("%w: %s: format %s is not written by this build", ErrRefused, k.path(), k.cfg.Format)
}

// subjectName is the subject of the sink's schema.
func (k *Sink) subjectName() (string, error) {
	if k.cfg.SubjectStrategy != config.RecordNameStrategy {
		return k.cfg.Topic + "-value", nil
	}
	switch k.cfg.Format {
	case config.FormatAvro:
		if rs, ok := deref(k.avro.schema).(*avro.RecordSchema); ok {
			return rs.FullName(), nil
		}
	case config.FormatProtobuf:
		return string(k.proto.md.FullName()), nil
	case config.FormatJSONSchema:
		if t := jsonTitle(k.text); t != "" {
			return t, nil
		}
	}
	return "", fmt.Errorf("%w: %s: subject_strategy record_name needs a named record (for JSON Schema, a title)", ErrRefused, k.path())
}

// ID is the schema id the sink writes with (after Prepare).
func (k *Sink) ID() int { return k.id }

// Subject is the subject of the sink's schema (after Prepare).
func (k *Sink) Subject() string { return k.subject }

// Text is the sink's schema (after Prepare).
func (k *Sink) Text() string { return k.text }

// AppendRecord appends the framed encoding of r's value: a record of a
// schema format, or one a map step built, or JSON (the value must be an
// object). A Debezium delete appends nothing (a tombstone).
func (k *Sink) AppendRecord(dst []byte, r *operator.Record) ([]byte, *operator.RecordError) {
	if r.Tombstone() {
		return dst, nil
	}
	if k.json != nil {
		js, rerr := r.AppendValue(nil, config.FormatJSON)
		if rerr != nil {
			return dst, rerr
		}
		return k.AppendJSON(dst, js)
	}
	fields, _, ok := r.Object()
	if !ok {
		// A raw or undecoded JSON value: its JSON, read exactly.
		js, rerr := r.AppendValue(nil, config.FormatJSON)
		if rerr != nil {
			return dst, rerr
		}
		return k.AppendJSON(dst, js)
	}
	return k.appendFields(dst, fields)
}

// AppendJSON appends the framed encoding of js, a JSON object the job
// wrote (an aggregate's or a window's output), its numbers read exactly.
//
// js may also be this sink's value already (its IntOutput wrote it: it
// starts with the framing's 0 byte, as no JSON text does): it is
// appended as it is.
func (k *Sink) AppendJSON(dst []byte, js []byte) ([]byte, *operator.RecordError) {
	if len(js) > 0 && js[0] == 0 {
		return append(dst, js...), nil
	}
	if k.json != nil {
		if err := k.json.validate(js); err != nil {
			return dst, k.fitError(err)
		}
		dst, _ = header.AppendEncode(dst, k.id, nil)
		return append(dst, js...), nil
	}
	if k.fast != nil {
		framed, _ := header.AppendEncode(dst, k.id, nil)
		if out, ok := k.fast.append(framed, js); ok {
			return out, nil
		}
	}
	fields, err := operator.DecodeJSONObjectExact(js)
	if err != nil {
		return dst, &operator.RecordError{Step: "sinks", Code: operator.CodeSchema, Reason: fmt.Sprintf("%s: the value is not a JSON object for schema id %d: %v", k.path(), k.id, err)}
	}
	return k.appendFields(dst, fields)
}

func (k *Sink) appendFields(dst []byte, fields map[string]any) ([]byte, *operator.RecordError) {
	for name := range k.round {
		if d, ok := operator.DecimalValue(fields[name]); ok && fields[name] != nil {
			if scale, ok := k.decimalScale(name); ok {
				fields[name] = d.Round(scale)
			}
		}
	}
	start := len(dst)
	dst, _ = header.AppendEncode(dst, k.id, nil)
	var err error
	switch k.cfg.Format {
	case config.FormatAvro:
		dst, err = k.avro.appendObject(dst, fields)
	case config.FormatProtobuf:
		dst, err = k.proto.appendObject(dst, fields)
	}
	if err != nil {
		return dst[:start], k.fitError(err)
	}
	return dst, nil
}

// fitError is an output that does not fit the sink's schema.
func (k *Sink) fitError(err error) *operator.RecordError {
	return &operator.RecordError{Step: "sinks", Code: operator.CodeSchema, SchemaID: k.id,
		Reason: fmt.Sprintf("%s: the output does not fit schema id %d of subject %s: %v", k.path(), k.id, k.subject, err)}
}

// decimalScale is the scale of field name when the schema writes it as
// a decimal.
func (k *Sink) decimalScale(name string) (int, bool) {
	if k.proto != nil {
		// A decimal written as text or a Decimal message keeps its
		// scale: avg's 15 digits are written as computed.
		return 0, false
	}
	if k.avro == nil {
		return 0, false
	}
	i := slices.IndexFunc(k.avro.fields, func(f *avro.Field) bool { return f.Name() == name })
	if i < 0 {
		return 0, false
	}
	t := deref(k.avro.fields[i].Type())
	if u, ok := t.(*avro.UnionSchema); ok && u.Nullable() {
		_, j := u.Indices()
		t = deref(u.Types()[j])
	}
	if ls, ok := t.(avro.LogicalTypeSchema); ok && ls.Logical() != nil {
		if dl, ok := ls.Logical().(*avro.DecimalLogicalSchema); ok {
			return dl.Scale(), true
		}
	}
	return 0, false
}
