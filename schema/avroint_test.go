package schema

import (
	"bytes"
	"context"
	"testing"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/operator"
)

// intPathSchema has the key and integer fields the path reads between
// fields of every kind it skips.
const intPathSchema = `{"type":"record","name":"E","fields":[
 {"name":"pad","type":"string"},
 {"name":"key","type":"string"},
 {"name":"e","type":{"type":"enum","name":"C","symbols":["A","B"]}},
 {"name":"amount","type":"long"},
 {"name":"u","type":["null","string",{"type":"array","items":{"type":"map","values":"double"}}]},
 {"name":"f","type":{"type":"fixed","name":"F","size":3}},
 {"name":"small","type":"int"},
 {"name":"rec","type":{"type":"record","name":"R","fields":[{"name":"b","type":"boolean"},{"name":"fl","type":"float"},{"name":"next","type":["null","R"]}]}},
 {"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}}]}`

// readBoth reads b (framed with id) by the integer path and by the
// general path, and fails if the integer path read something the
// general path reads otherwise, or does not read at all.
func readBoth(t testing.TB, d *decoder, b []byte, fields []string) (ok bool) {
	var ints [4]int64
	key, ok := d.ReadInts(b, "key", fields, ints[:len(fields)])
	dec, rerr := d.DecodeObject(b)
	if !ok {
		return false
	}
	if rerr != nil {
		t.Fatalf("% x: the integer path read it, the general path says %v", b, rerr)
	}
	if dec.Fields["key"] != string(key) {
		t.Fatalf("% x: key %q, general %q", b, key, dec.Fields["key"])
	}
	for i, f := range fields {
		var want int64
		switch v := dec.Fields[f].(type) {
		case int64:
			want = v
		case int:
			want = int64(v)
		default:
			t.Fatalf("% x: field %s is %T in the general path", b, f, v)
		}
		if ints[i] != want {
			t.Fatalf("% x: %s = %d, general %d", b, f, ints[i], want)
		}
	}
	return true
}

func intPathDecoder(t testing.TB) (*decoder, int, func(map[string]any) []byte) {
	reg := srfake.New()
	t.Cleanup(reg.Close)
	id, _, err := reg.RegisterSchema("in-value", sr.Schema{Schema: intPathSchema})
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRegistry(sumJob(t, reg.URL(), "").SchemaRegistry, quiet(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.fetch(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	w, err := compileAvroWriter(avro.MustParse(intPathSchema))
	if err != nil {
		t.Fatal(err)
	}
	enc := func(v map[string]any) []byte {
		b, _ := header.AppendEncode(nil, id, nil)
		b, err := w.appendObject(b, v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return &decoder{reg: r, format: "avro", what: "value"}, id, enc
}

func intPathValue(key string, amount int64, small int) map[string]any {
	return map[string]any{"pad": "xxxxxxxx", "key": key, "e": "B", "amount": amount,
		"u": []any{map[string]any{"a": 1.5}, map[string]any{}}, "f": []byte{1, 2, 3}, "small": small,
		"rec": map[string]any{"b": true, "fl": 2.5, "next": map[string]any{"b": false, "fl": 0.0, "next": nil}}, "ts": int64(1765000000000)}
}

// TestAvroIntPathMatchesGeneral: the integer path reads the key and the
// integers the general path reads, skipping fields of every kind; it
// declines a decimal schema, a missing field and a field of another type.
func TestAvroIntPathMatchesGeneral(t *testing.T) {
	d, _, enc := intPathDecoder(t)
	for _, v := range []map[string]any{
		intPathValue("k1", 42, -7), intPathValue("", -9223372036854775808, 2147483647), intPathValue("ключ", 9223372036854775807, -2147483648),
	} {
		if !readBoth(t, d, enc(v), []string{"amount", "small"}) {
			t.Errorf("%v: declined", v)
		}
		if !readBoth(t, d, enc(v), []string{"small"}) {
			t.Errorf("%v: declined with one field", v)
		}
	}
	good := enc(intPathValue("k", 1, 1))
	for name, fields := range map[string][]string{"a missing field": {"nope"}, "a string field": {"pad"}, "a logical long": {"ts"}} {
		var ints [4]int64
		if _, ok := d.ReadInts(good, "key", fields, ints[:len(fields)]); ok {
			t.Errorf("%s: read", name)
		}
	}
	// Trailing bytes and a truncated value: declined (the general path
	// explains them).
	var ints [4]int64
	if _, ok := d.ReadInts(append(bytes.Clone(good), 0), "key", []string{"amount"}, ints[:1]); ok {
		t.Error("trailing byte read")
	}
	if _, ok := d.ReadInts(good[:len(good)-1], "key", []string{"amount"}, ints[:1]); ok {
		t.Error("truncated value read")
	}
	// A schema with a decimal is not the path's.
	if compileIntPlan(avro.MustParse(paymentV1), "parity", []string{"n"}) != nil {
		t.Error("a schema with a decimal has a plan")
	}
}

// FuzzAvroIntPath: on any bytes, whatever the integer path reads, the
// general path reads the same.
func FuzzAvroIntPath(f *testing.F) {
	f.Add(intPathValueBytes(f))
	f.Add([]byte{0, 0, 0, 0, 1, 2, 'x'})
	d, id, _ := intPathDecoder(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		b, _ := header.AppendEncode(nil, id, nil)
		readBoth(t, d, append(b, body...), []string{"amount", "small"})
	})
}

func intPathValueBytes(f *testing.F) []byte {
	w, _ := compileAvroWriter(avro.MustParse(intPathSchema))
	b, err := w.appendObject(nil, intPathValue("k7", 3, 4))
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// TestFastJSONMatchesGeneral: the one-pass JSON to Avro writes the bytes
// the general way writes, and declines what it does not handle.
func TestFastJSONMatchesGeneral(t *testing.T) {
	w, err := compileAvroWriter(avro.MustParse(`{"type":"record","name":"S","fields":[{"name":"key","type":"string"},
	 {"name":"sum","type":"long"},{"name":"n","type":"int"},{"name":"ts","type":["null","long"]},{"name":"x","type":"double"},{"name":"b","type":"boolean"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	p := compileFast(w)
	if p == nil {
		t.Fatal("no plan")
	}
	for _, tt := range []struct {
		js   string
		fast bool
	}{
		{`{"key":"k1","sum":5,"n":-3,"ts":1765000000000,"x":1.5,"b":true}`, true},
		{`{"key":"","sum":-9223372036854775808,"n":2147483647,"ts":null,"x":0,"b":false}`, true},
		{`{"key":"a\"b","sum":1,"n":1,"ts":null,"x":1,"b":true}`, false}, // an escape
		{`{"key":"k","sum":1.5,"n":1,"ts":null,"x":1,"b":true}`, false},  // a fraction
		{`{"key":"k","n":1,"sum":1,"ts":null,"x":1,"b":true}`, false},    // out of order
		{`{"key":"k","sum":1,"n":2147483648,"ts":null,"x":1,"b":true}`, false},
		{`{"key":"k","sum":1,"n":1,"ts":null,"x":1,"b":true,"extra":1}`, false},
	} {
		got, ok := p.append(nil, []byte(tt.js))
		if ok != tt.fast {
			t.Errorf("%s: fast %v, want %v", tt.js, ok, tt.fast)
			continue
		}
		if !ok {
			if len(got) != 0 {
				t.Errorf("%s: declined after writing % x", tt.js, got)
			}
			continue
		}
		fields, err := decodeExact(tt.js)
		if err != nil {
			t.Fatal(err)
		}
		want, err := w.appendObject(nil, fields)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s:\nfast    % x\ngeneral % x", tt.js, got, want)
		}
	}
}

func decodeExact(js string) (map[string]any, error) {
	return operator.DecodeJSONObjectExact([]byte(js))
}

// TestIntOutputMatchesTranscoding: the integer path's outputs written
// straight as the sink's Avro are the bytes the sink writes for the same
// output as JSON; the chain reads the Avro input by the integer path.
func TestIntOutputMatchesTranscoding(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	const in = `{"type":"record","name":"Event","fields":[{"name":"key","type":"string"},{"name":"amount","type":"long"},{"name":"ts","type":"long"},{"name":"pad","type":"string"}]}`
	id, _, err := reg.RegisterSchema("events-value", sr.Schema{Schema: in})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("job.yaml", []byte(`name: bench
kafka:
  brokers: [localhost:9092]
schema_registry:
  url: `+reg.URL()+`
sources:
  - topics: [events]
    format: avro
steps:
  - key_by: key
  - aggregate:
      values: {sum: sum(amount), count: count(), ts: last(ts), low: min(amount)}
sinks:
  - topic: sums
    format: avro
`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	set, err := New(cfg, quiet(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := set.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	chain, err := operator.Compile(cfg.Steps)
	if err != nil {
		t.Fatal(err)
	}
	chain.SetInputs(set.Inputs())
	agg := chain.Aggregator()
	out := set.Sink(0).IntOutput(agg.Names(), agg.Funcs())
	if out == nil {
		t.Fatalf("no IntOutput for %s", set.Sink(0).Text())
	}
	plain, withOut := agg.NewIntState(), agg.NewIntState()
	if plain == nil {
		t.Fatal("the chain has no integer path")
	}
	plain.Reset()
	w, _ := compileAvroWriter(avro.MustParse(in))
	for i, key := range []string{"k1", `k"2`, "k1", "ключ"} {
		b, _ := header.AppendEncode(nil, id, nil)
		b, err := w.appendObject(b, map[string]any{"key": key, "amount": int64(i*7 - 3), "ts": int64(1765000000000 + i), "pad": "xx"})
		if err != nil {
			t.Fatal(err)
		}
		rec := &operator.Record{Topic: "events", Value: b, Format: config.FormatAvro}
		if err := set.Prefetch(context.Background(), []*kgo.Record{{Topic: "events", Value: b}}); err != nil {
			t.Fatal(err)
		}
		if _, rerr := chain.Process(rec); rerr != nil {
			t.Fatal(rerr)
		}
		if _, ok := agg.AddInts(plain, rec); !ok {
			t.Fatalf("record %d: not read by the integer path", i)
		}
		js := plain.AppendOutput(nil, rec.GroupKey)
		want, rerr := set.Sink(0).AppendJSON(nil, js)
		if rerr != nil {
			t.Fatal(rerr)
		}
		*withOut = *plain
		agg.SetIntOutput(out)
		got := withOut.AppendOutput(nil, rec.GroupKey)
		agg.SetIntOutput(nil)
		if !bytes.Equal(got, want) {
			t.Errorf("record %d (%s):\ndirect     % x\ntranscoded % x", i, js, got, want)
		}
		if again, _ := set.Sink(0).AppendJSON(nil, got); !bytes.Equal(again, got) {
			t.Errorf("record %d: the sink does not pass its own value on", i)
		}
	}
}
