package twophasev1

import (
	"context"
	"errors"

	"github.com/eoflow/pipeline/twophase"
)

// The participants and the epoch are twophase's: this package is the
// commit protocol as it ran before twophase.Machine merged it with the
// checkpoint coordinator, kept only until the engine runs on the Machine.
type (
	Epoch       = twophase.Epoch
	Participant = twophase.Participant
)

// DecisionLog is the participant whose commit is the decision.
type DecisionLog interface {
	Participant
	// LastDecided returns the newest epoch whose decision committed.
	LastDecided(ctx context.Context) (Epoch, error)
}

// ErrFenced is twophase.ErrFenced.
var ErrFenced = twophase.ErrFenced

// isFencedDefault is Config.IsFenced's default.
func isFencedDefault(err error) bool { return errors.Is(err, ErrFenced) }
