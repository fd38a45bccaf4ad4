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
	"github.com/eoflow/pipeline/sink"
	"github.com/eoflow/pipeline/source"
	"github.com/eoflow/pipeline/twophase"
)

// attempt is one run of the job between two restarts. The Job keeps the
// configuration and the lifecycle (Run, Stop, the status, savepoint
// requests); an attempt owns what lives and dies with one run: its
// clients, its commit path, the record sizes its topics accept, and the
// state and offsets it restored. What differs between single mode, group
// mode and at_most_once is its mode; the steps are the same (runAttempt).
type attempt struct {
	j    *Job
	mode mode
	adm  *kadm.Client
	// cluster is what the restore reads besides the checkpoint.
	cluster cluster
	// adapters make the Kafka producers and readers.
	adapters adapters
	limits   sink.Limits
	txn      transaction    // nil under at_most_once
	plain    outputProducer // the outputs, unless exactly_once
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
	// asOf are the joins as of event time and their tables (asof.go; nil:
	// the job has none), built with the tables.
	asOf *asOfJoins
	// tablesFrom says where latest's table positions come from, for the
	// log: empty for the job's own checkpoint, else the savepoint's.
	tablesFrom string
	// tableDuty (group mode; nil in single mode: every partition) says
	// whether this member dead-letters the bad records of a partition of
	// the tables, and tableFloors (group mode) are where the group's
	// committed offsets say the tables' dead letters stand, by topic
	// (tableduty.go).
	tableDuty   func(partition int32) bool
	tableFloors map[string]map[int32]int64
	// keptTables are the tables the previous generation's attempt left
	// this one, by id (group mode, tablekept.go; nil: none).
	keptTables map[string]*tableTask
	// groupTime is what a group member restored of event time
	// (groupeventtime.go; nil in single mode or without event time).
	groupTime *groupTime
	// groupHeld holds the records joins as of event time held at the
	// committed offsets of the assigned source partitions (group mode,
	// groupheld.go; nil: single mode, or no such join).
	groupHeld *checkpoint.Record
	// localShuffle is the repartition partitions, by partition, whose
	// records from this process's own source partitions skip the topic
	// (localshuffle.go; nil: none, or not group mode).
	localShuffle []bool

	closers []func()
}

// A mode is what an attempt does its own way in single mode
// (singleMode), in group mode (groupMode) and without checkpoints
// (atMostOnceMode). runAttempt calls its steps in order; each may end
// the attempt with an error.
type mode interface {
	// prepare checks that the job can start, before anything on the
	// cluster changes, then makes sure its topics exist and reads their
	// limits (a.limits). It returns the plan of the savepoint to import,
	// if the job starts from one.
	prepare(ctx context.Context, a *attempt) (*savepoint.RestorePlan, error)
	// recover opens the producers (a.txn, a.plain) and runs the epoch
	// machine's recovery: every predecessor fenced, the last decided
	// checkpoint read (a.latest).
	recover(ctx context.Context, a *attempt) error
	// restore rebuilds the state (a.ops) and the source offsets
	// (a.offsets), importing the savepoint (plan) when it is due.
	restore(ctx context.Context, a *attempt, plan *savepoint.RestorePlan) error
	// readers opens the source readers the graph's source tasks read.
	readers(a *attempt) ([]recordReader, error)
	// wire gives the graph what only this mode has, before it runs.
	wire(a *attempt, g *graph)
	// finish ends the attempt once its tasks stopped with err, and
	// returns the attempt's error.
	finish(a *attempt, err error) error
}

// runAttempt runs the task graph once in mode m: prepare, recover,
// restore, run until failure. It reports whether any checkpoint
// completed, to reset the restart backoff.
func (j *Job) runAttempt(parent context.Context, m mode) (progressed bool, err error) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	a := &attempt{j: j, mode: m, adapters: dialedAdapters{}}
	defer a.close()
	plan, err := m.prepare(ctx, a)
	if err != nil {
		return false, err
	}
	restoreStart := j.now()
	if err := m.recover(ctx, a); err != nil {
		return false, err
	}
	if err := m.restore(ctx, a, plan); err != nil {
		return false, err
	}
	if err := a.loadTables(ctx, nil); err != nil {
		return false, err
	}
	if a.loop != nil {
		a.restoredAfter(restoreStart)
	}
	return a.run(ctx, parent)
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
	c := newKafkaCluster(cl, a.j.conn, a.j.cfg.Name)
	a.adm, a.cluster = c.adm, c
	return nil
}

// prepareCheckpointed is prepare for the modes with checkpoints. Before
// anything on the cluster changes it checks the transaction timeout
// against the brokers' limit, and the savepoint the job starts from
// against the configuration or, without one, checkRestart (if set: the
// job's last checkpoint against the configuration). Then it creates the
// checkpoint topic, settles the job's mode claim (the records it read
// are returned), creates the mode's own topics (internal, if set) and the
// sinks' topics, and reads every topic's limits.
func (a *attempt) prepareCheckpointed(ctx context.Context, checkRestart func(context.Context, *kadm.Client) error, internal func(context.Context) error) (*savepoint.RestorePlan, *jobRecords, error) {
	j, cfg := a.j, a.j.cfg
	if err := a.openAdmin(); err != nil {
		return nil, nil, err
	}
	if err := checkTransactionTimeout(ctx, a.adm, cfg); err != nil {
		return nil, nil, err
	}
	// A savepoint that does not fit is refused before anything changes on
	// the cluster: no topic created, no instance fenced.
	var plan *savepoint.RestorePlan
	if j.from != nil {
		var err error
		if plan, err = j.checkSavepoint(ctx, a.adm); err != nil {
			return nil, nil, err
		}
	} else if checkRestart != nil {
		// Likewise a restart from the job's own checkpoints.
		if err := checkRestart(ctx, a.adm); err != nil {
			return nil, nil, err
		}
	}
	if err := kstore.Ensure(ctx, a.adm, cfg.Name, cfg.Checkpoint.ReplicationFactor); err != nil {
		return nil, nil, err
	}
	// A job's state and offsets are its mode's own: the other mode would
	// start over and write every output again (settleMode refuses).
	recs, err := j.settleMode(ctx)
	if err != nil {
		return nil, nil, err
	}
	if internal != nil {
		if err := internal(ctx); err != nil {
			return nil, recs, err
		}
	}
	if err := j.ensureSinkTopics(ctx, a.adm); err != nil {
		return nil, recs, err
	}
	a.limits = j.describeLimits(ctx, a.adm)
	return plan, recs, nil
}

// openPlain opens the plain producer of the outputs, unless they go
// through the transaction.
func (a *attempt) openPlain() error {
	j := a.j
	if j.cfg.Guarantee.TransactionalOutputs() {
		return nil
	}
	plain, err := a.adapters.plain(a)
	if err != nil {
		return err
	}
	a.plain = plain
	a.closers = append(a.closers, plain.Close)
	return nil
}

// recoverWith runs the epoch machine's recovery over txn and plain:
// every predecessor fenced, the last decided checkpoint read (a.latest),
// and its next epoch begun. commitOffsets, when set, commits each
// epoch's source offsets inside its transaction (group mode).
func (a *attempt) recoverWith(ctx context.Context, txn transaction, plain outputProducer, commitOffsets func(context.Context, []checkpoint.SourceOffset) error) error {
	j, cfg := a.j, a.j.cfg
	a.txn, a.plain = txn, plain
	var others []string
	c := newCommitter(txn)
	if plain != nil {
		others = append(others, plain.Name())
		c.parts[plain.Name()] = plain
	}
	c.commitOffsets, c.faults, c.beforeCommit, c.now = commitOffsets, j.faults, j.beforeCommit, j.now
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

// continueFrom checks the checkpoint recovery found against the
// configuration (it was checked before fencing; this is the one read
// after) and carries its savepoint on.
func (a *attempt) continueFrom() error {
	if a.latest == nil {
		return nil
	}
	if _, err := a.j.checkCheckpoint(a.latest, true); err != nil {
		return err
	}
	a.savepointID = a.latest.Savepoint
	return nil
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

// run reads through the task graph until it fails or stops, then lets the
// mode finish.
func (a *attempt) run(ctx, parent context.Context) (progressed bool, err error) {
	readers, err := a.mode.readers(a)
	if err != nil {
		return false, err
	}
	g, err := newGraph(a, readers)
	if err != nil {
		closeReaders(readers)
		return false, err
	}
	defer g.close()
	a.mode.wire(a, g)
	eg, gctx := errgroup.WithContext(ctx)
	g.start(gctx, eg)
	err = eg.Wait()
	if err == nil && parent.Err() == nil {
		err = errors.New("task graph stopped without a cause")
	}
	return g.completed.Load() > 0, a.mode.finish(a, err)
}

// checkpointedReaders opens one source.Reader per share of the restored
// partitions (assignPartitions).
func (a *attempt) checkpointedReaders() ([]recordReader, error) {
	var readers []recordReader
	for _, part := range assignPartitions(a.offsets) {
		r, err := a.adapters.reader(a, part)
		if err != nil {
			closeReaders(readers)
			return nil, err
		}
		readers = append(readers, r)
	}
	return readers, nil
}

// endEpoch aborts the epoch in flight of an attempt whose tasks stopped
// with err, rather than leave it to the next start's fencing: read_committed
// readers of the outputs are not held back meanwhile. A failure here
// changes nothing (fencing still aborts): it is logged, and err returned.
func (a *attempt) endEpoch(err error) error {
	abortCtx, cancelAbort := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelAbort()
	if aerr := a.loop.shutdown(abortCtx, err); aerr != nil && !errors.Is(err, sink.ErrFenced) {
		a.j.log.Warn("aborting the open transaction", "err", aerr)
	}
	return err
}
