package paritycheck

import (
	"context"
	"fmt"
	"math/big"
	"sync"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/eoflow/pipeline/internal/kread"
)

// AvroOutput is one output of examples/avro-sum: the parity-sum output
// and the exact sum of the amounts (n cents each).
type AvroOutput struct {
	Output
	Amount *big.Rat
}

// ReadAvro returns the committed outputs of topic per key, in log order,
// decoded the way an independent reader would: each record's writer
// schema fetched by its id from the registry at registryURL, and decoded
// by hamba/avro's generic reader (decimals as big.Rat), not by the
// pipeline's own decoders.
func ReadAvro(ctx context.Context, conn []kgo.Opt, topic, registryURL string) (map[string][]AvroOutput, error) {
	cl, err := sr.NewClient(sr.URLs(registryURL))
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	schemas := map[int]avro.Schema{}
	schemaOf := func(id int) (avro.Schema, error) {
		mu.Lock()
		defer mu.Unlock()
		if s, ok := schemas[id]; ok {
			return s, nil
		}
		ss, err := cl.SchemaByID(ctx, id)
		if err != nil {
			return nil, err
		}
		s, err := avro.Parse(ss.Schema)
		if err != nil {
			return nil, err
		}
		schemas[id] = s
		return s, nil
	}
	var h sr.ConfluentHeader
	out := map[string][]AvroOutput{}
	err = kread.All(ctx, conn, topic, func(r *kgo.Record) error {
		where := fmt.Sprintf("output %s/%d@%d", r.Topic, r.Partition, r.Offset)
		id, body, err := h.DecodeID(r.Value)
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		s, err := schemaOf(id)
		if err != nil {
			return fmt.Errorf("%s: schema id %d: %w", where, id, err)
		}
		var v map[string]any
		if err := avro.Unmarshal(s, body, &v); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		var o AvroOutput
		var ok1, ok2, ok3 bool
		o.Key, ok1 = v["key"].(string)
		o.Count, ok2 = v["count"].(int64)
		o.Sum, ok3 = v["sum"].(int64)
		o.Amount, _ = v["amount"].(*big.Rat)
		if !ok1 || !ok2 || !ok3 || o.Amount == nil {
			return fmt.Errorf("%s: unexpected record %v", where, v)
		}
		if string(r.Key) != o.Key {
			return fmt.Errorf("%s: record key %q, value key %q", where, r.Key, o.Key)
		}
		out[o.Key] = append(out[o.Key], o)
		return nil
	})
	return out, err
}

// JudgeAvro is Judge over the Avro outputs, and checks that every
// output's amount is exactly its sum in cents (each number n is n cents).
func JudgeAvro(outputs map[string][]AvroOutput, n int64) *Report {
	plain := map[string][]Output{}
	var bad []string
	var wrong int64
	for k, outs := range outputs {
		for _, o := range outs {
			plain[k] = append(plain[k], o.Output)
			if want := new(big.Rat).SetFrac64(o.Sum, 100); o.Amount.Cmp(want) != 0 {
				wrong++
				if len(bad) < 5 {
					bad = append(bad, fmt.Sprintf("%s count %d: amount %s, want %s (sum %d cents)", k, o.Count, o.Amount.FloatString(2), want.FloatString(2), o.Sum))
				}
			}
		}
	}
	rep := Judge(plain, n)
	rep.WrongValues = wrong
	rep.Problems = append(rep.Problems, bad...)
	return rep
}
