package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/engine"
	"github.com/eoflow/pipeline/internal/admin"
	"github.com/eoflow/pipeline/internal/datagen"
	"github.com/eoflow/pipeline/metrics"
)

// demoConfig is the parity-sum job the demo runs against the in-process
// broker. It is the reference job (examples/parity-sum) with the demo's
// broker and admin address filled in.
const demoConfig = `
name: parity-sum-demo
guarantee: exactly_once
kafka:
  brokers: ${KAFKA_BROKERS}
checkpoint:
  interval: 1s
sources:
  - id: numbers
    topics: numbers
steps:
  - id: parity
    key_by: 'n % 2 == 0 ? "even" : "odd"'
  - id: sums
    aggregate:
      values:
        count: count()
        sum: sum(n)
sinks:
  - topic: parity-sums
admin:
  listen: ${ADMIN_LISTEN}
logging:
  level: warn
`

// demo is `pipeline demo`: the whole thing in one process, no Docker, no
// Java — an in-process broker (franz-go's kfake; fine for a look around,
// never the proof of exactly-once, which the tests run against real Kafka),
// a data generator, and the parity-sum job, printing results and
// checkpoint progress until Ctrl-C.
func demo(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("pipeline demo", "  pipeline demo [flags]\n      everything in one process: an in-process broker, a data generator and\n      the parity-sum job, printing the running totals until Ctrl-C")
	listen := fs.String("admin", "127.0.0.1:8080", "admin and metrics listen address (port 0 picks one)")
	rate := fs.Float64("rate", 500, "numbers per second the generator writes")
	if _, code, ok := parseFlags(fs, args, false, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "pipeline demo: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := runDemo(ctx, *listen, *rate, stdout); err != nil {
		fmt.Fprintf(stderr, "pipeline demo: %v\n", err)
		return exitFail
	}
	return exitOK
}

// runDemo runs the demo until ctx ends.
func runDemo(ctx context.Context, listen string, rate float64, out io.Writer) error {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, "numbers"))
	if err != nil {
		return fmt.Errorf("starting the in-process broker: %w", err)
	}
	defer cluster.Close()
	brokers := strings.Join(cluster.ListenAddrs(), ",")

	// Bind the admin address first: the first URL printed must answer.
	srvPlaceholder, err := admin.Listen(listen, nil)
	if err != nil {
		return fmt.Errorf("admin address %s: %w", listen, err)
	}
	addr := srvPlaceholder.Addr()
	env := map[string]string{"KAFKA_BROKERS": brokers, "ADMIN_LISTEN": addr}
	cfg, err := config.Parse("demo.yaml", []byte(demoConfig), func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	})
	if err != nil {
		return err
	}
	m := metrics.New(nil, cfg.Name)
	m.SetInfo(string(cfg.Guarantee), version())
	log := slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelWarn}))
	job, err := engine.New(cfg, log, engine.WithMetrics(m))
	if err != nil {
		return err
	}
	conn := []kgo.Opt{kgo.SeedBrokers(cluster.ListenAddrs()...)}
	srv := srvPlaceholder.WithHandler(admin.Handler(job, admin.Options{
		Config: cfg, Metrics: m.Handler(), Gatherer: m.Gatherer(), Records: admin.KafkaRecords{Conn: conn},
	}))

	fmt.Fprintf(out, "web UI:      http://%s/ui/\n", addr)
	fmt.Fprintf(out, "metrics:     http://%s/metrics\n", addr)
	fmt.Fprintf(out, "job status:  http://%s/api/v1/job\n", addr)
	fmt.Fprintf(out, "checkpoints: http://%s/api/v1/checkpoints\n", addr)
	fmt.Fprintf(out, "broker:      %s (in-process kfake; numbers -> parity-sums)\n", brokers)
	fmt.Fprintln(out, "Ctrl-C stops.")

	var wg sync.WaitGroup
	errs := make(chan error, 4)
	run := func(name string, fn func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(); err != nil && ctx.Err() == nil {
				errs <- fmt.Errorf("%s: %w", name, err)
			}
		}()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	run("admin", func() error { return srv.Run(ctx) })
	run("job", func() error { return job.Run(ctx) })
	run("datagen", func() error {
		_, err := datagen.Numbers(ctx, conn, datagen.Options{Topic: "numbers", From: 1, Rate: rate})
		return err
	})
	run("results", func() error { return printResults(ctx, conn, job, out) })
	var firstErr error
	select {
	case <-ctx.Done():
	case firstErr = <-errs:
	}
	cancel()
	wg.Wait()
	return firstErr
}

// printResults follows the output with read_committed and prints, once a
// second, the latest total per key and the checkpoint the job is at.
func printResults(ctx context.Context, conn []kgo.Opt, job *engine.Job, out io.Writer) error {
	cl, err := kgo.NewClient(append(append([]kgo.Opt{}, conn...),
		kgo.ConsumeTopics("parity-sums"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	latest := map[string]string{}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		pollCtx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		fs := cl.PollFetches(pollCtx)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		fs.EachRecord(func(r *kgo.Record) { latest[string(r.Key)] = string(r.Value) })
		select {
		case <-tick.C:
			st := job.Status()
			var odd, even struct{ Count, Sum int64 }
			_ = json.Unmarshal([]byte(latest["odd"]), &odd)
			_ = json.Unmarshal([]byte(latest["even"]), &even)
			fmt.Fprintf(out, "%s  checkpoint %-5d %-8s odd: count=%d sum=%d   even: count=%d sum=%d\n",
				time.Now().Format("15:04:05"), st.Checkpoint.LastCompleted, st.State, odd.Count, odd.Sum, even.Count, even.Sum)
		default:
		}
	}
}
