package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
	"github.com/eoflow/pipeline/internal/testkit/paritycheck"
	"github.com/eoflow/pipeline/sink"
)

// A broadcast table in group mode: two processes share the join job
// (testdata/group-table.yaml), each reading the whole table customers, and
// one is killed with SIGKILL while orders arrive and started again. An independent read_committed
// reader finds one output per order, counts in order and each tier's exact
// sum; and the table's one record that is not JSON is one dead letter,
// although each process read it on each of its attempts.
func TestGroupModeBroadcastTable(t *testing.T) {
	k := kafkatest.Broker(t)
	g := newGroupJob(t, k.Bootstrap())
	g.config = "testdata/group-table.yaml"
	customers := g.env["JOB_NAME"] + "-customers"
	g.env["CUSTOMERS_TOPIC"] = customers
	compact := "compact"
	kafkatest.CreateTopic(t, k.Bootstrap(), customers, 2, map[string]*string{"cleanup.policy": &compact})
	cl := kafkatest.Client(t, k.Bootstrap())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	produce := func(recs ...*kgo.Record) {
		t.Helper()
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for c, tier := range enrichTiers[:6] {
		if tier == "none" {
			tier = "gold" // c3: deleted below
		}
		produce(&kgo.Record{Topic: customers, Key: fmt.Appendf(nil, "c%d", c), Value: fmt.Appendf(nil, `{"tier":%q}`, tier)})
	}
	produce(&kgo.Record{Topic: customers, Key: []byte("c3")}, &kgo.Record{Topic: customers, Key: []byte("c9"), Value: []byte(`{"tier":`)})

	var written int64
	orders := func(count int) {
		t.Helper()
		var recs []*kgo.Record
		for range count {
			written++
			recs = append(recs, &kgo.Record{Topic: g.env["INPUT_TOPIC"], Value: fmt.Appendf(nil, `{"id":%d,"customer":"c%d","n":%d}`, written, written%7, written)})
		}
		produce(recs...)
	}
	judge := func() *paritycheck.Report {
		t.Helper()
		outs, err := paritycheck.Read(ctx, g.conn, g.env["OUTPUT_TOPIC"])
		if err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
			t.Fatal(err)
		}
		rep := paritycheck.JudgeBy(outs, written, enrichTier)
		if rep.Duplicated != 0 || rep.OutOfOrder != 0 || rep.WrongValues != 0 {
			t.Fatalf("not exactly once: %v", rep)
		}
		return rep
	}
	await := func() {
		t.Helper()
		defer g.logf("exact after %d orders", written)
		deadline := time.Now().Add(2 * time.Minute)
		for !judge().Exact() {
			if time.Now().After(deadline) {
				t.Fatalf("not exact after %d orders: %v", written, judge())
			}
			g.alive()
			time.Sleep(200 * time.Millisecond)
		}
	}

	a, b := g.member("a"), g.member("b")
	g.logf("starting a and b")
	a.start() // both read the table before either commits: each writes only its own partitions' dead letters
	b.start()
	for deadline := time.Now().Add(time.Minute); strings.Count(a.output(), "member attempt") == 0 || strings.Count(b.output(), "member attempt") == 0; {
		if time.Now().After(deadline) {
			t.Fatal("a and b were not both assigned partitions within a minute")
		}
		g.alive()
		time.Sleep(50 * time.Millisecond)
	}
	g.logf("a and b assigned")
	for range 10 {
		orders(100)
		time.Sleep(100 * time.Millisecond)
	}
	await()
	a.kill() // a's partitions, and their dead-letter duties, go to b and back
	orders(500)
	a.start()
	orders(500)
	await()
	b.terminate()
	g.logf("b stopped")
	a.terminate()
	g.logf("a stopped")
	rep := judge()
	t.Logf("%d orders, %d and %d starts, %d and %d attempts: %v", written, a.started, b.started,
		strings.Count(a.output(), "member attempt"), strings.Count(b.output(), "member attempt"), rep)

	dls := deadLetters(t, &job{t: t, conn: g.conn, env: g.env})
	if len(dls) != 1 {
		t.Fatalf("%d dead letters; want the bad table record's one", len(dls))
	}
	if h := headers(dls[0]); h[sink.HeaderCode] != "decode" || h[sink.HeaderTopic] != customers || string(dls[0].Key) != "c9" {
		t.Errorf("the dead letter: key %q, headers %v", dls[0].Key, h)
	}
}
