package schema

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/operator"
)

// A Protobuf schema importing another subject's schema and the
// well-known types.
const (
	commonProto = `syntax = "proto3";
package shop;
enum Channel { WEB = 0; STORE = 1; }
message Money { string currency = 1; }
`
	paymentProto = `syntax = "proto3";
package shop;
import "common.proto";
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";
import "google/type/decimal.proto";

message Payment {
  int64 n = 1;
  string parity = 2;
  google.type.Decimal amount = 3;
  google.protobuf.Timestamp ts = 4;
  google.protobuf.Int64Value discount = 5;
  Channel channel = 6;
  repeated string tags = 7;
  map<string, int64> counts = 8;
  uint64 big = 9;
  optional string note = 10;
  Money money = 11;
  oneof kind { string card = 12; string iban = 13; }
}
message Header { string source = 1; }
`
)

// protoJob reads Protobuf payments and writes their sums in format out.
func protoJob(t *testing.T, url, in, out string) *config.Config {
	t.Helper()
	yaml := `name: pay
kafka:
  brokers: [localhost:9092]
schema_registry:
  url: ` + url + `
sources:
  - topics: [payments]
    format: ` + in + `
steps:
  - filter: 'n > 0'
  - key_by: parity
  - aggregate:
      values:
        count: count()
        total: sum(n)
        last_ts: last(ts)
sinks:
  - topic: sums
    format: ` + out + `
`
	c, err := config.Parse("job.yaml", []byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestProtobufRead: a message with references, well-known types, an
// enum, lists, maps, oneof and presence reads as real values; int64 and
// uint64 exact; the message indexes pick the message.
func TestProtobufRead(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	if _, _, err := reg.RegisterSchema("common", sr.Schema{Schema: commonProto, Type: sr.TypeProtobuf}); err != nil {
		t.Fatal(err)
	}
	schema := sr.Schema{Schema: paymentProto, Type: sr.TypeProtobuf, References: []sr.SchemaReference{{Name: "common.proto", Subject: "common", Version: 1}}}
	id, _, err := reg.RegisterSchema("payments-value", schema)
	if err != nil {
		t.Fatal(err)
	}
	pf, err := compileProto(paymentProto, []sr.SubjectSchema{{Subject: "common.proto", Schema: sr.Schema{Schema: commonProto}}})
	if err != nil {
		t.Fatal(err)
	}
	w, err := pf.writer()
	if err != nil || w.md.Name() != "Payment" || len(w.indexes) != 1 || w.indexes[0] != 0 {
		t.Fatalf("writer: %+v %v", w, err)
	}
	ts := time.UnixMilli(1765000000123).UTC()
	in := map[string]any{
		"n": int64(9007199254740993), "parity": "odd", "amount": mustDecimal(t, "112.90"), "ts": ts, "discount": int64(5),
		"channel": "STORE", "tags": []any{"a", "b"}, "counts": map[string]any{"x": int64(1)}, "big": mustDecimal(t, "18446744073709551615"),
		"money": map[string]any{"currency": "EUR"}, "iban": "DE00",
	}
	b, _ := header.AppendEncode(nil, id, nil)
	b, err = w.appendObject(b, in)
	if err != nil {
		t.Fatal(err)
	}
	set, err := New(protoJob(t, reg.URL(), "protobuf", "json"), quiet(), nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := &kgo.Record{Topic: "payments", Value: b}
	if err := set.Prefetch(context.Background(), []*kgo.Record{rec}); err != nil {
		t.Fatal(err)
	}
	dec, rerr := set.Inputs()["payments"].Value.DecodeObject(b)
	if rerr != nil {
		t.Fatal(rerr)
	}
	got := dec.Fields
	want := map[string]any{
		"n": int64(9007199254740993), "parity": "odd", "amount": "decimal:112.90", "ts": ts, "discount": int64(5), "channel": "STORE",
		"tags": []any{"a", "b"}, "counts": map[string]any{"x": int64(1)}, "big": "decimal:18446744073709551615", "note": nil,
		"money": map[string]any{"currency": "EUR"}, "card": nil, "iban": "DE00",
	}
	for k, v := range want {
		if g := normalizeDecimal(got[k]); !equalValue(g, v) {
			t.Errorf("%s = %#v, want %#v", k, g, v)
		}
	}
	if strings.Join(dec.Order, ",") != "n,parity,amount,ts,discount,channel,tags,counts,big,note,money,card,iban" {
		t.Errorf("order %v", dec.Order)
	}
	// A message index the schema lacks, and bytes that are not the
	// message, are schema errors.
	bad, _ := header.AppendEncode(nil, id, []int{7})
	if _, rerr := set.Inputs()["payments"].Value.DecodeObject(append(bad, 0x08, 0x01)); rerr == nil || !strings.Contains(rerr.Reason, "message index [7]") {
		t.Errorf("index 7: %v", rerr)
	}
	garbage, _ := header.AppendEncode(nil, id, []int{0})
	if _, rerr := set.Inputs()["payments"].Value.DecodeObject(append(garbage, 0x12, 0x10, 'x')); rerr == nil || rerr.Code != operator.CodeSchema {
		t.Errorf("garbage: %v", rerr)
	}
	// Index [1] is the second message, Header.
	hdr, _ := header.AppendEncode(nil, id, []int{1})
	if d, rerr := set.Inputs()["payments"].Value.DecodeObject(append(hdr, 0x0a, 0x01, 'k')); rerr != nil || d.Fields["source"] != "k" {
		t.Errorf("Header: %v %v", d.Fields, rerr)
	}
}

// TestProtobufWriteDerived: an aggregate over Protobuf input, written as
// Protobuf with a derived proto3 schema, and read back; the framing
// carries the message index [0].
func TestProtobufWriteDerived(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	if _, _, err := reg.RegisterSchema("common", sr.Schema{Schema: commonProto, Type: sr.TypeProtobuf}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := reg.RegisterSchema("payments-value", sr.Schema{Schema: paymentProto, Type: sr.TypeProtobuf,
		References: []sr.SchemaReference{{Name: "common.proto", Subject: "common", Version: 1}}}); err != nil {
		t.Fatal(err)
	}
	set, err := New(protoJob(t, reg.URL(), "protobuf", "protobuf"), quiet(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := set.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	k := set.Sink(0)
	want := "syntax = \"proto3\";\npackage eoflow.pipeline;\nimport \"google/protobuf/timestamp.proto\";\n\nmessage sums {\n  string key = 1;\n  int64 count = 2;\n  int64 total = 3;\n  google.protobuf.Timestamp last_ts = 4;\n}\n"
	if k.Text() != want {
		t.Errorf("derived:\n%s\nwant:\n%s", k.Text(), want)
	}
	out, rerr := k.AppendJSON(nil, []byte(`{"key":"odd","count":2,"total":9007199254740993,"last_ts":"2025-12-06T05:46:40.123Z"}`))
	if rerr != nil {
		t.Fatal(rerr)
	}
	id, rest, err := header.DecodeID(out)
	if err != nil || id != k.ID() {
		t.Fatalf("id %d %v", id, err)
	}
	idx, body, err := header.DecodeIndex(rest, 8)
	if err != nil || len(idx) != 1 || idx[0] != 0 || rest[0] != 0 {
		t.Fatalf("indexes %v (first byte %x): %v", idx, rest[0], err)
	}
	msg := dynamicpb.NewMessage(k.proto.md)
	if err := proto.Unmarshal(body, msg); err != nil {
		t.Fatal(err)
	}
	f := func(name string) protoreflect.Value {
		return msg.Get(k.proto.md.Fields().ByName(protoreflect.Name(name)))
	}
	if f("key").String() != "odd" || f("total").Int() != 9007199254740993 || f("count").Int() != 2 {
		t.Errorf("read back %v", msg)
	}
}

const paymentJSONSchema = `{"$schema":"http://json-schema.org/draft-07/schema#","title":"Payment","type":"object",
 "properties":{"n":{"type":"integer"},"parity":{"type":"string","enum":["even","odd"]},"amount":{"type":"number"},
  "ts":{"type":"string","format":"date-time"}},
 "required":["n","parity","amount"]}`

// TestJSONSchemaReadAndWrite: values valid against their schema read as
// JSON does; invalid ones are schema errors naming where; the derived
// output schema validates what the job writes, and refuses the rest.
func TestJSONSchemaReadAndWrite(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	id, _, err := reg.RegisterSchema("payments-value", sr.Schema{Schema: paymentJSONSchema, Type: sr.TypeJSON})
	if err != nil {
		t.Fatal(err)
	}
	set, err := New(protoJob(t, reg.URL(), "json_schema", "json_schema"), quiet(), nil)
	if err != nil {
		t.Fatal(err)
	}
	frame := func(js string) []byte {
		b, _ := header.AppendEncode(nil, id, nil)
		return append(b, js...)
	}
	good := frame(`{"n":9007199254740993,"parity":"odd","amount":112.9,"ts":"2025-12-06T05:46:40.123Z"}`)
	invalid := frame(`{"n":1,"parity":"maybe","amount":1}`)
	notJSON := frame(`{"n":1,`)
	recs := []*kgo.Record{{Topic: "payments", Value: good}, {Topic: "payments", Value: invalid}, {Topic: "payments", Value: notJSON}}
	if err := set.Prefetch(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	dec := set.Inputs()["payments"].Value
	d, rerr := dec.DecodeObject(good)
	if rerr != nil || d.Fields["n"] != 9007199254740993 || d.Fields["amount"] != 112.9 {
		t.Fatalf("good: %v %v", d.Fields, rerr)
	}
	if _, rerr := dec.DecodeObject(invalid); rerr == nil || rerr.SchemaID != id || !strings.Contains(rerr.Reason, "not valid against the JSON Schema at /parity") {
		t.Errorf("invalid: %v", rerr)
	}
	if _, rerr := dec.DecodeObject(notJSON); rerr == nil || rerr.Code != operator.CodeSchema {
		t.Errorf("not JSON: %v", rerr)
	}

	if err := set.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	k := set.Sink(0)
	want := `{"$schema":"http://json-schema.org/draft-07/schema#","title":"sums","type":"object","properties":{"key":{"type":"string"},"count":{"type":"integer"},"total":{"type":"integer"},"last_ts":{"type":["null","string"],"format":"date-time"}},"required":["key","count","total"],"additionalProperties":false}`
	if k.Text() != want {
		t.Errorf("derived:\n%s\nwant:\n%s", k.Text(), want)
	}
	js := `{"key":"odd","count":2,"total":9007199254740993,"last_ts":"2025-12-06T05:46:40.123Z"}`
	out, rerr := k.AppendJSON(nil, []byte(js))
	if rerr != nil {
		t.Fatal(rerr)
	}
	if oid, rest, _ := header.DecodeID(out); oid != k.ID() || string(rest) != js {
		t.Errorf("written %q with id %d", rest, oid)
	}
	if _, rerr := k.AppendJSON(nil, []byte(`{"key":"odd","count":"two","total":1}`)); rerr == nil || !strings.Contains(rerr.Reason, "at /count") {
		t.Errorf("an output of the wrong type: %v", rerr)
	}
}

// FuzzProtobufDecode and FuzzJSONSchemaDecode: arbitrary bytes after a
// schema id give a value or a schema error, never a panic.
func FuzzProtobufDecode(f *testing.F) {
	pf, err := compileProto(paymentProto, []sr.SubjectSchema{{Subject: "common.proto", Schema: sr.Schema{Schema: commonProto}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte{0x02, 0x02, 0x0a, 0x01, 'k'})
	f.Add([]byte{0, 0x08, 0x01})
	f.Add([]byte{0, 0x5a, 0x05, 0x0a, 0x03, 'E', 'U', 'R'})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, _, err := pf.decode(b)
		if err != nil {
			return
		}
		if len(b) > 0 && b[0] == 0 { // a Payment: it writes back
			w, _ := pf.writer()
			if _, err := w.appendObject(nil, m); err != nil {
				t.Fatalf("a Payment read does not write back: %v", err)
			}
		}
	})
}

func FuzzJSONSchemaDecode(f *testing.F) {
	jf, err := compileJSONSchema(paymentJSONSchema, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(`{"n":1,"parity":"odd","amount":1.5}`))
	f.Add([]byte(`{"n":"x"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, _, err := jf.decode(b)
		if err == nil && m == nil {
			t.Fatal("no value and no error")
		}
	})
}

func mustDecimal(t *testing.T, s string) operator.Decimal { return decimal(t, s) }

// equalValue compares decoded values (times by instant).
func equalValue(a, b any) bool {
	switch x := a.(type) {
	case time.Time:
		y, ok := b.(time.Time)
		return ok && x.Equal(y)
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalValue(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k := range x {
			if !equalValue(x[k], y[k]) {
				return false
			}
		}
		return true
	}
	return a == b
}

// TestProtobufDecimalsAnnounced: a schema says it may give Decimals when
// a message has a decimal field, a uint64 (beyond int64 a Decimal), or
// holds a message that does, however its text names them; expressions
// take the decimal-aware program only then.
func TestProtobufDecimalsAnnounced(t *testing.T) {
	for _, c := range []struct {
		proto string
		want  bool
	}{
		{`message M { int64 a = 1; string DecimalNote = 2; }`, false}, // the word alone is no decimal
		{`message M { uint64 big = 1; }`, true},
		{`message M { fixed64 big = 1; }`, true},
		{`message M { map<string, uint64> big = 1; }`, true},
		{`message M { N n = 1; } message N { repeated uint64 big = 1; }`, true},
		{`import "confluent/type/decimal.proto"; message M { confluent.type.Decimal d = 1; }`, true},
		{`import "google/type/decimal.proto"; message M { google.type.Decimal d = 1; }`, true},
		{`message M { int64 a = 1; } message N { M m = 1; N n = 2; }`, false}, // recursive, no decimal
	} {
		pf, err := compileProto(`syntax = "proto3"; `+c.proto, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.proto, err)
		}
		if pf.decimals != c.want {
			t.Errorf("%s: decimals %v, want %v", c.proto, pf.decimals, c.want)
		}
	}
}
