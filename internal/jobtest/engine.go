package jobtest

import (
	"context"
	"log/slog"
	"time"

	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/engine"
	"github.com/eoflow/pipeline/internal/fault"
)

// This file is all this package knows of the engine: it runs the real
// job through these few calls, so a rename of the engine package is a
// change here alone.

// Headers of a late record, shown in diffs.
const (
	headerLateWindowEnd = engine.HeaderLateWindowEnd
	headerLateWatermark = engine.HeaderLateWatermark
)

// parseJob reads a job file's content with env as its only variables,
// brokers as its cluster and registry as its schema registry (if it names
// one), and checks everything building the job checks, without
// connecting.
func parseJob(file string, data []byte, env map[string]string, brokers []string, registry string) (*config.Config, error) {
	cfg, err := config.Parse(file, data, func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}, config.WithCheck(engine.CheckExpressions), config.WithBrokers(brokers), config.WithSchemaRegistry(registry))
	if err != nil {
		return nil, err
	}
	if _, err := engine.New(cfg, slog.New(slog.DiscardHandler)); err != nil {
		return nil, err
	}
	return cfg, nil
}

// engineJob is one run of the real job.
type engineJob struct{ job *engine.Job }

// restartBackoff is the first wait before a restart in a test run: crash
// runs restart several times, each in a moment.
const restartBackoff = 10 * time.Millisecond

func newEngineJob(cfg *config.Config, log *slog.Logger, faults *fault.Injector) (*engineJob, error) {
	j, err := engine.New(cfg, log, engine.WithFaults(faults), engine.WithRestartBackoff(restartBackoff))
	if err != nil {
		return nil, err
	}
	return &engineJob{job: j}, nil
}

func (e *engineJob) run(ctx context.Context) error { return e.job.Run(ctx) }

// stop asks for a graceful stop: a final checkpoint, then run returns.
func (e *engineJob) stop() { e.job.Stop() }

// jobStatus is what the harness reads of a running job.
type jobStatus struct {
	State string
	// Running: restored, its task graph runs (a stop now takes a final
	// checkpoint).
	Running bool
	// Restarts counts the attempts that ended in a failure.
	Restarts int
	// Checkpoint is the last completed checkpoint's id.
	Checkpoint uint64
	// Err is the last failure, if the job is restarting or failed.
	Err string
}

func (e *engineJob) status() jobStatus {
	s := e.job.Status()
	return jobStatus{
		State: string(s.State), Running: s.State == engine.StateRunning, Restarts: s.Restarts,
		Checkpoint: s.Checkpoint.LastCompleted, Err: s.Error,
	}
}
