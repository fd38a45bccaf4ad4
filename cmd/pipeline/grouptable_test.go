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

// Tables in group mode: two processes share the join job
// (testdata/group-table.yaml), and one is killed with SIGKILL while orders
// arrive and started again. broadcast: each process reads the whole table
// customers. partitioned: the orders are keyed by customer and the table
// has their topic's six partitions, so each process reads only the table
// partitions of its order partitions, and looks each order's key up
// there. An independent read_committed reader finds one output per
// order, counts in order and each tier's exact sum; and the table's one
// record that is not JSON is one dead letter, although each process read
// its partition on each of its attempts.
//
// repartitioned: the table is partitioned, with three partitions, and the
// orders are keyed by order id on six: the job repartitions them by the
// join key (config/joinrepartition.go), and each process reads the table
// partitions of its partitions of that topic. A filter after the join
// keeps only orders whose _key is still their own id, so every order
// counts only if the record key crossed the repartition with it.
func TestGroupModeTables(t *testing.T) {
	for _, mode := range []string{"broadcast", "partitioned", "repartitioned"} {
		t.Run(mode, func(t *testing.T) { groupModeTable(t, mode) })
	}
}

func groupModeTable(t *testing.T, mode string) {
	k := kafkatest.Broker(t)
	g := newGroupJob(t, k.Bootstrap())
	g.config = "testdata/group-table.yaml"
	customers := g.env["JOB_NAME"] + "-customers"
	g.env["CUSTOMERS_TOPIC"], g.env["TABLE_MODE"] = customers, mode
	parts := int32(2)
	orderKey := func(n int64) []byte { return fmt.Appendf(nil, "c%d", n%7) }
	assignedOf := "-in/" // the topic whose partitions carry the table's
	switch mode {
	case "partitioned":
		g.env["JOIN_KEY"], parts = "_key", 6 // the orders topic's count
	case "repartitioned":
		g.env["TABLE_MODE"], g.env["KEEP"], parts = "partitioned", `_key == "o" + string(id)`, 3
		orderKey = func(n int64) []byte { return fmt.Appendf(nil, "o%d", n) }
		assignedOf = "-enrich-repartition/"
	}
	compact := "compact"
	kafkatest.CreateTopic(t, k.Bootstrap(), customers, parts, map[string]*string{"cleanup.policy": &compact})
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
			// Keyed by customer: co-partitioned with the table (the
			// same partitioner, the same count) in the partitioned case.
			recs = append(recs, &kgo.Record{Topic: g.env["INPUT_TOPIC"], Key: orderKey(written),
				Value: fmt.Appendf(nil, `{"id":%d,"customer":"c%d","n":%d}`, written, written%7, written)})
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

	if mode != "broadcast" {
		for _, m := range []*job{a, b} {
			if err := tableReadsFollowAssignments(m.output(), assignedOf); err != nil {
				t.Errorf("%v:\n%s", err, m.output())
			}
		}
	}
	dls := deadLetters(t, &job{t: t, conn: g.conn, env: g.env})
	if len(dls) != 1 {
		t.Fatalf("%d dead letters; want the bad table record's one", len(dls))
	}
	if h := headers(dls[0]); h[sink.HeaderCode] != "decode" || h[sink.HeaderTopic] != customers || string(dls[0].Key) != "c9" {
		t.Errorf("the dead letter: key %q, headers %v", dls[0].Key, h)
	}
}

// tableReadsFollowAssignments checks a process's log in the partitioned
// cases: each attempt reads as many partitions of the table as it was
// assigned of the topic that carries them, whose partitions' names
// contain of (the co-partitioned input topic, or the join's repartition
// topic; all of them once the other process has stopped: a count, not a
// fixed number, is the rule), and at least one attempt read the table.
func tableReadsFollowAssignments(log, of string) error {
	assigned, reads := -1, 0
	for _, line := range strings.Split(log, "\n") {
		switch {
		case strings.Contains(line, "member attempt"):
			assigned = strings.Count(line, of)
		case strings.Contains(line, "table read to its end"):
			reads++
			var n int
			i := strings.Index(line, " partitions=")
			if i < 0 {
				return fmt.Errorf("a table read without its partition count: %s", line)
			}
			if _, err := fmt.Sscanf(line[i:], " partitions=%d", &n); err != nil || n != assigned {
				return fmt.Errorf("an attempt assigned %d input partitions read %s of the table", assigned, line[i+1:])
			}
		}
	}
	if reads == 0 {
		return errors.New("no attempt read the table")
	}
	return nil
}
