package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/eoflow/pipeline/internal/kread"
	"github.com/eoflow/pipeline/internal/srtest"
	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
)

// orderSchema is the Avro value of an order: a decimal beyond float64's
// precision and a timestamp, which crossed the join's repartition topic
// as JSON would come back a float and a string.
const orderSchema = `{"type":"record","name":"Order","fields":[` +
	`{"name":"n","type":"long"},{"name":"customer","type":"string"},` +
	`{"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":22,"scale":2}},` +
	`{"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},{"name":"ms","type":"long"}]}`

// An Avro stream (Avro keys) through a join the job repartitions by its
// key (testdata/group-avro-join.yaml, group mode, the table partitioned
// on three partitions, the orders keyed by order id on six), against a
// real schema registry: the step after the join keeps an order only if
// its _key is still its decoded Avro key and its ts still a timestamp of
// its ms, and the tiers' sums of amounts of 17 significant digits are
// exact. An independent read_committed reader of the output topic judges
// it; no record is a dead letter.
func TestGroupModeAvroJoinRepartitioned(t *testing.T) {
	reg := srtest.Start(t)
	k := kafkatest.Broker(t)
	g := newGroupJob(t, k.Bootstrap())
	g.config = "testdata/group-avro-join.yaml"
	customers := g.env["JOB_NAME"] + "-customers"
	g.env["CUSTOMERS_TOPIC"], g.env["SCHEMA_REGISTRY_URL"] = customers, reg.URL()
	compact := "compact"
	kafkatest.CreateTopic(t, k.Bootstrap(), customers, 3, map[string]*string{"cleanup.policy": &compact})

	valueID, _, err := reg.RegisterSchema(g.env["INPUT_TOPIC"]+"-value", sr.Schema{Schema: orderSchema})
	if err != nil {
		t.Fatal(err)
	}
	keyID, _, err := reg.RegisterSchema(g.env["INPUT_TOPIC"]+"-key", sr.Schema{Schema: `"string"`})
	if err != nil {
		t.Fatal(err)
	}
	valueSchema, keySchema := avro.MustParse(orderSchema), avro.MustParse(`"string"`)
	framed := func(id int, s avro.Schema, v any) []byte {
		t.Helper()
		body, err := avro.Marshal(s, v)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := (&sr.ConfluentHeader{}).AppendEncode(nil, id, nil)
		return append(b, body...)
	}
	type order struct {
		N        int64     `avro:"n"`
		Customer string    `avro:"customer"`
		Amount   *big.Rat  `avro:"amount"`
		TS       time.Time `avro:"ts"`
		MS       int64     `avro:"ms"`
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := kafkatest.Client(t, k.Bootstrap())
	tiers := map[string]string{"c0": "gold", "c1": "silver", "c2": "gold"} // c3, c4: no value
	var recs []*kgo.Record
	for c, tier := range tiers {
		recs = append(recs, &kgo.Record{Topic: customers, Key: []byte(c), Value: fmt.Appendf(nil, `{"tier":%q}`, tier)})
	}
	type total struct {
		count int64
		sum   *big.Rat
	}
	want := map[string]*total{}
	const n = 300
	base := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	for i := int64(1); i <= n; i++ {
		c := fmt.Sprintf("c%d", i%5)
		amount := new(big.Rat).SetFrac64(1234567890123456789+i, 100) // 12345678901234567.89 + i/100
		ts := base.Add(time.Duration(i) * time.Millisecond)
		recs = append(recs, &kgo.Record{Topic: g.env["INPUT_TOPIC"], Key: framed(keyID, keySchema, fmt.Sprintf("o%d", i)),
			Value: framed(valueID, valueSchema, order{N: i, Customer: c, Amount: amount, TS: ts, MS: ts.UnixMilli()})})
		tier, ok := tiers[c]
		if !ok {
			tier = "none"
		}
		if want[tier] == nil {
			want[tier] = &total{sum: new(big.Rat)}
		}
		want[tier].count++
		want[tier].sum.Add(want[tier].sum, amount)
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	// The last total of each tier, read independently.
	read := func() (map[string]map[string]json.Number, error) {
		last := map[string]map[string]json.Number{}
		err := kread.All(ctx, g.conn, g.env["OUTPUT_TOPIC"], func(r *kgo.Record) error {
			var v map[string]json.Number
			d := json.NewDecoder(strings.NewReader(strings.Replace(string(r.Value), `"key":"`+string(r.Key)+`",`, "", 1)))
			d.UseNumber()
			if err := d.Decode(&v); err != nil {
				return fmt.Errorf("output %s: %w", r.Value, err)
			}
			last[string(r.Key)] = v
			return nil
		})
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			err = nil
		}
		return last, err
	}
	exact := func(last map[string]map[string]json.Number) bool {
		if len(last) != len(want) {
			return false
		}
		for tier, w := range want {
			got := last[tier]
			s, ok := new(big.Rat).SetString(string(got["sum"]))
			if got["count"].String() != fmt.Sprint(w.count) || !ok || s.Cmp(w.sum) != 0 {
				return false
			}
		}
		return true
	}
	a := g.member("a")
	a.start()
	var last map[string]map[string]json.Number
	for deadline := time.Now().Add(time.Minute); ; {
		if last, err = read(); err != nil {
			t.Fatal(err)
		}
		if exact(last) {
			break
		}
		if time.Now().After(deadline) {
			for tier, w := range want {
				t.Errorf("tier %s: %v; want count %d, sum %s", tier, last[tier], w.count, w.sum.FloatString(2))
			}
			t.Fatalf("not exact within a minute:\n%s", a.output())
		}
		g.alive()
		time.Sleep(200 * time.Millisecond)
	}
	a.terminate()
	if dls := deadLetters(t, &job{t: t, conn: g.conn, env: g.env}); len(dls) != 0 {
		t.Errorf("%d dead letters, the first: %v %s", len(dls), headers(dls[0]), dls[0].Value)
	}
	t.Logf("totals: %v", last)
}
