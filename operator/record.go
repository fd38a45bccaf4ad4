package operator

import (
	"maps"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eoflow/pipeline/config"
)

// Record is one Kafka record on its way through a Chain. The runtime fills
// the exported input fields from the consumed record; the chain sets
// GroupKey and Keyed, and may replace the value (a map step). Key and Value
// are never modified: they are what goes to the dead-letter topic when the
// record fails.
//
// A Record is owned by one goroutine at a time; handing it over a channel
// hands over the decoded value with it.
type Record struct {
	Key       []byte
	Value     []byte
	Timestamp time.Time
	Topic     string
	Partition int32
	Offset    int64
	// Format of Value: config.FormatJSON (also the zero value) or
	// config.FormatRaw.
	Format config.Format

	// GroupKey is the key_by result as text; Keyed says a key_by step ran.
	// It may alias Value (the integer path, intpath.go): copy it to keep
	// it beyond the Record's Value.
	GroupKey string
	Keyed    bool
	// JoinSide is the stream of an interval join the record came by (0:
	// it goes to no interval join); JoinNoKey: its join key was nil (a
	// left record of a left join, which matches nothing).
	JoinSide  JoinSide
	JoinNoKey bool
	// AsOf is the record's event time, set by the runtime: a join as of
	// event time looks the record up as of it.
	AsOf int64
	// keyKind is the JSON type of the key_by result, for the aggregate's
	// output.
	keyKind keyKind

	// fields is the expression environment: the decoded JSON object, the
	// {value, key} object of a raw record, or the object a map step built.
	// It also receives the _key/_timestamp/... variables expressions use.
	// nil while the record holds its fields in slots.
	fields map[string]any
	// slots hold the fields a chain reads when they are few
	// (partial.slots names them; bit i of slotted says slot i holds its
	// field, which the value had): no map is built unless an expression
	// needs one as its environment (env).
	slots   [maxSlots]any
	slotted uint8
	inSlots bool
	// order is the field order of an object built by a map step (nil
	// otherwise): the output is encoded in this order.
	order   []string
	decoded bool
	// compact: the decoding found no whitespace between tokens, so the
	// value is its own compact JSON (strings were validated as UTF-8).
	compact bool
	// changed: a map step replaced the value, so Value no longer is it.
	changed bool
	// partial: fields holds only these fields of the value (the ones the
	// chain reads); nil when it holds them all. The value was validated
	// whole all the same.
	partial *fieldSet
	// metaSet: the meta variables already written into fields.
	metaSet metaMask
	// share is set when fields is shared with copies of the record that
	// other branches of a job graph read (Record.fork): the map is never
	// written to (setMeta copies it first), and the last copy to let go
	// of it recycles it (release).
	share *fieldShare
	// intsRead: the chain's integer path read the record (intpath.go):
	// ints holds the integers of the fields it reads, and nothing else
	// is decoded.
	intsRead bool
	ints     [maxSlots]int64
	// key is the decoded key of a source with a key format (keyDecoded),
	// what _key reads instead of the key's text.
	key        any
	keyDecoded bool
	// tombstone: a Debezium delete, written unchanged as a tombstone;
	// skip: a record Process drops (Debezium's own tombstone).
	tombstone, skip bool
	// decimals: the decoding may have produced Decimals, so expressions
	// run their decimal programs (decimalexpr.go).
	decimals bool
	// joined are the table values join steps showed the record's later
	// steps, in join order (join.go); never part of its value.
	joined []joinedValue
	// inputs are its aggregate's values as the source side of group
	// mode's shuffle evaluated them (SetShuffled): Add takes them as they
	// are.
	inputs []byte
}

// fieldShare counts the copies of a record that read one decoded map.
type fieldShare struct{ holders atomic.Int32 }

// release lets go of r's fields: a map of its own, or its hold on a
// shared one, which goes back to maps (if set) with the last hold.
// keep says whether a map of its own goes back to maps too.
func (r *Record) release(maps *fieldMaps, keep bool) {
	if s := r.share; s != nil {
		r.share = nil
		if s.holders.Add(-1) == 0 && keep {
			maps.put(r.fields)
		}
		return
	}
	if keep {
		maps.put(r.fields)
	}
}

// fieldMaps keeps the maps of records that are done with, for the
// decoding of later records (Chain.Recycle). Safe for concurrent use: the
// goroutine that finishes with a record is rarely the one that decodes the
// next.
type fieldMaps struct{ pool sync.Pool }

// maxRecycledFields: a map that held more fields is left to the garbage
// collector rather than kept at that size for records of any size.
const maxRecycledFields = 64

func (p *fieldMaps) put(m map[string]any) {
	if p == nil || m == nil || len(m) > maxRecycledFields {
		return
	}
	clear(m)
	p.pool.Put(m)
}

func (p *fieldMaps) get() map[string]any {
	if p == nil {
		return nil
	}
	m, _ := p.pool.Get().(map[string]any)
	return m
}

// Reset clears r for reuse with another input, keeping nothing of it.
func (r *Record) Reset() {
	*r = Record{}
}

// Changed reports whether a map step replaced the value, so the output is
// an encoding of the new object rather than the input bytes.
func (r *Record) Changed() bool { return r.changed }

// Fields returns the record's value as the expressions see it, decoding it
// first if no step has yet. The map belongs to the record: read it, do not
// keep it. Meta variables (_key, ...) an expression used are in it too.
func (r *Record) Fields() (map[string]any, error) {
	var d decoder
	if err := r.decode(&d, ""); err != nil {
		return nil, err
	}
	if err := r.decodeAll(""); err != nil {
		return nil, err
	}
	return r.fields, nil
}

// decode builds the expression environment once per record. step names
// what needed it, for the error.
func (r *Record) decode(d *decoder, step string) *RecordError {
	return r.decodeFields(d, step, nil)
}

// decodeAll decodes the whole value of a record the chain decoded only in
// part (see Chain), for an expression that reads more. The meta variables
// are written again as expressions ask for them.
func (r *Record) decodeAll(step string) *RecordError {
	if r.partial == nil {
		return nil
	}
	var d decoder
	m, err := d.decodeObject(r.Value)
	if err != nil {
		// Unreachable: the partial decoding parsed all of it.
		return &RecordError{Step: step, Code: CodeDecode, Reason: err.Error()}
	}
	r.release(nil, false)
	r.fields, r.partial, r.metaSet = m, nil, 0
	r.clearSlots()
	return nil
}

// env returns the expression environment as a map, moving the fields out
// of the slots into one first (from maps, if not nil) when they are there.
func (r *Record) env(maps *fieldMaps) map[string]any {
	if !r.inSlots {
		return r.fields
	}
	m := maps.get()
	if m == nil {
		m = make(map[string]any, maxSlots)
	}
	for i, name := range r.partial.slots {
		if r.slotted&(1<<i) != 0 {
			m[name] = r.slots[i]
		}
	}
	r.clearSlots()
	r.fields = m
	return m
}

// field returns the value of the top-level field name and whether the
// record has it.
func (r *Record) field(name string) (any, bool) {
	if len(r.joined) > 0 {
		if v, ok := r.joinedField(name); ok {
			return v, true
		}
	}
	if r.inSlots {
		i := slotOf(r.partial, name)
		if i < 0 {
			// Unreachable: partial covers every field an expression reads.
			return nil, false
		}
		return r.slots[i], r.slotted&(1<<i) != 0
	}
	v, ok := r.fields[name]
	return v, ok
}

func (r *Record) clearSlots() {
	if r.inSlots {
		r.slots, r.slotted, r.inSlots = [maxSlots]any{}, 0, false
	}
}

// decodeFields is decode building only the top-level fields in need (all
// when nil): see Chain.
func (r *Record) decodeFields(d *decoder, step string, need *fieldSet) *RecordError {
	if r.decoded {
		return nil
	}
	if r.Format == config.FormatJoinRecord {
		return r.decodeJoinRecord(d, step, need) // read back from a join's repartition topic
	}
	if in := d.input(r); in != nil && !d.inInput {
		d.inInput = true
		err := r.decodeInput(d, in, step, need)
		d.inInput = false
		return err
	}
	if r.Format == config.FormatRaw {
		// Raw bytes are passed through untouched; expressions see them as
		// strings.
		r.fields = map[string]any{"value": string(r.Value), "key": string(r.Key)}
		r.decoded = true
		return nil
	}
	if r.Format.Registered() {
		// Unreachable: the runtime gives the chain a decoder for every
		// topic it reads in a schema format.
		return &RecordError{Step: step, Code: CodeSchema, Reason: "no decoder for format " + string(r.Format) + " of topic " + r.Topic}
	}
	d.spaced = false
	if need != nil && need.slots != nil {
		has, err := d.decodeSlots(r.Value, need, &r.slots)
		if err != nil {
			r.slots = [maxSlots]any{}
			return &RecordError{Step: step, Code: CodeDecode, Reason: err.Error()}
		}
		r.fields, r.partial, r.slotted, r.inSlots = nil, need, has, true
		r.decoded, r.compact = true, !d.spaced
		return nil
	}
	m, err := d.decodeFields(r.Value, need)
	if err != nil {
		return &RecordError{Step: step, Code: CodeDecode, Reason: err.Error()}
	}
	r.fields, r.partial = m, need
	r.decoded, r.compact = true, !d.spaced
	return nil
}

// metaMask says which meta variables an expression reads.
type metaMask uint8

const (
	metaKey metaMask = 1 << iota
	metaTimestamp
	metaTopic
	metaPartition
	metaOffset
)

// metaNames are the record metadata visible to expressions. They shadow a
// JSON field of the same name: the leading underscore keeps clashes rare.
var metaNames = [...]string{"_key", "_timestamp", "_topic", "_partition", "_offset"}

func metaBit(name string) metaMask {
	for i, n := range metaNames {
		if n == name {
			return 1 << i
		}
	}
	return 0
}

// setMeta writes the meta variables in want that are not in fields yet.
// Only what an expression reads is written: most expressions read none, and
// then nothing is allocated.
func (r *Record) setMeta(want metaMask) {
	missing := want &^ r.metaSet
	if missing == 0 {
		return
	}
	if r.share != nil {
		// Other branches' copies read this map: write to one of its own.
		m := maps.Clone(r.fields)
		r.release(nil, false)
		r.fields = m
	}
	if missing&metaKey != 0 {
		if r.keyDecoded {
			r.fields["_key"] = r.key
		} else {
			r.fields["_key"] = string(r.Key) // a null key reads as ""
		}
	}
	if missing&metaTimestamp != 0 {
		r.fields["_timestamp"] = r.Timestamp.UTC()
	}
	if missing&metaTopic != 0 {
		r.fields["_topic"] = r.Topic
	}
	if missing&metaPartition != 0 {
		r.fields["_partition"] = int(r.Partition)
	}
	if missing&metaOffset != 0 {
		r.fields["_offset"] = boxInt(r.Offset)
	}
	r.metaSet |= missing
}

// detach makes an expression result safe to keep beyond this evaluation.
// An expression can return the environment itself ($env): that map is the
// record's, and receives the meta variables as expressions read them. It is
// copied, without the meta variables (they are not part of the value).
func (r *Record) detach(v any) any {
	m, ok := v.(map[string]any)
	if !ok || r.fields == nil || reflect.ValueOf(m).UnsafePointer() != reflect.ValueOf(r.fields).UnsafePointer() {
		return v
	}
	c := maps.Clone(m)
	for i, name := range metaNames {
		if r.metaSet&(1<<i) != 0 {
			delete(c, name)
		}
	}
	return c
}

// AppendValue appends the value to write to a sink of the given format:
//
//   - json, value unchanged: the input JSON, compacted (field order and number
//     spelling kept); a raw record's bytes as a JSON string;
//   - json, value built by a map step: that object, fields in map order;
//   - raw, value unchanged: the input bytes, untouched;
//   - raw, value built by a map step: its JSON encoding (a map step always
//     builds an object; raw has no other representation of it).
//
// It decodes the record if no step did, so an undecodable JSON value is a
// RecordError (CodeDecode) here too; it never fails otherwise.
func (r *Record) AppendValue(dst []byte, f config.Format) ([]byte, *RecordError) {
	if r.changed {
		return r.appendObject(dst), nil
	}
	if r.tombstone {
		return dst, nil
	}
	if f == config.FormatRaw {
		return append(dst, r.Value...), nil
	}
	if r.Format == config.FormatRaw {
		return appendString(dst, string(r.Value)), nil
	}
	if !r.decoded {
		var d decoder
		if err := r.decode(&d, "sink"); err != nil {
			return dst, err
		}
	}
	if r.Format.Registered() || r.order != nil {
		// Decoded from a schema format (or unwrapped from an envelope):
		// the fields in the schema's order.
		if _, _, ok := r.Object(); !ok {
			return dst, nil
		}
		return r.appendObject(dst), nil
	}
	if r.compact {
		return append(dst, r.Value...), nil // what appendCompact would write
	}
	return appendCompact(dst, r.Value), nil
}

// Unchanged returns the record's own value when that is exactly what
// AppendValue would write for format f (a raw sink, or a compact JSON
// value a step already validated, unchanged by any step), so that a sink
// can send the input's bytes instead of a copy of them. ok false: use
// AppendValue (also for an empty value, which AppendValue writes as none).
func (r *Record) Unchanged(f config.Format) (value []byte, ok bool) {
	switch {
	case r.changed || len(r.Value) == 0 || r.tombstone:
		return nil, false
	case f == config.FormatRaw:
		return r.Value, true
	case isJSON(r.Format) && r.decoded && r.compact && r.order == nil:
		return r.Value, true
	}
	return nil, false
}

// appendObject encodes the object a map step built, in its field order.
func (r *Record) appendObject(dst []byte) []byte {
	dst = append(dst, '{')
	for i, k := range r.order {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, k)
		dst = append(dst, ':')
		if r.changed {
			dst = appendValue(dst, r.fields[k])
		} else {
			dst = appendSchemaValue(dst, r.fields[k])
		}
	}
	return append(dst, '}')
}
