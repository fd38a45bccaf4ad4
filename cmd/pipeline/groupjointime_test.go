package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/internal/kread"
	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
)

// Event time across a join's repartition topic, on a real broker, with
// two processes (testdata/group-join-windows.yaml): orders keyed by order
// id on six partitions, joined with a partitioned table of three, so the
// job repartitions them by customer, then tumbling windows of a second
// per tier. The orders of partitions 0 to 2 arrive first, covering six
// seconds of event time; a is killed with SIGKILL; then the orders of
// partitions 3 to 5 arrive, over the same six seconds, and a starts
// again. Each partition of the repartition topic sees a partition's
// orders at +6s before another's at +0s: judged by its own records, it
// would call those late. Judged as single mode judges them, by their own
// partitions' watermarks, none is. An independent read_committed reader
// finds every window of every tier exactly once, with the oracle's count
// and sum, and nothing in the late topic.
func TestGroupRepartitionedJoinWindows(t *testing.T) {
	k := kafkatest.Broker(t)
	g := newGroupJob(t, k.Bootstrap())
	g.config = "testdata/group-join-windows.yaml"
	customers, late := g.env["JOB_NAME"]+"-customers", g.env["JOB_NAME"]+"-late"
	g.env["CUSTOMERS_TOPIC"], g.env["LATE_TOPIC"] = customers, late
	compact := "compact"
	kafkatest.CreateTopic(t, k.Bootstrap(), customers, 3, map[string]*string{"cleanup.policy": &compact})
	kafkatest.CreateTopic(t, k.Bootstrap(), late, 1, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Bootstrap()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	produce := func(recs ...*kgo.Record) {
		t.Helper()
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// The table by the default partitioner, as the join keys are: c3
	// deleted, c6 never there, both "none".
	byKey := kafkatest.Client(t, k.Bootstrap())
	for c, tier := range enrichTiers[:6] {
		rec := &kgo.Record{Topic: customers, Key: fmt.Appendf(nil, "c%d", c)}
		if tier != "none" {
			rec.Value = fmt.Appendf(nil, `{"tier":%q}`, tier)
		}
		if err := byKey.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	t0 := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC).UnixMilli()
	type win struct {
		tier  string
		start int64
	}
	want := map[win][2]int64{}
	var n int64
	// orders writes per of the orders of each of partitions, their event
	// times from t0 up by 50 ms each; the oracle counts them in their
	// windows (each partition's times only grow: none is late).
	orders := func(partitions []int32, per int) {
		t.Helper()
		var recs []*kgo.Record
		for _, p := range partitions {
			for i := range per {
				n++
				ts := t0 + int64(i)*50
				recs = append(recs, &kgo.Record{Topic: g.env["INPUT_TOPIC"], Partition: p, Key: fmt.Appendf(nil, "o%d", n),
					Value: fmt.Appendf(nil, `{"id":%d,"customer":"c%d","n":%d,"ts":%d}`, n, n%7, n, ts)})
				w := win{enrichTier(n), ts - ts%1000}
				c := want[w]
				want[w] = [2]int64{c[0] + 1, c[1] + n}
			}
		}
		produce(recs...)
	}

	a, b := g.member("a"), g.member("b")
	a.start()
	b.start()
	for deadline := time.Now().Add(time.Minute); strings.Count(a.output(), "member attempt") == 0 || strings.Count(b.output(), "member attempt") == 0; {
		if time.Now().After(deadline) {
			t.Fatal("a and b were not both assigned partitions within a minute")
		}
		g.alive()
		time.Sleep(50 * time.Millisecond)
	}
	g.logf("a and b assigned")
	orders([]int32{0, 1, 2}, 120) // t0 to t0+6s
	time.Sleep(2 * time.Second)
	a.kill()
	g.logf("a killed")
	orders([]int32{3, 4, 5}, 120) // the same six seconds, after
	a.start()
	// Every partition's watermark past t0+6s: each window of the orders
	// fires (the closing orders' own window stays open).
	var closing []*kgo.Record
	for p := range int32(6) {
		n++
		closing = append(closing, &kgo.Record{Topic: g.env["INPUT_TOPIC"], Partition: p, Key: fmt.Appendf(nil, "o%d", n),
			Value: fmt.Appendf(nil, `{"id":%d,"customer":"c0","n":%d,"ts":%d}`, n, n, t0+60_000)})
	}
	produce(closing...)

	got := map[win][2]int64{}
	for deadline := time.Now().Add(2 * time.Minute); ; {
		if lates := committed(ctx, t, g.conn, late); len(lates) > 0 {
			t.Fatalf("%d orders went late, the first %s: judged against the repartition topic's own records, not their partitions' watermarks", len(lates), lates[0].Value)
		}
		got = map[win][2]int64{}
		for _, r := range committed(ctx, t, g.conn, g.env["OUTPUT_TOPIC"]) {
			var o struct {
				Key         string
				WindowStart time.Time `json:"window_start"`
				Count, Sum  int64
			}
			if err := json.Unmarshal(r.Value, &o); err != nil {
				t.Fatalf("output %s: %v", r.Value, err)
			}
			w := win{o.Key, o.WindowStart.UnixMilli()}
			if _, dup := got[w]; dup {
				t.Fatalf("window %+v written twice: %s", w, r.Value)
			}
			got[w] = [2]int64{o.Count, o.Sum}
		}
		if len(got) >= len(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after two minutes %d windows of %d: %v", len(got), len(want), got)
		}
		g.alive()
		time.Sleep(200 * time.Millisecond)
	}
	for _, w := range slices.SortedFunc(maps.Keys(want), func(x, y win) int { return strings.Compare(fmt.Sprint(x), fmt.Sprint(y)) }) {
		if got[w] != want[w] {
			t.Errorf("window %+v: (count, sum) %v, want %v", w, got[w], want[w])
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d windows, want %d: %v", len(got), len(want), got)
	}
	b.terminate()
	a.terminate()
	t.Logf("%d orders in %d windows, %d and %d starts", n, len(want), a.started, b.started)
}

// committed is the committed records of topic (none before it exists).
func committed(ctx context.Context, t *testing.T, conn []kgo.Opt, topic string) []*kgo.Record {
	t.Helper()
	var out []*kgo.Record
	err := kread.All(ctx, conn, topic, func(r *kgo.Record) error {
		out = append(out, r)
		return nil
	})
	if err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatal(err)
	}
	return out
}
