package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eoflow/pipeline/checkpoint/kstore"
	"github.com/eoflow/pipeline/sink"
	"github.com/eoflow/pipeline/source"
)

// membership is the process's member of the job's consumer group. It
// never reads records through the group client (every topic is paused):
// it only learns what the process owns. Reading is the attempt's, through
// its own readers, from the offsets the group had committed.
type membership struct {
	cl       *kgo.Client
	group    string
	instance string
	log      *slog.Logger
	// sessionTimeout is scale.session_timeout, for the message that
	// says the brokers refuse it.
	sessionTimeout time.Duration
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
	// those that leave, and admins the admin addresses they advertised
	// (adminpeers.go). Only the group's loop touches them (onAssigned,
	// then onFetched, which copies them into the assignment).
	members []string
	admins  map[string]string
	// fence initializes the transactional id of an instance, aborting
	// what it left open.
	fence func(ctx context.Context, instance string) error
	// known returns the instance ids with checkpoint records of the job;
	// asked once, at the first assignment (seeded then).
	known  func(ctx context.Context) ([]string, error)
	seeded bool
	// balancer deals the partitions out, remembering this member's
	// last share (stickiness.go).
	balancer *rememberingSticky

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
		group: cfg.Name, instance: j.instance, log: j.log, sessionTimeout: cfg.Scale.SessionTimeout,
		assigned: make(chan *assignment), revoked: make(chan chan struct{}), fatal: make(chan error, 1),
		closing:  make(chan struct{}),
		fence:    j.fenceMember,
		balancer: newRememberingSticky(),
		known:    func(ctx context.Context) ([]string, error) { return kstore.MemberInstances(ctx, j.conn, cfg.Name) },
	}
	topics := j.groupTopics()
	opts := append(append(append([]kgo.Opt{}, j.conn...), source.FetchOpts()...),
		// The member's client id carries this process's admin address
		// to the others (adminpeers.go).
		kgo.ClientID(memberClientID(cfg.Kafka.ClientID, j.adminAddr)),
		kgo.ConsumerGroup(cfg.Name),
		kgo.ConsumeTopics(topics...),
		kgo.InstanceID(j.instance),
		kgo.SessionTimeout(cfg.Scale.SessionTimeout),
		// Members learn of a rebalance at their next heartbeat. Those
		// that learn first revoke everything (eager) and wait in the join
		// for the rest, their partitions unread meanwhile: the interval
		// bounds that wait, so it does not grow with the session timeout
		// (at a sixth of a 120 s session, partitions sat unread for 20 s
		// on every rebalance of a group's first start).
		kgo.HeartbeatInterval(heartbeatInterval(cfg.Scale.SessionTimeout)),
		// Eager and sticky: a rebalance revokes everything (the attempt
		// is rebuilt), and partitions stay where they were when they can
		// (stickiness.go: franz-go's eager client forgets where they were).
		kgo.Balancers(m.balancer),
		kgo.DisableAutoCommit(),
		kgo.RequireStableFetchOffsets(),
		// The group's leader deals out partitions added to the topics
		// once its metadata shows them: within the partition discovery
		// interval, as single mode finds them (partitionWatch), rather
		// than the client's default five minutes.
		kgo.MetadataMaxAge(j.discoverEvery),
		kgo.MetadataMinAge(min(j.discoverEvery, 5*time.Second)),
		kgo.OnPartitionsAssigned(m.onAssigned),
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

// heartbeatInterval is how often a member heartbeats with the given
// session timeout: every second, or a third of a session shorter than 3 s
// (Kafka's rule: well within the session). franz-go's default is 3 s.
func heartbeatInterval(session time.Duration) time.Duration {
	return min(time.Second, session/3)
}

// groupTopics are the topics the group deals out: the sources and, for a
// keyed job, the repartition topic.
func (j *Job) groupTopics() []string {
	var topics []string
	for _, src := range j.cfg.Sources {
		topics = append(topics, src.Topics...)
	}
	if j.shuffle.repartitions(j.plan.keyed) {
		topics = append(topics, RepartitionTopic(j.cfg.Name))
	}
	return topics
}

// onFetched runs in the group's loop once a generation is assigned and
// its committed offsets are stable: it hands the assignment (the
// partitions the offsets were fetched for) to the run loop.
func (m *membership) onFetched(ctx context.Context, cl *kgo.Client, resp *kmsg.OffsetFetchResponse) error {
	memberID, generation := cl.GroupMetadata()
	a := &assignment{
		member:  sink.GroupMember{Group: m.group, MemberID: memberID, InstanceID: m.instance, Generation: generation},
		members: slices.Clone(m.members),
		admins:  maps.Clone(m.admins),
	}
	// The response has the partitions once per form (per group from
	// OffsetFetch v8 on, top level before); franz-go may fill both.
	seen := map[source.TopicPartition]bool{}
	add := func(topic string, partition int32) {
		tp := source.TopicPartition{Topic: topic, Partition: partition}
		if !seen[tp] {
			seen[tp] = true
			a.tps = append(a.tps, tp)
		}
	}
	for _, g := range resp.Groups {
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				add(t.Topic, p.Partition)
			}
		}
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			add(t.Topic, p.Partition)
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

// watch polls the paused client for the group's errors. Some end the
// process: another process took its instance id (FENCED_INSTANCE_ID), or
// the brokers refuse its session timeout (INVALID_SESSION_TIMEOUT, which
// the client would otherwise retry forever, the job never starting).
func (m *membership) watch(ctx context.Context) {
	for ctx.Err() == nil {
		fs := m.cl.PollFetches(ctx)
		if fs.IsClientClosed() {
			return
		}
		fs.EachError(func(_ string, _ int32, err error) {
			switch {
			case errors.Is(err, kerr.FencedInstanceID):
				m.fail(fmt.Errorf("%w: another process joined the group with instance id %q; stopping this one (give every process its own --instance-id): %w",
					sink.ErrFenced, m.instance, err))
			case errors.Is(err, kerr.InvalidSessionTimeout):
				m.fail(m.sessionTimeoutError(ctx, err))
			case ctx.Err() == nil && !errors.Is(err, context.Canceled):
				m.log.Debug("consumer group", "err", err)
			}
		})
	}
}

// fail hands err to the run loop, which ends the process with it (the
// first error is enough).
func (m *membership) fail(err error) {
	select {
	case m.fatal <- err:
	default:
	}
}

// sessionTimeoutError says that the brokers refused scale.session_timeout
// (err) and what they allow, as far as one broker's configuration tells.
func (m *membership) sessionTimeoutError(ctx context.Context, err error) error {
	allowed := "6s to 30m unless the brokers changed it"
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(m.cl)
	if md, merr := adm.BrokerMetadata(ctx); merr == nil && len(md.Brokers) > 0 {
		if rcs, derr := adm.DescribeBrokerConfigs(ctx, md.Brokers[0].NodeID); derr == nil {
			limits := map[string]time.Duration{}
			for _, rc := range rcs {
				for _, c := range rc.Configs {
					if ms, perr := strconv.ParseInt(c.MaybeValue(), 10, 64); perr == nil {
						limits[c.Key] = time.Duration(ms) * time.Millisecond
					}
				}
			}
			lo, okLo := limits["group.min.session.timeout.ms"]
			hi, okHi := limits["group.max.session.timeout.ms"]
			if okLo && okHi {
				allowed = fmt.Sprintf("%v to %v", lo, hi)
			}
		}
	}
	return fmt.Errorf("%w: scale.session_timeout %v is outside what the brokers allow (group.min.session.timeout.ms to group.max.session.timeout.ms: %s): "+
		"set scale.session_timeout within that range: %w", ErrUnfit, m.sessionTimeout, allowed, err)
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

// onAssigned runs in the group's loop when a generation is assigned,
// before its committed offsets are fetched: it fences the members that
// left since the last generation, and on the first assignment those that
// left unseen (fenceDeparted). It must come before the
// fetch: the fetch waits for stable offsets, and a member killed while
// committing leaves its epoch's offsets pending in its open transaction,
// which would hold every member's fetch until the transaction timeout.
func (m *membership) onAssigned(ctx context.Context, cl *kgo.Client, assigned map[string][]int32) {
	_, generation := cl.GroupMetadata()
	kept, moved := m.balancer.assigned(generation, assigned)
	m.log.Info("group assignment", "generation", generation, "kept", kept, "moved_here", moved)
	m.fenceDeparted(ctx)
}

// fenceDeparted fences the transactional ids of members that left the
// group since it was last seen: a process killed mid-epoch leaves its
// transaction open, and read_committed readers of everything it wrote to
// (outputs, the repartition and state topics) would wait for the
// transaction timeout, as would the group's stable offset fetch when the
// transaction holds offsets. Initializing its transactional id aborts it
// now. A process that comes back with that id fences in turn, as on any
// start (Job.Run). The first time, there is no last view: the members
// that left unseen take its place (unseen).
func (m *membership) fenceDeparted(ctx context.Context) {
	described, err := kadm.NewClient(m.cl).DescribeGroups(ctx, m.group)
	if err != nil {
		m.log.Warn("describing the consumer group", "err", err)
		return
	}
	var now []string
	admins := map[string]string{}
	for _, g := range described {
		for _, mem := range g.Members {
			if mem.InstanceID != nil {
				now = append(now, *mem.InstanceID)
				if a := advertisedAdmin(mem.ClientID, mem.ClientHost); a != "" {
					admins[*mem.InstanceID] = a
				}
			}
		}
	}
	m.admins = admins
	slices.Sort(now)
	var departed []string
	for _, gone := range m.members {
		if gone != m.instance && !slices.Contains(now, gone) {
			departed = append(departed, gone)
		}
	}
	if !m.seeded {
		m.seeded = true
		departed = append(departed, m.unseen(ctx, now)...)
	}
	for _, gone := range departed {
		id := sink.MemberTransactionalID(m.group, gone)
		fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := m.fence(fctx, gone)
		cancel()
		if err != nil {
			m.log.Warn("fencing a departed member's transactional id", "instance", gone, "transactional_id", id, "err", err)
			continue
		}
		m.log.Info("fenced a departed member's transactional id: its open transaction is aborted", "instance", gone, "transactional_id", id)
	}
	m.members = now
}

// unseen are the instances with checkpoint records of the job that are out
// of the group and have a transaction open: members that left while no
// member was there to see them go (every process of the job was stopped
// or killed; this one started after). Only a process's first assignment
// asks: it has seen nobody leave yet, and from then on it sees every
// departure. An instance that is back in the group, or whose id has no
// transaction open, is left alone (a job's checkpoint topic names every
// instance it ever ran with).
func (m *membership) unseen(ctx context.Context, now []string) []string {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	known, err := m.known(ctx)
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		// A new job: its first assignment comes before its first attempt
		// creates the checkpoint topic. Nobody left unseen.
		m.log.Debug("no checkpoint topic yet: no instance left unseen", "err", err)
		return nil
	}
	if err != nil {
		m.log.Warn("reading the instance ids of the job's checkpoint records, to fence those that left unseen", "err", err)
		return nil
	}
	byTxn := map[string]string{}
	var ids []string
	for _, instance := range known {
		if instance != m.instance && !slices.Contains(now, instance) {
			id := sink.MemberTransactionalID(m.group, instance)
			byTxn[id] = instance
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	described, err := kadm.NewClient(m.cl).DescribeTransactions(ctx, ids...)
	if err != nil {
		m.log.Warn("describing the transactions of instances out of the group", "err", err)
	}
	var open []string
	for _, d := range described.Sorted() {
		if d.Err == nil && d.State == "Ongoing" {
			open = append(open, byTxn[d.TxnID])
		}
	}
	return open
}

// fenceMember fences the transactional id of the job's instance: the
// coordinator aborts what that instance's process left open.
func (j *Job) fenceMember(ctx context.Context, instance string) error {
	return fenceTransactionalID(ctx, j.conn, sink.MemberTransactionalID(j.cfg.Name, instance), j.cfg.Kafka.TransactionTimeout)
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
