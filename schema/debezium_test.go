package schema

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/operator"
)

// debeziumAvro is the shape of a Debezium connector's Avro value (the
// Envelope record of a table's Value rows).
const debeziumAvro = `{"type":"record","name":"Envelope","namespace":"shop.public.orders","fields":[
 {"name":"before","type":["null",{"type":"record","name":"Value","fields":[
   {"name":"id","type":"long"},
   {"name":"total","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}}]}],"default":null},
 {"name":"after","type":["null","Value"],"default":null},
 {"name":"source","type":{"type":"record","name":"Source","namespace":"io.debezium.connector.postgresql","fields":[
   {"name":"table","type":"string"},{"name":"lsn","type":["null","long"],"default":null}]}},
 {"name":"op","type":"string"},
 {"name":"ts_ms","type":["null","long"],"default":null}]}`

// TestDebeziumAvro: an Avro change event exposes op, before, after and
// source (its decimals exact), a delete is written on as a tombstone,
// and Debezium's own tombstone is dropped.
func TestDebeziumAvro(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	id, _, err := reg.RegisterSchema("orders-value", sr.Schema{Schema: debeziumAvro})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("job.yaml", []byte(`name: cdc
kafka:
  brokers: [localhost:9092]
schema_registry:
  url: `+reg.URL()+`
sources:
  - topics: [orders]
    format: avro
    envelope: debezium
steps:
  - filter: 'source.table == "orders" && (after ?? before).total > 10'
sinks:
  - topic: orders-changes
`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	set, err := New(cfg, quiet(), nil)
	if err != nil {
		t.Fatal(err)
	}
	chain, err := operator.Compile(cfg.Steps)
	if err != nil {
		t.Fatal(err)
	}
	chain.SetInputs(set.Inputs())
	row := func(id int64, total string) map[string]any {
		return map[string]any{"id": id, "total": decimal(t, total)}
	}
	src := map[string]any{"table": "orders", "lsn": int64(7)}
	update := encodeAvro(t, id, debeziumAvro, map[string]any{"before": row(1, "10.00"), "after": row(1, "12.50"), "source": src, "op": "u", "ts_ms": int64(5)})
	small := encodeAvro(t, id, debeziumAvro, map[string]any{"before": nil, "after": row(2, "9.99"), "source": src, "op": "c", "ts_ms": nil})
	del := encodeAvro(t, id, debeziumAvro, map[string]any{"before": row(1, "12.50"), "after": nil, "source": src, "op": "d", "ts_ms": int64(6)})
	recs := []*kgo.Record{{Topic: "orders", Value: update}, {Topic: "orders", Value: small}, {Topic: "orders", Value: del}, {Topic: "orders", Key: []byte("k")}}
	if err := set.Prefetch(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, rec := range recs {
		r := &operator.Record{Topic: rec.Topic, Key: rec.Key, Value: rec.Value, Format: config.FormatAvro}
		keep, rerr := chain.Process(r)
		if rerr != nil {
			t.Fatal(rerr)
		}
		if !keep {
			out = append(out, "dropped")
			continue
		}
		js, _ := r.AppendValue(nil, config.FormatJSON)
		if r.Tombstone() {
			out = append(out, "tombstone")
			continue
		}
		out = append(out, string(js))
	}
	want := []string{
		`{"before":{"id":1,"total":10},"after":{"id":1,"total":12.5},"source":{"lsn":7,"table":"orders"},"op":"u","ts_ms":5}`,
		"dropped",   // 9.99 is not more than 10: the filter compared decimals exactly
		"tombstone", // the delete
		"dropped",   // Debezium's own tombstone
	}
	for i := range want {
		if i >= len(out) || out[i] != want[i] {
			t.Errorf("record %d: %q, want %q", i, out, want)
			break
		}
	}
}
