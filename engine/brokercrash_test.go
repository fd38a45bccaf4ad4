package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
)

// Broker crashes on a 3-node cluster: SIGKILL the broker leading an output
// partition, and separately the one coordinating the job's transactions,
// while input arrives; each comes back after a while. Under exactly_once
// the output is still exactly one failure-free run's.
func TestExactlyOnceSurvivesBrokerCrashes(t *testing.T) {
	c := kafkatest.StartCluster(t, 3)
	brokers := c.Bootstrap()
	base := kafkatest.Topic(t, "job")
	e := &testEnv{t: t, brokers: brokers, conn: []kgo.Opt{kgo.SeedBrokers(brokers...)}}
	e.env = map[string]string{
		"KAFKA_BROKERS":       strings.Join(brokers, ","),
		"JOB_NAME":            base,
		"INPUT_TOPIC":         base + "-in",
		"OUTPUT_TOPIC":        base + "-out",
		"GUARANTEE":           "exactly_once",
		"CHECKPOINT_INTERVAL": "100ms",
		"ADMIN_LISTEN":        "off",
		"LOG_LEVEL":           "debug",
	}
	kafkatest.CreateTopic(t, brokers, e.env["INPUT_TOPIC"], 4, nil)
	t.Logf("%s: cluster up", time.Now().Format("15:04:05.000"))
	r := startWith(t, paritySum(t, e.env))
	e.numbers(1, 5000)
	e.awaitFinal(5000, r)
	adm := kadm.NewClient(kafkatest.Client(t, brokers))
	n := int64(5000)

	crash := func(what string, victim int32) {
		t.Helper()
		t.Logf("%s: killing broker %d (%s)", time.Now().Format("15:04:05.000"), victim, what)
		if err := c.KillBroker(victim); err != nil {
			t.Fatal(err)
		}
		// Input keeps arriving while the broker is down.
		for range 5 {
			e.numbers(n+1, 1000)
			n += 1000
			time.Sleep(200 * time.Millisecond)
		}
		t.Logf("%s: input written while broker %d is down", time.Now().Format("15:04:05.000"), victim)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := c.StartBroker(ctx, victim); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: broker %d is back", time.Now().Format("15:04:05.000"), victim)
		e.numbers(n+1, 1000)
		n += 1000
		e.awaitFinal(n, r)
		t.Logf("%s: the output caught up", time.Now().Format("15:04:05.000"))
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	md, err := adm.Metadata(ctx, e.env["OUTPUT_TOPIC"])
	if err != nil {
		t.Fatal(err)
	}
	var leader int32 = -1
	for _, p := range md.Topics[e.env["OUTPUT_TOPIC"]].Partitions {
		leader = p.Leader // the output has the brokers' default partitions; any leader will do
	}
	crash("leader of an output partition", leader)

	ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	described, err := adm.DescribeTransactions(ctx, e.env["JOB_NAME"]+"-txn")
	if err != nil {
		t.Fatal(err)
	}
	crash("transaction coordinator of the job", described[e.env["JOB_NAME"]+"-txn"].Coordinator)

	rep := e.awaitFinal(n, r)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if !rep.Exact() {
		t.Fatalf("after broker crashes: %v", rep)
	}
	t.Logf("%d numbers through two broker crashes: %v", n, rep)
}
