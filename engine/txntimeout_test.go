package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/eoflow/pipeline/internal/fault"
	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
	"github.com/eoflow/pipeline/metrics"
	"github.com/eoflow/pipeline/metrics/metricstest"
)

// A job whose transaction outlived kafka.transaction_timeout (a long GC
// pause, a stopped process) was aborted by the transaction coordinator:
// nobody took over, so it restarts from its last checkpoint, says so, and
// the output is still exact (issue 11, item 7). The sink task is stalled
// with records of the open transaction written, until the coordinator has
// aborted it; then it goes on, and meets the bumped epoch on its next
// flush (while-writing-state) or at its commit (before-commit).
func TestTransactionTimeoutRestartsFromCheckpoint(t *testing.T) {
	for _, point := range []fault.Point{fault.WhileWritingState, fault.BeforeCommit} {
		t.Run(string(point), func(t *testing.T) {
			e := newTestEnv(t, "exactly_once")
			cfg := paritySum(t, e.env)
			cfg.Kafka.TransactionTimeout = 2 * time.Second
			// Only the transaction may time out: the stall holds up the
			// sink task alone, and the checkpoint coordinator would
			// otherwise abort the checkpoint first.
			cfg.Checkpoint.Timeout = 10 * time.Minute
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			adm := kadm.NewClient(kafkatest.Client(t, e.brokers))
			paused := make(chan error, 1)
			stall := fault.Pause(point, 1, func() {
				paused <- awaitAbortedByCoordinator(ctx, adm, cfg.Name+"-txn")
			})
			e.numbers(1, 2000)
			m := metrics.New(prometheus.NewRegistry(), cfg.Name)
			r := startWith(t, cfg, WithFaults(stall), WithMetrics(m))
			if err := <-paused; err != nil {
				t.Fatal(err)
			}
			e.numbers(2001, 1000)
			rep := e.awaitFinal(3000, r)
			if err := r.stop(); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if !rep.Exact() {
				t.Fatalf("after a transaction timeout: %v", rep)
			}
			logs := r.logs.String()
			if !strings.Contains(logs, `msg="the transaction timed out`) || !strings.Contains(logs, "kafka.transaction_timeout=2s") ||
				!strings.Contains(logs, "restarting from the last completed checkpoint") || strings.Contains(logs, "took over") {
				t.Fatalf("the log does not say that the transaction timed out and the job restarted:\n%s", logs)
			}
			text := metricstest.Scrape(t, m.Handler())
			if v, _ := metricstest.Value(text, fmt.Sprintf(`pipeline_restarts_total{pipeline=%q,reason="transaction_timeout"}`, cfg.Name)); v < 1 {
				t.Errorf("pipeline_restarts_total{reason=\"transaction_timeout\"} = %v, want at least 1", v)
			}
		})
	}
}

// awaitAbortedByCoordinator waits until the transaction coordinator has
// aborted txnID's open transaction for outliving its timeout (it looks
// every transaction.abort.timed.out.transaction.cleanup.interval.ms).
func awaitAbortedByCoordinator(ctx context.Context, adm *kadm.Client, txnID string) error {
	for {
		described, err := adm.DescribeTransactions(ctx, txnID)
		if err != nil {
			return err
		}
		if d, err := described.On(txnID, nil); err == nil && d.State == "CompleteAbort" {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.New("the coordinator never aborted the transaction")
		case <-time.After(200 * time.Millisecond):
		}
	}
}
