package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/internal/datagen"
	"github.com/eoflow/pipeline/internal/kread"
	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
	"github.com/eoflow/pipeline/internal/testkit/paritycheck"
)

// graphConfig is the job graph example: two sources merged, read by a sum
// per parity, a sum per n mod 3 and a filter of the multiples of ten.
const graphConfig = "../../examples/parity-branches/config.yaml"

// graphTopics adds the graph example's topics to env, named after base,
// and creates its second input (the job harness made the first,
// INPUT_TOPIC).
func graphTopics(t *testing.T, brokers []string, env map[string]string, base string) {
	env["MORE_TOPIC"] = base + "-more"
	env["PARITY_TOPIC"] = base + "-parity"
	env["MOD3_TOPIC"] = base + "-mod3"
	env["TENS_TOPIC"] = base + "-tens"
	kafkatest.CreateTopic(t, brokers, env["MORE_TOPIC"], 2, nil)
}

// graphFeed writes the numbers from..from+count-1, every other piece of
// ten to the second source, so both sources and the merge carry input.
func graphFeed(t *testing.T, conn []kgo.Opt, env map[string]string, from, count int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for n := from; n < from+count; {
		size := min(10, from+count-n)
		topic := env["INPUT_TOPIC"]
		if (n/10)%2 == 1 {
			topic = env["MORE_TOPIC"]
		}
		if _, err := datagen.Numbers(ctx, conn, datagen.Options{Topic: topic, From: n, Count: size}); err != nil {
			t.Fatal(err)
		}
		n += size
	}
}

func mod3(x int64) string { return strconv.FormatInt(x%3, 10) }

// judgeGraph reads the graph's three outputs and says what is not exactly
// that of 1..n: each aggregate judged by its key (every number once per
// branch, counts in order, exact sums), and every multiple of ten once.
func judgeGraph(t *testing.T, conn []kgo.Opt, env map[string]string, n int64) (exact bool, why string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var problems []string
	for _, agg := range []struct {
		topic string
		keyOf paritycheck.KeyOf
	}{{env["PARITY_TOPIC"], paritycheck.Parity}, {env["MOD3_TOPIC"], mod3}} {
		outs, err := paritycheck.Read(ctx, conn, agg.topic)
		if err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
			t.Fatal(err)
		}
		rep := paritycheck.JudgeBy(outs, n, agg.keyOf)
		if rep.Duplicated != 0 || rep.OutOfOrder != 0 || rep.WrongValues != 0 {
			t.Fatalf("%s is not exactly once: %v", agg.topic, rep)
		}
		if !rep.Exact() {
			problems = append(problems, fmt.Sprintf("%s: %v", agg.topic, rep))
		}
	}
	seen := map[int64]int{}
	err := kread.All(ctx, conn, env["TENS_TOPIC"], func(r *kgo.Record) error {
		var v struct{ N int64 }
		if err := json.Unmarshal(r.Value, &v); err != nil {
			return fmt.Errorf("%s: %q: %w", env["TENS_TOPIC"], r.Value, err)
		}
		seen[v.N]++
		return nil
	})
	if err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatal(err)
	}
	for x, c := range seen {
		if x%10 != 0 || c > 1 || x > n {
			t.Fatalf("%s: %d written %d times (inputs 1..%d)", env["TENS_TOPIC"], x, c, n)
		}
	}
	if len(seen) != int(n/10) {
		problems = append(problems, fmt.Sprintf("%s: %d of the %d multiples of ten", env["TENS_TOPIC"], len(seen), n/10))
	}
	return len(problems) == 0, fmt.Sprint(problems)
}

// The job graph example exactly once under SIGKILL (one process): killed
// at every fault point and at random, restarted each time, while input
// arrives on both sources. An independent read_committed reader then finds
// every branch exact.
func TestGraphJobExactUnderSIGKILL(t *testing.T) {
	j := newJob(t, "exactly_once")
	j.config = graphConfig
	k := kafkatest.Broker(t)
	graphTopics(t, k.Bootstrap(), j.env, j.env["JOB_NAME"])
	seed := uint64(envInt(t, "CRASH_SEED", time.Now().UnixNano()))
	t.Logf("seed %d (CRASH_SEED=%d replays it)", seed, seed)
	var written int64
	crashLoop(t, j, func() {
		graphFeed(t, j.conn, j.env, written+1, 200)
		written += 200
		time.Sleep(50 * time.Millisecond)
	}, 2, rand.New(rand.NewPCG(seed, 0)))
	j.start()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		exact, why := judgeGraph(t, j.conn, j.env, written)
		if exact {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d starts, not exact: %s", j.started, why)
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("%d numbers, %d starts: every branch exact", written, j.started)
	j.terminate()
}

// The job graph example exactly once in group mode: two processes share
// it through the consumer group (each aggregate's records cross the
// repartition topic, a route apiece), one SIGKILLed twice and restarted
// while input arrives; every branch exact at the end.
func TestGraphJobExactInGroupMode(t *testing.T) {
	k := kafkatest.Broker(t)
	g := newGroupJob(t, k.Bootstrap())
	g.config = graphConfig
	graphTopics(t, k.Bootstrap(), g.env, g.env["JOB_NAME"])
	var written int64
	feed := func(count int64) {
		graphFeed(t, g.conn, g.env, written+1, count)
		written += count
	}
	g.member("a").start()
	g.member("b").start()
	feed(500)
	time.Sleep(2 * time.Second)
	g.alive()
	for i := range 2 {
		g.logf("SIGKILL %d: instance b", i+1)
		g.member("b").kill()
		feed(300)
		time.Sleep(time.Second)
		g.member("b").start()
		feed(300)
		time.Sleep(2 * time.Second)
		g.alive()
	}
	feed(200)
	deadline := time.Now().Add(3 * time.Minute)
	for {
		exact, why := judgeGraph(t, g.conn, g.env, written)
		if exact {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not exact: %s", why)
		}
		g.alive()
		time.Sleep(300 * time.Millisecond)
	}
	g.logf("%d numbers: every branch exact", written)
}
