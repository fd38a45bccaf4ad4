package checkpoint

import (
	"errors"
	"fmt"
	"time"
)

// Defaults for a zero CoordinatorConfig field. They match the job
// configuration's defaults (package config).
const (
	DefaultInterval      = time.Second
	DefaultTimeout       = 30 * time.Second
	DefaultMaxConcurrent = 1
)

// CoordinatorConfig configures a Coordinator. Durations are measured on the
// times passed to the coordinator's inputs, never on a clock of its own.
type CoordinatorConfig struct {
	// Interval between the triggers of two periodic checkpoints. Default
	// 1s. Flink: execution.checkpointing.interval; Kafka Streams:
	// commit.interval.ms.
	Interval time.Duration
	// Timeout after which a checkpoint that is not fully acked (or not yet
	// handed out for commit) is aborted, which fails the job. Default 30s.
	// Flink: execution.checkpointing.timeout.
	Timeout time.Duration
	// MinPause is the least time between the end (commit or abort) of one
	// checkpoint and the periodic trigger of the next. Default 0. Forced
	// checkpoints (TriggerNow, Stop) ignore it. Flink:
	// execution.checkpointing.min-pause.
	MinPause time.Duration
	// MaxConcurrent is how many checkpoints may be in flight (triggered and
	// not yet committed or aborted) at once. Default 1. Each one in flight
	// is an open Kafka transaction, so the sink needs that many producers.
	// Flink: execution.checkpointing.max-concurrent-checkpoints.
	MaxConcurrent int
	// Tasks must all ack a checkpoint before it may commit. Required, no
	// duplicates, no empty ids.
	Tasks []TaskID
	// LastCompleted is the checkpoint the job was restored from (0: a fresh
	// start). Numbering continues at LastCompleted+1.
	LastCompleted ID
	// LastCompletedAt is when LastCompleted was taken, for LastCompletedAt()
	// before the first checkpoint of this run completes. Optional.
	LastCompletedAt time.Time
}

// withDefaults returns c with zero fields defaulted and problems listed, all
// at once.
func (c CoordinatorConfig) withDefaults() (CoordinatorConfig, error) {
	var errs []error
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxConcurrent == 0 {
		c.MaxConcurrent = DefaultMaxConcurrent
	}
	if c.Interval < 0 {
		errs = append(errs, fmt.Errorf("interval %v: must be positive", c.Interval))
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("timeout %v: must be positive", c.Timeout))
	}
	if c.MinPause < 0 {
		errs = append(errs, fmt.Errorf("min pause %v: must not be negative", c.MinPause))
	}
	if c.MaxConcurrent < 0 {
		errs = append(errs, fmt.Errorf("max concurrent %d: must be at least 1", c.MaxConcurrent))
	}
	if len(c.Tasks) == 0 {
		errs = append(errs, errors.New("tasks: at least one task must ack checkpoints"))
	}
	seen := make(map[TaskID]bool, len(c.Tasks))
	for i, t := range c.Tasks {
		switch {
		case t == "":
			errs = append(errs, fmt.Errorf("tasks[%d]: empty task id", i))
		case seen[t]:
			errs = append(errs, fmt.Errorf("tasks[%d]: duplicate task id %q", i, t))
		}
		seen[t] = true
	}
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("checkpoint coordinator config: %w", err)
	}
	return c, nil
}
