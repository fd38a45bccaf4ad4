package operator

import (
	"hash/maphash"
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
// every Apply that returned before it. The values are decoded once, when
// applied, and shared read-only by every lookup: nothing changes a value
// after it was stored (a record's expressions only read what a join shows
// them).
type Table struct {
	id     string
	format config.Format
	// jsonKey: the record keys are JSON values, looked up by their text.
	jsonKey bool
	seed    maphash.Seed
	shards  [tableShards]tableShard
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

// tableShards spreads the keys over this many locks, so that lookups on
// many cores do not all touch one lock word.
const tableShards = 64

type tableShard struct {
	mu sync.RWMutex
	m  map[string]tableEntry
	_  [32]byte // with the lock and the map, a cache line of its own
}

// tableEntry is one key's latest value, decoded, and the bytes of its
// key and value as read (size).
type tableEntry struct {
	value any
	size  int64
}

// NewTable is an empty table of cfg. A schema registry format needs its
// decoder (SetDecoders) before the first Apply.
func NewTable(cfg config.Table) *Table {
	t := &Table{id: cfg.ID, format: cfg.Format, jsonKey: cfg.KeyFormat == config.FormatJSON, seed: maphash.MakeSeed()}
	for i := range t.shards {
		t.shards[i].m = map[string]tableEntry{}
	}
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
	k, v, skip, rerr := t.decodeRecord(&t.dec, key, value)
	if skip != "" {
		return skip, rerr
	}
	if value == nil {
		t.delete(k)
		return "", nil
	}
	t.put(k, tableEntry{value: v, size: int64(len(key) + len(value))})
	return "", nil
}

// decodeRecord decodes a record of the table's topic, with dec for JSON:
// the text its key is looked up by, and its value (nil for a tombstone,
// value nil). skip "" means it decoded; otherwise rerr says why not.
func (t *Table) decodeRecord(dec *decoder, key, value []byte) (k string, v any, skip SkipReason, rerr *RecordError) {
	if key == nil {
		return "", nil, SkipNoKey, &RecordError{Code: CodeDecode, Reason: "the record has no key: a table is keyed by its records' keys"}
	}
	k = string(key)
	switch {
	case t.key != nil:
		kv, err := t.key.DecodeValue(key)
		if err != nil {
			return "", nil, SkipKey, err
		}
		s, kerr := KeyString(kv)
		if kerr != nil {
			return "", nil, SkipKey, kerr
		}
		k = s
	case t.jsonKey:
		kv, err := dec.decodeValue(key)
		if err != nil {
			return "", nil, SkipKey, &RecordError{Code: CodeDecode, Reason: "key: the key is not JSON: " + err.Error()}
		}
		s, kerr := KeyString(kv)
		if kerr != nil {
			return "", nil, SkipKey, kerr
		}
		k = s
	}
	if value == nil {
		return k, nil, "", nil
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

func (t *Table) shard(k string) *tableShard {
	return &t.shards[maphash.String(t.seed, k)%tableShards]
}

func (t *Table) put(k string, e tableEntry) {
	s := t.shard(k)
	s.mu.Lock()
	old, had := s.m[k]
	s.m[k] = e
	s.mu.Unlock()
	if !had {
		t.keys.Add(1)
	}
	t.bytes.Add(e.size - old.size)
}

func (t *Table) delete(k string) {
	s := t.shard(k)
	s.mu.Lock()
	old, had := s.m[k]
	delete(s.m, k)
	s.mu.Unlock()
	if had {
		t.keys.Add(-1)
		t.bytes.Add(-old.size)
	}
}

// Lookup returns the latest value of key and whether the table holds one.
// The value is shared: read it, never change it.
func (t *Table) Lookup(key string) (any, bool) {
	s := t.shard(key)
	s.mu.RLock()
	e, ok := s.m[key]
	s.mu.RUnlock()
	return e.value, ok
}
