package keyed

import (
	"math/big"
	"reflect"
	"testing"
	"time"

	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/operator"
)

// avroOrders is a group-mode job whose Avro orders (with Avro keys) the
// job repartitions by customer before it joins them with a partitioned
// table (config/joinrepartition.go).
const avroOrders = `
name: job
kafka: {brokers: ["127.0.0.1:9"]}
schema_registry: {url: "http://127.0.0.1:9"}
scale: {mode: group}
sources:
  - {id: orders, topics: [orders], format: avro, key_format: avro}
tables:
  - {id: customers, topic: customers, mode: partitioned}
steps:
  - id: enrich
    join: {table: customers, key: customer, as: c, how: left}
  - key_by: 'c == nil ? "none" : c.tier'
  - aggregate: {values: {n: count(), sum: sum(amount)}}
sinks:
  - topic: out
`

// decoded is a schema decoder giving one value and one key.
type decoded struct {
	fields map[string]any
	key    any
}

func (d decoded) DecodeObject([]byte) (operator.Decoded, *operator.RecordError) {
	m := map[string]any{}
	for k, v := range d.fields {
		m[k] = v
	}
	return operator.Decoded{Fields: m, Order: []string{"customer", "amount", "ts", "blob", "f"}, Decimals: true}, nil
}
func (d decoded) DecodeValue([]byte) (any, *operator.RecordError) { return d.key, nil }

// The internal sink and source WithJoinRepartitions writes carry an Avro
// record across the repartition topic as the join would have read it
// from its source: the decimal, timestamp, bytes and float values with
// their types, the decoded key (_key), and the value's bytes for a sink
// that writes the input as read. (As JSON, the decimal came back a
// float, the timestamp and the bytes strings, 2.0 the integer 2, and the
// key a string of Avro bytes.)
func TestJoinRepartitionCrossesTheRecordAsRead(t *testing.T) {
	cfg, err := config.Parse("c.yaml", []byte(avroOrders), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	job := cfg.WithJoinRepartitions()
	if len(job.JoinRepartitioned()) != 1 {
		t.Fatalf("not repartitioned: %+v", job.Sources)
	}
	rs := job.JoinRepartitioned()[0]
	var in, out config.Source
	for _, s := range job.Sources {
		if s.ID == "orders" {
			in = s
		}
		if s.ID == rs.Source {
			out = s
		}
	}
	sinkCfg := job.Sinks[len(job.Sinks)-1]
	amount, _ := operator.NewDecimal(big.NewInt(11290), 2)
	near := compileChain(t)
	dec := decoded{
		fields: map[string]any{"customer": "c1", "amount": amount, "ts": time.UnixMilli(1733561234567).UTC(), "blob": []byte{0, 0xff}, "f": 2.0},
		key:    map[string]any{"order": int64(7)},
	}
	near.SetInputs(operator.Inputs{"orders": {Value: dec, Key: dec}})
	rec := &operator.Record{Key: []byte{0, 0, 0, 0, 2, 14}, Value: []byte{0, 0, 0, 0, 1, 9, 9}, Timestamp: time.UnixMilli(5), Topic: "orders", Format: in.Format}
	if keep, rerr := near.Process(rec); !keep || rerr != nil {
		t.Fatal(keep, rerr)
	}
	sinks := Sinks{{Topic: sinkCfg.Topic, Format: sinkCfg.Format, CarryKey: true}}
	key, kerr := operator.CompileExpr("sinks[1].key", sinkCfg.Key)
	if kerr != nil {
		t.Fatal(kerr)
	}
	sinks[0].Key = key
	var buf Buf
	outs, rerr := sinks.Outputs(&buf, rec.Timestamp, rec, rec.Key, nil, 0, 0)
	if rerr != nil || len(outs) != 1 {
		t.Fatal(outs, rerr)
	}
	w := outs[0]
	if string(w.Key) != "c1" || len(w.Headers) != 1 || w.Headers[0].Key != config.JoinKeyHeader || string(w.Headers[0].Value) != string(rec.Key) {
		t.Fatalf("the repartition record: key %q, headers %v", w.Key, w.Headers)
	}

	// The far side: the record read from the topic, its key restored
	// from the header, in the internal source's formats.
	far := compileChain(t)
	if out.KeyFormat != config.FormatRaw {
		t.Errorf("the internal source reads key format %s: the header's bytes would be decoded again", out.KeyFormat)
	}
	got := &operator.Record{Key: w.Headers[0].Value, Value: w.Value, Timestamp: w.Timestamp, Topic: w.Topic, Format: out.Format}
	if keep, rerr := far.Process(got); !keep || rerr != nil {
		t.Fatal(keep, rerr)
	}
	wf, _ := rec.Fields()
	gf, _ := got.Fields()
	if !reflect.DeepEqual(gf, wf) {
		t.Errorf("after the repartition the join reads\n%#v\nwant\n%#v", gf, wf)
	}
	for _, f := range []config.Format{config.FormatJSON, config.FormatRaw} {
		want, _ := rec.AppendValue(nil, f)
		if v, _ := got.AppendValue(nil, f); string(v) != string(want) {
			t.Errorf("a %s sink writes %q, want %q", f, v, want)
		}
	}
	// What an expression after the join sees of the key.
	k := compileMap(t, "k", "_key")
	for _, r := range []*operator.Record{rec, got} {
		if _, rerr := k.Process(r); rerr != nil {
			t.Fatal(rerr)
		}
	}
	wk, _ := rec.AppendValue(nil, config.FormatJSON)
	gk, _ := got.AppendValue(nil, config.FormatJSON)
	if string(gk) != string(wk) || string(wk) != `{"k":{"order":7}}` {
		t.Errorf("_key after the join: %s, want %s", gk, wk)
	}
}

func compileChain(t *testing.T) *operator.Chain {
	t.Helper()
	c, err := operator.Compile([]config.Step{{Filter: "true"}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func compileMap(t *testing.T, name, expr string) *operator.Chain {
	t.Helper()
	c, err := operator.Compile([]config.Step{{Map: []config.Field{{Name: name, Expr: expr}}}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
