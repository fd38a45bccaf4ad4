package operator

import (
	"bytes"
	"sync"
	"sync/atomic"

	"github.com/eoflow/pipeline/config"
)

// Table is a table's state: the latest value of each record key of its
// topic, a tombstone (a null value) deleting the key. It is what join
// steps look records up in.
//
// One goroutine applies the topic's records (Apply, in offset order per
// partition); any number look keys up meanwhile (Lookup), each seeing
// every Apply that returned before it. A value is checked when applied
// (one that does not decode is refused and the key keeps its value) and
// kept as its bytes, as read (tablestore.go); a lookup decodes it, so
// that a table costs the memory of its bytes rather than that of decoded
// Go values, and every lookup gets a value of its own.
type Table struct {
	id     string
	format config.Format
	// jsonKey: the record keys are JSON values, looked up by their text.
	jsonKey bool
	store   tableStore
	// keys and bytes are the table's size: how many keys it holds, and
	// the bytes of their keys and values as read from the topic.
	keys, bytes atomic.Int64
	// dec decodes JSON for Apply (one goroutine applies).
	dec decoder
	// value and key decode a schema registry format (nil: json or raw);
	// decimals: the values may hold Decimals (a schema format), so a
	// record that meets one runs its decimal programs.
	value, key SchemaDecoder
	decimals   bool
}

// NewTable is an empty table of cfg. A schema registry format needs its
// decoder (SetDecoders) before the first Apply.
func NewTable(cfg config.Table) *Table {
	t := &Table{id: cfg.ID, format: cfg.Format, jsonKey: cfg.KeyFormat == config.FormatJSON}
	t.initStore()
	return t
}

// SetDecoders gives the table the decoders of its schema registry
// formats: value for its values, key for its keys (nil: that side is
// json or raw). Call it before the first Apply.
func (t *Table) SetDecoders(value, key SchemaDecoder) {
	t.value, t.key = value, key
	t.decimals = value != nil || key != nil
}

// ID is the table's id.
func (t *Table) ID() string { return t.id }

// Len is how many keys the table holds.
func (t *Table) Len() int64 { return t.keys.Load() }

// Bytes is the size of the keys and values the table holds, as read from
// its topic.
func (t *Table) Bytes() int64 { return t.bytes.Load() }

// SkipReason says why Apply could not apply a record of the table's
// topic. The values are stable metric labels.
type SkipReason string

const (
	// SkipNoKey: the record has no key (a table is keyed).
	SkipNoKey SkipReason = "no_key"
	// SkipKey: the key does not decode, or is not a string, number or
	// bool (key_format json or a schema format).
	SkipKey SkipReason = "key"
	// SkipDecode: the value does not decode as JSON; the key keeps the
	// value it had.
	SkipDecode SkipReason = "decode"
	// SkipSchema: the value does not decode with the writer schema its
	// bytes name (or names none the registry has).
	SkipSchema SkipReason = "schema"
)

// SkipReasons lists every SkipReason, for pre-registering metric labels.
func SkipReasons() []SkipReason { return []SkipReason{SkipNoKey, SkipKey, SkipDecode, SkipSchema} }

// Apply applies one record of the table's topic: value nil deletes key,
// anything else becomes its latest value. A record it cannot apply
// changes nothing and is reported with the reason and the error a dead
// letter carries (its code: decode, schema or type; no step: the caller
// names the table); skip "" means it was applied.
//
// A schema registry format reads only the decoders' cache: the caller
// fetches the schemas a record names first (schema.Set.Prefetch).
func (t *Table) Apply(key, value []byte) (skip SkipReason, rerr *RecordError) {
	k, skip, rerr := t.decodeKey(&t.dec, key)
	if skip != "" {
		return skip, rerr
	}
	if value == nil {
		if old, had := t.store.delete(k); had {
			t.keys.Add(-1)
			t.bytes.Add(-int64(old))
		}
		return "", nil
	}
	if skip, rerr := t.check(&t.dec, value); skip != "" {
		return skip, rerr
	}
	size := len(key) + len(value)
	old, had := t.store.put(k, value, size)
	if !had {
		t.keys.Add(1)
	}
	t.bytes.Add(int64(size - old))
	return "", nil
}

// Check reports what Apply would of a record, without applying it: the
// reason it cannot be applied and its error (skip "" if it can). A table
// kept across a rebalance tells with it the dead letters of records it
// applied while another process was on duty for them.
func (t *Table) Check(key, value []byte) (skip SkipReason, rerr *RecordError) {
	if _, skip, rerr := t.decodeKey(&t.dec, key); skip != "" {
		return skip, rerr
	}
	if value == nil {
		return "", nil
	}
	return t.check(&t.dec, value)
}

// check checks that a record value of the table's topic decodes, with
// dec for JSON, without keeping what it decodes to.
func (t *Table) check(dec *decoder, value []byte) (SkipReason, *RecordError) {
	switch {
	case t.format == config.FormatRaw && t.value == nil:
		return "", nil
	case t.value == nil:
		// JSON: the scanner's fast skip accepts exactly what it decodes
		// (skip.go); what it does not take is decoded, for the error.
		var spaced bool
		if end, _, ok := skipFast(value, 0, maxDepth); ok && skipSpaces(value, end, &spaced) == len(value) {
			return "", nil
		}
	}
	if _, err := t.decodeWith(dec, value); err != nil {
		if t.value != nil {
			return SkipSchema, err
		}
		return SkipDecode, err
	}
	return "", nil
}

// decodeRecord decodes a record of the table's topic, with dec for JSON:
// the text its key is looked up by, and its value (nil for a tombstone,
// value nil). skip "" means it decoded; otherwise rerr says why not.
func (t *Table) decodeRecord(dec *decoder, key, value []byte) (k string, v any, skip SkipReason, rerr *RecordError) {
	k, skip, rerr = t.decodeKey(dec, key)
	if skip != "" || value == nil {
		return k, nil, skip, rerr
	}
	v, err := t.decodeWith(dec, value)
	if err != nil {
		if t.value != nil {
			return "", nil, SkipSchema, err
		}
		return "", nil, SkipDecode, err
	}
	return k, v, "", nil
}

// decodeKey decodes the key of a record of the table's topic, with dec
// for JSON, to the text it is looked up by.
func (t *Table) decodeKey(dec *decoder, key []byte) (k string, skip SkipReason, rerr *RecordError) {
	if key == nil {
		return "", SkipNoKey, &RecordError{Code: CodeDecode, Reason: "the record has no key: a table is keyed by its records' keys"}
	}
	var kv any
	switch {
	case t.key != nil:
		v, err := t.key.DecodeValue(key)
		if err != nil {
			return "", SkipKey, err
		}
		kv = v
	case t.jsonKey:
		v, err := dec.decodeValue(key)
		if err != nil {
			return "", SkipKey, &RecordError{Code: CodeDecode, Reason: "key: the key is not JSON: " + err.Error()}
		}
		kv = v
	default:
		return string(key), "", nil
	}
	s, kerr := KeyString(kv)
	if kerr != nil {
		return "", SkipKey, kerr
	}
	return s, "", nil
}

// decodeWith decodes a record value of the table's topic in its format,
// JSON with dec.
func (t *Table) decodeWith(dec *decoder, value []byte) (any, *RecordError) {
	switch {
	case t.value != nil:
		return t.value.DecodeValue(value)
	case t.format == config.FormatRaw:
		return string(value), nil
	}
	v, err := dec.decodeValue(value)
	if err != nil {
		return nil, &RecordError{Code: CodeDecode, Reason: "the value is not JSON: " + err.Error()}
	}
	return v, nil
}

// Lookup returns the latest value of key, decoded, and whether the table
// holds one. The value is the caller's.
func (t *Table) Lookup(key string) (any, bool) {
	dec := lookupDecoders.Get().(*decoder)
	v, ok, _ := t.lookup(dec, key)
	lookupDecoders.Put(dec)
	return v, ok
}

// lookupDecoders decode for Lookup; a join decodes with its chain's.
var lookupDecoders = sync.Pool{New: func() any { return new(decoder) }}

// lookup is Lookup decoding JSON with dec. An error is a value that
// decoded when applied and does not now: it does not happen.
func (t *Table) lookup(dec *decoder, key string) (any, bool, *RecordError) {
	sh, h := t.store.hash(key)
	sh.mu.RLock()
	b, ok := sh.m.get(h, key)
	if !ok {
		sh.mu.RUnlock()
		return nil, false, nil
	}
	switch {
	case t.value != nil:
		// A schema decoder may keep parts of its input (bytes fields):
		// it gets a copy of its own, decoded outside the lock.
		b = bytes.Clone(b)
		sh.mu.RUnlock()
		v, err := t.value.DecodeValue(b)
		return v, err == nil, err
	case t.format == config.FormatRaw:
		v := string(b)
		sh.mu.RUnlock()
		return v, true, nil
	}
	// The JSON decoder copies what it keeps: it reads b in place, under
	// the lock that keeps b from changing.
	v, err := dec.decodeValue(b)
	sh.mu.RUnlock()
	if err != nil {
		return nil, false, &RecordError{Code: CodeDecode, Reason: "table " + t.id + ": the value is not JSON: " + err.Error()}
	}
	return v, true, nil
}
