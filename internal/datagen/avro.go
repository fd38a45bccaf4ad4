package datagen

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/big"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
)

// Avro says to write the numbers in Avro, in the Confluent wire format,
// with the schema registered under <topic>-value. Each number n is the
// record Number{n, parity, amount, ts}: amount is n cents as a
// decimal(18,2) (so the sum of 1..N is N(N+1)/200, exactly), ts the time
// of writing. Version 2 of the schema adds "note" (a string, default ""),
// the evolution a compatible producer makes.
type Avro struct {
	// Registry is the schema registry's base URL.
	Registry string
	// Version is the schema version to write, 1 (default) or 2.
	Version int
}

// NumberSchemaV1 and NumberSchemaV2 are the two versions of Number.
const (
	NumberSchemaV1 = `{"type":"record","name":"Number","namespace":"eoflow.datagen","fields":[` +
		`{"name":"n","type":"long"},{"name":"parity","type":"string"},` +
		`{"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":18,"scale":2}},` +
		`{"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}}]}`
	NumberSchemaV2 = `{"type":"record","name":"Number","namespace":"eoflow.datagen","fields":[` +
		`{"name":"n","type":"long"},{"name":"parity","type":"string"},` +
		`{"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":18,"scale":2}},` +
		`{"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},` +
		`{"name":"note","type":"string","default":""}]}`
)

// number is one record of Number, for hamba/avro's encoder.
type number struct {
	N      int64     `avro:"n"`
	Parity string    `avro:"parity"`
	Amount *big.Rat  `avro:"amount"`
	TS     time.Time `avro:"ts"`
	Note   string    `avro:"note"`
}

// avroEncoder registers the schema and encodes numbers with it.
type avroEncoder struct {
	schema avro.Schema
	id     int
	v2     bool
}

func (a *Avro) encoder(ctx context.Context, topic string) (*avroEncoder, error) {
	text := NumberSchemaV1
	if a.Version == 2 {
		text = NumberSchemaV2
	} else if a.Version != 0 && a.Version != 1 {
		return nil, fmt.Errorf("schema version %d: want 1 or 2", a.Version)
	}
	s, err := avro.Parse(text)
	if err != nil {
		return nil, err
	}
	cl, err := sr.NewClient(sr.URLs(a.Registry))
	if err != nil {
		return nil, err
	}
	id, err := cl.RegisterSchema(ctx, topic+"-value", sr.Schema{Schema: text, Type: sr.TypeAvro}, -1, -1)
	if err != nil {
		return nil, fmt.Errorf("registering the schema under %s-value at %s: %w", topic, a.Registry, err)
	}
	return &avroEncoder{schema: s, id: id, v2: a.Version == 2}, nil
}

// encode is number n's framed value.
func (e *avroEncoder) encode(n int64, ts time.Time) []byte {
	v := number{N: n, Parity: Parity(n), Amount: new(big.Rat).SetFrac64(n, 100), TS: ts}
	if e.v2 {
		v.Note = "v2"
	}
	body, err := avro.Marshal(e.schema, v)
	if err != nil {
		panic(fmt.Sprintf("encoding number %d: %v", n, err)) // the schema is ours: unreachable
	}
	b, _ := (&sr.ConfluentHeader{}).AppendEncode(make([]byte, 0, 5+len(body)), e.id, nil)
	return append(b, body...)
}

// avroNumber is the n of a framed Number (its first field), if value is one.
func avroNumber(value []byte) (int64, bool) {
	if len(value) < 6 || value[0] != 0 {
		return 0, false
	}
	n, size := binary.Varint(value[5:])
	return n, size > 0
}
