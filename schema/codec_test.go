package schema

import (
	"bytes"
	"context"
	"log/slog"
	"math/big"
	"slices"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/internal/srtest"
)

const numberAvsc = `{"type":"record","name":"Number","namespace":"eoflow.datagen","fields":[
  {"name":"n","type":"long"},{"name":"parity","type":"string"},
  {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":18,"scale":2}},
  {"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},
  {"name":"tags","type":{"type":"array","items":{"type":"record","name":"Tag","fields":[{"name":"k","type":"string"}]}},"default":[]},
  {"name":"note","type":["null","string"],"default":null}]}`

func mustWriter(t *testing.T, f config.Format, text, message string) *Writer {
	t.Helper()
	w, err := NewWriter(f, text, message)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// registryAt is a Registry client of the registry at url.
func registryAt(t *testing.T, url string) *Registry {
	t.Helper()
	r, err := NewRegistry(config.SchemaRegistry{URL: []string{url}, Timeout: 5 * time.Second}, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A value given as JSON is written as hamba/avro's own encoder writes
// it (numbers exact: the decimal 0.10, not a float), and reads back, by
// the id in its framing, as JSON in the schema's field order.
func TestWriterAvroRoundTrip(t *testing.T) {
	w := mustWriter(t, config.FormatAvro, numberAvsc, "")
	body, err := w.Encode([]byte(`{"parity":"odd","n":1,"amount":0.10,"ts":"2026-12-04T10:00:00Z"}`))
	if err != nil {
		t.Fatal(err)
	}
	type tag struct {
		K string `avro:"k"`
	}
	// tags takes its default, [].
	want, err := avro.Marshal(avro.MustParse(numberAvsc), struct {
		N      int64     `avro:"n"`
		Parity string    `avro:"parity"`
		Amount *big.Rat  `avro:"amount"`
		TS     time.Time `avro:"ts"`
		Tags   []tag     `avro:"tags"`
		Note   *string   `avro:"note"`
	}{1, "odd", big.NewRat(1, 10), time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC), []tag{}, nil})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(body, want) {
		t.Fatalf("encoded % x\nhamba/avro % x", body, want)
	}
	if body, err = w.Encode([]byte(`{"parity":"odd","n":1,"amount":0.10,"ts":"2026-12-04T10:00:00Z","tags":[{"k":"a"}]}`)); err != nil {
		t.Fatal(err)
	}

	reg := srtest.Start(t)
	id, _, err := reg.RegisterSchema("numbers-value", w.Schema())
	if err != nil {
		t.Fatal(err)
	}
	framed, _ := (&sr.ConfluentHeader{}).AppendEncode(nil, id, nil)
	js, _, ok, err := registryAt(t, reg.URL()).JSON(context.Background(), append(framed, body...))
	if err != nil || !ok {
		t.Fatalf("JSON: %v, %v", ok, err)
	}
	if got := `{"n":1,"parity":"odd","amount":0.1,"ts":"2026-12-04T10:00:00Z","tags":[{"k":"a"}],"note":null}`; string(js) != got {
		t.Errorf("read back %s\nwant      %s", js, got)
	}
}

// A value the schema does not take says where, down to the field.
func TestWriterErrorsNameTheField(t *testing.T) {
	avroW := mustWriter(t, config.FormatAvro, numberAvsc, "")
	protoW := mustWriter(t, config.FormatProtobuf, paymentProto2, "shop.Payment")
	jsonW := mustWriter(t, config.FormatJSONSchema, parityJSONSchema, "")
	for _, c := range []struct {
		w    *Writer
		in   string
		path []string
		msg  string
	}{
		{avroW, `{"n":1,"parity":"odd","amount":"x","ts":0}`, []string{"amount"}, `want a decimal, got a string "x"`},
		{avroW, `{"n":1,"parity":"odd","amount":0.001,"ts":0}`, []string{"amount"}, `0.001 has more than the 2 digits after the point of the schema's decimal`},
		{avroW, `{"parity":"odd","amount":1,"ts":0}`, []string{"n"}, `missing, and the schema gives it no default`},
		{avroW, `{"n":1,"parity":"odd","amout":1,"ts":0}`, []string{"amout"}, `the schema has no such field; did you mean amount?`},
		{avroW, `{"n":1,"parity":"odd","amount":1,"ts":0,"tags":[{"k":"a"},{"k":2,"value":1}]}`, []string{"tags", "1", "value"}, `the schema has no such field; allowed: k`},
		{avroW, `{"n":1,"parity":"odd","amount":1,"ts":0,"tags":[{"k":"a"},{}]}`, []string{"tags", "1", "k"}, `missing, and the schema gives it no default`},
		{avroW, `[1]`, nil, `want a record, got an array`},
		{protoW, `{"n":"one"}`, []string{"n"}, `want an int64, got a string "one"`},
		{protoW, `{"n":1,"money":{"currency":"EUR","cents":1}}`, []string{"money", "cents"}, `the schema has no such field; allowed: currency`},
		{jsonW, `{"n":1,"parity":"odd!"}`, []string{"parity"}, `value must be one of 'even', 'odd'`},
	} {
		_, err := c.w.Encode([]byte(c.in))
		if err == nil {
			t.Errorf("%s: no error", c.in)
			continue
		}
		path, msg := ValuePath(err)
		if !slices.Equal(path, c.path) || msg != c.msg {
			t.Errorf("%s: %v, %q; want %v, %q (the error: %v)", c.in, path, msg, c.path, c.msg, err)
		}
	}
}

const (
	paymentProto2 = `syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
message Money { string currency = 1; }
message Payment {
  int64 n = 1;
  string parity = 2;
  Money money = 3;
  google.protobuf.Timestamp ts = 4;
  message Line { int64 qty = 1; }
}
`
	parityJSONSchema = `{"type":"object","properties":{"n":{"type":"integer"},"parity":{"enum":["even","odd"]}},"required":["n"]}`
)

// Protobuf writes the message named (a nested one too) with its message
// indexes; JSON Schema writes the JSON text itself once it is valid.
// Both read back as JSON.
func TestWriterProtobufAndJSONSchema(t *testing.T) {
	reg := srtest.Start(t)
	client := registryAt(t, reg.URL())
	for _, c := range []struct {
		format  config.Format
		text    string
		message string
		in      string
		indexes []byte // the bytes after the id, before the data
		out     string
	}{
		{config.FormatProtobuf, paymentProto2, "Payment", `{"n":7,"ts":"2026-12-04T10:00:00Z","money":{"currency":"EUR"}}`, []byte{0x02, 0x02},
			`{"n":7,"parity":"","money":{"currency":"EUR"},"ts":"2026-12-04T10:00:00Z"}`},
		{config.FormatProtobuf, paymentProto2, "shop.Payment.Line", `{"qty":2}`, []byte{0x04, 0x02, 0x00}, `{"qty":2}`},
		{config.FormatProtobuf, paymentProto2, "", `{"currency":"EUR"}`, []byte{0x00}, `{"currency":"EUR"}`},
		{config.FormatJSONSchema, parityJSONSchema, "", `{"parity":"odd","n":1}`, nil, `{"n":1,"parity":"odd"}`},
	} {
		w := mustWriter(t, c.format, c.text, c.message)
		body, err := w.Encode([]byte(c.in))
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		if !bytes.HasPrefix(body, c.indexes) {
			t.Errorf("%s: the body starts % x, want the indexes % x", c.in, body, c.indexes)
		}
		id, _, err := reg.RegisterSchema("t-value", w.Schema())
		if err != nil {
			t.Fatal(err)
		}
		framed, _ := (&sr.ConfluentHeader{}).AppendEncode(nil, id, nil)
		js, _, ok, err := client.JSON(context.Background(), append(framed, body...))
		if err != nil || !ok || string(js) != c.out {
			t.Errorf("%s: read back %s, %v, %v; want %s", c.in, js, ok, err, c.out)
		}
	}
	if _, err := NewWriter(config.FormatProtobuf, paymentProto2, "Paymnet"); err == nil || err.Error() != "no message Paymnet in the schema; its messages: shop.Money, shop.Payment, shop.Payment.Line" {
		t.Errorf("an unknown message: %v", err)
	}
	if _, err := NewWriter(config.FormatAvro, `{"type":"recrod"}`, ""); err == nil {
		t.Error("a bad Avro schema compiled")
	}

	// Bytes that are not framed, or name an id the registry does not
	// have, or do not read with their schema, are not read.
	for _, b := range [][]byte{[]byte(`{"n":1}`), {0, 0, 0, 0x30, 0x39, 2}, {0, 0, 0, 0, 1, 0xff}} {
		if js, _, ok, err := client.JSON(context.Background(), b); ok || err != nil {
			t.Errorf("% x: read as %s, %v", b, js, err)
		}
	}
}
