package engine

import (
	"context"

	"github.com/eoflow/pipeline/checkpoint/savepoint"
	"github.com/eoflow/pipeline/source"
)

// singleMode is the attempt of a job that one process runs (scale.mode:
// single): it reads every source partition, fences the job's one
// transactional id, and restores from the job's own last checkpoint.
type singleMode struct{}

func (singleMode) prepare(ctx context.Context, a *attempt) (*savepoint.RestorePlan, error) {
	plan, _, err := a.prepareCheckpointed(ctx, a.j.checkBeforeRestart, nil)
	return plan, err
}

// recover: fencing aborts a predecessor's open transaction, which would
// otherwise hold back the read_committed restore until it timed out; then
// the decision log says which checkpoint is the last.
func (singleMode) recover(ctx context.Context, a *attempt) error {
	txn, err := a.adapters.txn(a)
	if err != nil {
		return err
	}
	a.closers = append(a.closers, txn.Close)
	if err := a.openPlain(); err != nil {
		return err
	}
	return a.recoverWith(ctx, txn, a.plain, nil)
}

// restore rebuilds the state and the source offsets: from the savepoint
// when the job starts from one it has not imported yet, else from the
// job's own last checkpoint.
func (singleMode) restore(ctx context.Context, a *attempt, fromPlan *savepoint.RestorePlan) error {
	j := a.j
	if j.from != nil && (a.latest == nil || a.latest.Savepoint != j.from.r.ID()) {
		return a.importSavepoint(ctx, fromPlan)
	}
	if j.from != nil {
		j.log.Info("the savepoint was imported before; continuing from the job's own checkpoints",
			"savepoint", j.from.r.Dir(), "id", j.from.r.ID(), "checkpoint", a.latest.ID)
	}
	if err := a.continueFrom(); err != nil {
		return err
	}
	var err error
	if a.offsets, err = j.startOffsets(ctx, a.cluster, a.latest); err != nil {
		return err
	}
	if a.ops, a.restored, err = j.restoreOperators(ctx, a.latest, a.cluster.ReadState); err != nil {
		return err
	}
	return j.checkRestored(a.latest, keysOf(a.ops), a.restored)
}

func (singleMode) readers(a *attempt) ([]recordReader, error) { return a.checkpointedReaders() }

// wire: single mode shows its progress as the job's consumer group's
// offsets (group mode commits them in the epoch's transaction instead),
// and watches the source topics for added partitions (in group mode the
// group deals them out).
func (singleMode) wire(a *attempt, g *graph) {
	j := a.j
	g.offsets = newGroupOffsets(a.adm, j.cfg.Name, j.log)
	g.loop.committed = g.offsets.publish
	added := make(chan []source.TopicPartition, 1)
	g.watch = newPartitionWatch(j, a.adm, a.offsets, added)
	g.loop.partitionsAdded = added
}

func (singleMode) finish(a *attempt, err error) error { return a.endEpoch(err) }
