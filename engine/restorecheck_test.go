package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/checkpoint/kstore"
	"github.com/eoflow/pipeline/checkpoint/savepoint"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
)

// clusterState is what a refused start must leave as it was: the job's
// topics, every partition's end offset, and its transactional id's epoch
// (fencing bumps it).
type clusterState struct {
	topics []string
	ends   map[string]int64
	epoch  int16
}

func (e *testEnv) cluster(job string) clusterState {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adm := kadm.NewClient(kafkatest.Client(e.t, e.brokers))
	all, err := adm.ListTopics(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	st := clusterState{ends: map[string]int64{}, epoch: -1}
	for _, td := range all.Sorted() {
		if strings.HasPrefix(td.Topic, job+"-") {
			st.topics = append(st.topics, td.Topic)
		}
	}
	if len(st.topics) > 0 {
		ends, err := adm.ListEndOffsets(ctx, st.topics...)
		if err != nil {
			e.t.Fatal(err)
		}
		ends.Each(func(o kadm.ListedOffset) { st.ends[fmt.Sprintf("%s/%d", o.Topic, o.Partition)] = o.Offset })
	}
	txns, err := adm.DescribeTransactions(ctx, job+"-txn")
	if err != nil {
		e.t.Fatal(err)
	}
	if d, ok := txns[job+"-txn"]; ok && d.Err == nil {
		st.epoch = d.ProducerEpoch
	}
	return st
}

func (e *testEnv) assertUnchanged(job string, before clusterState) {
	e.t.Helper()
	after := e.cluster(job)
	if !slices.Equal(after.topics, before.topics) {
		e.t.Errorf("topics of the job: before %v, after %v", before.topics, after.topics)
	}
	if !maps.Equal(after.ends, before.ends) {
		e.t.Errorf("end offsets: before %v, after %v: something was written", before.ends, after.ends)
	}
	if after.epoch != before.epoch {
		e.t.Errorf("producer epoch of %s-txn: before %d, after %d: an instance was fenced", job, before.epoch, after.epoch)
	}
}

// runRefused runs cfg and returns Run's error, which must come (a refusal
// does not restart forever) and leave the job failed.
func runRefused(t *testing.T, cfg *config.Config) (error, string) {
	t.Helper()
	j, logs := newJob(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := j.Run(ctx)
	if ctx.Err() != nil {
		t.Fatalf("Run did not return: it kept restarting:\n%s", logs.String())
	}
	if st := j.Status(); st.State != StateFailed {
		t.Errorf("status %s after a refusal, want %s", st.State, StateFailed)
	}
	return err, logs.String()
}

// A plain restart from the job's own checkpoints applies the rules of a
// savepoint restore: a changed aggregate, a dropped one, a topic no longer
// read or another key-group count is refused with the savepoint's
// message, Run returns (the job does not restart forever), and nothing
// changes on the cluster. Reordered values are harmless and restart, the
// sums staying exact.
func TestRestartWithChangedConfigIsRefused(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	e.numbers(1, 500)
	r := start(t, paritySum(t, e.env))
	e.awaitFinal(500, r)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	job := e.env["JOB_NAME"]
	before := e.cluster(job)

	moved := maps.Clone(e.env)
	moved["INPUT_TOPIC"] = e.env["INPUT_TOPIC"] + "-v2"
	fewerGroups := paritySum(t, e.env)
	fewerGroups.Checkpoint.KeyGroups = 64
	tests := []struct {
		name   string
		cfg    *config.Config
		wanted []string
	}{
		{"value function changed", paritySumEdited(t, e.env, "sum: sum(n)", "sum: sum(n * 2)"),
			[]string{`operator "sums": value "sum" was sum(n), the config has sum(n * 2)`}},
		{"value added", paritySumEdited(t, e.env, "sum: sum(n)", "sum: sum(n)\n        low: min(n)"),
			[]string{`operator "sums": values differ: the checkpoint has [count: count(), sum: sum(n)]`, `value "low" is not in the checkpoint`}},
		{"key_by changed", paritySumEdited(t, e.env, `n % 2 == 0 ? "even" : "odd"`, `n % 3 == 0 ? "even" : "odd"`),
			[]string{`operator "sums": key_by was 'n % 2 == 0 ? "even" : "odd"'`}},
		{"aggregate renamed", paritySumEdited(t, e.env, "id: sums", "id: totals"),
			[]string{`aggregate "sums" (2 keys) has state in the checkpoint but is not in the config`, savepoint.FlagAllowDroppedState}},
		{"topic no longer read", paritySum(t, moved),
			[]string{fmt.Sprintf(`checkpoint topic %q is not read by any source of the config (it holds the offsets of 4 partitions, read by source "numbers")`, e.env["INPUT_TOPIC"])}},
		{"key groups changed", fewerGroups, []string{"key groups: the checkpoint has 128, the config has 64"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err, _ := runRefused(t, tt.cfg)
			if !errors.Is(err, ErrIncompatible) || !errors.Is(err, checkpoint.ErrIncompatible) {
				t.Fatalf("Run = %v, want a refusal of the checkpoint", err)
			}
			for _, w := range append(tt.wanted, savepoint.RestartFix) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the refusal does not say %q:\n%v", w, err)
				}
			}
			e.assertUnchanged(job, before)
		})
	}

	// Reordered values: each keeps its state; the sums go on exactly.
	reordered := paritySumEdited(t, e.env, "count: count()\n        sum: sum(n)", "sum: sum(n)\n        count: count()")
	r = startWith(t, reordered)
	e.numbers(501, 500)
	rep := e.awaitFinal(1000, r)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if !rep.Exact() {
		t.Fatalf("after reordering the values: %v", rep)
	}
	if !strings.Contains(r.logs.String(), `values reordered: the checkpoint has [count, sum], the config has [sum, count]`) {
		t.Errorf("the restart did not note the reordered values:\n%s", r.logs.String())
	}
}

// A checkpoint written by an older build does not describe its operators:
// the restart restores it as before, and the log says what it could not
// check. A state that then does not decode (a value added) is refused for
// good, not retried forever.
func TestRestartFromAnOlderRecord(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	e.numbers(1, 200)
	r := start(t, paritySum(t, e.env))
	e.awaitFinal(200, r)
	// Gracefully: stopped at once during a checkpoint's commit, the job
	// would leave its transaction open, with the checkpoint record in it,
	// and the rewrite could not settle before a restart fenced it.
	if err := r.finish(); err != nil {
		t.Fatal(err)
	}
	e.rewriteLatestWithoutOperators()

	err, _ := runRefused(t, paritySumEdited(t, e.env, "sum: sum(n)", "sum: sum(n)\n        low: min(n)"))
	if !errors.Is(err, ErrIncompatible) || !strings.Contains(err.Error(), "state has values [count sum], config has [count sum low]") {
		t.Fatalf("Run = %v, want the state's values refused", err)
	}

	r = startWith(t, paritySum(t, e.env))
	e.numbers(201, 100)
	rep := e.awaitFinal(300, r)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if !rep.Exact() {
		t.Fatalf("restart from an older record: %v", rep)
	}
	if !strings.Contains(r.logs.String(), "written by an older build") {
		t.Errorf("the log does not say the check could not be done:\n%s", r.logs.String())
	}
}

// rewriteLatestWithoutOperators commits, as the job's newest checkpoint,
// a copy of its latest without operator descriptions: a v1 record, as a
// build before format v3 wrote it.
func (e *testEnv) rewriteLatestWithoutOperators() {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	job := e.env["JOB_NAME"]
	latest, err := kstore.Latest(ctx, e.conn, job)
	if err != nil || latest == nil || len(latest.Operators) == 0 {
		e.t.Fatalf("latest checkpoint: %+v, %v", latest, err)
	}
	latest.ID++
	latest.Operators = nil
	rec, err := kstore.CheckpointRecord(latest)
	if err != nil {
		e.t.Fatal(err)
	}
	if rec.Value[0] != 1 {
		e.t.Fatalf("the rewritten record is format v%d, want v1", rec.Value[0])
	}
	p := kafkatest.Client(e.t, e.brokers, kgo.TransactionalID(job+"-old-build"))
	if err := p.BeginTransaction(); err != nil {
		e.t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, rec).FirstErr(); err != nil {
		e.t.Fatal(err)
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		e.t.Fatal(err)
	}
	// The restart reads up to the last stable offset before it fences
	// anyone: the rewrite must be marked by then.
	kafkatest.AwaitSettled(ctx, e.t, e.brokers, checkpoint.TopicName(job))
}

// A deleted internal topic is damage the restart names and refuses,
// changing nothing: state without its checkpoint would be counted again
// from the input's start, a checkpoint without its state would start the
// sums over. A state topic that exists but lost its keys is found by
// comparing what the restore read with the checkpoint's key count.
func TestDamagedInternalTopicsAreRefused(t *testing.T) {
	tests := []struct {
		name   string
		damage func(e *testEnv, job string)
		wanted string
	}{
		{"checkpoints deleted", func(e *testEnv, job string) { e.deleteTopic(checkpoint.TopicName(job)) },
			"holds 2 keys, but the checkpoint topic %s-checkpoints has no checkpoint"},
		{"state deleted", func(e *testEnv, job string) { e.deleteTopic(kstore.StateTopic(job)) },
			`recorded 2 keys of aggregate "sums", but the state topic %s-state holds none`},
		{"state emptied", func(e *testEnv, job string) {
			e.deleteTopic(kstore.StateTopic(job))
			kafkatest.CreateTopic(e.t, e.brokers, kstore.StateTopic(job), 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")})
		}, `recorded 2 keys of aggregate "sums", but the state topic %s-state holds none`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newTestEnv(t, "exactly_once")
			e.numbers(1, 300)
			r := start(t, paritySum(t, e.env))
			e.awaitFinal(300, r)
			if err := r.stop(); err != nil {
				t.Fatal(err)
			}
			job := e.env["JOB_NAME"]
			tt.damage(e, job)
			before := e.cluster(job)
			err, _ := runRefused(t, paritySum(t, e.env))
			if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), fmt.Sprintf(tt.wanted, job)) ||
				!strings.Contains(err.Error(), "--from-savepoint") {
				t.Fatalf("Run = %v, want the damage named", err)
			}
			if tt.name != "state emptied" { // found only by the restore, after fencing
				e.assertUnchanged(job, before)
			}
		})
	}
}

// deleteTopic deletes topic and waits until the cluster no longer lists it.
func (e *testEnv) deleteTopic(topic string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adm := kadm.NewClient(kafkatest.Client(e.t, e.brokers))
	resp, err := adm.DeleteTopic(ctx, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		e.t.Fatal(err)
	}
	for {
		td, err := adm.ListTopics(ctx, topic)
		if err == nil && !td.Has(topic) {
			return
		}
		select {
		case <-ctx.Done():
			e.t.Fatalf("topic %s still listed after deleting it", topic)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
