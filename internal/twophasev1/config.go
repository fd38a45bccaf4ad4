package twophasev1

import (
	"errors"
	"fmt"
)

// DefaultMaxInFlight is Config.MaxInFlight's default.
const DefaultMaxInFlight = 1

// Config configures a Protocol.
type Config struct {
	// DecisionLog names the participant whose commit is the decision (the
	// Kafka transaction carrying the checkpoint record). Required.
	DecisionLog string
	// Participants names the other participants, in the order in which
	// their actions are emitted. May be empty: then the protocol is the
	// Kafka transaction alone, as the runtime runs it today.
	Participants []string
	// MaxInFlight is how many epochs may be in flight (begun, not yet done
	// or aborted) at once. Default 1. Set it to the checkpoint
	// coordinator's MaxConcurrent (Flink:
	// execution.checkpointing.max-concurrent-checkpoints). Above 1, every
	// participant must hold several prepared epochs at once (for Kafka, one
	// transactional producer per epoch in flight).
	MaxInFlight int
	// IsFenced tells whether a participant's error means another instance
	// fenced this one, which fails the job for good. Default: errors.Is(err,
	// ErrFenced). For the Kafka participant, sink.IsFenced.
	IsFenced func(error) bool
}

// withDefaults returns c with zero fields defaulted and every problem
// listed at once.
func (c Config) withDefaults() (Config, error) {
	var errs []error
	if c.MaxInFlight == 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.MaxInFlight < 0 {
		errs = append(errs, fmt.Errorf("max in flight %d: must be at least 1", c.MaxInFlight))
	}
	if c.IsFenced == nil {
		c.IsFenced = isFencedDefault
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
		return c, fmt.Errorf("two-phase commit config: %w", err)
	}
	return c, nil
}
