package operator

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/eoflow/pipeline/config"
)

// tableOp is one step of a model test of a Table: apply a value (n picks
// its length, version its content), apply one that does not decode,
// apply a tombstone, or look a key up.
type tableOp struct {
	kind    tableOpKind
	key     int
	n       int
	version int
}

type tableOpKind uint8

const (
	opPut tableOpKind = iota
	opPutBad
	opDelete
	opLookup
	tableOpKinds
)

// modelKeys are the record keys of a model test, as read (raw) and as
// looked up (text): with key_format json, a key's text may be shorter or
// longer than its bytes (1e5 is 100000), which the Bytes metric counts as
// read.
type modelKey struct{ raw, text string }

func modelKeys(json bool) []modelKey {
	var ks []modelKey
	for i := range 40 {
		if json {
			ks = append(ks, modelKey{fmt.Sprintf(`"k%d"`, i), fmt.Sprintf("k%d", i)})
		} else {
			ks = append(ks, modelKey{fmt.Sprintf("customer-%d", i), fmt.Sprintf("customer-%d", i)})
		}
	}
	if json {
		for e := range 8 {
			ks = append(ks, modelKey{fmt.Sprintf("1e%d", e), "1" + strings.Repeat("0", e)})
		}
	}
	return ks
}

// modelValue is the value a put applies: n picks its length (values of
// one n have one length, so they replace each other in place), version
// its content.
func modelValue(n, version int) []byte {
	return fmt.Appendf(nil, `{"s":"%c","v":"%s"}`, 'a'+version%26, strings.Repeat("x", n))
}

// checkTableModel applies ops to a Table and to a map, its model, and
// checks after each that they agree: what Lookup returns, Len and Bytes.
func checkTableModel(t *testing.T, jsonKeys bool, ops []tableOp) {
	t.Helper()
	kf := config.FormatRaw
	if jsonKeys {
		kf = config.FormatJSON
	}
	tb := NewTable(config.Table{ID: "model", Format: config.FormatJSON, KeyFormat: kf})
	keys := modelKeys(jsonKeys)
	type entry struct {
		value []byte
		size  int
	}
	model := map[string]entry{}
	var dec decoder
	check := func(i int, k modelKey) {
		t.Helper()
		got, ok := tb.Lookup(k.text)
		e, want := model[k.text]
		if ok != want {
			t.Fatalf("op %d: Lookup(%s) found %v, the model %v", i, k.text, ok, want)
		}
		if !ok {
			return
		}
		if wantV, _ := dec.decodeValue(e.value); !reflect.DeepEqual(got, wantV) {
			t.Fatalf("op %d: Lookup(%s) = %v, the model %s", i, k.text, got, e.value)
		}
	}
	for i, op := range ops {
		k := keys[op.key%len(keys)]
		switch op.kind {
		case opPut:
			v := modelValue(op.n, op.version)
			if skip, rerr := tb.Apply([]byte(k.raw), v); skip != "" {
				t.Fatalf("op %d: Apply(%s) skipped: %s %v", i, k.raw, skip, rerr)
			}
			model[k.text] = entry{v, len(k.raw) + len(v)}
		case opPutBad:
			if skip, _ := tb.Apply([]byte(k.raw), []byte(`{"v":`)); skip != SkipDecode {
				t.Fatalf("op %d: Apply of a bad value: skip %q, want %q", i, skip, SkipDecode)
			}
		case opDelete:
			if skip, _ := tb.Apply([]byte(k.raw), nil); skip != "" {
				t.Fatalf("op %d: tombstone skipped: %s", i, skip)
			}
			delete(model, k.text)
		case opLookup:
			check(i, k)
		}
		bytes := 0
		for _, e := range model {
			bytes += e.size
		}
		if tb.Len() != int64(len(model)) || tb.Bytes() != int64(bytes) {
			t.Fatalf("op %d: Len %d, Bytes %d; the model %d, %d", i, tb.Len(), tb.Bytes(), len(model), bytes)
		}
	}
	for _, k := range keys {
		check(len(ops), k)
	}
}

// randomTableOps are n ops over the model's keys, mostly puts of a few
// lengths (in-place replacements, moves, and chunks of their own for the
// largest), a fifth tombstones.
func randomTableOps(rng *rand.Rand, n int) []tableOp {
	ops := make([]tableOp, n)
	for i := range ops {
		op := tableOp{key: rng.IntN(1 << 10), version: i}
		switch r := rng.IntN(100); {
		case r < 45:
			op.kind, op.n = opPut, []int{0, 3, 40, 200}[rng.IntN(4)]
			if rng.IntN(200) == 0 {
				op.n = 70 << 10 // beyond a small shard's next chunk
			}
		case r < 50:
			op.kind = opPutBad
		case r < 70:
			op.kind = opDelete
		default:
			op.kind = opLookup
		}
		ops[i] = op
	}
	return ops
}

// The table agrees with a map through random sequences of values,
// replacements (in place and moved), tombstones, refused values, and
// enough of them to rehash and compact its shards.
func TestTableModel(t *testing.T) {
	for seed := range uint64(6) {
		for _, jsonKeys := range []bool{false, true} {
			t.Run(fmt.Sprintf("seed=%d/json_keys=%v", seed, jsonKeys), func(t *testing.T) {
				n := 20000
				if testing.Short() {
					n = 5000
				}
				checkTableModel(t, jsonKeys, randomTableOps(rand.New(rand.NewPCG(seed, 34)), n))
			})
		}
	}
}

// A value larger than a chunk (1 MiB) gets a chunk of its own, and
// reads back whole; replacing and deleting it frees it.
func TestTableLargeValue(t *testing.T) {
	ops := []tableOp{
		{kind: opPut, key: 1, n: 0},
		{kind: opPut, key: 2, n: 3 << 20},
		{kind: opPut, key: 3, n: 1},
		{kind: opLookup, key: 2},
		{kind: opPut, key: 2, n: 2 << 20, version: 1},
		{kind: opLookup, key: 2},
		{kind: opDelete, key: 2},
		{kind: opPut, key: 2, n: 5},
	}
	checkTableModel(t, false, ops)
}

// FuzzTableModel is TestTableModel on sequences the fuzzer finds: three
// bytes an op (kind and key, key, length).
func FuzzTableModel(f *testing.F) {
	f.Add([]byte{0, 1, 3, 0, 1, 3, 3, 1, 0, 2, 1, 0, 3, 1, 0}, false)
	f.Add([]byte{0, 41, 200, 0, 42, 10, 2, 41, 0, 3, 42, 0}, true)
	f.Fuzz(func(t *testing.T, data []byte, jsonKeys bool) {
		var ops []tableOp
		for i := 0; i+2 < len(data) && len(ops) < 4000; i += 3 {
			ops = append(ops, tableOp{kind: tableOpKind(data[i] % byte(tableOpKinds)), key: int(data[i+1]), n: int(data[i+2]) * int(data[i+2]) / 64, version: i})
		}
		checkTableModel(t, jsonKeys, ops)
	})
}

// Lookups run while one goroutine applies, and each sees every Apply
// that returned before it began: a key's version never goes back from
// what the writer had published (the race detector checks the locking,
// and the moves of compactions and rehashes run under the readers).
func TestTableLookupsSeeApplied(t *testing.T) {
	tb := NewTable(config.Table{ID: "t", Format: config.FormatJSON, KeyFormat: config.FormatRaw})
	const keys, rounds = 200, 60
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("k%d", i)
	}
	var published [keys]atomic.Int64 // the version applied, +1 (0: none yet)
	var done atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 3 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for !done.Load() {
				i := rng.IntN(keys)
				want := published[i].Load()
				v, ok := tb.Lookup(names[i])
				switch {
				case want == 0:
					continue
				case !ok:
					errs <- fmt.Errorf("%s: not found after version %d was applied", names[i], want-1)
					return
				}
				got := v.(map[string]any)["v"].(int)
				if int64(got) < want-1 {
					errs <- fmt.Errorf("%s: version %d after %d was applied", names[i], got, want-1)
					return
				}
			}
		})
	}
	for r := range rounds {
		for i := range keys {
			// Lengths that change from round to round: values move, the
			// shards' garbage grows and is compacted away.
			v := fmt.Appendf(nil, `{"v":%d,"pad":"%s"}`, r, strings.Repeat("p", (r*7+i)%50))
			if skip, rerr := tb.Apply([]byte(names[i]), v); skip != "" {
				t.Fatalf("Apply: %s %v", skip, rerr)
			}
			published[i].Store(int64(r) + 1)
		}
	}
	done.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A lookup's value is its own: changing it changes no later lookup's.
func TestTableLookupOwnValue(t *testing.T) {
	tb := NewTable(config.Table{ID: "t", Format: config.FormatJSON, KeyFormat: config.FormatRaw})
	tb.Apply([]byte("c1"), []byte(`{"tier":"gold"}`))
	v, _ := tb.Lookup("c1")
	v.(map[string]any)["tier"] = "changed"
	if v, _ := tb.Lookup("c1"); v.(map[string]any)["tier"] != "gold" {
		t.Errorf("c1 = %v after a caller changed what it was given", v)
	}
}

// A table keeps its values as bytes, not as Go values on the heap the
// collector scans (and doubles in resident memory): a key of a
// three-field JSON value costs the heap no more than a few bytes (its
// share of the shards' first chunks). Holding the decoded maps cost
// ~330 bytes a key.
func TestTableHeapPerKey(t *testing.T) {
	const keys = 100000
	recs := make([][2][]byte, keys)
	for i := range recs {
		recs[i] = [2][]byte{fmt.Appendf(nil, "customer-%07d", i), fmt.Appendf(nil, `{"tier":"%s","region":"eu-%d","since":%d}`, []string{"gold", "silver", "bronze"}[i%3], i%7, 1700000000+i)}
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	tb := NewTable(config.Table{ID: "customers", Format: config.FormatJSON, KeyFormat: config.FormatRaw})
	for _, r := range recs {
		tb.Apply(r[0], r[1])
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perKey := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / keys
	if perKey > 32 {
		t.Errorf("the table holds %d heap bytes a key; want its values off the heap", perKey)
	}
	if tb.Len() != keys {
		t.Errorf("Len = %d, want %d", tb.Len(), keys)
	}
	runtime.KeepAlive(tb)
	runtime.KeepAlive(recs)
}

// A value the fast check does not take (nested deeper than it reads) is
// decoded to be checked, and kept; one nested deeper than the decoder
// reads is refused.
func TestTableDeepValue(t *testing.T) {
	tb := NewTable(config.Table{ID: "t", Format: config.FormatJSON, KeyFormat: config.FormatRaw})
	deep := strings.Repeat("[", maxFastDepth+10) + "1" + strings.Repeat("]", maxFastDepth+10)
	if skip, rerr := tb.Apply([]byte("c1"), []byte(deep)); skip != "" {
		t.Fatalf("Apply of %d nested arrays: %s %v", maxFastDepth+10, skip, rerr)
	}
	v, ok := tb.Lookup("c1")
	for range maxFastDepth + 10 {
		a, isArray := v.([]any)
		if !isArray || len(a) != 1 {
			t.Fatalf("c1 = %v, %v; want the nested arrays", v, ok)
		}
		v = a[0]
	}
	if v != 1 {
		t.Errorf("innermost %v, want 1", v)
	}
	tooDeep := strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1)
	if skip, _ := tb.Apply([]byte("c1"), []byte(tooDeep)); skip != SkipDecode {
		t.Errorf("Apply of %d nested arrays: skip %q, want %q", maxDepth+1, skip, SkipDecode)
	}
}

// recordBytes is the length appendRecord writes, across the varints'
// one- and two-byte boundaries and keys read longer or shorter than
// their text; record reads back what was written.
func TestTableRecordEncoding(t *testing.T) {
	for _, kl := range []int{0, 1, 127, 128, 300} {
		for _, vl := range []int{0, 127, 128, 16384} {
			for _, d := range []int{-200, -64, -63, -1, 0, 63, 64, 1000} {
				key, value, size := strings.Repeat("k", kl), []byte(strings.Repeat("v", vl)), kl+vl+d
				w := appendRecord([]byte{0}, key, value, size) // location 0 is none
				if n := recordBytes(key, value, size); n != len(w)-1 {
					t.Fatalf("key %d, value %d, size %d: recordBytes %d, written %d", kl, vl, size, n, len(w)-1)
				}
				m := shardMemory{chunks: [][]byte{w}}
				k, v, sz, n := m.record(1)
				if string(k) != key || string(v) != string(value) || sz != size || n != len(w)-1 {
					t.Fatalf("key %d, value %d, size %d: read back %d, %d, %d, %d", kl, vl, size, len(k), len(v), sz, n)
				}
			}
		}
	}
}
