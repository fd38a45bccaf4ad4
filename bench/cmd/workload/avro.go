package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
)

// eventSchema is the flat shape's record in Avro: the same fields and
// values, so the Avro and JSON keyed sums compute the same outputs.
const eventSchema = `{"type":"record","name":"Event","namespace":"eoflow.bench","fields":[` +
	`{"name":"key","type":"string"},{"name":"amount","type":"long"},{"name":"ts","type":"long"},{"name":"pad","type":"string"}]}`

type event struct {
	Key    string `avro:"key" json:"key"`
	Amount int64  `avro:"amount" json:"amount"`
	TS     int64  `avro:"ts" json:"ts"`
	Pad    string `avro:"pad" json:"pad"`
}

// avroEvents encodes the flat shape's JSON values as Avro records.
type avroEvents struct {
	schema avro.Schema
	id     int
}

func newAvroEvents(ctx context.Context, registry, topic string) (*avroEvents, error) {
	if registry == "" {
		return nil, fmt.Errorf("-format avro needs -registry or SCHEMA_REGISTRY_URL")
	}
	cl, err := sr.NewClient(sr.URLs(registry))
	if err != nil {
		return nil, err
	}
	id, err := cl.RegisterSchema(ctx, topic+"-value", sr.Schema{Schema: eventSchema}, -1, -1)
	if err != nil {
		return nil, fmt.Errorf("registering the event schema at %s: %w", registry, err)
	}
	return &avroEvents{schema: avro.MustParse(eventSchema), id: id}, nil
}

func (a *avroEvents) encode(js []byte) ([]byte, error) {
	var e event
	if err := json.Unmarshal(js, &e); err != nil {
		return nil, err
	}
	body, err := avro.Marshal(a.schema, e)
	if err != nil {
		return nil, err
	}
	b, _ := (&sr.ConfluentHeader{}).AppendEncode(make([]byte, 0, 5+len(body)), a.id, nil)
	return append(b, body...), nil
}
