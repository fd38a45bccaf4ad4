package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
	"github.com/eoflow/pipeline/internal/testkit/paritycheck"
	"github.com/eoflow/pipeline/sink"
)

// enrichConfig is the table join example: orders enriched from the
// compacted topic customers, counted and summed per customer tier.
const enrichConfig = "../../examples/orders-enrich/config.yaml"

// The customers of the test: order n is customer c<n mod 7>'s. c3 is
// written and then deleted (a tombstone), c6 is never written: both count
// under "none". c5's tier changes before the job starts: the latest
// value counts.
var enrichTiers = []string{"gold", "silver", "bronze", "none", "silver", "silver", "none"}

func enrichTier(n int64) string { return enrichTiers[n%7] }

// The table join example exactly once under SIGKILL (one process): the
// table read before the first order, orders arriving on four partitions,
// and updates of the customers that keep their tiers arriving too, while
// the process is killed at every fault point and at random and restarted
// each time. An independent read_committed reader then finds one output
// per order, counts in order, and each tier's exact sum: every order
// joined with its customer's tier once; and one dead letter of the table
// record that is not JSON, though every start read it again.
func TestJoinJobExactUnderSIGKILL(t *testing.T) {
	j := newJob(t, "exactly_once")
	j.config = enrichConfig
	k := kafkatest.Broker(t)
	customers := j.env["JOB_NAME"] + "-customers"
	j.env["ORDERS_TOPIC"] = j.env["INPUT_TOPIC"]
	j.env["CUSTOMERS_TOPIC"] = customers
	compact := "compact"
	kafkatest.CreateTopic(t, k.Bootstrap(), customers, 2, map[string]*string{"cleanup.policy": &compact})
	cl := kafkatest.Client(t, k.Bootstrap())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	produce := func(recs ...*kgo.Record) {
		t.Helper()
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	customer := func(c int, tier string, version int64) *kgo.Record {
		return &kgo.Record{Topic: customers, Key: fmt.Appendf(nil, "c%d", c), Value: fmt.Appendf(nil, `{"tier":%q,"v":%d}`, tier, version)}
	}
	for c, tier := range enrichTiers[:6] {
		if c == 5 {
			produce(customer(c, "gold", 0)) // replaced just below
		}
		if tier == "none" {
			tier = "gold" // c3: deleted just below
		}
		produce(customer(c, tier, 0))
	}
	produce(customer(5, "silver", 1), &kgo.Record{Topic: customers, Key: []byte("c3")})
	// A record of the table that is not JSON: one dead letter, whatever
	// the restarts (each reads the table again from its start); c9 is no
	// order's customer.
	produce(&kgo.Record{Topic: customers, Key: []byte("c9"), Value: []byte(`{"tier":`)})

	seed := uint64(envInt(t, "CRASH_SEED", time.Now().UnixNano()))
	t.Logf("seed %d (CRASH_SEED=%d replays it)", seed, seed)
	var written int64
	crashLoop(t, j, func() {
		var recs []*kgo.Record
		for range 200 {
			written++
			recs = append(recs, &kgo.Record{Topic: j.env["ORDERS_TOPIC"], Value: fmt.Appendf(nil, `{"id":%d,"customer":"c%d","n":%d}`, written, written%7, written)})
		}
		// An update of a live customer that keeps its tier: the table
		// changes while orders arrive, the result must not.
		c := int(written/200) % 3
		recs = append(recs, customer(c, enrichTiers[c], written))
		produce(recs...)
		time.Sleep(50 * time.Millisecond)
	}, 2, rand.New(rand.NewPCG(seed, 0)))
	j.start()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		outs, err := paritycheck.Read(ctx, j.conn, j.env["OUTPUT_TOPIC"])
		if err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
			t.Fatal(err)
		}
		rep := paritycheck.JudgeBy(outs, written, enrichTier)
		if rep.Duplicated != 0 || rep.OutOfOrder != 0 || rep.WrongValues != 0 {
			t.Fatalf("seed %d: not exactly once: %v", seed, rep)
		}
		if rep.Exact() {
			t.Logf("%d orders, %d starts: every tier exact: %v", written, j.started, rep)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("seed %d: after %d starts, not exact: %v", seed, j.started, rep)
		}
		time.Sleep(250 * time.Millisecond)
	}
	j.terminate()
	dls := deadLetters(t, j)
	if len(dls) != 1 {
		t.Fatalf("seed %d: %d dead letters after %d starts; want the bad table record's one", seed, len(dls), j.started)
	}
	if h := headers(dls[0]); h[sink.HeaderCode] != "decode" || h[sink.HeaderTopic] != customers || h[sink.HeaderStep] != "tables[0]" || string(dls[0].Key) != "c9" {
		t.Errorf("the table record's dead letter: key %q, headers %v", dls[0].Key, h)
	}
}
