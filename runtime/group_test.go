package runtime

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/internal/kafkatest"
	"github.com/eoflow/pipeline/internal/kread"
)

// groupEnv turns e's job into a group-mode job.
func groupEnv(e *testEnv) {
	e.env["SCALE_MODE"] = "group"
	e.env["SCALE_PARTITIONS"] = "4"
	e.env["SESSION_TIMEOUT"] = "6s"
}

// paritySumGroup is the parity-sum example in group mode.
func paritySumGroup(t *testing.T, env map[string]string) *config.Config {
	cfg := paritySum(t, env)
	if cfg.Scale.Mode != config.ScaleGroup {
		t.Fatalf("scale.mode %q, want group", cfg.Scale.Mode)
	}
	return cfg
}

// Two members of one job, in one test process: each input once, exact
// sums, through the repartition topic; the status says who owns what.
func TestGroupModeTwoMembers(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	groupEnv(e)
	e.numbers(1, 2000)
	a := startWith(t, paritySumGroup(t, e.env), WithInstanceID("a"))
	b := startWith(t, paritySumGroup(t, e.env), WithInstanceID("b"))
	e.numbers(2001, 2000)
	rep := e.awaitFinal(4000, a)
	if !rep.Exact() {
		t.Fatalf("not exactly once: %v", rep)
	}
	for _, r := range []*running{a, b} {
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.Contains(a.logs.String()+b.logs.String(), "member attempt") {
		t.Fatal("no member attempt logged")
	}
}

// A job moves between modes only through a savepoint: a group-mode start
// on a single-mode job's checkpoints is refused, and the other way round,
// before anything is written.
func TestModeSwitchIsRefused(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	e.numbers(1, 100)
	r := start(t, paritySum(t, e.env))
	e.awaitFinal(100, r)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	groupEnv(e)
	r = startWith(t, paritySumGroup(t, e.env), WithInstanceID("a"))
	select {
	case err := <-r.done:
		if !errors.Is(err, ErrIncompatible) || !strings.Contains(err.Error(), "ran in single mode") {
			t.Fatalf("group mode on single-mode checkpoints: Run = %v, want ErrIncompatible saying it ran in single mode", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("group mode started on a single-mode job's checkpoints")
	}

	g := newTestEnv(t, "exactly_once")
	groupEnv(g)
	g.numbers(1, 100)
	r = startWith(t, paritySumGroup(t, g.env), WithInstanceID("a"))
	g.awaitFinal(100, r)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	delete(g.env, "SCALE_MODE")
	r = start(t, paritySum(t, g.env))
	select {
	case err := <-r.done:
		if !errors.Is(err, ErrIncompatible) || !strings.Contains(err.Error(), "ran in group mode") {
			t.Fatalf("single mode on a group-mode job: Run = %v, want ErrIncompatible saying it ran in group mode", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("single mode started on a group-mode job")
	}
}

// A group-mode job without key_by needs no repartition topic: each
// member writes what its source partitions keep.
func TestGroupModeStateless(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	groupEnv(e)
	cfg := paritySumEdited(t, e.env, "  - id: parity\n    key_by: 'n % 2 == 0 ? \"even\" : \"odd\"'\n  - id: sums\n    aggregate:\n      emit: ${EMIT:-every_record}\n      values:\n        count: count()\n        sum: sum(n)\n",
		"  - filter: n % 2 == 0\n")
	e.numbers(1, 1000)
	a := startWith(t, cfg, WithInstanceID("a"))
	b := startWith(t, cfg, WithInstanceID("b"))
	got := e.awaitOutputs(500, a)
	seen := map[string]bool{}
	for _, v := range got {
		if seen[v] {
			t.Fatalf("output %s twice", v)
		}
		seen[v] = true
	}
	for _, r := range []*running{a, b} {
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
	}
	if topics := e.topics(); slicesContains(topics, e.env["JOB_NAME"]+"-repartition") {
		t.Fatalf("a stateless job created a repartition topic: %v", topics)
	}
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// awaitOutputs waits until the output topic holds n records and returns
// their values; more than n fails.
func (e *testEnv) awaitOutputs(n int, r *running) []string {
	e.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var vals []string
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := kread.All(ctx, e.conn, e.env["OUTPUT_TOPIC"], func(r *kgo.Record) error {
			vals = append(vals, string(r.Value))
			return nil
		})
		cancel()
		if err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
			e.t.Fatal(err)
		}
		if len(vals) == n {
			return vals
		}
		select {
		case err := <-r.done:
			e.t.Fatalf("job stopped early (%v) with %d outputs", err, len(vals))
		default:
		}
		if len(vals) > n || time.Now().After(deadline) {
			e.t.Fatalf("%d outputs, want %d", len(vals), n)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// topics lists the cluster's topics.
func (e *testEnv) topics() []string {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	listed, err := kadm.NewClient(kafkatest.Client(e.t, e.brokers)).ListTopics(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	return listed.Names()
}
