package schema

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/metrics"
	"github.com/eoflow/pipeline/operator"
)

// Set is one job's use of schemas: the decoders of its sources (as
// operator.Inputs), the encoders of its sinks, and the Registry both
// share. New builds it without connecting; Prefetch and Prepare are where
// it talks to the registry.
type Set struct {
	cfg    *config.Config
	reg    *Registry
	log    *slog.Logger
	inputs operator.Inputs
	// framed are the topics whose values (framed.value) or keys carry a
	// schema id, for Prefetch.
	framed map[string]framing
	// sinks are the encoders, by index of cfg.Sinks (nil: json or raw).
	sinks []*Sink
	// tables are the decoders of the tables in a schema format, by id.
	tables map[string]tableDecoders
}

// tableDecoders decode one table's values and keys (nil: json or raw).
type tableDecoders struct{ value, key operator.SchemaDecoder }

type framing struct{ value, key bool }

// Uses reports whether cfg needs a Set: a schema format anywhere, a key
// format or an envelope.
func Uses(cfg *config.Config) bool {
	for _, s := range cfg.Sources {
		if s.Format.Registered() || s.KeyFormat.Registered() || s.KeyFormat == config.FormatJSON || s.Envelope == config.EnvelopeDebezium {
			return true
		}
	}
	for _, s := range cfg.Sinks {
		if s.Format.Registered() {
			return true
		}
	}
	for _, t := range cfg.Tables {
		if t.Format.Registered() || t.KeyFormat.Registered() {
			return true
		}
	}
	return false
}

// New builds the Set of cfg, or nil when cfg needs none (Uses).
func New(cfg *config.Config, log *slog.Logger, m *metrics.Metrics) (*Set, error) {
	if !Uses(cfg) {
		return nil, nil
	}
	s := &Set{cfg: cfg, log: log, inputs: operator.Inputs{}, framed: map[string]framing{}, sinks: make([]*Sink, len(cfg.Sinks))}
	if cfg.SchemaRegistry.Enabled() {
		reg, err := NewRegistry(cfg.SchemaRegistry, log, m)
		if err != nil {
			return nil, err
		}
		s.reg = reg
	}
	for _, src := range cfg.Sources {
		in := &operator.Input{Debezium: src.Envelope == config.EnvelopeDebezium, JSONKey: src.KeyFormat == config.FormatJSON}
		if src.Format.Registered() {
			in.Value = &decoder{reg: s.reg, format: src.Format, what: "value"}
		}
		if src.KeyFormat.Registered() {
			in.Key = &decoder{reg: s.reg, format: src.KeyFormat, what: "key"}
		}
		if in.Value == nil && in.Key == nil && !in.Debezium && !in.JSONKey {
			continue
		}
		for _, t := range src.Topics {
			s.inputs[t] = in
			s.framed[t] = framing{value: src.Format.Registered(), key: src.KeyFormat.Registered()}
		}
	}
	for i, k := range cfg.Sinks {
		if k.Format.Registered() {
			s.sinks[i] = &Sink{set: s, index: i, cfg: k}
		}
	}
	for _, t := range cfg.Tables {
		var td tableDecoders
		if t.Format.Registered() {
			td.value = &decoder{reg: s.reg, format: t.Format, what: "value", reader: "table"}
		}
		if t.KeyFormat.Registered() {
			td.key = &decoder{reg: s.reg, format: t.KeyFormat, what: "key", reader: "table"}
		}
		if td.value == nil && td.key == nil {
			continue
		}
		if s.tables == nil {
			s.tables = map[string]tableDecoders{}
		}
		s.tables[t.ID] = td
		s.framed[t.Topic] = framing{value: td.value != nil, key: td.key != nil}
	}
	return s, nil
}

// Table returns the decoders of table id's values and keys in a schema
// format (nil: that side is json or raw, or s is nil). Records of its
// topic go through Prefetch before they are decoded, as a source's do.
func (s *Set) Table(id string) (value, key operator.SchemaDecoder) {
	if s == nil {
		return nil, nil
	}
	td := s.tables[id]
	return td.value, td.key
}

// Registry is the Set's registry client (nil without schema_registry).
func (s *Set) Registry() *Registry { return s.reg }

// Inputs are the decoders of the sources, for operator.Chain.SetInputs.
func (s *Set) Inputs() operator.Inputs { return s.inputs }

// Sink is the encoder of cfg.Sinks[i], nil for a json or raw sink.
func (s *Set) Sink(i int) *Sink { return s.sinks[i] }

// Prefetch makes sure every schema id that recs name is in the cache, so
// that decoding them needs no request. Ids the registry does not have are
// cached as such (their records become dead letters). It returns nil, or
// ErrUnavailable (wrapped) when the registry gave no answer: call it again
// later (the records wait; they are not decoded meanwhile), or ctx's
// error.
func (s *Set) Prefetch(ctx context.Context, recs []*kgo.Record) error {
	if s == nil || s.reg == nil || len(s.framed) == 0 {
		return nil
	}
	last := -1 // most records of a poll name the same id
	for _, rec := range recs {
		f, ok := s.framed[rec.Topic]
		if !ok {
			continue
		}
		for _, b := range [2][]byte{valueIf(f.value, rec.Value), valueIf(f.key, rec.Key)} {
			id, ok := schemaID(b)
			if !ok || id == last {
				continue
			}
			last = id
			if err := s.reg.fetch(ctx, id); err != nil {
				return err
			}
		}
	}
	return nil
}

func valueIf(ok bool, b []byte) []byte {
	if ok {
		return b
	}
	return nil
}

// header reads and writes the Confluent framing.
var header sr.ConfluentHeader

// schemaID is the schema id of framed bytes, if they are framed.
func schemaID(b []byte) (int, bool) {
	id, _, err := header.DecodeID(b)
	return id, err == nil
}

// decoder is an operator.SchemaDecoder over the Registry's cache.
type decoder struct {
	reg    *Registry
	format config.Format
	what   string // "value" or "key", for messages
	reader string // "table", or "" for a source, for messages
}

var _ operator.SchemaDecoder = (*decoder)(nil)

// entry finds the compiled schema of b's id, and the bytes after the
// framing.
func (d *decoder) entry(b []byte) (*entry, []byte, *operator.RecordError) {
	id, rest, err := header.DecodeID(b)
	if err != nil {
		return nil, nil, &operator.RecordError{Code: operator.CodeSchema, Reason: fmt.Sprintf("%s is not in the Confluent wire format (a 0 byte and a 4-byte schema id, then the %s data): %s", d.what, d.format, describeBytes(b))}
	}
	e := d.reg.cached(id)
	if e == nil {
		// Unreachable: Prefetch fetched every id of the poll.
		return nil, nil, &operator.RecordError{Code: operator.CodeSchema, SchemaID: id, Reason: fmt.Sprintf("schema id %d was not fetched", id)}
	}
	if e.err != nil {
		return nil, nil, &operator.RecordError{Code: operator.CodeSchema, SchemaID: id, Reason: e.err.Error()}
	}
	if want := formatType(d.format); e.schema.Type != want {
		return nil, nil, &operator.RecordError{Code: operator.CodeSchema, SchemaID: id, Reason: fmt.Sprintf("schema id %d is a %s schema, but the %s reads %s", id, e.schema.Type, cmp.Or(d.reader, "source"), d.format)}
	}
	return e, rest, nil
}

func (d *decoder) DecodeObject(b []byte) (operator.Decoded, *operator.RecordError) {
	e, rest, rerr := d.entry(b)
	if rerr != nil {
		return operator.Decoded{}, rerr
	}
	var (
		out operator.Decoded
		err error
	)
	switch d.format {
	case config.FormatAvro:
		out.Fields, err = e.avro.decodeObject(rest)
		out.Order, out.Decimals = e.avro.fields, e.avro.decimals
	case config.FormatProtobuf:
		out.Fields, out.Order, err = e.proto.decode(rest)
		out.Decimals = e.proto.decimals
	case config.FormatJSONSchema:
		out.Fields, out.Order, err = e.json.decode(rest)
	}
	if err != nil {
		return operator.Decoded{}, &operator.RecordError{Code: operator.CodeSchema, SchemaID: e.id, Reason: fmt.Sprintf("%s of schema id %d: %v", d.what, e.id, err)}
	}
	return out, nil
}

func (d *decoder) DecodeValue(b []byte) (any, *operator.RecordError) {
	e, rest, rerr := d.entry(b)
	if rerr != nil {
		return nil, rerr
	}
	var (
		v   any
		err error
	)
	switch d.format {
	case config.FormatAvro:
		v, err = e.avro.decodeValue(rest)
	case config.FormatProtobuf:
		v, err = e.proto.decodeValue(rest)
	case config.FormatJSONSchema:
		v, err = e.json.decodeValue(rest)
	}
	if err != nil {
		return nil, &operator.RecordError{Code: operator.CodeSchema, SchemaID: e.id, Reason: fmt.Sprintf("%s of schema id %d: %v", d.what, e.id, err)}
	}
	return v, nil
}

// formatType is the registry's schema type of a format.
func formatType(f config.Format) sr.SchemaType {
	switch f {
	case config.FormatProtobuf:
		return sr.TypeProtobuf
	case config.FormatJSONSchema:
		return sr.TypeJSON
	}
	return sr.TypeAvro
}

// describeBytes names the start of b for an error.
func describeBytes(b []byte) string {
	switch {
	case len(b) == 0:
		return "it is empty"
	case len(b) < 5:
		return fmt.Sprintf("it has only %d bytes", len(b))
	}
	return fmt.Sprintf("it starts with byte 0x%02x", b[0])
}

// Unavailable reports whether err means the registry gave no answer.
func Unavailable(err error) bool { return errors.Is(err, ErrUnavailable) }
