package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/checkpoint/kstore"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/internal/kread"
	"github.com/eoflow/pipeline/sink"
	"github.com/eoflow/pipeline/source"
	"github.com/eoflow/pipeline/state"
)

// Group mode (scale.mode: group) runs one job on many processes, each
// started with the same configuration and an instance id of its own. The
// job's consumer group decides who owns what:
//
//   - a source partition: its owner reads it, runs the stateless steps
//     and, for a keyed job, writes each record unchanged to the partition
//     of <job>-repartition that owns the record's key group (a fixed,
//     contiguous range of key groups per partition, as workers have);
//   - a repartition partition q: its owner reads it, runs the steps again
//     (they are deterministic) and the keyed operator; its state is
//     partition q of <job>-group-state.
//
// Each process runs the single-mode task graph over what it owns, with a
// transactional id of its own (<job>-<instance>): one transaction per
// epoch holds its outputs, repartition records, state changes and dead
// letters, its checkpoint record (keyed <job>/<instance>), and the barrier
// offsets of every partition it reads, committed to the group on behalf
// of its member and generation (KIP-447). A process the group has moved
// on from cannot commit: the group coordinator refuses its offsets, and
// it aborts. The stateless path of a keyed job always goes through the
// repartition topic, even when the owner is the same process, so that
// replay never depends on who owned what.
//
// Rebalances, first version: the group uses an eager protocol, so every
// rebalance revokes every partition; the revocation ends the attempt
// (its open epoch aborted, never a transaction open across a restore) and
// the next assignment starts a new one, which fetches the group's stable
// offsets (a pending transactional commit is waited for) and restores the
// state partitions it owns up to their last stable offset. When a member
// leaves the group without ending its transaction (killed), the others
// fence its transactional id, so its open transaction does not hold
// read_committed readers until the transaction timeout.

// shuffle is how a group-mode job spreads keyed work: the repartition and
// state topics, their partition count R, and the key groups G.
type shuffle struct {
	repartition, state string
	partitions, groups int
}

func newShuffle(cfg *config.Config) *shuffle {
	if cfg.Scale.Mode != config.ScaleGroup {
		return nil
	}
	return &shuffle{
		repartition: RepartitionTopic(cfg.Name), state: GroupStateTopic(cfg.Name),
		partitions: cfg.Scale.Partitions, groups: cfg.Checkpoint.KeyGroups,
	}
}

// RepartitionTopic is the internal topic a group-mode keyed job shuffles
// its records through.
func RepartitionTopic(job string) string { return job + "-repartition" }

// GroupStateTopic is the compacted state topic of a group-mode job: one
// partition per repartition partition.
func GroupStateTopic(job string) string { return job + "-group-state" }

// partitionOf is the repartition (and state) partition that owns key
// group kg.
func (s *shuffle) partitionOf(kg state.KeyGroup) int32 {
	return int32(state.WorkerOf(kg, s.partitions, s.groups))
}

// place sends a changelog record to the state partition of its key
// group: the partition whose owner restores it.
func (s *shuffle) place(rec *kgo.Record) {
	rec.Topic = s.state
	if k, err := state.DecodeChangelogKey(rec.Key); err == nil {
		rec.Partition = s.partitionOf(k.Group)
	}
}

// Repartition headers: where a shuffled record was read, so the keyed
// side rebuilds the input record exactly (its dead letters name it).
const (
	headerSourceTopic     = "pipeline.source.topic"
	headerSourcePartition = "pipeline.source.partition"
	headerSourceOffset    = "pipeline.source.offset"
)

// assignment is one generation's share of a process: the partitions the
// group gave it (sorted) and who it is in that generation. Each attempt
// on it fetches their committed offsets anew (restoreMember).
type assignment struct {
	member sink.GroupMember
	tps    []source.TopicPartition
}

func (a *assignment) partitions() []source.TopicPartition { return a.tps }

func sortPartitions(tps []source.TopicPartition) {
	sort.Slice(tps, func(a, b int) bool {
		if tps[a].Topic != tps[b].Topic {
			return tps[a].Topic < tps[b].Topic
		}
		return tps[a].Partition < tps[b].Partition
	})
}

// membership is the process's member of the job's consumer group. It
// never reads records through the group client (every topic is paused):
// it only learns what the process owns. Reading is the attempt's, through
// its own readers, from the offsets the group had committed.
type membership struct {
	cl       *kgo.Client
	group    string
	instance string
	log      *slog.Logger
	// assigned gets every new generation's assignment; revoked a channel
	// to close once the attempt running on the old one has ended (the
	// group waits for it: the old epoch is aborted before anyone else
	// reads the partitions). fatal gets errors that end the process.
	assigned chan *assignment
	revoked  chan chan struct{}
	fatal    chan error
	// current is the assignment not yet revoked (nil: none).
	current *assignment
	// members are the instance ids of the group as last seen, to fence
	// those that leave.
	members []string

	// closing is closed first by close: the group's loop may be waiting
	// in a callback for a run loop that is gone, and closing the client
	// waits for that loop.
	closing chan struct{}
	wg      sync.WaitGroup
	cancel  context.CancelFunc
}

func newMembership(j *Job) (*membership, error) {
	cfg := j.cfg
	m := &membership{
		group: cfg.Name, instance: j.instance, log: j.log,
		assigned: make(chan *assignment), revoked: make(chan chan struct{}), fatal: make(chan error, 1),
		closing: make(chan struct{}),
	}
	topics := j.groupTopics()
	opts := append(append([]kgo.Opt{}, j.conn...),
		kgo.ConsumerGroup(cfg.Name),
		kgo.ConsumeTopics(topics...),
		kgo.InstanceID(j.instance),
		kgo.SessionTimeout(cfg.Scale.SessionTimeout),
		// Eager and sticky: a rebalance revokes everything (the attempt
		// is rebuilt), and partitions stay where they were when they can.
		kgo.Balancers(kgo.StickyBalancer()),
		kgo.DisableAutoCommit(),
		kgo.RequireStableFetchOffsets(),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.OnOffsetsFetched(m.onFetched),
		kgo.OnPartitionsRevoked(m.onRevoked),
		kgo.OnPartitionsLost(m.onRevoked),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	cl.PauseFetchTopics(topics...)
	m.cl = cl
	j.metrics.SetGroupMember(j.instance)
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.watch(ctx)
	}()
	return m, nil
}

// groupTopics are the topics the group deals out: the sources and, for a
// keyed job, the repartition topic.
func (j *Job) groupTopics() []string {
	var topics []string
	for _, src := range j.cfg.Sources {
		topics = append(topics, src.Topics...)
	}
	if j.plan.agg != nil {
		topics = append(topics, RepartitionTopic(j.cfg.Name))
	}
	return topics
}

// onFetched runs in the group's loop once a generation is assigned and
// its committed offsets are stable: it hands the assignment (the
// partitions the offsets were fetched for) to the run loop.
func (m *membership) onFetched(ctx context.Context, cl *kgo.Client, resp *kmsg.OffsetFetchResponse) error {
	memberID, generation := cl.GroupMetadata()
	a := &assignment{member: sink.GroupMember{Group: m.group, MemberID: memberID, InstanceID: m.instance, Generation: generation}}
	for _, g := range resp.Groups {
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				a.tps = append(a.tps, source.TopicPartition{Topic: t.Topic, Partition: p.Partition})
			}
		}
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			a.tps = append(a.tps, source.TopicPartition{Topic: t.Topic, Partition: p.Partition})
		}
	}
	sortPartitions(a.tps)
	select {
	case m.assigned <- a:
	case <-ctx.Done():
	case <-m.closing:
	}
	return nil
}

// onRevoked runs in the group's loop when a generation ends (every
// rebalance, under the eager protocol) or is lost: it waits until the
// attempt on it has ended.
func (m *membership) onRevoked(ctx context.Context, _ *kgo.Client, _ map[string][]int32) {
	done := make(chan struct{})
	select {
	case m.revoked <- done:
	case <-ctx.Done():
		return
	case <-m.closing:
		return
	}
	select {
	case <-done:
	case <-ctx.Done():
	case <-m.closing:
	}
}

// watch polls the paused client for the group's errors: a process whose
// instance id another process took (FENCED_INSTANCE_ID) must stop.
func (m *membership) watch(ctx context.Context) {
	for ctx.Err() == nil {
		fs := m.cl.PollFetches(ctx)
		if fs.IsClientClosed() {
			return
		}
		fs.EachError(func(_ string, _ int32, err error) {
			if errors.Is(err, kerr.FencedInstanceID) {
				select {
				case m.fatal <- fmt.Errorf("%w: another process joined the group with instance id %q; stopping this one (give every process its own --instance-id): %w",
					sink.ErrFenced, m.instance, err):
				default:
				}
			} else if ctx.Err() == nil && !errors.Is(err, context.Canceled) {
				m.log.Debug("consumer group", "err", err)
			}
		})
	}
}

// leave takes the process out of the group at once, so that a stopped
// process's partitions go to the others now rather than after the session
// timeout (a static member's Close does not leave).
func (m *membership) leave(ctx context.Context) {
	memberID, _ := m.cl.GroupMetadata()
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group = m.group
	member := kmsg.NewLeaveGroupRequestMember()
	member.MemberID, member.InstanceID = memberID, &m.instance
	req.Members = append(req.Members, member)
	var err error
	for try := 0; try < 3 && ctx.Err() == nil; try++ {
		// The group's coordinator may have moved (a broker restarted):
		// a failed request looks it up again.
		var resp *kmsg.LeaveGroupResponse
		if resp, err = req.RequestWith(ctx, m.cl); err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err == nil || errors.Is(err, kerr.UnknownMemberID) || errors.Is(err, kerr.FencedInstanceID) {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
	}
	if err != nil {
		m.log.Warn("leaving the consumer group; the others take over this process's partitions after scale.session_timeout", "err", err)
	}
}

// closeWait bounds how long close waits for the group client: closing
// waits for a join or sync in flight, which the coordinator may hold for
// the rebalance timeout while other members rejoin. The member has left
// the group by then (leave), so nothing waits on this process.
const closeWait = 5 * time.Second

func (m *membership) close() {
	close(m.closing)
	m.cancel()
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		m.cl.Close()
		m.wg.Wait()
	}()
	select {
	case <-closed:
	case <-time.After(closeWait):
		m.log.Warn("the consumer group client did not close within 5s (a rebalance in flight); exiting without waiting for it")
	}
}

// await waits for an assignment to run on: the current one, or the next
// generation's. It answers revocations meanwhile (nothing runs). nil
// when the job is to stop.
func (m *membership) await(ctx context.Context, stopping <-chan struct{}) (*assignment, error) {
	for m.current == nil {
		select {
		case a := <-m.assigned:
			m.current = a
		case done := <-m.revoked:
			close(done)
		case err := <-m.fatal:
			return nil, err
		case <-ctx.Done():
			return nil, nil
		case <-stopping:
			return nil, nil
		}
	}
	return m.current, nil
}

// fenceDeparted fences the transactional ids of members that left the
// group since it was last seen: a process killed mid-epoch leaves its
// transaction open, and read_committed readers of everything it wrote to
// (outputs, the repartition and state topics) would wait for the
// transaction timeout. Initializing its transactional id aborts it now.
// A process that comes back with that id fences in turn, as on any start.
func (m *membership) fenceDeparted(ctx context.Context, adm *kadm.Client, j *Job) {
	described, err := adm.DescribeGroups(ctx, m.group)
	if err != nil {
		m.log.Warn("describing the consumer group", "err", err)
		return
	}
	var now []string
	for _, g := range described {
		for _, mem := range g.Members {
			if mem.InstanceID != nil {
				now = append(now, *mem.InstanceID)
			}
		}
	}
	slices.Sort(now)
	for _, gone := range m.members {
		if gone == m.instance || slices.Contains(now, gone) {
			continue
		}
		id := sink.MemberTransactionalID(j.cfg.Name, gone)
		fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := fenceTransactionalID(fctx, j.conn, id, j.cfg.Kafka.TransactionTimeout)
		cancel()
		if err != nil {
			m.log.Warn("fencing a departed member's transactional id", "instance", gone, "transactional_id", id, "err", err)
			continue
		}
		m.log.Info("fenced a departed member's transactional id: its open transaction is aborted", "instance", gone, "transactional_id", id)
	}
	m.members = now
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

// fenceTransactionalID initializes id's producer: the transaction
// coordinator aborts what id left open and fences its last producer.
func fenceTransactionalID(ctx context.Context, conn []kgo.Opt, id string, timeout time.Duration) error {
	cl, err := kgo.NewClient(append(append([]kgo.Opt{}, conn...), kgo.TransactionalID(id), kgo.TransactionTimeout(timeout))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	_, _, err = cl.ProducerID(ctx)
	return err
}

// errRebalanced ends an attempt whose assignment was revoked: not a
// failure, the next generation's attempt starts at once.
var errRebalanced = errors.New("the consumer group rebalanced")

// groupRun is Run's attempt in group mode: wait for an assignment, run an
// attempt on it until it fails or the group revokes it.
func (j *Job) groupRun(m *membership) func(ctx context.Context) (bool, error) {
	var adm *kadm.Client
	return func(ctx context.Context) (bool, error) {
		a, err := m.await(ctx, j.stopping)
		if err != nil {
			return false, err
		}
		if a == nil {
			return false, &stoppedError{}
		}
		if adm == nil {
			cl, err := kgo.NewClient(j.conn...)
			if err != nil {
				return false, err
			}
			defer func() { cl.Close(); adm = nil }()
			adm = kadm.NewClient(cl)
		}
		m.fenceDeparted(ctx, adm, j)
		j.status.assigned(a, m.members)
		perTopic := map[string]int{}
		for _, tp := range a.tps {
			perTopic[tp.Topic]++
		}
		j.metrics.SetAssignment(a.member.Generation, perTopic, len(m.members))
		actx, cancel := context.WithCancel(ctx)
		defer cancel()
		type result struct {
			progressed bool
			err        error
		}
		res := make(chan result, 1)
		go func() {
			p, err := j.groupAttempt(actx, ctx, a)
			res <- result{p, err}
		}()
		for {
			select {
			case r := <-res:
				return r.progressed, memberVerdict(r.err)
			case done := <-m.revoked:
				cancel()
				r := <-res
				m.current = nil
				close(done)
				if r.err != nil && !errors.Is(r.err, errStopped) && actx.Err() == nil {
					return r.progressed, memberVerdict(r.err)
				}
				if errors.Is(r.err, errStopped) {
					return r.progressed, r.err
				}
				return r.progressed, errRebalanced
			case err := <-m.fatal:
				cancel()
				<-res
				return false, err
			}
		}
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

// groupAttempt runs the task graph once over assignment asg.
func (j *Job) groupAttempt(ctx, parent context.Context, asg *assignment) (progressed bool, err error) {
	if len(asg.tps) == 0 {
		j.log.Info("the group assigned nothing to this process (more processes than partitions); waiting", "generation", asg.member.Generation)
		<-ctx.Done()
		return false, ctx.Err()
	}
	a := &attempt{j: j, member: asg}
	defer a.close()
	if err := a.prepareGroup(ctx); err != nil {
		return false, err
	}
	restoreStart := j.now()
	if err := a.recoverMember(ctx); err != nil {
		return false, err
	}
	if err := a.restoreMember(ctx); err != nil {
		return false, err
	}
	a.restoredAfter(restoreStart)
	return a.run(ctx, parent)
}

// prepareGroup makes sure the job's topics exist: the checkpoint topic
// (members' records), the repartition and group-state topics with
// scale.partitions partitions (a different count is refused: it is fixed
// for the job's life), and the sinks'.
func (a *attempt) prepareGroup(ctx context.Context) error {
	j, cfg := a.j, a.j.cfg
	if j.from != nil {
		return fmt.Errorf("%w: starting a group-mode job from a savepoint is not supported yet; start it in single mode from the savepoint, then move it", ErrUnfit)
	}
	if err := a.openAdmin(); err != nil {
		return err
	}
	if err := checkTransactionTimeout(ctx, a.adm, cfg); err != nil {
		return err
	}
	if err := kstore.Ensure(ctx, a.adm, cfg.Name, cfg.Checkpoint.ReplicationFactor); err != nil {
		return err
	}
	single, _, err := kstore.Modes(ctx, j.conn, cfg.Name)
	if err != nil {
		return fmt.Errorf("reading the checkpoint topic: %w", err)
	}
	if single != nil {
		// Its state and offsets are the single-mode job's: group mode
		// would start over and write every output again.
		return fmt.Errorf("%w: job %s ran in single mode (its last checkpoint is %d): run it with scale.mode: single, or under a new name (a job moves between modes only through a savepoint, not yet supported for group mode)",
			ErrIncompatible, cfg.Name, single.ID)
	}
	if err := ensureShuffleTopics(ctx, a.adm, j.shuffle, j.plan.agg != nil, cfg.Checkpoint.ReplicationFactor); err != nil {
		return err
	}
	if err := j.ensureSinkTopics(ctx, a.adm); err != nil {
		return err
	}
	a.limits = j.describeLimits(ctx, a.adm)
	return nil
}

// ensureShuffleTopics creates the repartition topic and the compacted
// group-state topic of a keyed job with s.partitions partitions each, and
// refuses existing ones with another count.
func ensureShuffleTopics(ctx context.Context, adm *kadm.Client, s *shuffle, keyed bool, replication int) error {
	if !keyed {
		return nil
	}
	for _, t := range []struct {
		name    string
		configs map[string]*string
	}{{s.repartition, nil}, {s.state, kstore.TopicConfigs()}} {
		resp, err := adm.CreateTopic(ctx, int32(s.partitions), int16(replication), t.configs, t.name)
		if err == nil {
			err = resp.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("creating internal topic %s: %w", t.name, err)
		}
	}
	// A topic just created reaches every broker's metadata a moment
	// later.
	var md kadm.Metadata
	for try := 0; ; try++ {
		var err error
		if md, err = adm.Metadata(ctx, s.repartition, s.state); err != nil {
			return fmt.Errorf("describing the internal topics: %w", err)
		}
		missing := ""
		for _, name := range []string{s.repartition, s.state} {
			if td, ok := md.Topics[name]; !ok || td.Err != nil || len(td.Partitions) == 0 {
				missing = name
			}
		}
		if missing == "" {
			break
		}
		if try == 50 {
			return fmt.Errorf("internal topic %s: not found 10s after creating it", missing)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	for _, name := range []string{s.repartition, s.state} {
		td := md.Topics[name]
		if n := len(td.Partitions); n != s.partitions {
			return fmt.Errorf("%w: internal topic %s has %d partitions but scale.partitions is %d: it is fixed for the job's life (set it back to %d, or move the job to a new name through a savepoint)",
				ErrIncompatible, name, n, s.partitions, n)
		}
	}
	return nil
}

// recoverMember opens the member's producers and fences its own
// transactional id (aborting what its previous run left open); its last
// checkpoint record gives the next checkpoint id.
func (a *attempt) recoverMember(ctx context.Context) error {
	j, cfg := a.j, a.j.cfg
	var internal []string
	if j.plan.agg != nil {
		internal = []string{j.shuffle.repartition, j.shuffle.state}
	}
	txn, err := sink.NewMemberTxn(j.conn, cfg.Name, j.instance, internal, cfg.Kafka.TransactionTimeout, append(a.limits.Opts(), j.metrics.KafkaHooks("txn"))...)
	if err != nil {
		return err
	}
	a.closers = append(a.closers, txn.Close)
	a.commitOffsets = func(ctx context.Context, offsets []checkpoint.SourceOffset) error {
		return txn.CommitOffsets(ctx, a.member.member, offsets)
	}
	a.recordKey = sink.MemberRecordKey(cfg.Name, j.instance)
	var plain outputProducer
	if cfg.Guarantee != config.ExactlyOnce {
		p, err := sink.NewPlain(j.conn, append(a.limits.Opts(), j.metrics.KafkaHooks("outputs"))...)
		if err != nil {
			return err
		}
		plain = p
		a.closers = append(a.closers, p.Close)
	}
	if err := a.recoverWith(ctx, txn, plain); err != nil {
		return err
	}
	pid, epoch := txn.Producer()
	j.log.Info("member attempt", "generation", a.member.member.Generation, "member_id", a.member.member.MemberID,
		"producer_id", pid, "producer_epoch", epoch, "assigned", a.member.partitions())
	return nil
}

// restoreMember sets the start offset of every assigned partition (the
// group's committed offset; else the source's start position, or the
// start of a repartition partition) and restores the state partitions
// of the assigned repartition partitions.
func (a *attempt) restoreMember(ctx context.Context) error {
	j := a.j
	if a.latest != nil {
		if _, err := j.checkCheckpoint(a.latest, true); err != nil {
			return err
		}
		a.savepointID = a.latest.Savepoint
	}
	// Fetched for every attempt, not once per assignment: an attempt that
	// failed and restarts on the same assignment must continue from what
	// its predecessor committed, as its state does.
	committed, err := fetchStableOffsets(ctx, a.adm, j.cfg.Name, a.member.partitions(), j.cfg.Kafka.TransactionTimeout)
	if err != nil {
		return err
	}
	a.offsets = map[source.TopicPartition]int64{}
	var owned []int32
	fresh := map[string][]source.TopicPartition{} // by source id
	for _, tp := range a.member.partitions() {
		off, ok := committed[tp]
		if !ok {
			off = -1
		}
		if tp.Topic == j.shuffle.repartition {
			owned = append(owned, tp.Partition)
			a.offsets[tp] = max(off, 0)
			continue
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
	for _, src := range j.cfg.Sources {
		if len(fresh[src.ID]) == 0 {
			continue
		}
		resolved, err := a.cluster.ResolveStart(ctx, fresh[src.ID], src.Start)
		if err != nil {
			return err
		}
		for tp, off := range resolved {
			a.offsets[tp] = off
		}
	}
	if err := awaitSettled(ctx, a.adm, j.shuffle.state, owned, j.cfg.Kafka.TransactionTimeout); err != nil {
		return err
	}
	read := func(ctx context.Context, fn func(key, value []byte) error) error {
		if len(owned) == 0 {
			return nil
		}
		return kread.All(ctx, j.conn, j.shuffle.state, func(r *kgo.Record) error { return fn(r.Key, r.Value) }, owned...)
	}
	a.ops, a.restored, err = j.restoreOperators(ctx, nil, read)
	return err
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
