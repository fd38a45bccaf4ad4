package runtime

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/checkpoint/kstore"
	"github.com/eoflow/pipeline/sink"
	"github.com/eoflow/pipeline/twophase"
)

// kafkaDecisionLog is the job's transactional producer as the two-phase
// commit's decision log: transaction N holds epoch N's state changes (and,
// under exactly_once, its outputs and dead letters) and, written at Prepare,
// checkpoint record N. Committing the transaction is the decision "N
// commits"; there is no window where the checkpoint is complete but its
// outputs are not.
type kafkaDecisionLog struct {
	txn  *sink.Txn
	conn []kgo.Opt
	job  string
	// staged is the checkpoint record the next Prepare writes.
	staged *checkpoint.Record
	// latest is the newest committed checkpoint, read by LastDecided.
	latest *checkpoint.Record
}

var _ twophase.DecisionLog = (*kafkaDecisionLog)(nil)

func (d *kafkaDecisionLog) Name() string { return "kafka:" + d.job + "-txn" }

// stage sets the checkpoint record that Prepare of its epoch writes.
func (d *kafkaDecisionLog) stage(rec *checkpoint.Record) { d.staged = rec }

// Prepare writes checkpoint record e into the open transaction and flushes
// everything of the epoch to the brokers, invisible to read_committed
// readers until Commit.
func (d *kafkaDecisionLog) Prepare(ctx context.Context, e twophase.Epoch) error {
	if d.staged == nil || twophase.Epoch(d.staged.ID) != e {
		return fmt.Errorf("no checkpoint record staged for epoch %d", e)
	}
	r, err := kstore.CheckpointRecord(d.staged)
	if err != nil {
		return err
	}
	d.txn.Produce(ctx, r)
	return d.txn.Flush(ctx)
}

// Commit ends transaction e with a commit: the decision.
func (d *kafkaDecisionLog) Commit(ctx context.Context, e twophase.Epoch) error {
	if err := d.txn.Commit(ctx); err != nil {
		return err
	}
	d.latest = d.staged
	return nil
}

// Abort aborts the open transaction.
func (d *kafkaDecisionLog) Abort(ctx context.Context, e twophase.Epoch) error {
	return d.txn.Abort(ctx)
}

// Recover fences the job's transactional id: the coordinator aborts what a
// predecessor left open, at once. Kafka keeps no prepared transaction
// across instances, so nothing is ever in doubt here: not committed means
// not decided.
func (d *kafkaDecisionLog) Recover(ctx context.Context) ([]twophase.Epoch, error) {
	return nil, d.txn.Fence(ctx)
}

// LastDecided reads the newest committed checkpoint record (read_committed,
// after the fence, so no open transaction stalls the read).
func (d *kafkaDecisionLog) LastDecided(ctx context.Context) (twophase.Epoch, error) {
	rec, err := kstore.Latest(ctx, d.conn, d.job)
	if err != nil {
		return 0, fmt.Errorf("reading the latest checkpoint: %w", err)
	}
	d.latest = rec
	if rec == nil {
		return 0, nil
	}
	return twophase.Epoch(rec.ID), nil
}

// plainOutputs is the at_least_once output producer as a participant: it
// prepares by flushing, so no checkpoint is decided while an output it
// covers could still be lost. It cannot take anything back: Commit and
// Abort have nothing to do, which is exactly why at_least_once may repeat
// outputs after a crash.
type plainOutputs struct{ p *sink.Plain }

var _ twophase.Participant = plainOutputs{}

func (o plainOutputs) Name() string                                        { return "outputs" }
func (o plainOutputs) Prepare(ctx context.Context, _ twophase.Epoch) error { return o.p.Flush(ctx) }
func (o plainOutputs) Commit(context.Context, twophase.Epoch) error        { return nil }
func (o plainOutputs) Abort(context.Context, twophase.Epoch) error         { return nil }
func (o plainOutputs) Recover(context.Context) ([]twophase.Epoch, error)   { return nil, nil }
