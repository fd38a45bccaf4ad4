package schema

import (
	"bytes"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"

	"github.com/eoflow/pipeline/operator"
)

// everyType has a field of every Avro type the reader maps.
const everyType = `{"type":"record","name":"Every","namespace":"t","fields":[
 {"name":"n","type":"null"},
 {"name":"b","type":"boolean"},
 {"name":"i","type":"int"},
 {"name":"l","type":"long"},
 {"name":"f","type":"float"},
 {"name":"d","type":"double"},
 {"name":"s","type":"string"},
 {"name":"by","type":"bytes"},
 {"name":"dec","type":{"type":"bytes","logicalType":"decimal","precision":20,"scale":2}},
 {"name":"fdec","type":{"type":"fixed","name":"F8","size":8,"logicalType":"decimal","precision":18,"scale":3}},
 {"name":"fx","type":{"type":"fixed","name":"F2","size":2}},
 {"name":"e","type":{"type":"enum","name":"Color","symbols":["RED","GREEN"]}},
 {"name":"date","type":{"type":"int","logicalType":"date"}},
 {"name":"tsm","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"tsu","type":{"type":"long","logicalType":"timestamp-micros"}},
 {"name":"opt","type":["null","string"],"default":null},
 {"name":"either","type":["string","long"]},
 {"name":"arr","type":{"type":"array","items":"long"}},
 {"name":"m","type":{"type":"map","values":"double"}},
 {"name":"rec","type":{"type":"record","name":"Inner","fields":[{"name":"x","type":"int"}]}},
 {"name":"list","type":["null",{"type":"record","name":"Node","fields":[{"name":"v","type":"long"},{"name":"next","type":["null","Node"]}]}]}
]}`

func decimal(t *testing.T, s string) operator.Decimal {
	t.Helper()
	d, err := operator.ParseDecimal(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func everyValue(t *testing.T) map[string]any {
	return map[string]any{
		"n": nil, "b": true, "i": -7, "l": int64(9007199254740993), "f": 1.5, "d": 0.1,
		"s": "héllo", "by": []byte{0, 0xff, 1}, "dec": decimal(t, "-12345678901234567.89"), "fdec": decimal(t, "112.990"),
		"fx": []byte{1, 2}, "e": "GREEN",
		"date": time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC), "tsm": time.UnixMilli(1765000000123).UTC(), "tsu": time.UnixMicro(1765000000123456).UTC(),
		"opt": nil, "either": int64(42), "arr": []any{int64(1), int64(-2)}, "m": map[string]any{"a": 0.5},
		"rec":  map[string]any{"x": 3},
		"list": map[string]any{"v": int64(1), "next": map[string]any{"v": int64(2), "next": nil}},
	}
}

// TestAvroRoundTrip writes a value of every type and reads it back with
// its real type: decimals exact, times in UTC, unions as their branch.
func TestAvroRoundTrip(t *testing.T) {
	s := avro.MustParse(everyType)
	w, err := compileAvroWriter(s)
	if err != nil {
		t.Fatal(err)
	}
	r, err := compileAvroReader(s)
	if err != nil {
		t.Fatal(err)
	}
	want := everyValue(t)
	b, err := w.appendObject(nil, want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.decodeObject(b)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range want {
		if !reflect.DeepEqual(normalizeDecimal(got[k]), normalizeDecimal(v)) {
			t.Errorf("%s = %#v, want %#v", k, got[k], v)
		}
	}
	if !slicesEqual(r.fields, []string{"n", "b", "i", "l", "f", "d", "s", "by", "dec", "fdec", "fx", "e", "date", "tsm", "tsu", "opt", "either", "arr", "m", "rec", "list"}) {
		t.Errorf("field order %v", r.fields)
	}
}

// TestAvroMatchesHamba: what the writer writes, hamba/avro's own
// marshaller writes too, byte for byte (for values it takes generically).
func TestAvroMatchesHamba(t *testing.T) {
	const schema = `{"type":"record","name":"R","fields":[{"name":"k","type":"string"},{"name":"n","type":"long"},
	 {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}},
	 {"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},{"name":"opt","type":["null","long"]}]}`
	s := avro.MustParse(schema)
	w, err := compileAvroWriter(s)
	if err != nil {
		t.Fatal(err)
	}
	ts := time.UnixMilli(1765000000123).UTC()
	for _, amount := range []string{"0.00", "112.99", "-0.01", "-128.00", "127.99", "2147483.47", "-9999999.99"} {
		d := decimal(t, amount)
		ours, err := w.appendObject(nil, map[string]any{"k": "even", "n": int64(-5), "amount": d, "ts": ts, "opt": int64(7)})
		if err != nil {
			t.Fatal(err)
		}
		rat, _ := new(big.Rat).SetString(amount)
		theirs, err := avro.Marshal(s, map[string]any{"k": "even", "n": int64(-5), "amount": rat, "ts": ts, "opt": map[string]any{"long": int64(7)}})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ours, theirs) {
			t.Errorf("amount %s: ours % x, hamba's % x", amount, ours, theirs)
		}
	}
}

// TestAvroReadErrors: bytes that do not match the schema are errors, and
// say so; none panics.
func TestAvroReadErrors(t *testing.T) {
	r, err := compileAvroReader(avro.MustParse(`{"type":"record","name":"R","fields":[{"name":"s","type":"string"},{"name":"e","type":{"type":"enum","name":"E","symbols":["A"]}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "the bytes end inside the value"},
		{"string longer than the bytes", []byte{0x20, 'a'}, "the bytes end inside the value"},
		{"negative length", []byte{0x03}, "invalid string length"},
		{"enum out of range", []byte{0x02, 'a', 0x04}, "symbol 2 of 1"},
		{"trailing bytes", []byte{0x02, 'a', 0x00, 0x00}, "bytes left over after the value"},
	} {
		_, err := r.decodeObject(tt.b)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
	if _, err := (&avroReader{schema: avro.MustParse(`"long"`)}).decodeObject([]byte{2}); err == nil || !strings.Contains(err.Error(), "not a record") {
		t.Errorf("a long as an object: %v", err)
	}
}

// TestAvroWriteErrors: a value that does not fit its field is refused
// with the field named; a decimal is never rounded silently.
func TestAvroWriteErrors(t *testing.T) {
	w, err := compileAvroWriter(avro.MustParse(`{"type":"record","name":"R","fields":[{"name":"n","type":"long"},
	 {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":5,"scale":2}},{"name":"d","type":"string","default":"x"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		v    map[string]any
		want string
	}{
		{map[string]any{"n": "a", "amount": 1}, "field n: want a long, got a string"},
		{map[string]any{"n": 1}, "field amount: missing, and the schema gives it no default"},
		{map[string]any{"n": 1, "amount": decimal(t, "1.005")}, "more than the 2 digits after the point"},
		{map[string]any{"n": 1, "amount": decimal(t, "1000.00")}, "more than the 5 digits of the schema's decimal(5,2)"},
	} {
		if _, err := w.appendObject(nil, tt.v); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: %v, want %q", tt.v, err, tt.want)
		}
	}
	// A missing field with a default takes it.
	b, err := w.appendObject(nil, map[string]any{"n": 1, "amount": decimal(t, "1.5")})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := compileAvroReader(w.schema)
	got, err := r.decodeObject(b)
	if err != nil || got["d"] != "x" || got["amount"].(operator.Decimal).String() != "1.50" {
		t.Errorf("read back %v, %v", got, err)
	}
}

func TestUnscaledBytes(t *testing.T) {
	for _, tt := range []struct {
		v    string
		want []byte
	}{
		{"0", []byte{0}}, {"127", []byte{0x7f}}, {"128", []byte{0, 0x80}}, {"-128", []byte{0x80}}, {"-129", []byte{0xff, 0x7f}},
		{"255", []byte{0, 0xff}}, {"-1", []byte{0xff}},
		{"9223372036854775808", []byte{0, 0x80, 0, 0, 0, 0, 0, 0, 0}},
		{"-9223372036854775809", []byte{0xff, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
	} {
		z, _ := new(big.Int).SetString(tt.v, 10)
		if got := unscaledBytes(z); !bytes.Equal(got, tt.want) {
			t.Errorf("%s: % x, want % x", tt.v, got, tt.want)
		}
		// And back.
		r := avro.NewReader(nil, 0)
		d := decimalOf(r, tt.want, 0).(operator.Decimal)
		if d.String() != tt.v {
			t.Errorf("%s read back as %s", tt.v, d)
		}
	}
}

// FuzzAvroDecode: any bytes, read with a schema of every type, give a
// value or an error, never a panic, and a value read is written back to
// the same bytes.
func FuzzAvroDecode(f *testing.F) {
	s := avro.MustParse(everyType)
	r, err := compileAvroReader(s)
	if err != nil {
		f.Fatal(err)
	}
	w, err := compileAvroWriter(s)
	if err != nil {
		f.Fatal(err)
	}
	seed, err := w.appendObject(nil, everyValue(&testing.T{}))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := r.decodeObject(b)
		if err != nil {
			return
		}
		again, err := w.appendObject(nil, v)
		if err != nil {
			t.Fatalf("a value read does not write back: %v", err)
		}
		v2, err := r.decodeObject(again)
		if err != nil {
			t.Fatalf("written back, it does not read: %v", err)
		}
		if !reflect.DeepEqual(normalizeDecimal(v), normalizeDecimal(v2)) {
			t.Fatalf("read %v, written and read again %v", v, v2)
		}
	})
}

// normalizeDecimal makes decimals comparable by value and scale (their
// coefficient may be a big.Int).
func normalizeDecimal(v any) any {
	switch x := v.(type) {
	case operator.Decimal:
		return "decimal:" + x.String()
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = normalizeDecimal(e)
		}
		return m
	case []any:
		a := make([]any, len(x))
		for i, e := range x {
			a[i] = normalizeDecimal(e)
		}
		return a
	}
	return v
}

func slicesEqual(a, b []string) bool { return reflect.DeepEqual(a, b) }
