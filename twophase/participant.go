package twophase

import (
	"context"
	"errors"

	"github.com/eoflow/pipeline/checkpoint"
)

// Participant is one resource that takes part in the commit of every epoch:
// the Kafka transaction, or later a database with prepared transactions.
// It is the I/O side of the protocol; the Machine decides which of its
// methods to call, and when.
//
// The caller never runs two calls on one participant at once, and makes
// them in the order the Machine emitted them. Calls on different
// participants may run concurrently.
type Participant interface {
	// Name identifies the participant in Config, in actions and in errors.
	// It must be stable across restarts of the job, non-empty and unique
	// within the job.
	Name() string
	// Begin opens epoch e: from now on the runtime hands the participant
	// e's records (a Kafka transaction begins). A participant that holds
	// one open transaction at a time (Kafka) needs Config.MaxInFlight 1.
	// An error means e cannot commit; the epoch is aborted everywhere.
	Begin(ctx context.Context, e Epoch) error
	// Prepare makes everything of epoch e durable but invisible. After it
	// returns nil, Commit(e) must succeed unless the participant was fenced
	// or its resource failed, and e must survive a crash of this process
	// until Recover reports it in doubt (a decision log is exempt: see
	// DecisionLog). An error means e cannot commit; the epoch is aborted
	// everywhere.
	Prepare(ctx context.Context, e Epoch) error
	// Commit makes epoch e visible. It must be idempotent: recovery may
	// repeat it for an epoch that already committed. Epochs are committed
	// in increasing order.
	Commit(ctx context.Context, e Epoch) error
	// Abort discards epoch e, prepared or not. It must be idempotent, and do
	// nothing for an epoch the participant does not hold.
	Abort(ctx context.Context, e Epoch) error
	// Recover fences every predecessor (a crashed or still running earlier
	// instance of the job: from now on its calls fail with an error that
	// IsFenced recognises) and then reports the epochs this participant
	// holds prepared but neither committed nor aborted, so the protocol can
	// settle them by the decision log.
	Recover(ctx context.Context) (inDoubt []Epoch, err error)
}

// DecisionLog is the participant whose commit of epoch e IS the durable
// decision "e commits": the Kafka transaction that carries checkpoint
// record e. Exactly one per job. Because its own commit is the decision, it
// never needs to keep a prepared epoch across a crash: a prepared epoch it
// lost was not decided, and recovery aborts it everywhere.
type DecisionLog interface {
	Participant
	// LastDecided returns the newest checkpoint record whose epoch's
	// decision committed (nil if none): its ID is the last decided epoch,
	// and the job restores from it. It is called after Recover fenced
	// every predecessor, so no decision can land behind its back.
	LastDecided(ctx context.Context) (*checkpoint.Record, error)
}

// ErrFenced means another instance of the job fenced this one (took over
// its transactional id, its prepared transactions): this instance must stop
// for good and must not restart, because a restart would fence the
// newcomer in turn. A participant returns an error wrapping ErrFenced, or
// the job configures Config.IsFenced to recognise its own errors (for
// Kafka, sink.IsFenced).
var ErrFenced = errors.New("fenced: another instance of this job took over")

// isFencedDefault is Config.IsFenced's default.
func isFencedDefault(err error) bool { return errors.Is(err, ErrFenced) }
