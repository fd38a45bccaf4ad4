package twophase

import (
	"errors"
	"fmt"
	"time"
)

// Defaults for a zero Config field. They match the job configuration's
// defaults (package config).
const (
	DefaultInterval    = time.Second
	DefaultTimeout     = 30 * time.Second
	DefaultMaxInFlight = 1
)

// Config configures a Machine. Durations are measured on the times the
// messages carry, never on a clock of the Machine's own.
type Config struct {
	// DecisionLog names the participant whose commit of epoch N is the
	// decision "checkpoint N is complete": the Kafka transaction that
	// carries checkpoint record N. Required.
	DecisionLog string
	// Participants names the others, in the order their calls are
	// emitted. May be empty: then the protocol is the Kafka transaction
	// alone (exactly_once). Under at_least_once the output producer is
	// one, so that no checkpoint is decided while an output it covers
	// could still be lost.
	Participants []string
	// Interval between the triggers of two periodic checkpoints. Default
	// 1s. Flink: execution.checkpointing.interval; Kafka Streams:
	// commit.interval.ms.
	Interval time.Duration
	// Timeout after which a checkpoint whose decision has not been asked
	// of the decision log yet (a task has not acked, a participant has
	// not prepared, or the previous decision is still being made) is
	// aborted, which fails the job. Default 30s. Flink:
	// execution.checkpointing.timeout.
	Timeout time.Duration
	// MinPause is the least time between the end (decision or abort) of
	// one checkpoint and the periodic trigger of the next. Default 0.
	// TriggerNow and Stop ignore it. Flink:
	// execution.checkpointing.min-pause.
	MinPause time.Duration
	// MaxInFlight is how many epochs may be in flight (begun and not yet
	// committed everywhere) at once, and so how many checkpoints. Default
	// 1. Above 1 every participant must hold several open epochs at once
	// (for Kafka, one transactional producer per epoch in flight). Flink:
	// execution.checkpointing.max-concurrent-checkpoints.
	MaxInFlight int
	// IsFenced tells whether a participant's error means another instance
	// of the job fenced this one, which fails the job for good. Default:
	// errors.Is(err, ErrFenced). For Kafka, sink.IsFenced.
	IsFenced func(error) bool
}

// withDefaults returns c with zero fields defaulted and every problem
// listed at once.
func (c Config) withDefaults() (Config, error) {
	var errs []error
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.IsFenced == nil {
		c.IsFenced = isFencedDefault
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
	if c.MaxInFlight < 0 {
		errs = append(errs, fmt.Errorf("max in flight %d: must be at least 1", c.MaxInFlight))
	}
	if c.DecisionLog == "" {
		errs = append(errs, errors.New("decision log: required"))
	}
	seen := map[string]bool{c.DecisionLog: true}
	for i, p := range c.Participants {
		switch {
		case p == "":
			errs = append(errs, fmt.Errorf("participants[%d]: empty name", i))
		case p == c.DecisionLog:
			errs = append(errs, fmt.Errorf("participants[%d]: %q is the decision log", i, p))
		case seen[p]:
			errs = append(errs, fmt.Errorf("participants[%d]: duplicate name %q", i, p))
		}
		seen[p] = true
	}
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("epoch machine config: %w", err)
	}
	return c, nil
}
