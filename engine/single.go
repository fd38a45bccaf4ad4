package engine

import (
	"context"

	"github.com/eoflow/pipeline/checkpoint/kstore"
	"github.com/eoflow/pipeline/checkpoint/savepoint"
	"github.com/eoflow/pipeline/sink"
	"github.com/eoflow/pipeline/source"
)

// singleMode is the attempt of a job that one process runs (scale.mode:
// single): it reads every source partition, fences the job's one
// transactional id, and restores from the job's own last checkpoint.
type singleMode struct{}

func (singleMode) prepare(ctx context.Context, a *attempt) (*savepoint.RestorePlan, error) {
	j, cfg := a.j, a.j.cfg
	if err := a.openAdmin(); err != nil {
		return nil, err
	}
	if err := checkTransactionTimeout(ctx, a.adm, cfg); err != nil {
		return nil, err
	}
	// A savepoint that does not fit is refused before anything changes on
	// the cluster: no topic created, no instance fenced.
	var fromPlan *savepoint.RestorePlan
	if j.from != nil {
		var err error
		if fromPlan, err = j.checkSavepoint(ctx, a.adm); err != nil {
			return nil, err
		}
	} else if err := j.checkBeforeRestart(ctx, a.adm); err != nil {
		// Likewise a restart from the job's own checkpoints.
		return nil, err
	}
	if err := kstore.Ensure(ctx, a.adm, cfg.Name, cfg.Checkpoint.ReplicationFactor); err != nil {
		return nil, err
	}
	if _, err := j.settleMode(ctx); err != nil {
		return nil, err
	}
	if err := j.ensureSinkTopics(ctx, a.adm); err != nil {
		return nil, err
	}
	a.limits = j.describeLimits(ctx, a.adm)
	return fromPlan, nil
}

// recover: fencing aborts a predecessor's open transaction, which would
// otherwise hold back the read_committed restore until it timed out; then
// the decision log says which checkpoint is the last.
func (singleMode) recover(ctx context.Context, a *attempt) error {
	j, cfg := a.j, a.j.cfg
	txn, err := sink.NewTxn(j.conn, cfg.Name, cfg.Kafka.TransactionTimeout, append(a.limits.Opts(), j.metrics.KafkaHooks("txn"))...)
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
