package runtime

import (
	"fmt"
	"strings"
	"testing"

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
