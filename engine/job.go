package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/internal/fault"
	"github.com/eoflow/pipeline/internal/kclient"
	"github.com/eoflow/pipeline/metrics"
	"github.com/eoflow/pipeline/sink"
	"github.com/eoflow/pipeline/source"
	"github.com/eoflow/pipeline/twophase"
)

// ErrIncompatible wraps a checkpoint that does not fit the configuration:
// restarting cannot help, so the job stops.
var ErrIncompatible = errors.New("checkpoint does not fit the configuration")

// Job is one configured job, ready to run.
type Job struct {
	cfg     *config.Config
	log     *slog.Logger
	conn    []kgo.Opt
	plan    *plan
	workers int
	// openWindows counts the open windows of the current attempt's window
	// operators (emptyOperator starts it anew).
	openWindows *atomic.Int64
	now         func() time.Time
	// restartBackoff is the first wait before a restart; it doubles up to
	// maxBackoff while attempts keep failing without completing a
	// checkpoint.
	restartBackoff, maxBackoff time.Duration
	// jitter spreads a restart's wait over [backoff/2, backoff), so that
	// instances failing together (a broker restart) do not come back in
	// step.
	jitter func(backoff time.Duration) time.Duration
	faults *fault.Injector
	// discoverEvery is how often an attempt looks for partitions added
	// to the source topics (partitionDiscoveryInterval; tests shorten it).
	discoverEvery time.Duration
	// beforeCommit, if set, runs before each epoch's commit, on the
	// committing goroutine (tests).
	beforeCommit func(checkpoint.ID)
	// beforeExportState, if set, runs in a group savepoint's export after
	// it fetched the group's offsets and before it reads the state
	// (tests: let the pause run out meanwhile).
	beforeExportState func()
	// plantedBug is a known mistake a test put into the job's code paths
	// (plantedbug.go); none outside tests.
	plantedBug plantedBug
	// kept is what a group member's attempt revoked after its final
	// checkpoint left the next attempt (keptstate.go); nil: nothing.
	// Attempts run one after the other: the next takes it.
	kept    *keptState
	metrics *metrics.Metrics
	status  *status
	// stopping is closed by Stop: finish with a final checkpoint, exported
	// as a savepoint into stopSavepoint if that is set (StopWithSavepoint).
	stopping      chan struct{}
	stopOnce      sync.Once
	stopSavepoint string
	// ended is closed when Run returns, with its error in runErr
	// (SavepointAndStop waits for it).
	ended  chan struct{}
	runErr error
	// savepoints takes Savepoint's requests to the running attempt.
	savepoints chan *savepointRequest
	// from is the savepoint to start from (nil: the job's own checkpoints).
	from *savepointRestore
	// instance is the process's instance id and shuffle the keyed work's
	// layout, in group mode (shuffle nil: single mode).
	instance string
	shuffle  *shuffle
	// adminAddr is the admin API's address advertised to the group's
	// other members (WithAdminAddress); "" advertises none.
	adminAddr string
	// pauses follows the pauses of group savepoints (group mode).
	pauses *pauseWatch
	// importWait is how long a group member waits before it looks again
	// whether another member imported the savepoint the job starts from
	// (importMember; the simulation makes it 0).
	importWait time.Duration
}

// Stop asks the job to stop gracefully: it takes a final checkpoint, so
// everything read so far is committed, and Run then returns nil. The final
// checkpoint is bounded by checkpoint.timeout; cancelling Run's context
// stops at once instead (the epoch in flight is aborted, and replayed by
// the next start). Safe to call more than once, from any goroutine.
func (j *Job) Stop() { j.stopOnce.Do(func() { close(j.stopping) }) }

// StopPlan says what Stop does under the job's guarantee, for the log line
// of whoever calls it.
func (j *Job) StopPlan() string {
	if !j.cfg.Guarantee.Checkpoints() {
		return atMostOnceStopPlan
	}
	if j.Status().State == StateRestarting {
		// Nothing runs between attempts: there is no epoch to finish.
		return "stopping while the job waits to restart: no final checkpoint; the last completed one stands"
	}
	return "stopping after a final checkpoint"
}

// Option changes how a Job runs.
type Option func(*Job)

// WithFaults injects failures at the injector's armed points (tests).
func WithFaults(i *fault.Injector) Option { return func(j *Job) { j.faults = i } }

// withBeforeCommit runs fn before each epoch's commit (tests).
func withBeforeCommit(fn func(checkpoint.ID)) Option { return func(j *Job) { j.beforeCommit = fn } }

// withBeforeExportState runs fn in a group savepoint's export before it
// reads the state (tests).
func withBeforeExportState(fn func()) Option { return func(j *Job) { j.beforeExportState = fn } }

// WithInstanceID names this process in a group-mode job: its static
// membership of the job's consumer group and its transactional id
// (<job>-<id>). Every process of the job needs its own.
func WithInstanceID(id string) Option { return func(j *Job) { j.instance = id } }

// WithAdminAddress is the host:port at which the job's other processes
// reach this one's admin API (admin.advertise, else the listener's
// address; a host left empty, ":8080", stands for the address the
// brokers see this process connect from). In group mode the process
// advertises it to the others through the consumer group, and each
// reads the others' (Status().Group.Peers).
func WithAdminAddress(addr string) Option { return func(j *Job) { j.adminAddr = addr } }

// WithRestartBackoff sets the first wait before a restart after a failure
// (default 500ms; it doubles while attempts keep failing without completing
// a checkpoint, up to 30s, and each wait is spread over [d/2, d)). For
// tests and `pipeline test`, whose crash runs restart many times in a few
// seconds; a production job keeps the default. Flink's
// restart-strategy.exponential-delay.initial-backoff.
func WithRestartBackoff(d time.Duration) Option {
	return func(j *Job) { j.restartBackoff = max(d, time.Millisecond) }
}

// WithMetrics reports the job's metrics to m (default: a private registry).
func WithMetrics(m *metrics.Metrics) Option { return func(j *Job) { j.metrics = m } }

// New compiles the job's steps (errors point at the config file's lines)
// and prepares its Kafka connection settings. Nothing connects yet.
func New(cfg *config.Config, log *slog.Logger, opts ...Option) (*Job, error) {
	// A join of a partitioned table by a key the stream is not
	// partitioned by reads the stream through a topic of its own
	// (config/joinrepartition.go): from here on, a source and a sink of
	// the job like any other.
	cfg = cfg.WithJoinRepartitions()
	p, err := compile(cfg)
	if err != nil {
		return nil, err
	}
	conn, err := kclient.Options(cfg.Kafka)
	if err != nil {
		return nil, err
	}
	workers := cfg.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, cfg.Checkpoint.KeyGroups)
	j := &Job{
		cfg: cfg, log: log.With("job", cfg.Name), conn: conn, plan: p, workers: workers,
		now: time.Now, restartBackoff: 500 * time.Millisecond, maxBackoff: 30 * time.Second, discoverEvery: partitionDiscoveryInterval, importWait: time.Second,
		jitter:   equalJitter(rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))),
		stopping: make(chan struct{}), savepoints: make(chan *savepointRequest), ended: make(chan struct{}),
	}
	for _, o := range opts {
		o(j)
	}
	if j.shuffle = newShuffle(cfg); j.shuffle != nil {
		// No instance id is fine for a job that is only checked (pipeline
		// validate); Run needs one.
		if j.instance != "" && !validInstanceID(j.instance) {
			return nil, fmt.Errorf("instance id %q: use letters, digits, '.', '_' and '-' only (it is part of a transactional id)", j.instance)
		}
		p.shuffle = j.shuffle
		j.pauses = &pauseWatch{job: cfg.Name, now: func() time.Time { return j.now() }}
	}
	if j.metrics == nil {
		j.metrics = metrics.New(nil, cfg.Name)
	}
	j.status = newStatus(cfg, workers)
	j.plan.metrics = j.metrics
	j.plan.deadLetterLog = newDeadLetterLog(j.log, func() time.Time { return j.now() })
	if err := j.plan.useSchemas(cfg, j.log, j.metrics); err != nil {
		return nil, err
	}
	j.metrics.SetCheckpointInterval(cfg.Checkpoint.Interval)
	j.metrics.SetTransactionTimeout(cfg.Kafka.TransactionTimeout)
	for _, src := range cfg.Sources {
		for _, t := range src.Topics {
			j.metrics.Input(t)
		}
	}
	for _, t := range j.plan.lateTopics() {
		j.metrics.Output(t)
	}
	for _, s := range cfg.Sinks {
		j.metrics.Output(s.Topic)
		j.metrics.Output(s.DeadLetterTopic)
	}
	return j, nil
}

// Run runs the job until ctx ends (returning nil), it is fenced by another
// instance, or it cannot run: its checkpoint does not fit the
// configuration (ErrIncompatible, savepoint.ErrIncompatible), its internal
// topics are damaged (ErrDamaged), or the cluster cannot honour the
// configuration (ErrUnfit). Any other
// failure restarts it from the last completed checkpoint, after a pause
// that grows while failures repeat. A Job runs once.
func (j *Job) Run(ctx context.Context) error {
	err := j.run(ctx)
	j.runErr = err
	close(j.ended)
	return err
}

func (j *Job) run(ctx context.Context) error {
	if err := j.prepareSchemas(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	run := func(ctx context.Context) (bool, error) { return j.runAttempt(ctx, singleMode{}) }
	restartsFrom := "the last completed checkpoint"
	if !j.cfg.Guarantee.Checkpoints() {
		run = func(ctx context.Context) (bool, error) { return j.runAttempt(ctx, atMostOnceMode{}) }
		restartsFrom = "the group's offsets, with empty state (at_most_once)"
		// There are no checkpoints to finish: a graceful stop is an
		// immediate one, with the outputs flushed.
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		var wg sync.WaitGroup
		defer wg.Wait()
		defer cancel()
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-j.stopping:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	// In group mode, a rebalance that revokes the assignment while the
	// job waits to restart is answered at once: the group's other members
	// wait for this one to rejoin, their partitions unread meanwhile.
	var revoked chan chan struct{}
	var answerRevoked func(done chan struct{})
	if j.shuffle != nil {
		if j.instance == "" {
			return fmt.Errorf("scale.mode is group but the process has no instance id: start it with --instance-id or $PIPELINE_INSTANCE_ID")
		}
		if err := j.beforeJoining(ctx); permanent(err) {
			j.status.set(StateFailed, err)
			return err
		} else if err != nil && ctx.Err() == nil {
			j.log.Warn("preparing the job before joining the group; every attempt does it again", "err", err)
		}
		j.endOwnTransaction(ctx, "on start")
		m, err := newMembership(j)
		if err != nil {
			return err
		}
		defer m.close()
		revoked = m.revoked
		answerRevoked = func(done chan struct{}) {
			m.current = nil
			j.endOwnTransaction(ctx, "after a rebalance")
			close(done)
		}
		pctx, stopWatch := context.WithCancel(context.Background())
		var watching sync.WaitGroup
		watching.Add(1)
		go func() {
			defer watching.Done()
			j.pauses.run(pctx, j.conn, checkpoint.TopicName(j.cfg.Name))
		}()
		defer func() { stopWatch(); watching.Wait() }()
		defer func() {
			// Out of the group at once, so the others take over now
			// (a static member is otherwise waited for).
			lctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			m.leave(lctx)
		}()
		run = j.groupRun(m)
	}
	backoff := j.restartBackoff
	for attempt := 1; ; attempt++ {
		progressed, err := run(ctx)
		if errors.Is(err, errStopped) {
			j.status.set(StateStopped, nil)
			// The final checkpoint committed; its savepoint may not have.
			if errors.Is(err, ErrSavepoint) {
				return errors.Unwrap(err)
			}
			return nil
		}
		if ctx.Err() != nil {
			j.status.set(StateStopped, nil)
			return nil
		}
		if next, ok := plannedRestart(err); ok {
			// Not a failure: the attempt ended on purpose. Go on at once.
			j.status.set(StateRestarting, err)
			if next.reason != "" {
				j.metrics.Restarted(next.reason)
			}
			j.log.Info(next.message, "attempt", attempt, "err", err)
			backoff = j.restartBackoff
			continue
		}
		switch sink.Classify(err) {
		case sink.TakenOver:
			j.metrics.Fenced()
			j.status.set(StateFenced, err)
			j.log.Error("fenced: another instance of this job took over; stopping", "err", err)
			return err
		case sink.Unauthorized:
			err = sink.WithMissingACL(err)
			j.status.set(StateFailed, err)
			j.log.Error("not authorized; stopping (restarting cannot help)", "err", err)
			return err
		case sink.TimedOut:
			j.log.Warn("the transaction timed out: it was open longer than kafka.transaction_timeout and the transaction coordinator aborted it; "+
				"nothing of it became visible", "kafka.transaction_timeout", j.cfg.Kafka.TransactionTimeout)
		}
		if permanent(err) {
			j.status.set(StateFailed, err)
			return err
		}
		j.status.set(StateRestarting, err)
		j.metrics.Restarted(restartReason(err))
		if progressed {
			backoff = j.restartBackoff
		}
		wait := j.jitter(backoff)
		j.log.Error("job failed; restarting from "+restartsFrom, "attempt", attempt, "in", wait.Round(time.Millisecond), "err", err)
		select {
		case <-ctx.Done():
			j.status.set(StateStopped, nil)
			return nil
		case <-j.stopping:
			// Nothing is running: the last completed checkpoint stands.
			j.status.set(StateStopped, nil)
			if j.stopSavepoint != "" {
				return fmt.Errorf("%w: stopped while restarting, after: %w", ErrSavepoint, err)
			}
			return nil
		case <-time.After(wait):
		case done := <-revoked:
			// The next attempt waits for the new assignment anyway.
			answerRevoked(done)
		}
		backoff = min(2*backoff, j.maxBackoff)
	}
}

// plannedRestart says whether err ends an attempt on purpose, to start the
// next at once: with the restart reason for the metric ("" for none) and
// the log line.
func plannedRestart(err error) (restartPlan, bool) {
	for _, p := range []struct {
		err  error
		plan restartPlan
	}{
		{errImported, restartPlan{"", "starting over after importing the savepoint"}},
		{errAwaitImport, restartPlan{"", "starting over: another member imports the savepoint"}},
		{errRebalanced, restartPlan{"rebalance", "the consumer group rebalanced; starting over on the new assignment"}},
		{errPauseEnded, restartPlan{"savepoint_pause", "a group savepoint's pause ended; starting over to read what the sources skipped"}},
		// The attempt ended at a checkpoint to take the new partitions in.
		{errPartitionsAdded, restartPlan{"partitions_added", "restarting to read the added partitions"}},
	} {
		if errors.Is(err, p.err) {
			return p.plan, true
		}
	}
	return restartPlan{}, false
}

// restartPlan is a planned restart's metric reason ("" for none) and log
// line.
type restartPlan struct{ reason, message string }

// validInstanceID: an instance id becomes part of a transactional id and
// of a checkpoint record's key.
func validInstanceID(id string) bool {
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return id != "" && len(id) <= 200
}

// startOffsets gives every source partition its offset: the checkpointed
// one; for a partition added to a topic the checkpoint already read, its
// earliest offset (everything written to it since it appeared is new
// input, as Flink's KafkaSource reads it); and for a topic the job has
// not read before (a new job, or a topic added to the configuration), the
// configured start position.
func (j *Job) startOffsets(ctx context.Context, cl cluster, latest *checkpoint.Record) (map[source.TopicPartition]int64, error) {
	var checkpointed []checkpoint.SourceOffset
	if latest != nil {
		checkpointed = latest.Offsets
	}
	offsets := map[source.TopicPartition]int64{}
	for _, src := range j.cfg.Sources {
		tps, err := cl.Partitions(ctx, src.Topics)
		if err != nil {
			return nil, err
		}
		plan := planStart(tps, checkpointed)
		for tp, off := range plan.resume {
			offsets[tp] = off
		}
		for _, group := range []struct {
			tps   []source.TopicPartition
			start config.StartPosition
		}{{plan.added, config.StartPosition{Kind: config.StartEarliest}}, {plan.fresh, src.Start}} {
			if len(group.tps) == 0 {
				continue
			}
			resolved, err := cl.ResolveStart(ctx, group.tps, group.start)
			if err != nil {
				return nil, err
			}
			for tp, off := range resolved {
				offsets[tp] = off
			}
		}
		if len(plan.added) > 0 {
			j.log.Info("reading partitions added since the last checkpoint from their earliest offset", "source", src.ID, "partitions", plan.added)
		}
	}
	return offsets, nil
}

// startPlan is where each partition of a source begins (planStart).
type startPlan struct {
	// resume are the partitions with a checkpointed offset.
	resume map[source.TopicPartition]int64
	// added are partitions of a topic the checkpoint read, without an
	// offset of their own: they appeared after the job began reading the
	// topic, so all they hold is new input (earliest).
	added []source.TopicPartition
	// fresh are the partitions of topics the checkpoint never read: they
	// begin at the source's start position.
	fresh []source.TopicPartition
}

// planStart sorts a source's partitions tps by what the checkpoint knows
// of them.
func planStart(tps []source.TopicPartition, checkpointed []checkpoint.SourceOffset) startPlan {
	known := map[source.TopicPartition]int64{}
	readTopics := map[string]bool{}
	for _, o := range checkpointed {
		known[source.TopicPartition{Topic: o.Topic, Partition: o.Partition}] = o.Offset
		readTopics[o.Topic] = true
	}
	plan := startPlan{resume: map[source.TopicPartition]int64{}}
	for _, tp := range tps {
		switch off, ok := known[tp]; {
		case ok:
			plan.resume[tp] = off
		case readTopics[tp.Topic]:
			plan.added = append(plan.added, tp)
		default:
			plan.fresh = append(plan.fresh, tp)
		}
	}
	return plan
}

// ensureSinkTopics creates missing output and dead-letter topics, so a
// first run works without manual steps, and a poison record never fails
// the job for want of its dead-letter topic. They get the sinks'
// partitions and replication_factor (-1: the brokers' defaults); a
// dead-letter topic keeps the brokers' partition count. A replication
// factor the cluster cannot give is refused with the field to change,
// before anything is created.
func (j *Job) ensureSinkTopics(ctx context.Context, adm *kadm.Client) error {
	type want struct {
		partitions, replication int
		field                   string // the setting that asked for replication
	}
	wants := map[string]want{}
	ask := func(topic string, partitions, replication int, field string) {
		w, ok := wants[topic]
		if !ok {
			w = want{partitions: -1, replication: -1}
		}
		w.partitions = max(w.partitions, partitions)
		if replication > w.replication {
			w.replication, w.field = replication, field
		}
		wants[topic] = w
	}
	for i, s := range j.cfg.Sinks {
		field := fmt.Sprintf("sinks[%d].replication_factor", i)
		ask(s.Topic, s.Partitions, s.ReplicationFactor, field)
		ask(s.DeadLetterTopic, -1, s.ReplicationFactor, field)
		// The late topic, like a dead-letter topic, takes the brokers'
		// partition count and the sinks' replication.
		for _, t := range j.plan.lateTopics() {
			ask(t, -1, s.ReplicationFactor, field)
		}
	}
	topics := make([]string, 0, len(wants))
	for t := range wants {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	existing, err := adm.ListTopics(ctx, topics...)
	if err != nil {
		return fmt.Errorf("listing sink topics: %w", err)
	}
	var brokers int
	for _, t := range topics {
		w := wants[t]
		if existing.Has(t) || w.replication <= 0 {
			continue
		}
		if brokers == 0 {
			md, err := adm.BrokerMetadata(ctx)
			if err != nil {
				return fmt.Errorf("listing brokers: %w", err)
			}
			brokers = len(md.Brokers)
		}
		if w.replication > brokers {
			return fmt.Errorf("%w: %s is %d but the cluster has %d broker(s), so topic %s cannot be created: lower it to at most %d, or create the topic yourself",
				ErrUnfit, w.field, w.replication, brokers, t, brokers)
		}
	}
	for _, t := range topics {
		if existing.Has(t) {
			continue
		}
		w := wants[t]
		resp, created, err := createTopic(ctx, adm, t, w.partitions, w.replication, nil)
		if err != nil {
			return fmt.Errorf("creating sink topic %s: %w", t, err)
		}
		if created {
			j.log.Info("created topic", "topic", t, "partitions", resp.NumPartitions, "replication_factor", resp.ReplicationFactor)
		} else {
			j.log.Debug("topic created meanwhile by another process of the job", "topic", t)
		}
	}
	return nil
}

// createTopic creates topic unless it exists: created is false when the
// brokers answer TOPIC_ALREADY_EXISTS. Processes of one job start together
// (group mode, a restart beside a zombie) and each creates what it found
// missing, so a topic that exists by the time this one asks is what it
// wanted, never an error.
func createTopic(ctx context.Context, adm *kadm.Client, topic string, partitions, replication int, configs map[string]*string) (resp kadm.CreateTopicResponse, created bool, err error) {
	resp, err = adm.CreateTopic(ctx, int32(partitions), int16(replication), configs, topic)
	if err == nil {
		err = resp.Err
	}
	if errors.Is(err, kerr.TopicAlreadyExists) {
		return resp, false, nil
	}
	return resp, err == nil, err
}

func closeReaders(rs []recordReader) {
	for _, r := range rs {
		r.Close()
	}
}

// restartReason is a fixed word for the restarts metric (never error text,
// which would explode the label's cardinality).
func restartReason(err error) string {
	// First what the epoch machine's failure carries: a timed-out
	// transaction, or an injected fault on the commit path.
	switch {
	case sink.Classify(err) == sink.TimedOut:
		return "transaction_timeout"
	case errors.Is(err, fault.ErrInjected):
		return "injected"
	}
	if fe, ok := errors.AsType[*twophase.FailError](err); ok && !fe.Recovering {
		return fe.Reason.String()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timeout"
	}
	return "error"
}

// equalJitter waits between half the backoff and all of it, drawn from r
// (AWS's "equal jitter": never much shorter than planned, never in step).
func equalJitter(r *rand.Rand) func(time.Duration) time.Duration {
	var mu sync.Mutex
	return func(backoff time.Duration) time.Duration {
		if backoff <= 1 {
			return backoff
		}
		mu.Lock()
		defer mu.Unlock()
		half := backoff / 2
		return half + time.Duration(r.Int64N(int64(backoff-half)))
	}
}
