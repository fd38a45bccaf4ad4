package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/internal/fault"
	"github.com/eoflow/pipeline/internal/kread"
	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
)

// asOfConfig is the example of a join as of event time: orders with the
// tier their customer had at the order's time.
const asOfConfig = "../../examples/orders-asof/config.yaml"

// asOfT0 is the event time of order 0, a day ago (the broker refuses
// timestamps more than an hour ahead); order i is at i seconds after it,
// customer c<i mod 4>'s (c3 is never in the table).
var asOfT0 = time.Now().Add(-24 * time.Hour).Truncate(time.Second)

// asOfVersion is one record of the customers table: key, tier ("" a
// tombstone) and timestamp.
type asOfVersion struct {
	key, tier string
	at        time.Time
}

// asOfTier is the oracle: customer c's tier as of t, from the table's
// records alone (the latest timestamp at or before t, the later record
// on a tie; a tombstone or none: "none").
func asOfTier(versions []asOfVersion, c string, t time.Time) string {
	tier, found := "", false
	var best time.Time
	for _, v := range versions {
		if v.key == c && !v.at.After(t) && (!found || !v.at.Before(best)) {
			tier, best, found = v.tier, v.at, true
		}
	}
	if !found || tier == "" {
		return "none"
	}
	return tier
}

// The join as of event time exactly once under SIGKILL (one process):
// orders on four partitions and new tiers of the customers (a tombstone
// among them) stamped with event times among the orders', both arriving
// while the process is killed at every fault point and at random and
// restarted each time. A record far ahead then releases every order, and
// an independent read_committed reader finds each order once, with the
// tier the table's records say its customer had at the order's time,
// whichever of the two topics the job read first.
func TestAsOfJoinExactUnderSIGKILL(t *testing.T) {
	j := newJob(t, "exactly_once")
	j.config = asOfConfig
	k := kafkatest.Broker(t)
	customers := j.env["JOB_NAME"] + "-customers"
	j.env["ORDERS_TOPIC"] = j.env["INPUT_TOPIC"] // 4 partitions
	j.env["CUSTOMERS_TOPIC"] = customers
	compact := "compact"
	kafkatest.CreateTopic(t, k.Bootstrap(), customers, 1, map[string]*string{"cleanup.policy": &compact})
	cl := kafkatest.Client(t, k.Bootstrap())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	produce := func(recs ...*kgo.Record) {
		t.Helper()
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var versions []asOfVersion
	version := func(v asOfVersion) *kgo.Record {
		versions = append(versions, v)
		r := &kgo.Record{Topic: customers, Key: []byte(v.key), Timestamp: v.at}
		if v.tier != "" {
			r.Value = fmt.Appendf(nil, `{"tier":%q}`, v.tier)
		}
		return r
	}
	orderAt := func(i int64) time.Time { return asOfT0.Add(time.Duration(i) * time.Second) }
	produce(version(asOfVersion{"c0", "gold", asOfT0}), version(asOfVersion{"c1", "silver", asOfT0}), version(asOfVersion{"c2", "bronze", asOfT0}))

	seed := uint64(envInt(t, "CRASH_SEED", time.Now().UnixNano()))
	t.Logf("seed %d (CRASH_SEED=%d replays it)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	tiers := []string{"gold", "silver", "bronze", ""}
	var written int64
	// Every fault point but the state topic's: the job keeps no keyed state
	// (the held records are in the checkpoint record).
	points := slices.DeleteFunc(slices.Clone(fault.Points), func(p fault.Point) bool { return p == fault.WhileWritingState || p == fault.DuringRestore })
	crashLoopAt(t, j, points, func() {
		var recs []*kgo.Record
		for range 50 {
			written++
			recs = append(recs, &kgo.Record{Topic: j.env["ORDERS_TOPIC"], Partition: int32(written % 4),
				Value: fmt.Appendf(nil, `{"id":%d,"customer":"c%d","n":%d,"ts":%d}`, written, written%4, written, orderAt(written).UnixMilli())})
		}
		// A new tier for a customer, from a time among this round's
		// orders: the table's times grow, the orders around it meet the
		// old tier or the new one by their time alone.
		at := orderAt(written - int64(rng.IntN(50)))
		if last := versions[len(versions)-1].at; at.Before(last) {
			at = last
		}
		recs = append(recs, version(asOfVersion{fmt.Sprintf("c%d", rng.IntN(3)), tiers[rng.IntN(len(tiers))], at}))
		rng.Shuffle(len(recs), func(a, b int) { recs[a], recs[b] = recs[b], recs[a] })
		produce(recs...)
		time.Sleep(50 * time.Millisecond)
	}, 2, rand.New(rand.NewPCG(seed, 0)))
	j.start()
	produce(version(asOfVersion{"zz", "far", orderAt(written + 1000)})) // releases every order

	deadline := time.Now().Add(2 * time.Minute)
	for {
		got := map[int64]int{}
		err := kread.All(ctx, j.conn, j.env["OUTPUT_TOPIC"], func(r *kgo.Record) error {
			var o struct {
				ID       int64  `json:"id"`
				Customer string `json:"customer"`
				TS       int64  `json:"ts"`
				Tier     string `json:"tier"`
			}
			if err := json.Unmarshal(r.Value, &o); err != nil {
				return fmt.Errorf("output %s: %w", r.Value, err)
			}
			if o.ID < 1 || o.ID > written {
				return fmt.Errorf("output %s: an order never written", r.Value)
			}
			if want := asOfTier(versions, o.Customer, time.UnixMilli(o.TS)); o.Tier != want {
				return fmt.Errorf("order %d (%s at %s) met tier %q, the table's records say %q", o.ID, o.Customer, time.UnixMilli(o.TS).UTC(), o.Tier, want)
			}
			got[o.ID]++
			return nil
		})
		if err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
			t.Fatalf("seed %d: %v", seed, err)
		}
		for id, n := range got {
			if n > 1 {
				t.Fatalf("seed %d: order %d written %d times", seed, id, n)
			}
		}
		if int64(len(got)) == written {
			t.Logf("%d orders, %d table records, %d starts: each order once, with its tier as of its time", written, len(versions), j.started)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("seed %d: after %d starts, %d of %d orders written", seed, j.started, len(got), written)
		}
		time.Sleep(250 * time.Millisecond)
	}
	j.terminate()
}

// asOfConfigWith writes a copy of the orders-asof example that runs
// workers workers, and returns its path.
func asOfConfigWith(t *testing.T, workers int) string {
	t.Helper()
	data, err := os.ReadFile(asOfConfig)
	if err != nil {
		t.Fatal(err)
	}
	const after = "\ncheckpoint:\n"
	if !strings.Contains(string(data), after) {
		t.Fatalf("the orders-asof example no longer has %q", after)
	}
	changed := strings.Replace(string(data), after, fmt.Sprintf("\nworkers: %d\n%s", workers, after), 1)
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// A savepoint of a join as of event time taken while the join holds
// records, as a user takes it: `pipeline savepoint create` while every
// order waits for the table, `savepoint inspect` says how many are held,
// SIGTERM; then a job of another name (so nothing but the savepoint can
// give the records back) with another worker count starts from it, the
// table passes the orders, and an independent reader finds each order
// once, with its tier as of its time.
func TestAsOfJoinSavepointRestoresHeldRecords(t *testing.T) {
	asOfSavepointRoundTrip(t, nil)
}

// The same in group mode: the savepoint is the group's (written from
// Kafka: each source partition's held records at the group's committed
// offset), and the job of another name starts from it in group mode,
// whose import gives each partition's held records back to the member
// that reads it.
func TestGroupAsOfJoinSavepointRestoresHeldRecords(t *testing.T) {
	asOfSavepointRoundTrip(t, map[string]string{"SCALE_MODE": "group", "PIPELINE_INSTANCE_ID": "a",
		"SCALE_PARTITIONS": "2", "SESSION_TIMEOUT": "6s"})
}

// asOfSavepointRoundTrip is the savepoint of held orders and the start of
// another job from it, both with env added to the job's environment.
func asOfSavepointRoundTrip(t *testing.T, env map[string]string) {
	j := newJob(t, "exactly_once")
	maps.Copy(j.env, env)
	j.config = asOfConfigWith(t, 1)
	j.env["ADMIN_LISTEN"] = "127.0.0.1:0"
	j.env["PIPELINE_ADMIN_TOKEN"] = "test-token"
	j.env["SAVEPOINT_DIR"] = t.TempDir()
	k := kafkatest.Broker(t)
	customers := j.env["JOB_NAME"] + "-customers"
	j.env["ORDERS_TOPIC"] = j.env["INPUT_TOPIC"] // 4 partitions
	j.env["CUSTOMERS_TOPIC"] = customers
	compact := "compact"
	kafkatest.CreateTopic(t, k.Bootstrap(), customers, 1, map[string]*string{"cleanup.policy": &compact})
	cl := kafkatest.Client(t, k.Bootstrap(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	produce := func(recs ...*kgo.Record) {
		t.Helper()
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	versions := []asOfVersion{{"c0", "gold", asOfT0}, {"c1", "silver", asOfT0}, {"c2", "bronze", asOfT0}}
	table := func(vs ...asOfVersion) {
		t.Helper()
		for _, v := range vs {
			r := &kgo.Record{Topic: customers, Key: []byte(v.key), Timestamp: v.at}
			if v.tier != "" {
				r.Value = fmt.Appendf(nil, `{"tier":%q}`, v.tier)
			}
			produce(r)
		}
	}
	table(versions...)
	const orders = 40
	orderAt := func(i int64) time.Time { return asOfT0.Add(time.Duration(i) * time.Second) }
	var recs []*kgo.Record
	for i := int64(1); i <= orders; i++ {
		recs = append(recs, &kgo.Record{Topic: j.env["ORDERS_TOPIC"], Partition: int32(i % 4),
			Value: fmt.Appendf(nil, `{"id":%d,"customer":"c%d","n":%d,"ts":%d}`, i, i%4, i, orderAt(i).UnixMilli())})
	}
	// Every order is after the table's last record: each waits.
	j.start()
	produce(recs...)
	j.awaitRead(orders)

	sp := filepath.Join(j.env["SAVEPOINT_DIR"], "held")
	addr := "http://" + adminAddr.FindStringSubmatch(j.output())[1]
	if code, stdout, stderr := j.pipelineCmd("savepoint", "create", "-admin", addr, sp); code != 0 || !strings.Contains(stdout, "savepoint written: "+sp) ||
		!strings.Contains(stdout, fmt.Sprintf("held:       %d records", orders)) {
		t.Fatalf("savepoint create: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr := j.pipelineCmd("savepoint", "inspect", sp)
	if code != 0 || !strings.Contains(stdout, fmt.Sprintf("held for joins as of event time: %d records", orders)) || !strings.Contains(stdout, "-in/3: 10\n") {
		t.Fatalf("savepoint inspect: exit %d\n%s%s", code, stdout, stderr)
	}
	t.Logf("savepoint inspect:\n%s", stdout)
	j.terminate()

	// Another job, three workers, from the savepoint: the table passes
	// the orders only now.
	j.env["JOB_NAME"] = kafkatest.Topic(t, "moved")
	j.config = asOfConfigWith(t, 3)
	j.args = []string{"--from-savepoint", sp}
	j.start()
	versions = append(versions, asOfVersion{"c1", "", orderAt(20)}, asOfVersion{"zz", "far", orderAt(orders + 1000)})
	table(versions[3:]...)

	deadline := time.Now().Add(time.Minute)
	for {
		got := map[int64]int{}
		err := kread.All(ctx, j.conn, j.env["OUTPUT_TOPIC"], func(r *kgo.Record) error {
			var o struct {
				ID       int64  `json:"id"`
				Customer string `json:"customer"`
				TS       int64  `json:"ts"`
				Tier     string `json:"tier"`
			}
			if err := json.Unmarshal(r.Value, &o); err != nil {
				return fmt.Errorf("output %s: %w", r.Value, err)
			}
			if want := asOfTier(versions, o.Customer, time.UnixMilli(o.TS)); o.Tier != want {
				return fmt.Errorf("order %d (%s at %s) met tier %q, the table's records say %q", o.ID, o.Customer, time.UnixMilli(o.TS).UTC(), o.Tier, want)
			}
			got[o.ID]++
			return nil
		})
		if err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
			t.Fatal(err)
		}
		for id, n := range got {
			if n > 1 || id < 1 || id > orders {
				t.Fatalf("order %d written %d times", id, n)
			}
		}
		if len(got) == orders {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d orders written after the start from the savepoint", len(got), orders)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(j.output(), "restoring the records a join as of event time held at the savepoint") {
		t.Fatal("the start from the savepoint did not say it restored held records")
	}
	j.terminate()
}
