package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
	"github.com/eoflow/pipeline/metrics"
	"github.com/eoflow/pipeline/metrics/metricstest"
	"github.com/eoflow/pipeline/sink"
)

// A job whose principal lacks WRITE on a transactional id it uses stops
// with an error naming that ACL instead of restarting forever: first the
// mode claim's (<job>#mode, which every job initializes before it writes
// anything), then its producer's (<job>-txn); granted both, the same job
// with the same other ACLs runs exactly (so the first cases fail for the
// missing ACL alone). Issue 12, item 4.
func TestMissingTransactionalIDACLStopsNamingIt(t *testing.T) {
	c := kafkatest.StartClusterWith(t, kafkatest.Options{SASL: true, Authorizer: true})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	adm := kadm.NewClient(kafkatest.Client(t, c.Bootstrap()))
	grant := func(b *kadm.ACLBuilder) {
		t.Helper()
		results, err := adm.CreateACLs(ctx, b.Allow("User:"+kafkatest.SASLUser).AllowHosts().Operations(kadm.OpAll))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range results {
			if r.Err != nil {
				t.Fatalf("create ACL: %v", r.Err)
			}
		}
	}
	// Everything the job needs but its transactional ids: its topics and
	// group (all named after it, so after the test), and the cluster
	// (topic creation).
	grant(kadm.NewACLs().Topics(t.Name()).Groups(t.Name()).ResourcePatternType(kadm.ACLPatternPrefixed))
	grant(kadm.NewACLs().Clusters())

	// run starts the job after granting WRITE on the transactional ids
	// that ids names (of the job's name).
	run := func(t *testing.T, ids func(job string) []string) (*testEnv, *config.Config, *metrics.Metrics, *running) {
		base := kafkatest.Topic(t, "job")
		e := &testEnv{t: t, brokers: c.Bootstrap(), conn: []kgo.Opt{kgo.SeedBrokers(c.Bootstrap()...)}}
		e.env = map[string]string{
			"KAFKA_BROKERS":       strings.Join(c.SASLBootstrap(), ","),
			"JOB_NAME":            base,
			"INPUT_TOPIC":         base + "-in",
			"OUTPUT_TOPIC":        base + "-out",
			"GUARANTEE":           "exactly_once",
			"CHECKPOINT_INTERVAL": "100ms",
			"ADMIN_LISTEN":        "off",
			"LOG_LEVEL":           "debug",
		}
		kafkatest.CreateTopic(t, e.brokers, e.env["INPUT_TOPIC"], 4, nil)
		cfg := paritySum(t, e.env)
		cfg.Kafka.SASL = config.SASL{Mechanism: config.SASLScramSHA256, Username: kafkatest.SASLUser, Password: kafkatest.SASLPassword}
		e.numbers(1, 1000)
		if granted := ids(cfg.Name); len(granted) > 0 {
			grant(kadm.NewACLs().TransactionalIDs(granted...))
		}
		m := metrics.New(prometheus.NewRegistry(), cfg.Name)
		return e, cfg, m, startWith(t, cfg, WithMetrics(m))
	}

	for _, c := range []struct {
		name    string
		granted func(job string) []string
		missing func(job string) string
	}{
		{"denied", func(string) []string { return nil }, modeTransactionalID},
		{"denied its producer's", func(job string) []string { return []string{modeTransactionalID(job)} }, func(job string) string { return job + "-txn" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, cfg, m, r := run(t, c.granted)
			var err error
			select {
			case err = <-r.done:
			case <-ctx.Done():
				t.Fatal("the job kept running without WRITE on a transactional id")
			}
			if !errors.Is(err, sink.ErrUnauthorized) {
				t.Fatalf("Run: %v, want sink.ErrUnauthorized", err)
			}
			for _, want := range []string{"TransactionalId", "WRITE", c.missing(cfg.Name)} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Run's error %q does not say %q", err, want)
				}
			}
			t.Logf("Run: %v", err)
			text := metricstest.Scrape(t, m.Handler())
			found := false
			for line := range strings.Lines(text) {
				if strings.HasPrefix(line, "pipeline_restarts_total{") {
					found = true
					if !strings.HasSuffix(strings.TrimSpace(line), " 0") {
						t.Errorf("the job restarted (%s); restarting cannot grant an ACL", strings.TrimSpace(line))
					}
				}
			}
			if !found {
				t.Error("no pipeline_restarts_total in the metrics")
			}
		})
	}
	t.Run("granted", func(t *testing.T) {
		e, _, _, r := run(t, func(job string) []string { return []string{modeTransactionalID(job), job + "-txn"} })
		rep := e.awaitFinal(1000, r)
		if err := r.stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if !rep.Exact() {
			t.Fatalf("with every ACL granted: %v", rep)
		}
	})
}
