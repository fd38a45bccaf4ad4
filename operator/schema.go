package operator

import (
	"encoding/base64"
	"slices"
	"time"
	"unsafe"

	"github.com/eoflow/pipeline/config"
)

// The schema registry formats (avro, protobuf, json_schema) meet the
// chain here, through two small interfaces that package schema
// implements: a SchemaDecoder per source turns a record's bytes into
// values of the domain, and a sink's encoder (package schema) reads them
// back through Record.Object. Neither side does I/O in this package: the
// runtime has the schemas of a poll's records fetched before it hands
// them to the chain (schema.Set.Prefetch), so a decoder only ever reads
// its cache.

// SchemaDecoder decodes values or keys of one source in a schema format,
// each with the writer schema its bytes name. Implementations are safe
// for concurrent use.
type SchemaDecoder interface {
	// DecodeObject decodes a record value, which must be a record
	// (object, message). A failure is a *RecordError with CodeSchema.
	DecodeObject(b []byte) (Decoded, *RecordError)
	// DecodeValue decodes a value of any type (a record key).
	DecodeValue(b []byte) (any, *RecordError)
}

// IntReader is what a SchemaDecoder may also do, for the chain's integer
// path (intpath.go): read a record value's string field key and integer
// fields straight from its bytes, without building values. groupKey
// aliases b. ok false declines (a field of another type, a schema it
// does not know, bytes that do not read): the general path then decodes
// the record, and alone explains any error.
type IntReader interface {
	ReadInts(b []byte, key string, fields []string, ints []int64) (groupKey []byte, ok bool)
}

// IntOutput writes the integer path's output, {key, values...}, in a
// sink's format instead of JSON (value i is vals[i], or null where bit i
// of has is clear): the one sink of a job whose output would otherwise
// be written as JSON only for the sink to read it back. ok false: it
// cannot (the JSON is written, and the sink encodes that). The bytes it
// writes are the sink's whole value, framing included, which the sink's
// encoder passes on as they are.
type IntOutput interface {
	AppendIntOutput(dst []byte, key string, vals []int64, has uint32) ([]byte, bool)
}

// SetIntOutput makes the integer path's outputs o's (see IntOutput). Call
// it before the first Clone; nil restores JSON.
func (a *Aggregator) SetIntOutput(o IntOutput) { a.layout.intOut = o }

// IntPathFields is the most integer fields the integer path reads.
const IntPathFields = maxSlots

// Input says how a source topic's records are decoded when that is not
// by Record.Format alone.
type Input struct {
	// Value decodes values in a schema format (nil: json or raw).
	Value SchemaDecoder
	// Key decodes keys (nil: the key is text, raw). JSONKey: the keys
	// are JSON values, decoded by the chain's own JSON decoder.
	Key     SchemaDecoder
	JSONKey bool
	// Debezium: the values are Debezium change events (see debezium.go).
	Debezium bool
}

// intReader is in's IntReader, when the integer path may read its
// records by it: values in a schema format, keys not decoded, no
// envelope.
func (in *Input) intReader() IntReader {
	if in.Key != nil || in.JSONKey || in.Debezium || in.Value == nil {
		return nil
	}
	ir, _ := in.Value.(IntReader)
	return ir
}

// readInts is intPath.read for a record of a schema format.
func (p *intPath) readSchema(ir IntReader, r *Record) bool {
	var ints [maxSlots]int64
	key, ok := ir.ReadInts(r.Value, p.key, p.fields, ints[:len(p.fields)])
	if !ok {
		return false
	}
	r.GroupKey, r.Keyed, r.keyKind = "", true, keyString
	if len(key) > 0 {
		r.GroupKey = unsafe.String(&key[0], len(key))
	}
	r.ints, r.intsRead = ints, true
	return true
}

// Decoded is a record value a SchemaDecoder decoded.
type Decoded struct {
	// Fields are its top-level fields, Order their names in the
	// schema's order (shared: never modified by the caller).
	Fields map[string]any
	Order  []string
	// Decimals: its schema has decimals, so some values may be Decimals.
	Decimals bool
}

// Inputs are the source topics' Inputs; a topic without one is read by
// Record.Format alone.
type Inputs map[string]*Input

// SetInputs tells the chain how to decode the records of topics read in
// a schema format, with a key format or an envelope. Call it before the
// first Clone.
func (c *Chain) SetInputs(in Inputs) {
	c.inputs = in
	c.dec.inputs = in
}

// usesInput reports whether r is read through an Input rather than by
// its Format alone (its value, key or envelope).
func (d *decoder) input(r *Record) *Input {
	if d.inputs == nil {
		return nil
	}
	return d.inputs[r.Topic]
}

// decodeInput decodes r through in: the key first (its failure is the
// record's), then the value.
func (r *Record) decodeInput(d *decoder, in *Input, step string, need *fieldSet) *RecordError {
	switch {
	case in.Key != nil && r.Key != nil:
		k, err := in.Key.DecodeValue(r.Key)
		if err != nil {
			return err.withStep(step)
		}
		r.key, r.keyDecoded, r.decimals = k, true, true
	case in.JSONKey && r.Key != nil:
		k, err := d.decodeValue(r.Key)
		if err != nil {
			return &RecordError{Step: step, Code: CodeDecode, Reason: "key: " + err.Error()}
		}
		r.key, r.keyDecoded = k, true
	}
	if in.Value == nil {
		if in.Debezium {
			return r.decodeDebezium(d, step)
		}
		return r.decodeFields(d, step, need)
	}
	if r.Value == nil && in.Debezium {
		// Debezium's tombstone after a delete: the delete itself
		// already became one.
		r.fields, r.decoded, r.skip = map[string]any{}, true, true
		return nil
	}
	dec, err := in.Value.DecodeObject(r.Value)
	if err != nil {
		return err.withStep(step)
	}
	r.fields, r.order, r.decoded, r.decimals = dec.Fields, dec.Order, true, dec.Decimals
	if in.Debezium {
		return r.debezium(step)
	}
	return nil
}

// Object is the record's value as an encoder of an output format reads
// it: the fields (a map step's object, a decoded input's fields) and
// their order (nil: none in particular). ok false: the value is not an
// object (a raw record unchanged), or it is a Debezium delete (written
// as a tombstone). The map belongs to the record; read it only.
func (r *Record) Object() (fields map[string]any, order []string, ok bool) {
	if r.tombstone && !r.changed {
		return nil, nil, false
	}
	if !r.decoded || (r.Format == config.FormatRaw && !r.changed) {
		return nil, nil, false
	}
	if r.inSlots || r.partial != nil {
		if err := r.decodeAll("sink"); err != nil {
			return nil, nil, false
		}
		r.env(nil)
	}
	return r.fields, r.order, true
}

// Tombstone reports whether the record, unchanged, is written as a
// tombstone (no value): a Debezium delete.
func (r *Record) Tombstone() bool { return r.tombstone && !r.changed }

// appendSchemaValue appends the JSON of a value decoded from a schema
// format: the domain's values, and a time as RFC 3339 text in UTC, bytes
// as base64 (as encoding/json writes []byte), a duration as its Go text.
func appendSchemaValue(dst []byte, v any) []byte {
	switch x := v.(type) {
	case time.Time:
		return appendString(dst, x.UTC().Format(time.RFC3339Nano))
	case []byte:
		return appendString(dst, base64.StdEncoding.EncodeToString(x))
	case time.Duration:
		return appendString(dst, x.String())
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendSchemaValue(dst, e)
		}
		return append(dst, ']')
	case map[string]any:
		if canonical(x) {
			return appendValue(dst, x)
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, k)
			dst = append(dst, ':')
			dst = appendSchemaValue(dst, x[k])
		}
		return append(dst, '}')
	}
	if canonical(v) {
		return appendValue(dst, v)
	}
	n, err := normalize(v)
	if err != nil {
		return append(dst, "null"...)
	}
	return appendValue(dst, n)
}

// isJSON reports whether f is json (also the zero Format).
func isJSON(f config.Format) bool { return f == config.FormatJSON || f == "" }
