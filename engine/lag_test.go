package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eoflow/pipeline/internal/datagen"
	"github.com/eoflow/pipeline/metrics/metricstest"
)

// Once the job has processed and committed everything written, the lag of
// every input partition is 0, and it stays there while the job idles: the
// lag is measured after a poll's records are handed on, not before (which
// left the last poll's record count standing as lag, for good, on an idle
// job). The client's error pseudo-partition (-1) has no series.
func TestLagIsZeroOnceCaughtUp(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	job, logs := newJob(t, paritySum(t, e.env))
	done := runBackground(job)
	e.numbers(1, 2000)
	// The outputs of the last inputs are committed by a checkpoint whose
	// barrier the sources sent after handing those inputs on.
	e.awaitFinal(2000, &running{done: done, logs: logs})
	text := metricstest.Scrape(t, job.metrics.Handler())
	for p := 0; p < 4; p++ {
		sample := fmt.Sprintf(`pipeline_consumer_lag_records{partition="%d",pipeline=%q,topic=%q}`, p, job.cfg.Name, e.env["INPUT_TOPIC"])
		if v, ok := metricstest.Value(text, sample); !ok || v != 0 {
			t.Errorf("%s = %v (present: %v), want 0 once everything is processed", sample, v, ok)
		}
	}
	if strings.Contains(text, `partition="-1"`) {
		t.Errorf("a lag series for the client's error pseudo-partition:\n%s", text)
	}
	job.Stop()
	if err := awaitDone(t, done); err != nil {
		t.Fatal(err)
	}
}

// A drained job reports lag 0 on every partition it reads, also where
// transactions wrote them: the markers that end transactions hold the
// last offsets of a partition, and a reader's position after its last
// record is short of them. Single mode on an input written in
// transactions (it reported 1 for good), and group mode, whose
// repartition partitions end in a marker of every process that wrote to
// them (it reported 1 or 2).
func TestLagIsZeroOnceDrainedAfterTransactions(t *testing.T) {
	for _, mode := range []string{"single", "group"} {
		t.Run(mode, func(t *testing.T) {
			e := newTestEnv(t, "exactly_once")
			var opts []Option
			cfg := paritySum(t, e.env)
			if mode == "group" {
				groupEnv(e)
				cfg = paritySumGroup(t, e.env)
				opts = append(opts, WithInstanceID("a"))
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if _, err := datagen.Numbers(ctx, e.conn, datagen.Options{Topic: e.env["INPUT_TOPIC"], From: 1, Count: 2000, Resume: true}); err != nil {
				t.Fatal(err)
			}
			job, logs := newJob(t, cfg, opts...)
			done := runBackground(job)
			e.awaitFinal(2000, &running{done: done, logs: logs})
			topics := map[string]int{e.env["INPUT_TOPIC"]: 4}
			if mode == "group" {
				topics[RepartitionTopic(cfg.Name)] = 4
			}
			// The last commit's markers reach the readers a moment after
			// the outputs are readable.
			deadline := time.Now().Add(30 * time.Second)
			for {
				lagging := lags(t, job, topics)
				if len(lagging) == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("lag after the input is drained: %v", lagging)
				}
				time.Sleep(100 * time.Millisecond)
			}
			job.Stop()
			if err := awaitDone(t, done); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// lags returns the lag series of the partitions of topics (topic ->
// partition count) that are not 0 or missing.
func lags(t *testing.T, job *Job, topics map[string]int) map[string]float64 {
	t.Helper()
	text := metricstest.Scrape(t, job.metrics.Handler())
	out := map[string]float64{}
	for topic, n := range topics {
		for p := 0; p < n; p++ {
			sample := fmt.Sprintf(`pipeline_consumer_lag_records{partition="%d",pipeline=%q,topic=%q}`, p, job.cfg.Name, topic)
			if v, ok := metricstest.Value(text, sample); !ok || v != 0 {
				out[fmt.Sprintf("%s/%d", topic, p)] = v
			}
		}
	}
	return out
}
