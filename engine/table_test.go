package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/internal/kread"
	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
)

// tableEnv is the orders-enrich example on an in-memory Kafka.
type tableEnv struct {
	t    *testing.T
	conn []kgo.Opt
	env  map[string]string
	prod *kgo.Client
	// names are the topics' names where they are not the example's
	// own (on the shared real broker: newBrokerTableEnv).
	names map[string]string
}

// topic is the name of the example's topic name here.
func (e *tableEnv) topic(name string) string {
	if n, ok := e.names[name]; ok {
		return n
	}
	return name
}

// newBrokerTableEnv is a tableEnv on the real broker, its topics
// (orders: 2 partitions, customers: 2, compacted) of its own.
func newBrokerTableEnv(t *testing.T) *tableEnv {
	t.Helper()
	k := kafkatest.Broker(t)
	prefix := fmt.Sprintf("tables-%d-", time.Now().UnixNano())
	e := &tableEnv{t: t, conn: []kgo.Opt{kgo.SeedBrokers(k.Bootstrap()...)}, names: map[string]string{}}
	for _, n := range []string{"orders", "customers", "totals-by-tier"} {
		e.names[n] = prefix + n
	}
	compact := "compact"
	kafkatest.CreateTopic(t, k.Bootstrap(), e.topic("orders"), 2, nil)
	kafkatest.CreateTopic(t, k.Bootstrap(), e.topic("customers"), 2, map[string]*string{"cleanup.policy": &compact})
	e.env = map[string]string{
		"KAFKA_BROKERS": strings.Join(k.Bootstrap(), ","), "CHECKPOINT_INTERVAL": "100ms", "ADMIN_LISTEN": "off",
		"JOB_NAME": prefix + "job", "ORDERS_TOPIC": e.topic("orders"), "CUSTOMERS_TOPIC": e.topic("customers"),
		"OUTPUT_TOPIC": e.topic("totals-by-tier"),
	}
	e.prod = kafkatest.Client(t, k.Bootstrap())
	return e
}

func newTableEnv(t *testing.T) *tableEnv {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DefaultNumPartitions(1),
		kfake.SeedTopics(2, "orders"), kfake.SeedTopics(2, "customers"), kfake.SeedTopics(1, "asks"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	e := &tableEnv{t: t, conn: []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}}
	e.env = map[string]string{
		"KAFKA_BROKERS": strings.Join(c.ListenAddrs(), ","), "CHECKPOINT_INTERVAL": "50ms", "ADMIN_LISTEN": "off",
	}
	e.prod, err = kgo.NewClient(e.conn...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.prod.Close)
	return e
}

func (e *tableEnv) config(mutate func(string) string) *config.Config {
	e.t.Helper()
	data, err := os.ReadFile("../examples/orders-enrich/config.yaml")
	if err != nil {
		e.t.Fatal(err)
	}
	if mutate != nil {
		data = []byte(mutate(string(data)))
	}
	return parseConfig(e.t, data, e.env)
}

// write writes records "key\tvalue" (value "" is a tombstone; no tab: no
// key) to topic.
func (e *tableEnv) write(topic string, lines ...string) {
	e.t.Helper()
	for _, l := range lines {
		r := &kgo.Record{Topic: e.topic(topic)}
		if k, v, ok := strings.Cut(l, "\t"); ok {
			r.Key = []byte(k)
			if v != "" {
				r.Value = []byte(v)
			}
		} else {
			r.Value = []byte(l)
		}
		if err := e.prod.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			e.t.Fatal(err)
		}
	}
}

// ends are the end offsets of topic, by partition.
func (e *tableEnv) ends(topic string) map[int32]int64 {
	e.t.Helper()
	ends, err := kread.AllTo(context.Background(), e.conn, e.topic(topic), func(*kgo.Record) error { return nil })
	if err != nil {
		e.t.Fatal(err)
	}
	return ends
}

// awaitCheckpoint waits for a committed checkpoint of job that has read
// the orders and applied the customers to their ends as of now, and
// returns it.
func (e *tableEnv) awaitCheckpoint(job string) *checkpoint.Record {
	e.t.Helper()
	orders, customers := e.ends("orders"), e.ends("customers")
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		var last []byte
		if err := kread.All(context.Background(), e.conn, checkpoint.TopicName(job), func(r *kgo.Record) error {
			if r.Value != nil && !strings.HasSuffix(string(r.Key), "#mode") {
				last = r.Value
			}
			return nil
		}); err != nil && !strings.Contains(err.Error(), "UNKNOWN_TOPIC") {
			e.t.Fatal(err)
		}
		if last != nil {
			rec, err := checkpoint.DecodeRecord(last)
			if err != nil {
				e.t.Fatal(err)
			}
			if e.reached(rec, orders, customers) {
				return rec
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.t.Fatalf("no checkpoint of %s reached orders %v and customers %v", job, orders, customers)
	return nil
}

func (e *tableEnv) reached(rec *checkpoint.Record, orders, customers map[int32]int64) bool {
	for p, end := range orders {
		ok := end == 0
		for _, o := range rec.Offsets {
			ok = ok || o.Topic == e.topic("orders") && o.Partition == p && o.Offset >= end
		}
		if !ok {
			return false
		}
	}
	for p, end := range customers {
		ok := end == 0
		for _, t := range rec.Tables {
			for _, o := range t.Offsets {
				ok = ok || t.ID == "customers" && o.Partition == p && o.Offset >= end
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// lastPerKey reads the committed output: the last value of each key.
func (e *tableEnv) lastPerKey(topic string) map[string]string {
	e.t.Helper()
	out := map[string]string{}
	if err := kread.All(context.Background(), e.conn, e.topic(topic), func(r *kgo.Record) error {
		out[string(r.Key)] = string(r.Value)
		return nil
	}); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// The table is read to its end before the first order is joined, and its
// updates apply while the job runs: orders written after an update (once
// a checkpoint shows it applied) meet it. Every checkpoint holds the
// table's offsets.
func TestTableUpdatesApplyWhileRunning(t *testing.T) {
	for _, g := range []config.Guarantee{config.ExactlyOnce, config.AtLeastOnce} {
		t.Run(string(g), func(t *testing.T) { tableUpdatesApplyWhileRunning(t, g) })
	}
}

func tableUpdatesApplyWhileRunning(t *testing.T, g config.Guarantee) {
	e := newTableEnv(t)
	e.env["GUARANTEE"] = string(g)
	e.write("customers", "c1\t{\"tier\":\"gold\"}", "c2\t{\"tier\":\"silver\"}", "c3\t{\"tier\":\"gold\"}", "c3\t")
	cfg := e.config(nil)
	r := start(t, cfg)
	e.write("orders", `{"id":1,"customer":"c1","n":1}`, `{"id":2,"customer":"c2","n":2}`, `{"id":3,"customer":"c3","n":4}`)
	rec := e.awaitCheckpoint(cfg.Name)
	if len(rec.Tables) != 1 || rec.Tables[0].Topic != "customers" || len(rec.Tables[0].Offsets) != 2 {
		t.Fatalf("checkpoint %d tables: %+v; want customers with its two partitions", rec.ID, rec.Tables)
	}
	// c2 moves to gold, c4 arrives, c1 is deleted.
	e.write("customers", "c2\t{\"tier\":\"gold\"}", "c4\t{\"tier\":\"silver\"}", "c1\t")
	e.awaitCheckpoint(cfg.Name)
	e.write("orders", `{"id":4,"customer":"c2","n":8}`, `{"id":5,"customer":"c4","n":16}`, `{"id":6,"customer":"c1","n":32}`)
	e.awaitCheckpoint(cfg.Name)
	if err := r.finish(); err != nil {
		t.Fatal(err)
	}
	got := e.lastPerKey("totals-by-tier")
	want := map[string]string{
		"gold":   `{"key":"gold","count":2,"sum":9}`,    // 1 (c1), 8 (c2 as gold)
		"silver": `{"key":"silver","count":2,"sum":18}`, // 2 (c2 as silver), 16 (c4)
		"none":   `{"key":"none","count":2,"sum":36}`,   // 4 (c3 deleted), 32 (c1 deleted)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("totals per tier:\n got %v\nwant %v", got, want)
	}
}

// A restart whose configuration reads a table of the last checkpoint from
// another topic is refused, saying why, before anything changes; a
// restart with the same table goes on.
func TestTableTopicChangeIsRefused(t *testing.T) {
	e := newTableEnv(t)
	e.write("customers", "c1\t{\"tier\":\"gold\"}")
	cfg := e.config(nil)
	r := start(t, cfg)
	e.write("orders", `{"id":1,"customer":"c1","n":1}`)
	e.awaitCheckpoint(cfg.Name)
	if err := r.finish(); err != nil {
		t.Fatal(err)
	}
	e.prod.ProduceSync(context.Background(), &kgo.Record{Topic: "customers-v2", Key: []byte("c1"), Value: []byte(`{"tier":"silver"}`)})
	changed := e.config(func(s string) string {
		return strings.Replace(s, "${CUSTOMERS_TOPIC:-customers}", "customers-v2", 1)
	})
	r = start(t, changed)
	select {
	case err := <-r.done:
		if !errors.Is(err, ErrIncompatible) || !strings.Contains(err.Error(), `table "customers" was read from topic "customers" at checkpoint`) ||
			!strings.Contains(err.Error(), `the configuration reads it from "customers-v2"`) {
			t.Fatalf("Run = %v; want the changed table refused", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the job with a changed table topic did not stop")
	}
	// The same configuration restarts, and goes on where it was.
	r = start(t, e.config(nil))
	e.write("orders", `{"id":2,"customer":"c1","n":2}`)
	e.awaitCheckpoint(cfg.Name)
	if err := r.finish(); err != nil {
		t.Fatal(err)
	}
	if got := e.lastPerKey("totals-by-tier")["gold"]; got != `{"key":"gold","count":2,"sum":3}` {
		t.Errorf("gold after the restart: %s", got)
	}
}

// Jobs chain: one job's aggregate output, written in its transactions, is
// another job's table.
func TestAnAggregateOutputIsAnotherJobsTable(t *testing.T) {
	e := newTableEnv(t)
	e.write("customers", "c1\t{\"tier\":\"gold\"}", "c2\t{\"tier\":\"silver\"}")
	first := e.config(nil)
	r := start(t, first)
	e.write("orders", `{"id":1,"customer":"c1","n":1}`, `{"id":2,"customer":"c1","n":2}`, `{"id":3,"customer":"c2","n":4}`)
	e.awaitCheckpoint(first.Name)
	if err := r.finish(); err != nil {
		t.Fatal(err)
	}
	second := parseConfig(t, []byte(`name: chained
kafka: {brokers: "${KAFKA_BROKERS}"}
checkpoint: {interval: 50ms}
sources: [{id: asks, topics: [asks]}]
tables: [{id: totals, topic: totals-by-tier}]
steps:
  - {id: look, join: {table: totals, key: tier, as: t}}
  - {id: answer, map: {tier: tier, count: t.count, sum: t.sum}}
sinks: [{topic: answers}]
admin: {listen: "off"}
`), e.env)
	e.write("asks", `{"tier":"gold"}`, `{"tier":"silver"}`)
	r = start(t, second)
	deadline := time.Now().Add(time.Minute)
	for {
		var got []string
		kread.All(context.Background(), e.conn, "answers", func(r *kgo.Record) error {
			got = append(got, string(r.Value))
			return nil
		})
		if strings.Join(got, " ") == `{"tier":"gold","count":2,"sum":3} {"tier":"silver","count":1,"sum":4}` {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("answers %q", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := r.finish(); err != nil {
		t.Fatal(err)
	}
}
