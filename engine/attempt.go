package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/checkpoint/kstore"
	"github.com/eoflow/pipeline/checkpoint/savepoint"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/sink"
	"github.com/eoflow/pipeline/source"
	"github.com/eoflow/pipeline/twophase"
)

// attempt is one run of the job between two restarts. The Job keeps the
// configuration and the lifecycle (Run, Stop, the status, savepoint
// requests); an attempt owns what lives and dies with one run: its
// clients, its commit path, the record sizes its topics accept, and the
// state and offsets it restored.
type attempt struct {
	j   *Job
	adm *kadm.Client
	// cluster is what the restore reads besides the checkpoint.
	cluster cluster
	limits  sink.Limits
	txn     transaction    // nil under at_most_once
	plain   outputProducer // the outputs, unless exactly_once
	// loop owns the epoch machine, the only way an epoch commits, from
	// recovery to the end of the attempt (nil under at_most_once).
	loop *coordinatorLoop

	// What the attempt restored: the checkpoint it continues from (nil:
	// none yet), the savepoint its state came from (carried by every
	// checkpoint record), one keyed operator per worker, how many keys
	// they hold, and every source partition's offset.
	latest      *checkpoint.Record
	savepointID string
	ops         []workerOps
	restored    int
	offsets     map[source.TopicPartition]int64
	// tables are the job's tables, read to their ends (table.go; nil
	// without tables).
	tables *tableSet

	// Group mode only: the assignment the attempt runs on, how the
	// epoch's offsets are committed to the group (in its transaction),
	// and the key of the member's checkpoint records.
	member        *assignment
	commitOffsets func(ctx context.Context, offsets []checkpoint.SourceOffset) error
	recordKey     string
	// records are the job's checkpoint records as the attempt found them
	// before it wrote anything.
	records *jobRecords

	closers []func()
}

// close releases the attempt's clients, last opened first.
func (a *attempt) close() {
	for i := len(a.closers) - 1; i >= 0; i-- {
		a.closers[i]()
	}
}

// openAdmin opens the attempt's admin client.
func (a *attempt) openAdmin() error {
	cl, err := kgo.NewClient(a.j.conn...)
	if err != nil {
		return err
	}
	a.closers = append(a.closers, cl.Close)
	a.adm = kadm.NewClient(cl)
	a.cluster = kafkaCluster{adm: a.adm, conn: a.j.conn, job: a.j.cfg.Name}
	return nil
}

// attempt runs the task graph once: check, fence, restore, run until
// failure. It reports whether any checkpoint completed, to reset the
// restart backoff.
func (j *Job) attempt(parent context.Context) (progressed bool, err error) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	a := &attempt{j: j}
	defer a.close()
	fromPlan, err := a.prepare(ctx)
	if err != nil {
		return false, err
	}
	restoreStart := j.now()
	if err := a.recover(ctx); err != nil {
		return false, err
	}
	if err := a.restore(ctx, fromPlan); err != nil {
		return false, err
	}
	if err := a.loadTables(ctx, nil); err != nil {
		return false, err
	}
	a.restoredAfter(restoreStart)
	return a.run(ctx, parent)
}

// prepare checks that the job can start, before anything on the cluster
// changes, then makes sure its topics exist and reads their limits. It
// returns the plan of the savepoint to import, if the job starts from one.
func (a *attempt) prepare(ctx context.Context) (*savepoint.RestorePlan, error) {
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

// recover opens the producers and runs the two-phase commit's recovery:
// fencing aborts a predecessor's open transaction, which would otherwise
// hold back the read_committed restore until it timed out; then the
// decision log says which checkpoint is the last (a.latest).
func (a *attempt) recover(ctx context.Context) error {
	j, cfg := a.j, a.j.cfg
	txn, err := sink.NewTxn(j.conn, cfg.Name, cfg.Kafka.TransactionTimeout, append(a.limits.Opts(), j.metrics.KafkaHooks("txn"))...)
	if err != nil {
		return err
	}
	a.txn = txn
	a.closers = append(a.closers, txn.Close)
	if cfg.Guarantee != config.ExactlyOnce {
		plain, err := sink.NewPlain(j.conn, append(a.limits.Opts(), j.metrics.KafkaHooks("outputs"))...)
		if err != nil {
			return err
		}
		a.plain = plain
		a.closers = append(a.closers, plain.Close)
	}
	return a.recoverWith(ctx, txn, a.plain)
}

// recoverWith runs the epoch machine's recovery over txn and plain:
// every predecessor fenced, the last decided checkpoint read (a.latest),
// and its next epoch begun.
func (a *attempt) recoverWith(ctx context.Context, txn transaction, plain outputProducer) error {
	j, cfg := a.j, a.j.cfg
	a.txn, a.plain = txn, plain
	var others []string
	c := newCommitter(txn)
	if plain != nil {
		others = append(others, plain.Name())
		c.parts[plain.Name()] = plain
	}
	c.commitOffsets, c.faults, c.beforeCommit, c.now = a.commitOffsets, j.faults, j.beforeCommit, j.now
	m, err := twophase.NewMachine(twophase.Config{
		DecisionLog:  txn.Name(),
		Participants: others,
		Interval:     cfg.Checkpoint.Interval,
		Timeout:      cfg.Checkpoint.Timeout,
		MinPause:     cfg.Checkpoint.MinPause,
		MaxInFlight:  1, // one transactional producer: one epoch at a time
		IsFenced:     sink.IsFenced,
	})
	if err != nil {
		return err
	}
	a.loop = newCoordinatorLoop(m, c, j.log, j.now, j.metrics)
	if err := a.loop.recover(ctx); err != nil {
		if errors.Is(err, kerr.InvalidTransactionTimeout) {
			return fmt.Errorf("%w: kafka.transaction_timeout %v: %w", ErrUnfit, cfg.Kafka.TransactionTimeout, err)
		}
		return fmt.Errorf("recovering: %w", err)
	}
	a.latest = a.loop.recovered
	return nil
}

// restore rebuilds the state and the source offsets: from the savepoint
// when the job starts from one it has not imported yet, else from the
// job's own last checkpoint.
func (a *attempt) restore(ctx context.Context, fromPlan *savepoint.RestorePlan) error {
	j := a.j
	if j.from != nil && (a.latest == nil || a.latest.Savepoint != j.from.r.ID()) {
		return a.importSavepoint(ctx, fromPlan)
	}
	if j.from != nil {
		j.log.Info("the savepoint was imported before; continuing from the job's own checkpoints",
			"savepoint", j.from.r.Dir(), "id", j.from.r.ID(), "checkpoint", a.latest.ID)
	}
	if a.latest != nil {
		// Checked before fencing; this is the checkpoint read after.
		if _, err := j.checkCheckpoint(a.latest, true); err != nil {
			return err
		}
		a.savepointID = a.latest.Savepoint
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

// last is the checkpoint the attempt continues from: its id and when it
// was taken (zero for none).
func (a *attempt) last() (checkpoint.ID, time.Time) {
	if a.latest == nil {
		return 0, time.Time{}
	}
	return a.latest.ID, a.latest.Created()
}

// restoredAfter reports the restore, begun at start, to the metrics, the
// status and the log.
func (a *attempt) restoredAfter(start time.Time) {
	j := a.j
	lastID, lastAt := a.last()
	j.metrics.Restored(uint64(lastID), j.now().Sub(start))
	j.status.restored(lastID, lastAt, a.offsets)
	j.status.restoredFrom(a.savepointID)
	j.log.Info("restored", "checkpoint", lastID, "state_keys", a.restored, "partitions", len(a.offsets),
		"workers", j.workers, "took", j.now().Sub(start).Round(time.Millisecond))
}

// run reads the restored partitions through the task graph until it fails
// or stops, then aborts the epoch left open.
func (a *attempt) run(ctx, parent context.Context) (progressed bool, err error) {
	j := a.j
	var readers []recordReader
	for _, part := range assignPartitions(a.offsets) {
		r, err := source.NewReader(j.conn, part, j.metrics.KafkaHooks("source"))
		if err != nil {
			closeReaders(readers)
			return false, err
		}
		readers = append(readers, r)
	}
	g, err := newGraph(a, readers)
	if err != nil {
		closeReaders(readers)
		return false, err
	}
	defer g.close()
	if a.member == nil {
		// In group mode the group deals out added partitions.
		added := make(chan []source.TopicPartition, 1)
		g.watch = newPartitionWatch(j, a.adm, a.offsets, added)
		g.loop.partitionsAdded = added
	}
	eg, gctx := errgroup.WithContext(ctx)
	g.start(gctx, eg)
	err = eg.Wait()
	if err == nil && parent.Err() == nil {
		err = errors.New("task graph stopped without a cause")
	}
	// Abort the epoch in flight now rather than leave it to the next
	// start's fencing: read_committed readers of the outputs are not held
	// back meanwhile. A failure here changes nothing: fencing still aborts.
	abortCtx, cancelAbort := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelAbort()
	if aerr := a.loop.shutdown(abortCtx, err); aerr != nil && !errors.Is(err, sink.ErrFenced) {
		j.log.Warn("aborting the open transaction", "err", aerr)
	}
	return g.completed.Load() > 0, err
}
