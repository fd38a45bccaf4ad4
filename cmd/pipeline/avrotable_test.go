package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/internal/kread"
	"github.com/eoflow/pipeline/internal/srtest"
	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
	"github.com/eoflow/pipeline/sink"
)

// The Avro table cross-check: Confluent's AvroSerializer writes the
// table customers (keys Avro strings, values Customer records in two
// schema versions, a tombstone, and two values that do not decode), and
// testdata/avro-table.yaml joins JSON orders with it, killed with SIGKILL
// once between two halves of the orders. Each customer's value is read
// with its own writer schema; the decimal discounts sum exactly; the two
// bad values are one dead letter each (code schema), however often the
// table is read.
func TestAvroTableJoinedWithConfluentRecords(t *testing.T) {
	reg := srtest.Start(t)
	j := newJob(t, "exactly_once")
	j.config = "testdata/avro-table.yaml"
	k := kafkatest.Broker(t)
	customers := j.env["JOB_NAME"] + "-customers"
	compact := "compact"
	kafkatest.CreateTopic(t, k.Bootstrap(), customers, 2, map[string]*string{"cleanup.policy": &compact})
	j.env["SCHEMA_REGISTRY_URL"], j.env["CUSTOMERS_TOPIC"] = reg.URL(), customers
	confluent(t, nil, "confluent_table.py", "produce", j.env["KAFKA_BROKERS"], reg.URL(), customers)

	// The table as confluent_table.py's docstring writes it.
	type customer struct {
		tier     string
		discount *big.Rat
	}
	rat := func(s string) *big.Rat { r, _ := new(big.Rat).SetString(s); return r }
	table := map[string]customer{"c1": {"gold", rat("0.10")}, "c2": {"gold", rat("0.20")}, "c3": {"bronze", rat("0")}}
	type total struct {
		count, sum int64
		discount   *big.Rat
	}
	want := map[string]*total{}
	cl := kafkatest.Client(t, k.Bootstrap())
	const n = 600
	orders := func(from, to int64) {
		t.Helper()
		var recs []*kgo.Record
		for i := from; i <= to; i++ {
			c := fmt.Sprintf("c%d", i%6+1) // c4: deleted; c5, c6: never written
			recs = append(recs, &kgo.Record{Topic: j.env["INPUT_TOPIC"], Value: fmt.Appendf(nil, `{"customer":%q,"n":%d}`, c, i)})
			cu, ok := table[c]
			tier := "none"
			if ok {
				tier = cu.tier
			}
			tt := want[tier]
			if tt == nil {
				tt = &total{discount: new(big.Rat)}
				want[tier] = tt
			}
			tt.count++
			tt.sum += i
			if ok {
				tt.discount.Add(tt.discount, new(big.Rat).Mul(big.NewRat(i, 1), cu.discount))
			}
		}
		if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	j.start()
	orders(1, n/2)
	j.awaitOutputs(n / 2)
	j.kill()
	orders(n/2+1, n)
	j.start()
	j.awaitOutputs(n)
	j.terminate()

	// The last output of each tier, read independently.
	last := map[string]map[string]json.Number{}
	if err := kread.All(context.Background(), j.conn, j.env["OUTPUT_TOPIC"], func(r *kgo.Record) error {
		var v map[string]json.Number
		d := json.NewDecoder(strings.NewReader(strings.Replace(string(r.Value), `"key":"`+string(r.Key)+`",`, "", 1)))
		d.UseNumber()
		if err := d.Decode(&v); err != nil {
			return fmt.Errorf("output %s: %w", r.Value, err)
		}
		last[string(r.Key)] = v
		return nil
	}); err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatal(err)
	}
	if len(last) != len(want) {
		t.Errorf("tiers %v, want %v", last, want)
	}
	for tier, w := range want {
		got := last[tier]
		d, ok := new(big.Rat).SetString(string(got["discount"]))
		if got["count"].String() != fmt.Sprint(w.count) || got["sum"].String() != fmt.Sprint(w.sum) || !ok || d.Cmp(w.discount) != 0 {
			t.Errorf("tier %s: %v; want count %d, sum %d, discount %s", tier, got, w.count, w.sum, w.discount.FloatString(2))
		}
	}
	dls := deadLetters(t, j)
	if len(dls) != 2 {
		t.Fatalf("%d dead letters, want the two bad table values' one each", len(dls))
	}
	var reasons []string
	for i, dl := range dls {
		h := headers(dl)
		reasons = append(reasons, h[sink.HeaderReason])
		if h[sink.HeaderCode] != "schema" || h[sink.HeaderStep] != "tables[0]" || h[sink.HeaderTopic] != customers {
			t.Errorf("dead letter %d: %v; want code schema, step tables[0], topic %s", i, h, customers)
		}
	}
	slices.Sort(reasons) // the two records may be in either partition
	if !strings.Contains(reasons[0], "schema id 99999") || !strings.Contains(reasons[1], "not in the Confluent wire format") {
		t.Errorf("the dead letters' reasons: %q", reasons)
	}
	t.Logf("totals: %v", last)
}
