package operator

import (
	"math"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/eoflow/pipeline/config"
)

// fakeSchema is a SchemaDecoder that decodes every value to a copy of
// one Decoded and every key to key: what package schema gives for a
// record of a registry format.
type fakeSchema struct {
	dec Decoded
	key any
}

func (f fakeSchema) DecodeObject([]byte) (Decoded, *RecordError) {
	m := make(map[string]any, len(f.dec.Fields))
	for k, v := range f.dec.Fields {
		m[k] = deepCopy(v)
	}
	return Decoded{Fields: m, Order: f.dec.Order, Decimals: f.dec.Decimals}, nil
}
func (f fakeSchema) DecodeValue([]byte) (any, *RecordError) { return f.key, nil }

// avroLike is a decoded value with every type a schema decoder gives.
func avroLike(t *testing.T) Decoded {
	huge, _ := new(big.Int).SetString("-123456789012345678901234567890", 10)
	hugeDec, err := NewDecimal(huge, 7)
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]any{
		"n": 3, "big": int64(math.MinInt64), "amount": mustDecimal(t, "112.90"), "huge": hugeDec,
		"ts":   time.UnixMicro(1733561234567891).UTC(),
		"day":  time.Unix(20000*86400, 0).UTC(),
		"far":  time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		"zone": time.Date(2026, 12, 7, 4, 0, 0, 1, time.FixedZone("CET", 3600)),
		"dur":  1500 * time.Microsecond, "blob": []byte{0, 1, 0xff}, "empty": []byte{},
		"f": 2.0, "inf": math.Inf(-1), "nan": math.Float64frombits(0x7ff8000000000001), "s": "héllo \x00", "yes": true, "no": false, "none": nil,
		"arr": []any{1, "x", nil, map[string]any{"d": mustDecimal(t, "0.10"), "b": []byte("b")}, []any{}},
		"obj": map[string]any{"z": 1.5, "a": []any{time.Unix(0, 0).UTC()}},
	}
	order := make([]string, 0, len(fields))
	for k := range fields {
		order = append(order, k)
	}
	// Not sorted: the schema's order, which must cross as it is.
	order[0], order[len(order)-1] = order[len(order)-1], order[0]
	return Decoded{Fields: fields, Order: order, Decimals: true}
}

// cross runs r through near (the steps before the join), encodes it as a
// join record, and reads that back through far as the join's side of
// the repartition topic reads it: a record of the internal topic, in
// FormatJoinRecord, with the key the header carried.
func cross(t *testing.T, near, far *Chain, r *Record) (before, after *Record) {
	t.Helper()
	if keep, err := near.Process(r); err != nil || !keep {
		t.Fatalf("near side: keep %v, %v", keep, err)
	}
	b, rerr := r.AppendJoinRecord(nil)
	if rerr != nil {
		t.Fatal(rerr)
	}
	got := &Record{Key: r.Key, Value: b, Timestamp: r.Timestamp, Topic: "job-enrich-repartition", Format: config.FormatJoinRecord}
	if keep, err := far.Process(got); err != nil || !keep {
		t.Fatalf("far side: keep %v, %v", keep, err)
	}
	return r, got
}

// sameRecord checks that far sees what near saw: the value's fields with
// their types, their order, the key, the flags, and what every sink
// format writes of it.
func sameRecord(t *testing.T, near, far *Record) {
	t.Helper()
	nf, nerr := near.Fields()
	ff, ferr := far.Fields()
	if nerr != nil || ferr != nil {
		t.Fatalf("fields: %v, %v", nerr, ferr)
	}
	if !reflect.DeepEqual(nf, ff) {
		t.Errorf("fields:\n%#v\nwant\n%#v", ff, nf)
	}
	if !reflect.DeepEqual(far.order, near.order) || !reflect.DeepEqual(far.key, near.key) || far.keyDecoded != near.keyDecoded ||
		far.tombstone != near.tombstone || far.changed != near.changed || far.decimals != near.decimals || (far.Format != near.Format && !(isJSON(far.Format) && isJSON(near.Format))) ||
		string(far.Value) != string(near.Value) || (far.Value == nil) != (near.Value == nil) {
		t.Errorf("far record %+v\nnear record %+v", far, near)
	}
	for _, f := range []config.Format{config.FormatJSON, config.FormatRaw} {
		nv, nerr := near.AppendValue(nil, f)
		fv, ferr := far.AppendValue(nil, f)
		if string(nv) != string(fv) || (nerr == nil) != (ferr == nil) {
			t.Errorf("%s value %q (%v), want %q (%v)", f, fv, ferr, nv, nerr)
		}
	}
	if near.Tombstone() != far.Tombstone() {
		t.Errorf("tombstone %v, want %v", far.Tombstone(), near.Tombstone())
	}
}

// The join record carries a record across a join's repartition topic
// exactly: decoded values of every type a schema decoder gives (no
// string for a time, no float for a decimal, NaN's bits), the schema's
// field order, a decoded key, a Debezium delete, a map step's object, and
// a JSON or raw record as its bytes; the expressions after the join see
// the same values and _key.
func TestJoinRecordCrossesExactly(t *testing.T) {
	reads := mapStep("k", "_key", "ts", "string(ts)", "amount", "amount * 2", "huge", "huge", "blob", "string(blob)", "n", "n + big", "dur", "string(dur)")
	t.Run("schema format, decoded key", func(t *testing.T) {
		near := mustCompile(t, filterStep("n == 3"))
		near.SetInputs(Inputs{"orders": {Value: fakeSchema{dec: avroLike(t)}, Key: fakeSchema{key: map[string]any{"id": int64(7), "at": time.UnixMilli(5).UTC()}}}})
		r := &Record{Key: []byte{0, 0, 0, 0, 9, 14}, Value: []byte{0, 0, 0, 0, 1, 2, 3}, Topic: "orders", Format: config.FormatAvro}
		before, after := cross(t, near, mustCompile(t, filterStep("true")), r)
		sameRecordBut(t, before, after, "nan")
		// What expressions see after the join: the same value and key.
		for _, rec := range []*Record{before, after} {
			m := mustCompile(t, reads)
			if _, err := m.Process(rec); err != nil {
				t.Fatal(err)
			}
		}
		bv, _ := before.AppendValue(nil, config.FormatJSON)
		av, _ := after.AppendValue(nil, config.FormatJSON)
		if string(av) != string(bv) || !strings.Contains(string(av), `"k":{"at":"1970-01-01T00:00:00.005Z","id":7}`) {
			t.Errorf("after the join a map reads %s, want %s", av, bv)
		}
	})
	t.Run("map step before the join", func(t *testing.T) {
		near := mustCompile(t, mapStep("amount", "amount", "half", "n / 2", "n", "n", "f", "f", "when", "string(ts)"))
		near.SetInputs(Inputs{"orders": {Value: fakeSchema{dec: avroLike(t)}}})
		before, after := cross(t, near, mustCompile(t), &Record{Key: []byte("o1"), Value: []byte{0, 0, 0, 0, 1}, Topic: "orders", Format: config.FormatAvro})
		sameRecordBut(t, before, after)
		if _, ok := after.fields["amount"].(Decimal); !ok || !after.changed {
			t.Errorf("a map's decimal crossed as %T (changed %v)", after.fields["amount"], after.changed)
		}
	})
	t.Run("json, json key", func(t *testing.T) {
		near := mustCompile(t, filterStep("n > 0"))
		near.SetInputs(Inputs{"orders": {JSONKey: true}})
		before, after := cross(t, near, mustCompile(t, filterStep("true")),
			&Record{Key: []byte(`{"id": 1.50}`), Value: []byte(`{"customer":"c1", "n":1.50,"x":[1,{"y":null}]}`), Topic: "orders"})
		sameRecord(t, before, after)
		if !isJSON(after.Format) || after.key == nil {
			t.Errorf("format %q, key %v", after.Format, after.key)
		}
	})
	t.Run("json crosses as itself", func(t *testing.T) {
		in := []byte(` {"customer":"c1",  "n":1.50} `)
		r := &Record{Key: []byte("o1"), Value: in, Topic: "orders"}
		before, after := cross(t, mustCompile(t, filterStep("n > 1")), mustCompile(t), r)
		sameRecord(t, before, after)
		if b, _ := before.AppendJoinRecord(nil); string(b) != string(in) {
			t.Errorf("plain JSON crossed as %q, want its bytes %q (what a process of the release before reads)", b, in)
		}
	})
	t.Run("raw", func(t *testing.T) {
		before, after := cross(t, mustCompile(t, filterStep(`value != ""`)), mustCompile(t),
			&Record{Key: []byte("k\xff"), Value: []byte("not json \xfe"), Topic: "orders", Format: config.FormatRaw})
		sameRecord(t, before, after)
	})
	t.Run("debezium delete", func(t *testing.T) {
		near := mustCompile(t, filterStep(`op == "d"`))
		near.SetInputs(Inputs{"orders": {Debezium: true}})
		before, after := cross(t, near, mustCompile(t, filterStep("before.id == 1")),
			&Record{Key: []byte(`1`), Value: []byte(`{"schema":{"type":"struct"},"payload":{"op":"d","before":{"id":1},"after":null,"ts_ms":5}}`), Topic: "orders"})
		sameRecord(t, before, after)
		if !after.Tombstone() {
			t.Error("a Debezium delete is no tombstone after the join")
		}
	})
}

// sameRecordBut is sameRecord, but the fields named in skip compare by
// their bits (NaN is not equal to itself).
func sameRecordBut(t *testing.T, near, far *Record, skip ...string) {
	t.Helper()
	saved := map[string][2]any{}
	for _, k := range skip {
		saved[k] = [2]any{near.fields[k], far.fields[k]}
		delete(near.fields, k)
		delete(far.fields, k)
	}
	sameRecord(t, near, far)
	for k, v := range saved {
		if a, b := v[0].(float64), v[1].(float64); math.Float64bits(a) != math.Float64bits(b) {
			t.Errorf("field %s: %v, want %v", k, b, a)
		}
		near.fields[k], far.fields[k] = v[0], v[1]
	}
}

// A value that is not a join record is the JSON the release before wrote
// to the topic; a damaged join record is a dead letter (CodeDecode), and
// a value the encoding has no tag for is one on the near side
// (CodeType).
func TestJoinRecordLegacyAndDamaged(t *testing.T) {
	r := &Record{Key: []byte("o1"), Value: []byte(`{"customer":"c1","n":2}`), Topic: "job-enrich-repartition", Format: config.FormatJoinRecord}
	if keep, err := mustCompile(t, filterStep("n == 2")).Process(r); !keep || err != nil || r.Format != config.FormatJSON {
		t.Fatalf("a JSON value: keep %v, %v, format %q", keep, err, r.Format)
	}
	good, rerr := (&Record{Value: []byte(`{"a":1}`), Format: config.FormatAvro, decoded: true, fields: map[string]any{"a": 1}, order: []string{"a"}}).AppendJoinRecord(nil)
	if rerr != nil {
		t.Fatal(rerr)
	}
	for name, b := range map[string][]byte{
		"truncated":   good[:len(good)-1],
		"trailing":    append(append([]byte{}, good...), 0),
		"version":     {joinRecordMagic, 9},
		"format":      append([]byte{joinRecordMagic, joinRecordVersion, 0, 3}, "xml\x00"...),
		"flags":       {joinRecordMagic, joinRecordVersion, 0x7f},
		"tag":         append(append([]byte{}, good[:len(good)-2]...), 99, 2),
		"field count": {joinRecordMagic, joinRecordVersion, jrFields, 4, 'j', 's', 'o', 'n', 0, 200},
	} {
		r := &Record{Value: b, Topic: "job-enrich-repartition", Format: config.FormatJoinRecord}
		if _, err := mustCompile(t).Process(r); err == nil || err.Code != CodeDecode {
			t.Errorf("%s: %v, want a decode error", name, err)
		}
	}
	bad := &Record{Format: config.FormatAvro, decoded: true, fields: map[string]any{"c": make(chan int)}, order: []string{"c"}}
	if _, err := bad.AppendJoinRecord(nil); err == nil || err.Code != CodeType || !strings.Contains(err.Reason, `field "c"`) {
		t.Errorf("a value of no known type: %v", err)
	}
}

// An interval join's record crosses group mode's repartition topic as
// AppendJoinValue wrote it and SetJoinRecord read it back: the far side
// writes the JSON and raw values the near side writes, and knows a
// delete; plain JSON crosses as its bytes alone, even with a decoded key.
func TestJoinValueCrossesWhole(t *testing.T) {
	for _, c := range []struct {
		name   string
		chain  *Chain
		inputs Inputs
		rec    *Record
		plain  bool
	}{
		{name: "schema format", chain: mustCompile(t, filterStep("n == 3")), inputs: Inputs{"orders": {Value: fakeSchema{dec: avroLike(t)}}},
			rec: &Record{Value: []byte{0, 0, 0, 0, 1}, Topic: "orders", Format: config.FormatAvro}},
		{name: "map step", chain: mustCompile(t, mapStep("amount", "amount", "f", "f", "when", "ts")), inputs: Inputs{"orders": {Value: fakeSchema{dec: avroLike(t)}}},
			rec: &Record{Value: []byte{0, 0, 0, 0, 1}, Topic: "orders", Format: config.FormatAvro}},
		{name: "debezium delete", chain: mustCompile(t, filterStep(`op == "d"`)), inputs: Inputs{"orders": {Debezium: true}},
			rec: &Record{Value: []byte(`{"schema":{},"payload":{"op":"d","before":{"id":1},"after":null,"ts_ms":5}}`), Topic: "orders"}},
		{name: "raw", chain: mustCompile(t, filterStep(`value != ""`)), rec: &Record{Value: []byte("raw \xfe"), Topic: "orders", Format: config.FormatRaw}},
		{name: "json, json key", chain: mustCompile(t, filterStep("_key.id > 0")), inputs: Inputs{"orders": {JSONKey: true}},
			rec: &Record{Key: []byte(`{"id": 1}`), Value: []byte(` {"n": 1.50, "s": "\u00e9"} `), Topic: "orders"}, plain: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.chain.SetInputs(c.inputs)
			if keep, err := c.chain.Process(c.rec); err != nil || !keep {
				t.Fatalf("near side: keep %v, %v", keep, err)
			}
			b, rerr := c.rec.AppendJoinValue(nil)
			if rerr != nil {
				t.Fatal(rerr)
			}
			if JoinRecordFramed(b) == c.plain || (c.plain && string(b) != string(c.rec.Value)) {
				t.Fatalf("crossed as %q (framed %v), want plain JSON as read: %v", b, JoinRecordFramed(b), c.plain)
			}
			far := &Record{}
			if rerr := far.SetJoinRecord(b, "test"); rerr != nil {
				t.Fatal(rerr)
			}
			if far.Tombstone() != c.rec.Tombstone() {
				t.Errorf("tombstone %v, want %v", far.Tombstone(), c.rec.Tombstone())
			}
			for _, f := range []config.Format{config.FormatJSON, config.FormatRaw} {
				nv, nerr := c.rec.AppendValue(nil, f)
				fv, ferr := far.AppendValue(nil, f)
				if string(nv) != string(fv) || (nerr == nil) != (ferr == nil) {
					t.Errorf("%s value %q (%v), want %q (%v)", f, fv, ferr, nv, nerr)
				}
			}
		})
	}
	var damaged Record
	if rerr := damaged.SetJoinRecord([]byte{joinRecordMagic, joinRecordVersion, 1 << 7}, "the repartition topic"); rerr == nil || rerr.Code != CodeDecode {
		t.Errorf("a damaged join record: %v, want a decode error", rerr)
	}
}
