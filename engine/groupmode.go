package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/checkpoint/kstore"
	"github.com/eoflow/pipeline/checkpoint/savepoint"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/internal/kread"
	"github.com/eoflow/pipeline/sink"
	"github.com/eoflow/pipeline/source"
)

// errRebalanced ends an attempt whose assignment was revoked: not a
// failure, the next generation's attempt starts at once.
var errRebalanced = errors.New("the consumer group rebalanced")

// groupRun is Run's attempt in group mode: wait for an assignment, run an
// attempt on it until it fails or the group revokes it.
func (j *Job) groupRun(m *membership) func(ctx context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		a, err := m.await(ctx, j.stopping)
		if err != nil {
			return false, err
		}
		if a == nil {
			return false, &stoppedError{}
		}
		j.status.assigned(a, a.members)
		perTopic := map[string]int{}
		for _, tp := range a.tps {
			perTopic[tp.Topic]++
		}
		j.metrics.SetAssignment(a.member.Generation, perTopic, len(a.members))
		actx, cancel := context.WithCancel(ctx)
		defer cancel()
		type result struct {
			progressed bool
			err        error
		}
		res := make(chan result, 1)
		yield := make(chan struct{})
		go func() {
			p, err := j.groupAttempt(actx, a, yield)
			res <- result{p, err}
		}()
		for {
			select {
			case r := <-res:
				return r.progressed, memberVerdict(r.err)
			case done := <-m.revoked:
				// The attempt commits what it did (coordinatorLoop.onYield)
				// while the group waits for this member; one that cannot
				// within yieldWait is cancelled, its epoch aborted.
				close(yield)
				var r result
				select {
				case r = <-res:
				case <-time.After(yieldWait(j.cfg.Checkpoint.Timeout)):
					j.log.Warn("the final checkpoint of a revoked assignment did not complete in time; aborting it")
					cancel()
					r = <-res
				}
				cancel()
				m.current = nil
				j.endOwnTransaction(ctx, "after a rebalance")
				close(done)
				if r.err != nil && !errors.Is(r.err, errStopped) && !errors.Is(r.err, errYielded) && actx.Err() == nil {
					return r.progressed, memberVerdict(r.err)
				}
				if errors.Is(r.err, errStopped) {
					return r.progressed, r.err
				}
				return r.progressed || errors.Is(r.err, errYielded), errRebalanced
			case err := <-m.fatal:
				cancel()
				<-res
				return false, err
			}
		}
	}
}

// yieldWait bounds how long a revoked member waits for its attempt's
// final checkpoint: the checkpoint timeout, at most 10 s, since the whole
// group waits for the member to rejoin (and the coordinator for the
// rebalance timeout, a minute by default).
func yieldWait(checkpointTimeout time.Duration) time.Duration {
	return min(checkpointTimeout, 10*time.Second)
}

// endOwnTransaction makes sure no transaction of this process's
// transactional id is left open, before the process joins the group
// (when = "on start") and whenever it gives up a generation (when =
// "after a rebalance"). An open transaction may hold an epoch's offsets
// for the group, and every member's offset fetch for the next generation
// (which must be stable) waits for them, up to the transaction timeout.
// On start, it is what a killed predecessor with the same instance id
// left: a static member that comes back within the session timeout
// replaces itself without a rebalance, so no other member fences it, and
// its own producer comes only after the fetch. After a rebalance, it is
// an epoch caught in its commit when the attempt was cancelled, neither
// committed nor aborted. Initializing the transactional id aborts it.
func (j *Job) endOwnTransaction(ctx context.Context, when string) {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := j.fenceMember(fctx, j.instance); err != nil {
		j.log.Warn("ending this process's open transaction "+when+"; the group's next generation may wait for the transaction timeout", "transactional_id", sink.MemberTransactionalID(j.cfg.Name, j.instance), "err", err)
	}
}

// memberVerdict: in group mode a fenced producer is not the end of the
// process. Its transactional id is its own, but a member that saw it
// leave the group may have fenced it just as it came back; the group
// decides who runs (FENCED_INSTANCE_ID ends a duplicate), so a fenced
// producer only restarts the attempt.
func memberVerdict(err error) error {
	if err == nil || sink.Classify(err) != sink.TakenOver || errors.Is(err, kerr.FencedInstanceID) {
		return err
	}
	return fmt.Errorf("the transactional id was fenced (by a member that saw this instance leave the group, or by a process with the same instance id: the group keeps one of them); restarting: %v", err)
}

// groupMode is the attempt of a group member (scale.mode: group) on the
// partitions the group assigned it: it fences its own transactional id,
// commits each epoch's offsets to the group inside the epoch's
// transaction, restores the group-state partitions it owns, and takes part
// in the group's savepoints.
type groupMode struct {
	asg *assignment
	// records are the job's checkpoint records as the attempt found them
	// before it wrote anything.
	records *jobRecords
	// recordKey is the key of the member's checkpoint records.
	recordKey string
	// gate holds the source topics back while a stop with a savepoint
	// drains the repartition topic, or a group savepoint's pause is in
	// force.
	gate *groupGate
	// yield is closed when the group revokes asg (coordinatorLoop.onYield).
	yield <-chan struct{}
	// owned are the state partitions the attempt restored, own its
	// records' writer (wire): what it keeps when revoked (keptstate.go).
	owned []int32
	own   *memberRecords
	// continued: the attempt continued from the state the previous
	// generation's attempt kept, restoring only what moved here.
	continued bool
}

// groupAttempt runs the task graph once over assignment asg; closing
// yield asks it to commit and end (the group revoked asg).
func (j *Job) groupAttempt(ctx context.Context, asg *assignment, yield <-chan struct{}) (progressed bool, err error) {
	if len(asg.tps) == 0 {
		j.log.Info("the group assigned nothing to this process (more processes than partitions); waiting", "generation", asg.member.Generation)
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-yield:
			return false, errYielded
		}
	}
	return j.runAttempt(ctx, &groupMode{asg: asg, yield: yield})
}

// beforeJoining refuses what checkGroupStart refuses, then creates the
// job's topics, before the process joins the group. A member that joins
// first creates the repartition topic in its first attempt, and the
// group's leader, seeing the new topic, starts a second rebalance at
// once: every member's first attempt ends after a moment, and members
// that learn of it first wait for the others meanwhile, their partitions
// unread. Joining after the topics exist spares that rebalance. Every
// attempt prepares again (prepareGroup): this one only goes first.
func (j *Job) beforeJoining(ctx context.Context) error {
	if err := j.checkGroupStart(ctx); err != nil {
		return err
	}
	a := &attempt{j: j, adapters: dialedAdapters{}}
	defer a.close()
	_, err := (&groupMode{}).prepare(ctx, a)
	return err
}

// prepare makes sure the job's topics exist: the checkpoint topic
// (members' records), the repartition and group-state topics with
// scale.partitions partitions (a different count is refused: it is fixed
// for the job's life), and the sinks'.
func (m *groupMode) prepare(ctx context.Context, a *attempt) (*savepoint.RestorePlan, error) {
	j := a.j
	shuffleTopics := func(ctx context.Context) error {
		// The joins' repartition topics first: they are source topics
		// of the job (groupTopics).
		if err := ensureJoinTopics(ctx, a.adm, j.cfg); err != nil {
			return err
		}
		return ensureShuffleTopics(ctx, a.adm, j.shuffle, j.plan.keyed, j.groupTopics(), j.cfg.Checkpoint.ReplicationFactor)
	}
	// The group's own check (checkGroupStart) ran before the process
	// joined; a restart of an attempt is the group's.
	plan, recs, err := a.prepareCheckpointed(ctx, nil, shuffleTopics)
	m.records = recs
	return plan, err
}

// ensureShuffleTopics creates the repartition topic (unless the input is
// partitioned by the group key) and the compacted group-state topic of a
// keyed job with s.partitions partitions each, and refuses existing ones
// with another count; a job that does not repartition also needs its
// source topic (sources, its only one) to have that many.
func ensureShuffleTopics(ctx context.Context, adm *kadm.Client, s *shuffle, keyed bool, sources []string, replication int) error {
	if !keyed {
		return nil
	}
	type topic struct {
		name    string
		configs map[string]*string
	}
	internal := []topic{{s.state, kstore.TopicConfigs()}}
	if s.repartitions(keyed) {
		internal = append(internal, topic{s.repartition, nil})
	} else if err := checkCopartitioned(ctx, adm, s, sources); err != nil {
		return err
	}
	names := make([]string, len(internal))
	for i, t := range internal {
		names[i] = t.name
	}
	for _, t := range internal {
		if _, _, err := createTopic(ctx, adm, t.name, s.partitions, replication, t.configs); err != nil {
			return fmt.Errorf("creating internal topic %s: %w", t.name, err)
		}
	}
	md, _, err := awaitTopics(ctx, adm, names)
	if err != nil {
		return err
	}
	for _, name := range names {
		td := md.Topics[name]
		if n := len(td.Partitions); n != s.partitions {
			return fmt.Errorf("%w: internal topic %s has %d partitions but scale.partitions is %d: it is fixed for the job's life (set it back to %d, or move the job to a new name through a savepoint)",
				ErrIncompatible, name, n, s.partitions, n)
		}
	}
	return nil
}

// ensureJoinTopics creates the repartition topic of each join by a key
// the stream is not partitioned by (cfg.JoinRepartitioned) with as many
// partitions as its table's topic, so that partition p of it holds the
// join keys of table partition p, and refuses an existing one with
// another count: the table's topic gained partitions, and its keys moved.
func ensureJoinTopics(ctx context.Context, adm *kadm.Client, cfg *config.Config) error {
	for _, r := range cfg.JoinRepartitioned() {
		table, _ := cfg.Table(r.Table) // validation made sure it exists
		md, err := adm.Metadata(kadm.WithAuthorizedOps(ctx), table.Topic)
		if err != nil {
			return fmt.Errorf("describing table %s (topic %s): %w", table.ID, table.Topic, err)
		}
		td, ok := md.Topics[table.Topic]
		if !ok || td.Err != nil || len(td.Partitions) == 0 {
			return fmt.Errorf("%w: table %s: topic %s does not exist: create it (the job repartitions its stream into as many partitions as it has)", ErrUnfit, table.ID, table.Topic)
		}
		n := len(td.Partitions)
		if _, _, err := createTopic(ctx, adm, r.Topic, n, cfg.Checkpoint.ReplicationFactor, nil); err != nil {
			return fmt.Errorf("creating internal topic %s: %w", r.Topic, err)
		}
		got, _, err := awaitTopics(ctx, adm, []string{r.Topic})
		if err != nil {
			return err
		}
		if m := len(got.Topics[r.Topic].Partitions); m != n {
			return fmt.Errorf("%w: internal topic %s, the stream of steps[%d] repartitioned by its join key, has %d partitions, but table %s (topic %s) has %d: partition p of one must hold the keys of partition p of the other. Did topic %s gain partitions? Its keys moved with them: move the job to a new name through a savepoint, or delete %s while the job is stopped and nothing is left unread in it",
				ErrUnfit, r.Topic, r.Step, m, table.ID, table.Topic, n, table.Topic, r.Topic)
		}
	}
	return nil
}

// awaitTopics waits until the metadata shows every topic of names, just
// created (a topic reaches every broker's metadata a moment later), and
// says how many times it asked. kadm answers Metadata from the client's
// cache, which keeps a topic it did not find for MetadataMinAge (5 s):
// every ask would get the first answer, and a process joined its group
// 5 s late. Asking for the authorized operations too is kadm's way
// around the cache.
func awaitTopics(ctx context.Context, adm *kadm.Client, names []string) (kadm.Metadata, int, error) {
	for try := 1; ; try++ {
		md, err := adm.Metadata(kadm.WithAuthorizedOps(ctx), names...)
		if err != nil {
			return md, try, fmt.Errorf("describing the internal topics: %w", err)
		}
		missing := ""
		for _, name := range names {
			if td, ok := md.Topics[name]; !ok || td.Err != nil || len(td.Partitions) == 0 {
				missing = name
			}
		}
		if missing == "" {
			return md, try, nil
		}
		if try == 50 {
			return md, try, fmt.Errorf("internal topic %s: not found 10s after creating it", missing)
		}
		select {
		case <-ctx.Done():
			return md, try, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// recover opens the member's producers and fences its own
// transactional id (aborting what its previous run left open); its last
// checkpoint record gives the next checkpoint id.
func (m *groupMode) recover(ctx context.Context, a *attempt) error {
	j := a.j
	var internal []string
	if j.plan.keyed {
		internal = []string{j.shuffle.state}
		if j.shuffle.repartitions(true) {
			internal = append(internal, j.shuffle.repartition)
		}
	}
	// A join's repartition topic takes the times reported to each of
	// its partitions, without a key, besides its keyed records
	// (jointime.go).
	var mixed []string
	if tp := j.plan.time; tp != nil {
		mixed = slices.Sorted(maps.Keys(tp.joins))
	}
	txn, err := a.adapters.memberTxn(a, internal, mixed)
	if err != nil {
		return err
	}
	a.closers = append(a.closers, txn.Close)
	if err := a.openPlain(); err != nil {
		return err
	}
	if err := m.recoverOn(ctx, a, txn); err != nil {
		return err
	}
	pid, epoch := txn.Producer()
	j.log.Info("member attempt", "generation", m.asg.member.Generation, "member_id", m.asg.member.MemberID,
		"producer_id", pid, "producer_epoch", epoch, "assigned", m.asg.partitions())
	return nil
}

// memberTransaction is a group member's transaction: besides an epoch's
// records it commits the epoch's source offsets to the group, on behalf of
// the member (KIP-447). sink.Txn is Kafka's.
type memberTransaction interface {
	transaction
	CommitOffsets(ctx context.Context, m sink.GroupMember, offsets []checkpoint.SourceOffset) error
}

var _ memberTransaction = (*sink.Txn)(nil)

// recoverOn runs the epoch machine's recovery over txn (and a.plain):
// each epoch's offsets go into its transaction as those of the member of
// the assignment's generation, so a member the group moved on from cannot
// commit them.
func (m *groupMode) recoverOn(ctx context.Context, a *attempt, txn memberTransaction) error {
	j := a.j
	member := m.asg.member
	if j.plantedBug == plantedMemberlessCommit {
		member = sink.GroupMember{Group: member.Group, Generation: -1}
	}
	commitOffsets := func(ctx context.Context, offsets []checkpoint.SourceOffset) error {
		return txn.CommitOffsets(ctx, member, offsets)
	}
	m.recordKey = sink.MemberRecordKey(j.cfg.Name, j.instance)
	return a.recoverWith(ctx, txn, a.plain, commitOffsets)
}

// restore imports the savepoint the job starts from, unless a member did
// already, or restores what the member owns.
func (m *groupMode) restore(ctx context.Context, a *attempt, plan *savepoint.RestorePlan) error {
	j := a.j
	if j.from != nil {
		// Another member's import may be committed with its markers on
		// their way, or an open transaction may hide it (and this one's
		// own, if it imported before): read once every transaction there
		// is decided, or the savepoint is imported twice, its offsets
		// committed again over what the group committed since.
		if j.plantedBug != plantedImportedUnsettled {
			if err := j.awaitCheckpointTopic(ctx, a.cluster); err != nil {
				return err
			}
		}
		read := func(fn func(*kgo.Record) error) error {
			return a.cluster.Read(ctx, checkpoint.TopicName(j.cfg.Name), fn)
		}
		imported, err := kstore.SavepointImportedIn(read, j.cfg.Name, j.from.r.ID())
		if err != nil {
			return err
		}
		if !imported {
			j.kept = nil // the savepoint's state replaces everything
			return m.importMember(ctx, a, plan)
		}
	}
	if err := m.restoreMember(ctx, a); err != nil {
		return err
	}
	return m.assignTableDuty(ctx, a)
}

func (m *groupMode) readers(a *attempt) ([]recordReader, error) { return a.checkpointedReaders() }

// wire lays the member's own records out (ownRecords), gates its sources
// for the group's savepoints, and tells the loop how a stop with a
// savepoint drains.
func (m *groupMode) wire(a *attempt, g *graph) {
	j := a.j
	m.gate = &groupGate{repartition: j.shuffle.repartition, pausedBy: j.pauses.pausedFor}
	m.own = &memberRecords{key: m.recordKey, shuffle: j.shuffle, ackKey: pausedKey(j.cfg.Name, j.instance),
		timed: j.shuffle.repartitions(j.plan.keyed) && j.plan.time != nil && len(j.plan.time.byTopic) > 0, queues: map[int32]string{},
		time: j.plan.time, held: j.newMemberHeld(a.asOf), joinParts: joinPartitions(j.plan.time, a.groupTime),
		joinReported: map[string]string{}, joinKey: j.joinTimeKey, joinTold: map[partitionKey]string{}}
	if j.plantedBug == plantedHeldPassedByWatermark {
		m.own.time = nil
	}
	g.sink.own = m.own
	for _, s := range g.sources {
		s.gate = m.gate
	}
	if j.shuffle.repartitions(j.plan.keyed) {
		// Every attempt's, an import's too (which shuffles nothing
		// locally): never the last attempt's count.
		j.metrics.SetLocalShuffle(countTrue(a.localShuffle))
	}
	g.loop.group = m.groupStop(a, g)
	g.loop.yield = m.yield
}

// finish ends the epoch in flight; an attempt the group revoked after its
// final checkpoint committed leaves its state to the next (keptstate.go).
func (m *groupMode) finish(a *attempt, err error) error {
	err = a.endEpoch(err)
	if errors.Is(err, errYielded) {
		a.j.kept = m.keep(a)
	}
	return err
}

// restoreMember sets the start offset of every assigned partition (the
// group's committed offset; else the source's start position, or the
// start of a repartition partition) and restores the state partitions
// of the assigned repartition partitions.
func (m *groupMode) restoreMember(ctx context.Context, a *attempt) error {
	j := a.j
	if err := a.continueFrom(); err != nil {
		return err
	}
	// Whoever wrote the state partitions this process restores: every
	// member's checkpoint must fit the configuration.
	if err := j.checkMembers(m.records); err != nil {
		return err
	}
	// Fetched for every attempt, not once per assignment: an attempt that
	// failed and restarts on the same assignment must continue from what
	// its predecessor committed, as its state does.
	committed, err := a.cluster.FetchStableOffsets(ctx, j.cfg.Name, m.asg.partitions(), j.cfg.Kafka.TransactionTimeout)
	if err != nil {
		return err
	}
	if j.plantedBug == plantedOffsetsAtAssignment {
		if m.asg.firstFetch == nil {
			m.asg.firstFetch = committed
		}
		committed = m.asg.firstFetch
	}
	a.offsets = map[source.TopicPartition]int64{}
	var owned []int32
	fresh := map[string][]source.TopicPartition{} // by source id
	for _, tp := range m.asg.partitions() {
		off, ok := committed[tp]
		if !ok {
			off = -1
		}
		if tp.Topic == j.shuffle.repartition {
			owned = append(owned, tp.Partition)
			a.offsets[tp] = max(off, 0)
			continue
		}
		if j.plan.keyed && j.shuffle.byKey {
			// Not repartitioned: the state of source partition p's keys
			// is state partition p (copartition.go).
			owned = append(owned, tp.Partition)
		}
		if off >= 0 {
			a.offsets[tp] = off
			continue
		}
		for _, src := range j.cfg.Sources {
			if slices.Contains(src.Topics, tp.Topic) {
				fresh[src.ID] = append(fresh[src.ID], tp)
			}
		}
	}
	if err := a.startFresh(ctx, fresh); err != nil {
		return err
	}
	if j.shuffle.repartitions(j.plan.keyed) {
		local, err := j.localShufflePartitions(ctx, a)
		if err != nil {
			return err
		}
		a.localShuffle = localSet(local, j.shuffle.partitions)
		j.log.Info("local shuffle", "partitions", local)
	}
	if owned == nil {
		owned = []int32{} // restored: none (nil is "not restored", for keep)
	}
	m.owned = owned
	// The state partitions to read: those that moved here, when the
	// state of the others is kept from the previous generation.
	kept := m.takeKept(a)
	restoring := owned
	if kept != nil {
		restoring = slices.DeleteFunc(slices.Clone(owned), func(p int32) bool { return slices.Contains(kept.owned, p) })
	}
	if j.plantedBug != plantedRestoreBeforeMarkers {
		if err := a.cluster.AwaitSettled(ctx, j.shuffle.state, restoring, j.cfg.Kafka.TransactionTimeout); err != nil {
			return err
		}
	}
	if a.groupTime, err = m.restoreTime(ctx, a); err != nil {
		return err
	}
	if err := m.restoreGroupHeld(a); err != nil {
		return err
	}
	reader := func(partitions []int32) stateReader {
		return func(ctx context.Context, fn func(key, value []byte) error) error {
			if len(partitions) == 0 {
				return nil
			}
			return a.cluster.Read(ctx, j.shuffle.state, func(r *kgo.Record) error {
				if isGroupTime(r.Key) {
					return a.groupTime.restoreQueue(r)
				}
				return fn(r.Key, r.Value)
			}, partitions...)
		}
	}
	if kept != nil {
		if a.groupTime != nil {
			for _, p := range owned {
				if t := kept.queues[p]; t != nil {
					a.groupTime.queues[p] = t
				}
			}
		}
		a.keptTables = kept.tables
		a.ops, a.restored, err = j.regain(ctx, kept, owned, reader(restoring))
		m.continued = err == nil
		return err
	}
	a.ops, a.restored, err = j.restoreOperators(ctx, nil, reader(restoring))
	return err
}

// restoreTime reads what the attempt needs of event time besides the
// state partitions (nil without event time): the job's source
// partitions, and their times at the offsets just fetched, from every
// member's newest checkpoint record (groupeventtime.go). Those records
// are read again, after the offsets: an epoch that committed offsets
// since the attempt began committed its record with them.
func (m *groupMode) restoreTime(ctx context.Context, a *attempt) (*groupTime, error) {
	j := a.j
	tp := j.plan.time
	if tp == nil || len(tp.byTopic) == 0 {
		return nil, nil
	}
	gt := &groupTime{queues: map[int32]*queueTime{}}
	topics := slices.Sorted(maps.Keys(tp.byTopic))
	parts, err := a.cluster.Partitions(ctx, topics)
	if err != nil {
		return nil, err
	}
	for _, p := range parts {
		gt.partitions = append(gt.partitions, partitionKey{p.Topic, p.Partition})
	}
	cpTopic := checkpoint.TopicName(j.cfg.Name)
	if err := j.awaitCheckpointTopic(ctx, a.cluster); err != nil {
		return nil, err
	}
	recs := &jobRecords{}
	fold := foldJobRecords(j.cfg.Name, recs)
	gt.held, gt.joins = map[partitionKey][]byte{}, map[partitionKey][]byte{}
	err = a.cluster.Read(ctx, cpTopic, func(r *kgo.Record) error {
		if k, ok := j.parseHeldKey(r.Key); ok {
			gt.held[k] = r.Value // groupheld.go
			return nil
		}
		if k, ok := j.parseJoinTimeKey(r.Key); ok {
			gt.joins[k] = r.Value // jointime.go
			return nil
		}
		return fold(r)
	})
	if err != nil {
		return nil, fmt.Errorf("reading the checkpoint topic: %w", err)
	}
	gt.sources = mergedSourceTimes(recs.members)
	return gt, nil
}

// startFresh gives the assigned source partitions without a committed
// offset (fresh, by source id) their start offset, as single mode does
// (Job.startOffsets): a partition added to a topic the group has read
// before holds only new input and starts at its earliest offset; one of a
// topic never read (a new job, a topic added to the configuration), at
// the source's start position.
func (a *attempt) startFresh(ctx context.Context, fresh map[string][]source.TopicPartition) error {
	if len(fresh) == 0 {
		return nil
	}
	j := a.j
	fetched, err := a.cluster.FetchOffsets(ctx, j.cfg.Name)
	if err != nil {
		return err
	}
	read := map[string]bool{}
	for tp := range fetched {
		read[tp.Topic] = true
	}
	for _, src := range j.cfg.Sources {
		var added, never []source.TopicPartition
		for _, tp := range fresh[src.ID] {
			if read[tp.Topic] {
				added = append(added, tp)
			} else {
				never = append(never, tp)
			}
		}
		for _, group := range []struct {
			tps   []source.TopicPartition
			start config.StartPosition
		}{{added, config.StartPosition{Kind: config.StartEarliest}}, {never, src.Start}} {
			if len(group.tps) == 0 {
				continue
			}
			resolved, err := a.cluster.ResolveStart(ctx, group.tps, group.start)
			if err != nil {
				return err
			}
			for tp, off := range resolved {
				a.offsets[tp] = off
			}
		}
		if len(added) > 0 {
			j.log.Info("reading partitions added to a topic the group read before from their earliest offset", "source", src.ID, "partitions", added)
		}
	}
	return nil
}

// fetchStableOffsets reads the group's committed offsets of tps, waiting
// while a transaction that commits offsets for them is undecided
// (UNSTABLE_OFFSET_COMMIT, KIP-447), at most timeout. A partition without
// a committed offset is absent.
func fetchStableOffsets(ctx context.Context, adm *kadm.Client, group string, tps []source.TopicPartition, timeout time.Duration) (map[source.TopicPartition]int64, error) {
	deadline := time.Now().Add(timeout)
	for {
		fetched, err := adm.FetchOffsets(kadm.RequireStable(ctx), group)
		if err != nil {
			return nil, fmt.Errorf("fetching the offsets of group %s: %w", group, err)
		}
		out := map[source.TopicPartition]int64{}
		var unstable error
		for _, tp := range tps {
			r, ok := fetched.Lookup(tp.Topic, tp.Partition)
			switch {
			case !ok:
			case errors.Is(r.Err, kerr.UnstableOffsetCommit):
				unstable = r.Err
			case r.Err != nil:
				return nil, fmt.Errorf("fetching the offset of %s from group %s: %w", tp, group, r.Err)
			case r.At >= 0:
				out[tp] = r.At
			}
		}
		if unstable == nil {
			return out, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("fetching the offsets of group %s: still %w after %v", group, unstable, timeout)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// awaitSettled waits until every transaction that wrote to the given
// partitions of topic before now is decided and its markers written: the
// last stable offset reaches the high watermark seen first. The group's
// offsets are stable once the marker reaches the offsets topic, but the
// previous owner's last commit may still be marking the state partitions:
// a restore to the last stable offset before that would miss its state
// while the offsets include its input (restoring old sums under new
// offsets). Every writer's transaction is decided by now (the previous
// owner ended its epoch before the group moved on, a departed member was
// fenced), so this is a wait for markers; it gives up after timeout (the
// transaction timeout: the coordinator aborts what is older).
func awaitSettled(ctx context.Context, adm *kadm.Client, topic string, partitions []int32, timeout time.Duration) error {
	if len(partitions) == 0 {
		return nil
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return fmt.Errorf("listing the end offsets of %s: %w", topic, err)
	}
	deadline := time.Now().Add(timeout)
	for {
		stable, err := adm.ListCommittedOffsets(ctx, topic)
		if err != nil {
			return fmt.Errorf("listing the last stable offsets of %s: %w", topic, err)
		}
		var behind []int32
		for _, p := range partitions {
			end, ok1 := ends.Lookup(topic, p)
			lso, ok2 := stable.Lookup(topic, p)
			if !ok1 || !ok2 || end.Err != nil || lso.Err != nil || lso.Offset < end.Offset {
				behind = append(behind, p)
			}
		}
		if len(behind) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("partitions %v of %s still hold an undecided transaction after %v", behind, topic, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// groupStop is what a stop with a savepoint needs of this attempt: the
// savepoint holds the state of every record read from the sources only
// when no record is between the repartition topic's committed offsets
// and its end, so the process stops its sources, reads the repartition
// topic to its end and only then takes the final checkpoint. That needs
// one process owning every partition (the others stopped): a record
// another process wrote, or will read, is out of its reach.
func (m *groupMode) groupStop(a *attempt, g *graph) *groupStop {
	j := a.j
	rep := j.shuffle.repartition
	owned := map[source.TopicPartition]bool{}
	for _, tp := range m.asg.partitions() {
		owned[tp] = true
	}
	sole := true
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topics := append([]string{}, j.groupTopics()...)
	all, err := a.cluster.Partitions(ctx, topics)
	if err != nil {
		sole = false
	}
	for _, tp := range all {
		if !owned[tp] {
			sole = false
		}
	}
	return &groupStop{
		soleOwner: sole,
		savepoint: func(ctx context.Context, dir string) error {
			_, err := j.groupSavepoint(ctx, dir)
			return err
		},
		pause: func() {
			if j.plantedBug != plantedStopWithoutPause {
				m.gate.draining.Store(true)
			}
		},
		drained: func(offsets []checkpoint.SourceOffset) (bool, error) {
			if !j.shuffle.repartitions(j.plan.keyed) {
				return true, nil // no repartition topic
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			read := map[int32]int64{}
			for _, o := range offsets {
				if o.Topic == rep {
					read[o.Partition] = o.Offset
				}
			}
			drained, _, err := a.cluster.RepartitionDrained(ctx, rep, func(p int32) (int64, bool) {
				off, ok := read[p]
				return off, ok
			})
			return drained, err
		},
		keep: func(offsets []checkpoint.SourceOffset) []checkpoint.SourceOffset {
			var out []checkpoint.SourceOffset
			for _, o := range offsets {
				if o.Topic != rep {
					out = append(out, o)
				}
			}
			return out
		},
	}
}

// errImported ends the attempt that imported a savepoint, and errAwaitImport
// one that waits for another member to: not failures, the next attempt
// starts at once and restores what the import wrote.
var (
	errImported    = errors.New("imported the savepoint")
	errAwaitImport = errors.New("waiting for the savepoint to be imported")
)

// importMember starts a group-mode job from a savepoint (run
// --from-savepoint, every process started with it). One member imports:
// the owner of the first partition of the first source topic, for every
// partition, in one transaction: the savepoint's state into the
// group-state topic (keys the savepoint does not have deleted), the source
// offsets and the repartition topic's end offsets (records left there by
// an earlier run are not the savepoint's) committed to the group as the
// member of its generation, its checkpoint record naming the savepoint,
// and a tombstone for a single-mode job's record of the same name (the
// savepoint replaces it). The others wait for that record; then every
// member restores what it owns. Stop every process of the job before
// starting it from a savepoint.
func (m *groupMode) importMember(ctx context.Context, a *attempt, plan *savepoint.RestorePlan) error {
	j, txn := a.j, a.txn
	r := j.from.r
	first, err := a.firstPartition(ctx)
	if err != nil {
		return err
	}
	if !slices.Contains(m.asg.partitions(), first) {
		j.log.Info("waiting for the owner of the first source partition to import the savepoint", "partition", first, "savepoint", r.Dir())
		select {
		case <-ctx.Done():
		case <-time.After(j.importWait):
		}
		return errAwaitImport
	}
	for _, note := range plan.Notes {
		j.log.Info("restoring from a savepoint", "savepoint", r.Dir(), "note", note)
	}
	offsets, err := j.startOffsets(ctx, a.cluster, &checkpoint.Record{Offsets: plan.Offsets})
	if err != nil {
		return err
	}
	ops, keys, err := j.savepointOperators(r, plan)
	if err != nil {
		return err
	}
	var stale map[string]struct{}
	if j.plan.keyed {
		read := func(ctx context.Context, fn func(key, value []byte) error) error {
			return a.cluster.Read(ctx, j.shuffle.state, func(r *kgo.Record) error {
				if isGroupTime(r.Key) {
					return nil // deleted below, in every partition
				}
				return fn(r.Key, r.Value)
			})
		}
		if stale, err = liveStateKeys(ctx, read, nil); err != nil {
			return err
		}
	}
	if j.shuffle.repartitions(j.plan.keyed) {
		ends, err := a.cluster.EndOffsets(ctx, j.shuffle.repartition)
		if err != nil {
			return err
		}
		for p, end := range ends {
			offsets[source.TopicPartition{Topic: j.shuffle.repartition, Partition: p}] = end
		}
	}
	summary, err := j.produceState(ctx, txn, ops, stale, j.shuffle.place, a.limits)
	if err != nil {
		return err
	}
	if j.plan.keyed {
		// What the repartition partitions knew of event time is of the
		// job before the savepoint: their owners start over from the
		// new event-time records.
		for q := range j.shuffle.partitions {
			txn.Produce(ctx, &kgo.Record{Topic: j.shuffle.state, Partition: int32(q), Key: []byte(groupTimeKey)})
		}
	}
	id := checkpoint.ID(1)
	if a.latest != nil {
		id = a.latest.ID + 1
	}
	a.savepointID = r.ID()
	rec := a.newRecord(id, offsetList(offsets), mergeState(summary), importedEventTime(r.Manifest().EventTime, plan, j.plan.time))
	rec.Tables = plan.Tables
	rec.Normalize()
	crs, err := checkpointRecords(rec, m.recordKey, a.limits, j.metrics)
	if err != nil {
		return err
	}
	for _, cr := range crs {
		txn.Produce(ctx, cr)
	}
	// The records joins as of event time held at the savepoint are read
	// already (its offsets are past them): each source partition's go
	// where a member commits them with its offset (groupheld.go), so the
	// members restore them as if the group had committed the savepoint's
	// checkpoint.
	held, err := r.HeldRecords(plan)
	if err != nil {
		return err
	}
	if n := r.Manifest().Held; n != nil {
		j.log.Info("restoring the records a join as of event time held at the savepoint", "savepoint", r.Dir(),
			"records", len(held), "dropped", int(n.Records)-len(held), "still_joined_as_of_event_time", j.joinsAsOf())
		if len(held) > 0 && !j.holdsGroupRecords() {
			j.log.Warn("the job has no event time now: the records a join as of event time held at the savepoint are dropped", "records", len(held))
		}
	}
	if j.plantedBug == plantedImportDropsHeld {
		held = nil
	}
	for _, hr := range j.importedHeld(offsets, held) {
		txn.Produce(ctx, hr)
	}
	for _, jt := range j.importedJoinTimes(offsets) {
		txn.Produce(ctx, jt) // what the join topics knew is of the job before (jointime.go)
	}
	txn.Produce(ctx, &kgo.Record{Topic: checkpoint.TopicName(j.cfg.Name), Key: []byte(j.cfg.Name)}) // a single-mode job's record, gone
	// The other members' records describe the state before the savepoint
	// (maybe another configuration): gone, so that they refuse no member
	// (checkMembers).
	for key := range m.records.members {
		if key != m.recordKey {
			txn.Produce(ctx, &kgo.Record{Topic: checkpoint.TopicName(j.cfg.Name), Key: []byte(key)})
		}
	}
	// The offsets join the transaction once it is flushed (committer.do).
	// So do the tables' positions: every member's floor (tableduty.go).
	if err := a.loop.importEpoch(ctx, id, append(offsetList(offsets), tableCommits(plan.Tables)...)); err != nil {
		return fmt.Errorf("importing savepoint %s: %w", r.Dir(), err)
	}
	j.status.restoredFrom(r.ID())
	j.log.Info("imported savepoint", "dir", r.Dir(), "id", r.ID(), "from_job", r.Manifest().Job,
		"from_checkpoint", r.Manifest().CheckpointID, "as_checkpoint", id, "state_keys", keys, "deleted_keys", len(stale))
	return errImported
}

// firstPartition is partition 0 of the first source topic: its owner
// imports a savepoint.
func (a *attempt) firstPartition(ctx context.Context) (source.TopicPartition, error) {
	topics := a.j.groupTopics()
	tps, err := a.cluster.Partitions(ctx, topics[:1])
	if err != nil || len(tps) == 0 {
		return source.TopicPartition{}, fmt.Errorf("listing the partitions of %s: %v", topics[0], err)
	}
	return tps[0], nil
}

// repartitionDrained reports whether no record of the repartition topic
// is left after the positions position gives (false for a partition
// without one), and why not. Every transaction on the topic must be
// decided first; then the topic is read from the positions through to
// its end. (The positions cannot be compared with the end offsets: a
// reader stops after the last record, before the commit marker that ends
// the log.)
func repartitionDrained(ctx context.Context, adm *kadm.Client, conn []kgo.Opt, topic string, position func(partition int32) (int64, bool)) (bool, string, error) {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return false, "", err
	}
	stable, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		return false, "", err
	}
	from := map[int32]int64{}
	why := ""
	ends.Each(func(e kadm.ListedOffset) {
		if lso, ok := stable.Lookup(topic, e.Partition); !ok || lso.Offset < e.Offset {
			why = "a transaction is open on the repartition topic"
		}
		off, ok := position(e.Partition)
		if !ok && why == "" {
			why = fmt.Sprintf("partition %d of the repartition topic is not read", e.Partition)
		}
		from[e.Partition] = off
	})
	if why != "" {
		return false, why, nil
	}
	more, err := kread.After(ctx, conn, topic, from)
	if err != nil || more {
		return false, "records are left in the repartition topic", err
	}
	return true, "", nil
}

// groupGate is the sources' gate in group mode: while a stop with a
// savepoint drains the repartition topic (draining), or a group
// savepoint's pause is in force (pausedBy), the source topics are held
// back unread; the repartition topic is read on.
type groupGate struct {
	repartition string
	draining    atomic.Bool
	pausedBy    func() string
}

func (g *groupGate) paused() bool        { return g.draining.Load() || g.pausedBy() != "" }
func (g *groupGate) holds(t string) bool { return t != g.repartition }
func (g *groupGate) pausedFor() string   { return g.pausedBy() }

// memberRecords lays a member's own records out: its checkpoint records
// under its key, each state record in the group-state partition of its
// key group, and, when every source paused for a group savepoint before
// a barrier, the member's ack of the pause with that epoch. A keyed job
// with event time that repartitions (timed) adds what groupeventtime.go
// says: the times of its source partitions to every repartition
// partition, and what each of its repartition partitions knows to that
// partition's state, each when it changed since the attempt last wrote
// it.
type memberRecords struct {
	key     string
	shuffle *shuffle
	ackKey  string
	timed   bool
	// told is the last times written to the repartition topic, queues
	// the last of each repartition partition written to its state
	// partition (this attempt's).
	told   string
	queues map[int32]string
	// time is the job's event time (nil: none); held writes the records
	// joins as of event time hold, per source partition (groupheld.go;
	// nil: none).
	time *timePlan
	held *memberHeld
	// joinParts are the partition counts of the join repartition topics
	// that carry event time, joinReported the times last reported to
	// each; joinKey and joinTold keep what the member's partitions of
	// them know (jointime.go).
	joinParts    map[string]int32
	joinReported map[string]string
	joinKey      func(partitionKey) string
	joinTold     map[partitionKey]string
}

func (r *memberRecords) checkpointKey() string      { return r.key }
func (r *memberRecords) placeState(rec *kgo.Record) { r.shuffle.place(rec) }
func (r *memberRecords) heldInRecord() bool         { return false }
func (r *memberRecords) sealed(topic string, b *barrier) []*kgo.Record {
	out := r.heldRecords(topic, b)
	if r.timed {
		out = append(out, r.eventTimes(b)...)
	}
	if r.time != nil && len(r.joinParts) > 0 {
		out = append(out, joinReports(r.time, b, r.joinParts, r.joinReported)...)
		out = append(out, joinTimeRecords(topic, b, r.joinKey, r.joinTold)...)
	}
	if b.pausedFor == "" {
		return out
	}
	// What the sources shuffled before the pause commits with this
	// epoch, and nothing after it.
	return append(out, &kgo.Record{Topic: topic, Key: []byte(r.ackKey), Value: []byte(b.pausedFor)})
}

// eventTimes are the records of event time barrier b adds to its epoch
// (groupeventtime.go): they follow the epoch's shuffled records.
func (r *memberRecords) eventTimes(b *barrier) []*kgo.Record {
	var out []*kgo.Record
	if own := reportedTimes(r.time, b.times); len(own) > 0 {
		slices.SortFunc(own, compareReported)
		if v := encodeTimes(own); string(v) != r.told {
			r.told = string(v)
			for q := range r.shuffle.partitions {
				out = append(out, &kgo.Record{Topic: r.shuffle.repartition, Partition: int32(q), Key: []byte(r.key), Value: v,
					Headers: []kgo.RecordHeader{{Key: headerEventTimes}}})
			}
		}
	}
	for _, st := range b.shuffled {
		if v := encodeQueueTime(st); string(v) != r.queues[st.q] {
			r.queues[st.q] = string(v)
			out = append(out, &kgo.Record{Topic: r.shuffle.state, Partition: st.q, Key: []byte(groupTimeKey), Value: v})
		}
	}
	return out
}
