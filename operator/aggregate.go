package operator

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/expr-lang/expr/vm"

	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/internal/wire"
)

// Aggregator is the compiled aggregate step: the keyed, stateful end of a
// chain. It evaluates the named values of a record and folds them into the
// AggregateState of the record's group key. The runtime owns the states
// (one per group key, grouped into key groups) and decides when to emit
// (Emit) and what to write to the changelog (AggregateState.AppendBinary of
// the keys whose Add reported a change).
//
// An Aggregator is not safe for concurrent use (it reuses a VM and
// buffers); Clone gives each keyed worker its own.
type Aggregator struct {
	layout *layout
	path   string
	id     string
	emit   config.EmitMode
	ttl    time.Duration
	args   []*Expr // nil entries for count()

	vm   vm.VM
	dec  decoder
	vals []any // per-record scratch, one per value
	// ints is the chain's integer path (nil: none), whose records AddInts
	// takes (intpath.go).
	ints *intPath
}

// layout is what every state of one aggregate shares.
type layout struct {
	names []string
	funcs []config.AggregateFunc
	// block is the type of one state's memory, allocated at once (see
	// newState): the AggregateState, the array behind its accumulator
	// slice, and the accumulators.
	block reflect.Type
	// accsOffset and offsets[i] are where the accumulator array and value
	// i's accumulator are in a block.
	accsOffset uintptr
	offsets    []uintptr
	// header starts every state encoding (version, number of values);
	// prefixes[i] is value i's name as encoded (length, bytes).
	header   []byte
	prefixes [][]byte
	// members[i] is `,"<name i>":` as the output writes it, escaped once.
	members [][]byte
	// fast: the fast codec (statecodec.go) may handle this layout's
	// states; tags[i] is value i's function tag.
	fast bool
	tags []byte
	// ttl: states record when they were last updated (aggregate.ttl is
	// set), at updatedOffset in the block, and are encoded as version 3.
	ttl           bool
	updatedOffset uintptr
	// intOut, if set, writes the integer path's outputs in a sink's
	// format (SetIntOutput).
	intOut IntOutput
}

// newLayout builds the layout of the named values.
func newLayout(names []string, funcs []config.AggregateFunc, ttl bool) *layout {
	fields := []reflect.StructField{
		{Name: "State", Type: reflect.TypeFor[AggregateState]()},
		{Name: "Accs", Type: reflect.ArrayOf(len(funcs), reflect.TypeFor[Accumulator]())},
	}
	for i, fn := range funcs {
		acc, _ := NewAccumulator(fn) // validated by the caller
		fields = append(fields, reflect.StructField{Name: "A" + strconv.Itoa(i), Type: reflect.TypeOf(acc).Elem()})
	}
	if ttl {
		// Only a state with a TTL pays for its update time.
		fields = append(fields, reflect.StructField{Name: "Updated", Type: reflect.TypeFor[int64]()})
	}
	l := &layout{names: names, funcs: funcs, block: reflect.StructOf(fields), ttl: ttl}
	if ttl {
		l.updatedOffset = l.block.Field(len(fields) - 1).Offset
	}
	for i := range funcs {
		l.offsets = append(l.offsets, l.block.Field(2+i).Offset)
	}
	l.accsOffset = l.block.Field(1).Offset
	l.header = binary.AppendUvarint([]byte{stateVersion}, uint64(len(names)))
	for _, name := range names {
		l.prefixes = append(l.prefixes, append(binary.AppendUvarint(nil, uint64(len(name))), name...))
		l.members = append(l.members, append(appendString([]byte{','}, name), ':'))
	}
	l.fast = !ttl
	for _, fn := range funcs {
		tag, _ := funcTag(fn)
		l.tags = append(l.tags, tag)
		l.fast = l.fast && fastFunc(fn)
	}
	return l
}

// newState allocates an empty state and its accumulators as one block.
// Every record adds to the state of its key, and the keys are many: in one
// block the state is a few adjacent cache lines instead of a header, an
// array and one object per value scattered over the heap, each a cache
// miss. (A restore makes a million of them: the fields are found by their
// offsets, not through reflect.)
func (l *layout) newState() *AggregateState {
	return l.initState(reflect.New(l.block).UnsafePointer()) // zeroed, typed for the GC
}

// initState makes the zeroed block the empty state of l.
func (l *layout) initState(block unsafe.Pointer) *AggregateState {
	s := (*AggregateState)(block)
	s.layout = l
	s.accs = unsafe.Slice((*Accumulator)(unsafe.Add(block, l.accsOffset)), len(l.funcs))
	for i, fn := range l.funcs {
		p := unsafe.Add(block, l.offsets[i])
		switch fn {
		case config.AggCount:
			s.accs[i] = (*CountAcc)(p)
		case config.AggSum:
			s.accs[i] = (*SumAcc)(p)
		case config.AggMin, config.AggMax:
			a := (*MinMaxAcc)(p)
			a.max = fn == config.AggMax
			s.accs[i] = a
		case config.AggAvg:
			s.accs[i] = (*AvgAcc)(p)
		case config.AggFirst, config.AggLast:
			a := (*FirstLastAcc)(p)
			a.last = fn == config.AggLast
			s.accs[i] = a
		}
	}
	return s
}

// Clone returns an Aggregator sharing the compiled expressions, with its
// own scratch space, for another goroutine.
func (a *Aggregator) Clone() *Aggregator {
	return &Aggregator{layout: a.layout, path: a.path, id: a.id, emit: a.emit, ttl: a.ttl, args: a.args, vals: make([]any, len(a.args)), ints: a.ints}
}

// TTL is aggregate.ttl: a key not updated for this long is deleted (0:
// never).
func (a *Aggregator) TTL() time.Duration { return a.ttl }

// Path is the config path of the step, e.g. "steps[1].aggregate".
func (a *Aggregator) Path() string { return a.path }

// ID is the step's stable operator id (state maps to operators by it).
func (a *Aggregator) ID() string { return a.id }

// Emit is when the runtime emits: every_record (after each Add, the running
// value, changed or not) or on_checkpoint (each key whose Add reported a
// change since the last checkpoint, once, at the barrier).
func (a *Aggregator) Emit() config.EmitMode { return a.emit }

// Funcs are the functions of the values, in configured order.
func (a *Aggregator) Funcs() []config.AggregateFunc { return slices.Clone(a.layout.funcs) }

// Names are the output names of the values, in configured order.
func (a *Aggregator) Names() []string { return slices.Clone(a.layout.names) }

// NewState returns the empty state of a group key not seen before.
func (a *Aggregator) NewState() *AggregateState { return a.layout.newState() }

// DecodeState is NewState followed by UnmarshalBinary.
func (a *Aggregator) DecodeState(b []byte) (*AggregateState, error) {
	s := a.layout.newState()
	if err := s.unmarshal(b, s); err != nil { // s is dropped on error
		return nil, err
	}
	return s, nil
}

// DecodeInto replaces st, a state of this Aggregator, with the decoded b,
// without allocating (except for a decimal sum or a string first/last
// value): the running aggregate keeps its states encoded (state.Compact)
// and decodes a key's state into one reused AggregateState per record.
// The errors are UnmarshalBinary's; after one st is half decoded and must
// be reset or decoded again before use.
func (a *Aggregator) DecodeInto(st *AggregateState, b []byte) error {
	if st.layout != a.layout {
		panic("operator: AggregateState of another Aggregator")
	}
	return st.unmarshal(b, st)
}

// ResetState makes st, a state of this Aggregator, the empty state of a
// group key not seen before (as NewState), without allocating.
func (a *Aggregator) ResetState(st *AggregateState) {
	if st.layout != a.layout {
		panic("operator: AggregateState of another Aggregator")
	}
	block := unsafe.Pointer(st)
	reflect.NewAt(a.layout.block, block).Elem().SetZero()
	a.layout.initState(block)
}

// Add evaluates the values of r and adds them to st, all or nothing: if
// any value fails (missing field, evaluation error, wrong type, overflow)
// st is unchanged and the error names that value's path. changed reports
// whether the state differs afterwards (always true with count()).
func (a *Aggregator) Add(st *AggregateState, r *Record) (changed bool, err *RecordError) {
	if st.layout != a.layout {
		panic("operator: AggregateState of another Aggregator")
	}
	vals := a.vals[:0]
	if r.inputs != nil {
		// Evaluated where the record was read (group mode's shuffle).
		var derr error
		if vals, derr = a.decodeInputs(r.inputs, vals); derr != nil {
			clear(vals)
			return false, &RecordError{Step: a.path, Code: CodeDecode, Reason: derr.Error()}
		}
	} else {
		if err := r.decode(&a.dec, a.path); err != nil {
			return false, err
		}
		for _, e := range a.args {
			var v any
			if e != nil {
				out, err := e.run(&a.vm, r)
				if err != nil {
					clear(a.vals)
					return false, err
				}
				v = r.detach(out)
			}
			vals = append(vals, v)
		}
	}
	a.vals = vals
	defer clear(a.vals) // do not pin record values until the next record
	// All or nothing, and the error is that of the first value that
	// fails. The first accumulator needs no Check of its own: its Add
	// fails exactly when its Check would, changing nothing, so it goes
	// first once the others are known to pass (and is checked only to
	// tell which error comes first when another one fails).
	for i := 1; i < len(st.accs); i++ {
		if err := st.accs[i].Check(vals[i]); err != nil {
			if err0 := st.accs[0].Check(vals[0]); err0 != nil {
				return false, err0.withStep(a.valuePath(0))
			}
			return false, err.withStep(a.valuePath(i))
		}
	}
	for i, acc := range st.accs {
		ch, err := acc.Add(vals[i])
		if err != nil {
			// Only the first can fail here, before anything changed:
			// every Add fails exactly when its Check does.
			return changed, err.withStep(a.valuePath(i))
		}
		changed = changed || ch
	}
	// The output shows the key as the latest record's key_by gave it.
	if st.keyKind != r.keyKind {
		st.keyKind, changed = r.keyKind, true
	}
	return changed, nil
}

func (a *Aggregator) valuePath(i int) string {
	return a.path + ".values." + a.layout.names[i]
}

// AggregateState is the running aggregate of one group key: one
// Accumulator per named value, in configured order.
type AggregateState struct {
	layout *layout
	accs   []Accumulator
	// keyKind is the JSON type of the group key (a number, a bool, or
	// the zero value, a string), which the key's text does not tell.
	keyKind keyKind
}

// Updated is when the state was last updated, in epoch milliseconds
// (event or processing time, as the runtime's TTL keeps it); 0: unknown,
// and always 0 without aggregate.ttl.
func (s *AggregateState) Updated() int64 {
	if !s.layout.ttl {
		return 0
	}
	return *s.updatedAt()
}

// SetUpdated records when the state was last updated, for aggregate.ttl
// (a no-op without it).
func (s *AggregateState) SetUpdated(ms int64) {
	if s.layout.ttl {
		*s.updatedAt() = ms
	}
}

// updatedAt is where the block of a state with a TTL keeps the update
// time.
func (s *AggregateState) updatedAt() *int64 {
	return (*int64)(unsafe.Add(unsafe.Pointer(s), s.layout.updatedOffset))
}

// Value returns the current result of the named value.
func (s *AggregateState) Value(name string) (any, bool) {
	i := slices.Index(s.layout.names, name)
	if i < 0 {
		return nil, false
	}
	return s.accs[i].Result(), true
}

// Output returns the output record value for groupKey:
// {"key":<group key>,"<name1>":<result1>,...} in configured order, e.g.
// {"key":"even","count":3,"sum":6}. The key keeps the JSON type key_by
// gave it: {"key":0,...} for key_by: 'n % 3', {"key":true,...} for a bool.
func (s *AggregateState) Output(groupKey string) []byte {
	return s.AppendOutput(make([]byte, 0, 16+len(groupKey)+16*len(s.accs)), groupKey)
}

// AppendOutput appends Output(groupKey) to dst.
func (s *AggregateState) AppendOutput(dst []byte, groupKey string) []byte {
	dst = append(dst, `{"key":`...)
	dst = appendKey(dst, groupKey, s.keyKind)
	return s.appendValues(dst)
}

// appendValues appends ,"<name>":<result> per value and the closing brace.
func (s *AggregateState) appendValues(dst []byte) []byte {
	for i, acc := range s.accs {
		dst = append(dst, s.layout.members[i]...)
		dst = acc.appendResult(dst)
	}
	return append(dst, '}')
}

// AggregateState encoding versions: 1 for a string group key, 2 for a key
// of another JSON type (version 1 and a byte of key kind).
const (
	stateVersion        = 1
	stateVersionKeyKind = 2
	// stateVersionTTL: version 3, byte key kind (0 string), varint
	// updated time, then as version 1 after its version byte. Only an
	// aggregate with a TTL writes it.
	stateVersionTTL = 3
)

// AppendBinary appends the changelog encoding of the state:
//
//	byte     encoding version (1, or 2 when the group key is not a string)
//	byte     version 2 only: key kind (1 number, 2 bool)
//	uvarint  number of values
//	per value: uvarint name length, name, uvarint encoding length,
//	           accumulator encoding (see Accumulator)
//
// Names are stored so that a restore into a changed configuration (values
// renamed, added) is refused instead of mixing up sums, and reordered
// values each find their own state. The state of a string key is written
// as version 1, byte for byte as before key kinds were kept; a version 1
// state restores with a string key.
func (s *AggregateState) AppendBinary(b []byte) ([]byte, error) {
	if fb, ok := s.layout.appendFast(b, s); ok {
		return fb, nil
	}
	return s.appendGeneral(b)
}

// appendGeneral is AppendBinary for every state (appendFast for the
// common ones).
func (s *AggregateState) appendGeneral(b []byte) ([]byte, error) {
	switch {
	case s.layout.ttl:
		b = append(b, stateVersionTTL, byte(s.keyKind))
		b = binary.AppendVarint(b, s.Updated())
		b = append(b, s.layout.header[1:]...)
	case s.keyKind == keyString:
		b = append(b, s.layout.header...)
	default:
		b = append(b, stateVersionKeyKind, byte(s.keyKind))
		b = append(b, s.layout.header[1:]...)
	}
	for i, acc := range s.accs {
		b = append(b, s.layout.prefixes[i]...)
		// Accumulator encodings are short: one byte of length, encoded in
		// place after the fact (shifting if ever longer).
		lenAt := len(b)
		b = append(b, 0)
		var err error
		if b, err = acc.AppendBinary(b); err != nil {
			return nil, err
		}
		n := len(b) - lenAt - 1
		if n < 0x80 {
			b[lenAt] = byte(n)
			continue
		}
		var lenBuf [binary.MaxVarintLen64]byte
		l := binary.PutUvarint(lenBuf[:], uint64(n))
		b = append(b, lenBuf[:l-1]...)
		copy(b[lenAt+l:], b[lenAt+1:lenAt+1+n])
		copy(b[lenAt:], lenBuf[:l])
	}
	return b, nil
}

// MarshalBinary is AppendBinary(nil).
func (s *AggregateState) MarshalBinary() ([]byte, error) { return s.AppendBinary(nil) }

// UnmarshalBinary replaces the state with a decoded one. s must come from
// NewState of the Aggregator the state will be used with: the encoding must
// hold the same names and functions (in any order), else it is an error
// (a changed configuration cannot take over this state). On error s is
// unchanged. Corrupt input is an error, never a panic.
func (s *AggregateState) UnmarshalBinary(b []byte) error {
	t := s.layout.newState()
	if err := s.unmarshal(b, t); err != nil {
		return err
	}
	s.accs, s.keyKind = t.accs, t.keyKind
	s.SetUpdated(t.Updated())
	return nil
}

// unmarshal decodes b, an encoding for s's layout, into the accumulators
// of into, a new state of that layout; on error into is left half decoded.
func (s *AggregateState) unmarshal(b []byte, into *AggregateState) error {
	if s.layout.decodeFast(b, into) {
		return nil
	}
	return s.unmarshalGeneral(b, into)
}

// unmarshalGeneral is unmarshal for every encoding (decodeFast for the
// common ones), and the only one that explains an error.
func (s *AggregateState) unmarshalGeneral(b []byte, into *AggregateState) error {
	r := wire.NewReader(b)
	var updated int64
	into.keyKind, updated = readStateHeader(&r)
	into.SetUpdated(updated)
	n := r.Uvarint("values")
	if err := r.Err(); err != nil {
		return fmt.Errorf("decode aggregate state: %w", err)
	}
	if n != uint64(len(s.layout.names)) {
		return s.mismatch(b)
	}
	var seen uint64 // of the values, when reordered (a config has few)
	for i := range s.layout.funcs {
		name := r.Bytes("value name")
		enc := r.Bytes("value state")
		if r.Err() != nil {
			break
		}
		j := i
		if string(name) != s.layout.names[i] { // compared without allocating
			// Values reordered in the config: each accumulator is stored
			// under its value's name, so it still finds its place.
			j = slices.Index(s.layout.names, string(name))
			if j < 0 || j >= 64 {
				return s.mismatch(b)
			}
		}
		if j < 64 {
			if seen&(1<<j) != 0 {
				return s.mismatch(b)
			}
			seen |= 1 << j
		}
		if err := into.accs[j].UnmarshalBinary(enc); err != nil {
			return fmt.Errorf("value %s: %w", name, err)
		}
	}
	return closeState(&r, "aggregate")
}

// readStateHeader reads the version, the key kind and (version 3) the
// update time of an AggregateState encoding.
func readStateHeader(r *wire.Reader) (keyKind, int64) {
	switch v := r.Byte("version"); {
	case r.Err() != nil:
	case v == stateVersion:
	case v == stateVersionKeyKind, v == stateVersionTTL:
		k := keyKind(r.Byte("key kind"))
		if r.Err() == nil && k != keyNumber && k != keyBool && (v == stateVersionKeyKind || k != keyString) {
			r.Fail("key kind", fmt.Sprintf("unknown key kind %d", k))
			return keyString, 0
		}
		if v == stateVersionTTL {
			return k, r.Varint("updated")
		}
		return k, 0
	default:
		r.Fail("version", fmt.Sprintf("unknown encoding version %d", v))
	}
	return keyString, 0
}

// mismatch explains why an encoding belongs to another configuration,
// reading the names it holds (or reporting it corrupt).
func (s *AggregateState) mismatch(b []byte) error {
	r := wire.NewReader(b)
	readStateHeader(&r)
	n := r.Uvarint("values")
	var names []string
	for i := uint64(0); i < n && r.Err() == nil; i++ {
		names = append(names, string(r.Bytes("value name")))
		r.Bytes("value state")
	}
	if err := closeState(&r, "aggregate"); err != nil {
		return err
	}
	return fmt.Errorf("%w: state has values [%s], config has [%s]", errStateMismatch, strings.Join(names, " "), strings.Join(s.layout.names, " "))
}
