package schema

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"

	"github.com/eoflow/pipeline/operator"
)

// confluentFixture is testdata/confluent_protobuf.json, written by
// Confluent's Python client (cmd/pipeline/testdata/confluent_formats.py
// fixture): the schema its ProtobufSerializer registers for
// cmd/pipeline/testdata/crosscheck.proto (its serialized form, the
// descriptor protoc put in the generated code, without json_name), and
// records it wrote, framed with the mock registry's id.
type confluentFixture struct {
	Schema  string `json:"schema"`
	Records []struct {
		N        int64  `json:"n"`
		UnitCost string `json:"unit_cost"` // at scale 2; empty: number n's
		Hex      string `json:"hex"`
	} `json:"records"`
}

// confluentNumber is number n of confluent_formats.py as the values it
// reads as (unitCost: its unit cost's text, when not n's own).
func confluentNumber(t *testing.T, n int64, unitCost string) map[string]any {
	t.Helper()
	parity := "odd"
	if n%2 == 0 {
		parity = "even"
	}
	if unitCost == "" {
		scale := 2 + n%3
		unscaled := new(big.Int).Mul(big.NewInt(n-1000), new(big.Int).Exp(big.NewInt(10), big.NewInt(scale-2), nil))
		d, err := operator.NewDecimal(unscaled, int(scale))
		if err != nil {
			t.Fatal(err)
		}
		unitCost = d.String()
	}
	v := map[string]any{
		"n": n, "parity": parity, "amount": int64(1)<<53 + n, "ts": time.Unix(1767225600+n, n*1001).UTC(),
		"bonus": nil, "price": float64(n) / 4, "unit_cost": mustDecimal(t, unitCost),
	}
	if n%5 == 0 {
		v["bonus"] = n
	}
	return v
}

// TestProtobufReadsConfluentPythonSerializer: what Confluent's Python
// ProtobufSerializer registers and writes reads as the values it was
// given: the schema in its serialized form (which did not compile: its
// fields have no json_name, and protocompile took each for a custom JSON
// name "", conflicting with the next), the message indexes [0], [1] and
// [1, 1], int64, sint64 and sfixed64 beyond 2^53, Timestamps with
// nanoseconds, wrappers set or not, and confluent.type.Decimal unit
// costs exactly, across the edges of their two's-complement bytes. A
// Number (index [0]) written by this package's writer is byte-for-byte
// what Confluent's wrote.
func TestProtobufReadsConfluentPythonSerializer(t *testing.T) {
	b, err := os.ReadFile("testdata/confluent_protobuf.json")
	if err != nil {
		t.Fatal(err)
	}
	var fx confluentFixture
	if err := json.Unmarshal(b, &fx); err != nil {
		t.Fatal(err)
	}
	reg := srfake.New()
	defer reg.Close()
	id, _, err := reg.RegisterSchema("numbers-value", sr.Schema{Schema: fx.Schema, Type: sr.TypeProtobuf})
	if err != nil {
		t.Fatal(err)
	}
	set, err := New(protoJob(t, reg.URL(), "protobuf", "json"), quiet(), nil)
	if err != nil {
		t.Fatal(err)
	}
	pf, err := compileProto(fx.Schema, nil)
	if err != nil {
		t.Fatalf("the schema Confluent's serializer registered: %v", err)
	}
	w, err := pf.writer()
	if err != nil {
		t.Fatal(err)
	}
	indexes := map[int64]string{0: "00", 1: "0202", 2: "040202"} // n % 3: [0], [1], [1, 1]
	for _, r := range fx.Records {
		t.Run(fmt.Sprintf("n=%d,unit_cost=%s", r.N, r.UnitCost), func(t *testing.T) {
			rec, err := hex.DecodeString(r.Hex)
			if err != nil {
				t.Fatal(err)
			}
			if got := hex.EncodeToString(rec[5 : 5+len(indexes[r.N%3])/2]); got != indexes[r.N%3] {
				t.Fatalf("message indexes %s, want %s", got, indexes[r.N%3])
			}
			framed, _ := header.AppendEncode(nil, id, nil) // this registry's id
			framed = append(framed, rec[5:]...)
			kr := &kgo.Record{Topic: "payments", Value: framed}
			if err := set.Prefetch(context.Background(), []*kgo.Record{kr}); err != nil {
				t.Fatal(err)
			}
			dec, rerr := set.Inputs()["payments"].Value.DecodeObject(framed)
			if rerr != nil {
				t.Fatal(rerr)
			}
			if !dec.Decimals {
				t.Error("the schema's decimals are not announced: expressions would not compute with them")
			}
			want := confluentNumber(t, r.N, r.UnitCost)
			if r.N%3 != 0 {
				want["header"] = map[string]any{"source": "confluent"}
			}
			if got := normalizeDecimal(dec.Fields); !equalValue(got, normalizeDecimal(want)) {
				t.Fatalf("read\n%v\nwant\n%v", got, normalizeDecimal(want))
			}
			if r.N%3 != 0 {
				return
			}
			out, err := w.appendObject(nil, want)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out, rec[5:]) {
				t.Fatalf("written\n%x\nConfluent's\n%x", out, rec[5:])
			}
		})
	}
}

// TestProtobufSerializedReference: a referenced schema in the serialized
// form (Confluent's Python serializer registers an import so, under the
// producer's file name) compiles under the name it is imported by.
func TestProtobufSerializedReference(t *testing.T) {
	common, err := compileProto(`syntax = "proto3"; package shop; enum Channel { WEB = 0; STORE = 1; } message Money { string currency_code = 1; string amount_text = 2; }`, nil)
	if err != nil {
		t.Fatal(err)
	}
	fdp := protodesc.ToFileDescriptorProto(common.file)
	fdp.Name = proto.String("shop/v1/common.proto") // the producer's name
	for _, f := range fdp.MessageType[0].Field {
		f.JsonName = nil // as protoc embeds it in generated code
	}
	b, err := proto.Marshal(fdp)
	if err != nil {
		t.Fatal(err)
	}
	pf, err := compileProto(paymentProto, []sr.SubjectSchema{{Subject: "common.proto", Schema: sr.Schema{Schema: base64.StdEncoding.EncodeToString(b)}}})
	if err != nil {
		t.Fatal(err)
	}
	money := pf.file.Messages().ByName("Payment").Fields().ByName("money").Message()
	if money.FullName() != "shop.Money" || money.ParentFile().Path() != "common.proto" || money.Fields().ByName("currency_code").JSONName() != "currencyCode" {
		t.Fatalf("money: %s in %s, json name %s", money.FullName(), money.ParentFile().Path(), money.Fields().ByName("currency_code").JSONName())
	}
}
