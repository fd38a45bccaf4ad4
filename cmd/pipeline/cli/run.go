package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eoflow/pipeline/checkpoint/savepoint"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/engine"
	"github.com/eoflow/pipeline/internal/admin"
	"github.com/eoflow/pipeline/internal/fault"
	"github.com/eoflow/pipeline/internal/gcfloor"
	"github.com/eoflow/pipeline/internal/kclient"
	"github.com/eoflow/pipeline/metrics"
	"github.com/eoflow/pipeline/sink"
)

const runSynopsis = `  pipeline run [-c FILE] [--progress] [--from-savepoint PATH [--allow-dropped-state] [--remap-topic OLD=NEW]...]
      [--stop-with-savepoint DIR] [--instance-id ID]
      run the job until SIGINT or SIGTERM: the first takes a final checkpoint
      and exits 0, a second stops at once (the epoch in flight is aborted)`

// resolveInstanceID is a group-mode process's instance id: the flag,
// else $PIPELINE_INSTANCE_ID, else the host name (one process per host,
// as a container gets).
func resolveInstanceID(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if env := os.Getenv("PIPELINE_INSTANCE_ID"); env != "" {
		return env, nil
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		return "", fmt.Errorf("scale.mode is group: give this process an instance id with --instance-id or $PIPELINE_INSTANCE_ID (the host name is unknown: %v)", err)
	}
	return host, nil
}

// runJob is `pipeline run -c FILE`: load, compile, run until SIGINT or
// SIGTERM.
func runJob(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("pipeline run", runSynopsis)
	file := fs.String("c", "config.yaml", "the job's YAML `FILE`")
	var restore restoreFlags
	restore.register(fs)
	showProgress := fs.Bool("progress", isTerminal(stderr), "print a progress line to stderr every few seconds: records in and out with their rates, lag, the last checkpoint, dead letters (default: on when stderr is a terminal)")
	progressInterval := fs.Duration("progress-every", progressEvery, "how often --progress prints")
	stopWithSavepoint := fs.String("stop-with-savepoint", "", "on SIGINT/SIGTERM, write the final checkpoint as a savepoint into `DIR` (which must not exist yet)")
	heapFloor := fs.Int("heap-floor-mib", defaultHeapFloorMiB, "keep the garbage collector's heap goal at least this many `MiB` while the live heap is small (0: Go's default, twice the live heap); unused when GOGC or GOMEMLIMIT is set")
	instanceID := fs.String("instance-id", "", "this process's `ID` in a group-mode job (scale.mode: group): its static membership of the job's consumer group and its transactional id; every process needs its own (default $PIPELINE_INSTANCE_ID, else the host name)")
	if _, code, ok := parseFlags(fs, args, false, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "pipeline run: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if err := restore.check(); err != nil {
		fmt.Fprintf(stderr, "pipeline run: %v\n", err)
		return exitUsage
	}
	cfg, ok := loadConfig(*file, stdout, stderr)
	if !ok {
		return exitFail
	}
	if *stopWithSavepoint != "" {
		if !cfg.Guarantee.Checkpoints() {
			fmt.Fprintln(stderr, "pipeline run: --stop-with-savepoint: an at_most_once job takes no checkpoints, so it has no savepoints")
			return exitUsage
		}
		// Now, not after hours of running.
		if err := savepoint.CheckTarget(*stopWithSavepoint); err != nil {
			fmt.Fprintf(stderr, "pipeline run: --stop-with-savepoint: %v\n", err)
			return exitFail
		}
	}
	var jobOpts []engine.Option
	if cfg.Scale.Mode == config.ScaleGroup {
		id, err := resolveInstanceID(*instanceID)
		if err != nil {
			fmt.Fprintf(stderr, "pipeline run: %v\n", err)
			return exitUsage
		}
		jobOpts = append(jobOpts, engine.WithInstanceID(id))
	}
	if restore.path != "" {
		opt, err := restore.option(cfg)
		if err != nil {
			fmt.Fprintf(stderr, "pipeline run: %v\n", err)
			return exitFail
		}
		jobOpts = append(jobOpts, opt)
	}
	log := newLogger(cfg.Logging, stderr)
	faults, err := fault.FromEnv() // only a faultpoints build (the crash tests) reads it
	if err != nil {
		fmt.Fprintf(stderr, "pipeline run: %v\n", err)
		return exitUsage
	}
	// The registry is ours, so the progress line can read the job's
	// numbers from it.
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, cfg.Name)
	m.SetInfo(string(cfg.Guarantee), version())
	// The admin listener is bound first: a taken port is an error before
	// the job starts, and the job advertises the bound address to the
	// other processes of a group-mode job (port 0 included).
	var srv *admin.Server
	if cfg.Admin.Listen != "" {
		srv, err = admin.Listen(cfg.Admin.Listen, nil)
		if err != nil {
			fmt.Fprintf(stderr, "pipeline run: admin.listen %s: %v\n  %s\n", cfg.Admin.Listen, err, adminListenOrigin(cfg).change(cfg.Admin.Listen))
			return exitFail
		}
		defer srv.Close()
		jobOpts = append(jobOpts, engine.WithAdminAddress(engine.AdvertisedAdmin(cfg.Admin.Advertise, srv.Addr())))
	}
	job, err := engine.New(cfg, log, append(jobOpts, engine.WithFaults(faults), engine.WithMetrics(m))...)
	if err != nil {
		if printProblems(*file, err, stdout, stderr) {
			return exitFail
		}
		fmt.Fprintf(stderr, "pipeline run: %v\n", err)
		return exitFail
	}
	// The first SIGINT/SIGTERM stops gracefully (a final checkpoint, then
	// exit 0); a second one stops at once, aborting the epoch in flight.
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, hardStop := context.WithCancel(context.Background())
	defer hardStop()
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(signals)
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-signals:
		case <-ctx.Done():
			return
		}
		if *stopWithSavepoint != "" {
			log.Info("stopping after a final checkpoint, written as a savepoint (signal again to stop at once)", "savepoint", *stopWithSavepoint)
			job.StopWithSavepoint(*stopWithSavepoint)
		} else {
			log.Info(job.StopPlan() + " (signal again to stop at once)")
			job.Stop()
		}
		select {
		case <-signals:
			log.Info("stopping at once; the epoch in flight is aborted")
			hardStop()
		case <-ctx.Done():
		}
	}()

	srvCtx, stopServer := context.WithCancel(context.Background())
	defer stopServer()
	if srv != nil {
		conn, err := kclient.Options(cfg.Kafka)
		if err != nil {
			fmt.Fprintf(stderr, "pipeline run: %v\n", err)
			return exitFail
		}
		srv.WithHandler(admin.Handler(job, admin.Options{
			Config: cfg, Metrics: m.Handler(), Gatherer: reg, Records: admin.KafkaRecords{Conn: conn},
		}))
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := srv.Run(srvCtx); err != nil {
				log.Error("admin server", "err", err)
			}
		}()
		log.Info("admin listening", "metrics", "http://"+srv.Addr()+"/metrics", "api", "http://"+srv.Addr()+"/api/v1/job", "ui", "http://"+srv.Addr()+"/ui/")
	}
	if *heapFloor > 0 && gcfloor.Wanted() {
		floorCtx, stopFloor := context.WithCancel(context.Background())
		defer stopFloor()
		wg.Add(1)
		go func() {
			defer wg.Done()
			gcfloor.Run(floorCtx, uint64(*heapFloor)<<20, 50*time.Millisecond)
		}()
	}
	if *showProgress && *progressInterval > 0 {
		progressCtx, stopProgress := context.WithCancel(context.Background())
		defer stopProgress()
		wg.Add(1)
		go func() {
			defer wg.Done()
			reportProgress(progressCtx, *progressInterval, reg, newProgressTopics(cfg), job, stderr)
		}()
	}
	log.Info("starting", "guarantee", cfg.Guarantee, "brokers", strings.Join(cfg.Kafka.Brokers, ","), "config", *file)
	err = job.Run(ctx)
	if err != nil {
		if errors.Is(err, sink.ErrFenced) && cfg.Admin.Listen != "" {
			// Two scrapes' worth of time, so Prometheus records the fencing
			// before the series disappear (a second signal cuts it short).
			log.Info("keeping /metrics up for 10s so the fencing is scraped")
			waitCtx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			select {
			case <-waitCtx.Done():
			case <-time.After(10 * time.Second):
			}
			cancel()
		}
		reportStop(log, cfg.Logging, err, stderr)
		return exitFail
	}
	log.Info("stopped")
	return exitOK
}

// reportStop says once why the job stopped. A text log prints it as plain
// text after the log line: a refusal spans lines, each with its fix, which
// a log value would print as one line of \n escapes. A JSON log (read by
// machines, which plain text would trip) carries it in the record.
func reportStop(log *slog.Logger, l config.Logging, err error, stderr io.Writer) {
	if l.Format == "json" {
		log.Error("stopped", "err", err)
		return
	}
	log.Error("stopped; why follows")
	fmt.Fprintf(stderr, "pipeline run: %v\n", err)
}

// defaultHeapFloorMiB is --heap-floor-mib's default (internal/gcfloor):
// about the heap goal Go's default gave the keyed sum when it buffered
// four times the input it does now (source.FetchMaxBytes), so the peak
// RSS stays near what it was, and the collector runs a third as often.
const defaultHeapFloorMiB = 256

// loadConfig loads the file, printing every problem when it cannot: those
// of its expressions too, with the others.
func loadConfig(file string, stdout, stderr io.Writer) (*config.Config, bool) {
	cfg, err := config.Load(file, config.WithCheck(engine.CheckExpressions))
	if err != nil {
		if !printProblems(file, err, stdout, stderr) {
			fmt.Fprintf(stderr, "pipeline: %v\n", err)
		}
		return nil, false
	}
	return cfg, true
}

// printProblems prints configuration problems one per line, and reports
// whether err held any.
func printProblems(file string, err error, stdout, stderr io.Writer) bool {
	var problems config.Errors
	if !errors.As(err, &problems) {
		return false
	}
	for _, p := range problems {
		fmt.Fprintln(stdout, p)
	}
	fmt.Fprintf(stderr, "%s: %d problem(s)\n", file, len(problems))
	return true
}

// newLogger builds the job's logger from its logging settings.
func newLogger(l config.Logging, w io.Writer) *slog.Logger {
	var level slog.Level
	switch l.Level {
	case "debug":
		level = slog.LevelDebug
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	default:
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	if l.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
