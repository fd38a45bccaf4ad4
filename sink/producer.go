package sink

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/checkpoint/kstore"
	"github.com/eoflow/pipeline/internal/kclient"
	"github.com/eoflow/pipeline/internal/kread"
	"github.com/eoflow/pipeline/internal/mutant"
	"github.com/eoflow/pipeline/twophase"
)

// firstError keeps the first asynchronous produce failure of an epoch.
type firstError struct {
	mu  sync.Mutex
	err error
}

func (f *firstError) set(err error) {
	f.mu.Lock()
	if f.err == nil {
		f.err = err
	}
	f.mu.Unlock()
}

// promise is a produce callback that keeps the first failure.
func (f *firstError) promise(_ *kgo.Record, err error) {
	if err != nil {
		f.set(err)
	}
}

func (f *firstError) peek() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

func (f *firstError) take() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	err := f.err
	f.err = nil
	return err
}

// Txn is a job's transactional producer and the decision log of its
// two-phase commit (twophase.DecisionLog): transaction N holds epoch N's
// outputs, dead letters and state changes and, produced last, checkpoint
// record N, so committing it IS the decision "checkpoint N is complete".
// Records go in with Produce; the epoch begins, prepares, commits or aborts
// only as the twophase protocol says. One goroutine uses it at a time.
type Txn struct {
	cl TxnClient
	// log is where LastDecided reads the checkpoint topic.
	log     kread.Cluster
	job     string
	id      string
	timeout time.Duration
	failed  firstError
	open    bool
	// producerID and epoch are those of the open (or next) transaction,
	// for asking the coordinator about it after it failed (probe).
	producerID int64
	epoch      int16
	// begun is when Begin opened the transaction (monotonic): the
	// coordinator's clock for its timeout starts later, at its first
	// write, so a transaction younger than timeout here cannot have timed
	// out there.
	begun time.Time
	// promise records a failed produce; made once, because a closure
	// made per Produce is an allocation per record.
	promise func(*kgo.Record, error)
	// recordKey is the key of this producer's checkpoint records: the
	// job's name, or "<job>/<instance>" for a group member (MemberTxn).
	recordKey string
	// now is the clock a transaction's age is measured with (time.Now;
	// the simulations' own clock, SetClock).
	now func() time.Time
}

var _ twophase.DecisionLog = (*Txn)(nil)

// NewTxn creates job's transactional producer. Its transactional id,
// "<job>-txn" (TransactionalID), is stable across restarts of the job, so
// a restart fences the previous instance. conn are the connection options
// (kclient.Options); timeout is kafka.transaction_timeout.
func NewTxn(conn []kgo.Opt, job string, timeout time.Duration, extra ...kgo.Opt) (*Txn, error) {
	cl, err := newTxnClient(conn, TransactionalID(job), timeout, nil, extra)
	if err != nil {
		return nil, err
	}
	return NewTxnOn(cl, kread.Dial(conn), job, timeout), nil
}

// NewTxnOn is NewTxn on a client made by the caller, which must be
// transactional with id TransactionalID(job) and the given timeout; the
// last checkpoint is read from log. The Txn owns cl: Close closes it.
func NewTxnOn(cl TxnClient, log kread.Cluster, job string, timeout time.Duration) *Txn {
	return newTxn(cl, log, job, TransactionalID(job), job, timeout)
}

func newTxn(cl TxnClient, log kread.Cluster, job, id, recordKey string, timeout time.Duration) *Txn {
	t := &Txn{cl: cl, log: log, job: job, id: id, timeout: timeout, recordKey: recordKey, now: time.Now}
	t.promise = t.failed.promise
	return t
}

// SetClock makes the Txn measure a transaction's age with now instead of
// time.Now: a simulation's clock, which moves with the model's
// transaction timeouts, not with the wall.
func (t *Txn) SetClock(now func() time.Time) { t.now = now }

// newTxnClient makes the franz-go client of a Txn; a nil partitioner is
// franz-go's default.
func newTxnClient(conn []kgo.Opt, id string, timeout time.Duration, partitioner kgo.Partitioner, extra []kgo.Opt) (*kgo.Client, error) {
	opts := append(append([]kgo.Opt{}, conn...),
		kgo.TransactionalID(id),
		kgo.TransactionTimeout(timeout),
		// Outputs of an epoch go out as they come and are flushed at the
		// barrier; a short linger batches them without adding latency that
		// matters next to a checkpoint interval.
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.MetadataMinAge(kclient.ConcurrentTransactionsRetry),
	)
	if partitioner != nil {
		opts = append(opts, kgo.RecordPartitioner(partitioner))
	}
	return kgo.NewClient(append(opts, extra...)...)
}

// TransactionalID is the transactional id of job's producer (single
// mode).
func TransactionalID(job string) string { return job + "-txn" }

// MemberTransactionalID is the transactional id of instance's process of
// a group-mode job: stable across its restarts, so a restart fences its
// own predecessor, and known to the other members, so one of them can
// fence it when it leaves the group without ending its transaction.
func MemberTransactionalID(job, instance string) string { return job + "-" + instance }

// MemberRecordKey is the key of a group member's checkpoint records in
// the job's checkpoint topic (a single-mode job's key is the job name).
func MemberRecordKey(job, instance string) string { return job + "/" + instance }

// NewMemberTxn is the transactional producer of instance's process of a
// group-mode job (MemberTransactionalID); its checkpoint records are keyed
// MemberRecordKey. internal are the topics whose records carry their
// partition (the repartition and state topics), mixed those whose records
// without a key do: every other record is partitioned by its key as usual
// (MemberPartitioner).
func NewMemberTxn(conn []kgo.Opt, job, instance string, internal, mixed []string, timeout time.Duration, extra ...kgo.Opt) (*Txn, error) {
	cl, err := newTxnClient(conn, MemberTransactionalID(job, instance), timeout, MemberPartitioner(internal, mixed), extra)
	if err != nil {
		return nil, err
	}
	return NewMemberTxnOn(cl, kread.Dial(conn), job, instance, timeout), nil
}

// NewMemberTxnOn is NewMemberTxn on a client made by the caller, which
// must be transactional with id MemberTransactionalID(job, instance) and
// the given timeout, and partition as MemberPartitioner does; the last
// checkpoint is read from log. The Txn owns cl.
func NewMemberTxnOn(cl TxnClient, log kread.Cluster, job, instance string, timeout time.Duration) *Txn {
	return newTxn(cl, log, job, MemberTransactionalID(job, instance), MemberRecordKey(job, instance), timeout)
}

// MemberPartitioner is how a group member's producer partitions its
// records: those of the internal topics by their Partition field, those
// of the mixed topics by their Partition field when they have no key,
// every other record by its key (franz-go's default, as the Java client
// does). A join's repartition topic is mixed: its records are
// partitioned by the join key, and the times a member reports to each of
// its partitions carry no key.
func MemberPartitioner(internal, mixed []string) kgo.Partitioner { return manualFor(internal, mixed) }

// manualFor partitions the records of topics by their Partition field,
// those of mixed by it when they have no key, and every other record as
// the client does by default.
func manualFor(topics, mixed []string) kgo.Partitioner {
	manual := map[string]bool{}
	for _, t := range topics {
		manual[t] = true
	}
	return partitionerFunc(func(topic string) kgo.TopicPartitioner {
		switch {
		case manual[topic]:
			return kgo.ManualPartitioner().ForTopic(topic)
		case slices.Contains(mixed, topic):
			return unkeyedManual{kgo.StickyKeyPartitioner(nil).ForTopic(topic)}
		}
		return defaultPartitioner.ForTopic(topic)
	})
}

// unkeyedManual partitions a record without a key by its Partition
// field, and every other record as its TopicPartitioner does (keyed
// records by the murmur2 hash of the key, as franz-go's default and the
// Java client do).
type unkeyedManual struct{ kgo.TopicPartitioner }

// RequiresConsistency: every record stays in the partition chosen, the
// key's or its own.
func (unkeyedManual) RequiresConsistency(*kgo.Record) bool { return true }

func (p unkeyedManual) Partition(r *kgo.Record, n int) int {
	if r.Key == nil {
		return int(r.Partition)
	}
	return p.TopicPartitioner.Partition(r, n)
}

// defaultPartitioner is franz-go's default (kgo.RecordPartitioner's doc):
// keyed records by the murmur2 hash of the key, as the Java client does.
var defaultPartitioner = kgo.UniformBytesPartitioner(64<<10, true, true, nil)

type partitionerFunc func(topic string) kgo.TopicPartitioner

func (f partitionerFunc) ForTopic(topic string) kgo.TopicPartitioner { return f(topic) }

// GroupMember is who commits offsets through a transaction (KIP-447):
// the group coordinator accepts them only from a member of the group's
// current generation, so a process the group has moved on from (a
// zombie) cannot commit.
type GroupMember struct {
	Group      string
	MemberID   string
	InstanceID string
	Generation int32
}

// CommitOffsets adds offsets, the next offset to read of each partition,
// to the open transaction on behalf of m: they commit or abort with it.
// Call it after the transaction's records were produced: a transaction
// that produced nothing is ended by the client without asking the
// coordinator, and offsets added to it would stay pending. A member of an
// old generation gets ILLEGAL_GENERATION, a replaced static member
// FENCED_INSTANCE_ID, a stranger UNKNOWN_MEMBER_ID; the transaction can
// then only abort.
func (t *Txn) CommitOffsets(ctx context.Context, m GroupMember, offsets []checkpoint.SourceOffset) error {
	if len(offsets) == 0 {
		return nil
	}
	id, epoch, err := t.cl.ProducerID(ctx)
	if err != nil {
		return fmt.Errorf("committing offsets: %w", err)
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = t.id, id, epoch, m.Group
	addResp, err := add.RequestWith(ctx, t.cl)
	if err == nil {
		err = kerr.ErrorForCode(addResp.ErrorCode)
	}
	if err != nil {
		return fmt.Errorf("adding the offsets of group %s to the transaction: %w", m.Group, err)
	}
	commit := kmsg.NewPtrTxnOffsetCommitRequest()
	commit.TransactionalID, commit.Group, commit.ProducerID, commit.ProducerEpoch = t.id, m.Group, id, epoch
	commit.Generation, commit.MemberID = m.Generation, m.MemberID
	if m.InstanceID != "" {
		commit.InstanceID = &m.InstanceID
	}
	if mutant.On("txn-offsets-no-generation") {
		// The bug: the commit names no member, which KIP-447 lets any
		// producer do, a zombie of an old generation included.
		commit.Generation, commit.MemberID, commit.InstanceID = -1, "", nil
	}
	byTopic := map[string]int{}
	for _, o := range offsets {
		i, ok := byTopic[o.Topic]
		if !ok {
			i = len(commit.Topics)
			byTopic[o.Topic] = i
			topic := kmsg.NewTxnOffsetCommitRequestTopic()
			topic.Topic = o.Topic
			commit.Topics = append(commit.Topics, topic)
		}
		part := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		part.Partition, part.Offset, part.LeaderEpoch = o.Partition, o.Offset, -1
		commit.Topics[i].Partitions = append(commit.Topics[i].Partitions, part)
	}
	resp, err := commit.RequestWith(ctx, t.cl)
	if err != nil {
		return fmt.Errorf("committing offsets of group %s: %w", m.Group, err)
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				return fmt.Errorf("committing offsets of group %s as member %s (generation %d): %s/%d: %w", m.Group, m.MemberID, m.Generation, rt.Topic, rp.Partition, err)
			}
		}
	}
	return nil
}

// Fence initializes the producer id now. The transaction coordinator then
// aborts whatever a previous instance with the same transactional id left
// open and fences it, at once rather than after the transaction timeout;
// read_committed reads of the job's own topics would otherwise stall on
// that open transaction.
func (t *Txn) Fence(ctx context.Context) error {
	id, epoch, err := t.cl.ProducerID(ctx)
	if err != nil {
		return WithMissingACL(fmt.Errorf("initializing transactional id %s: %w", t.id, err))
	}
	t.producerID, t.epoch = id, epoch
	return nil
}

// ended notes the producer id and epoch of the next transaction: Kafka 4
// bumps the epoch at every end of a transaction (transaction.version 2).
// The client has them at hand, so this asks nothing of the brokers.
func (t *Txn) ended(ctx context.Context) {
	if id, epoch, err := t.cl.ProducerID(ctx); err == nil {
		t.producerID, t.epoch = id, epoch
	}
}

// Producer is the producer id and epoch of the open (or next)
// transaction, for logs.
func (t *Txn) Producer() (id int64, epoch int16) { return t.producerID, t.epoch }

// Name names the participant: the transactional id.
func (t *Txn) Name() string { return "kafka:" + t.id }

// Recover fences the transactional id (Fence): the coordinator aborts what
// a predecessor left open, at once. Kafka keeps no prepared transaction
// across producers, so nothing is ever in doubt: not committed means not
// decided.
func (t *Txn) Recover(ctx context.Context) ([]twophase.Epoch, error) {
	if mutant.On("txn-recover-no-fence") {
		// The bug: no fence before LastDecided; the client initializes
		// its producer id at its first produce, after the read.
		return nil, nil
	}
	return nil, t.Fence(ctx)
}

// LastDecided reads the newest committed checkpoint record
// (read_committed, after the fence, so no open transaction stalls the
// read), nil if there is none: the checkpoint the job restores.
func (t *Txn) LastDecided(ctx context.Context) (*checkpoint.Record, error) {
	rec, err := kstore.LatestKeyedOn(ctx, t.log, t.job, t.recordKey)
	if err != nil {
		return nil, fmt.Errorf("reading the latest checkpoint: %w", err)
	}
	return rec, nil
}

// Begin opens the transaction of epoch e.
func (t *Txn) Begin(context.Context, twophase.Epoch) error {
	if err := t.cl.BeginTransaction(); err != nil {
		return err
	}
	t.open, t.begun = true, t.now()
	return nil
}

// Produce adds rec to the open transaction, asynchronously; a failure fails
// the Commit.
func (t *Txn) Produce(ctx context.Context, rec *kgo.Record) {
	t.cl.Produce(ctx, rec, t.promise)
}

// Prepare flushes epoch e, whose last record is its checkpoint record:
// everything of the epoch is on the brokers, invisible to read_committed
// readers until Commit. It survives no crash of ours (the next instance's
// fence aborts it), which a decision log may do: not committed means not
// decided.
func (t *Txn) Prepare(ctx context.Context, _ twophase.Epoch) error { return t.Flush(ctx) }

// Flush waits until every record of the open transaction reached the
// brokers (still invisible to read_committed readers) and reports the
// first that failed. After a failure the transaction can only abort.
func (t *Txn) Flush(ctx context.Context) error {
	if err := t.cl.Flush(ctx); err != nil {
		return t.settle(ctx, fmt.Errorf("flushing transaction: %w", err))
	}
	if err := t.failed.peek(); err != nil {
		return t.settle(ctx, fmt.Errorf("producing in transaction: %w", err))
	}
	return nil
}

// Commit flushes every record of the transaction of epoch e and commits
// it: the decision. If any record failed, the transaction is aborted and
// the failure returned. Errors are classified (Classify): ErrFenced,
// ErrTransactionTimedOut, ErrUnauthorized, or a failure to retry.
func (t *Txn) Commit(ctx context.Context, _ twophase.Epoch) error {
	if err := t.cl.Flush(ctx); err != nil {
		return t.abortAfter(ctx, fmt.Errorf("flushing transaction: %w", err))
	}
	if err := t.failed.take(); err != nil && !mutant.On("txn-commit-despite-failed-produce") {
		// (The mutant's bug: the records that did land commit without
		// the one that failed.)
		return t.abortAfter(ctx, fmt.Errorf("producing in transaction: %w", err))
	}
	err := t.cl.EndTransaction(ctx, kgo.TryCommit)
	t.open = false
	if err != nil {
		return t.settle(ctx, fmt.Errorf("committing transaction: %w", err))
	}
	t.ended(ctx)
	return nil
}

func (t *Txn) abortAfter(ctx context.Context, cause error) error {
	if epochError(cause) {
		return t.settle(ctx, cause) // settling ends the transaction
	}
	if err := t.abort(ctx); err != nil {
		cause = errors.Join(cause, err)
	}
	return t.settle(ctx, cause)
}

// settle classifies a failure of the transaction, so that callers branch
// on Classify. An epoch error is put to the transaction coordinator (probe),
// which ends the transaction: after a takeover it is marked ErrFenced,
// after the coordinator aborted it for its age ErrTransactionTimedOut. An
// authorization failure is marked ErrUnauthorized with the ACL it lacks.
func (t *Txn) settle(ctx context.Context, err error) error {
	if err == nil || errors.Is(err, ErrFenced) || errors.Is(err, ErrTransactionTimedOut) || !epochError(err) {
		return WithMissingACL(err)
	}
	t.open = false
	_ = t.failed.take()
	verdict, perr := probe(ctx, t.cl, t.id, t.producerID, t.epoch)
	age := t.now().Sub(t.begun)
	if verdict = believe(verdict, age, t.timeout); verdict == TakenOver {
		err = fmt.Errorf("%w (the transaction was %v old; kafka.transaction_timeout is %v)", err, age.Round(time.Millisecond), t.timeout)
	}
	switch verdict {
	case TakenOver:
		return fmt.Errorf("%w (transactional id %s): %w", ErrFenced, t.id, err)
	case TimedOut:
		return fmt.Errorf("%w (kafka.transaction_timeout %v, transactional id %s): %w", ErrTransactionTimedOut, t.timeout, t.id, err)
	}
	return fmt.Errorf("%w (and asking the transaction coordinator whether the transaction timed out or another instance took over failed: %v)", err, perr)
}

// Abort drops the open transaction's records and aborts it. Aborting with
// nothing open does nothing.
func (t *Txn) Abort(ctx context.Context, _ twophase.Epoch) error { return t.abort(ctx) }

func (t *Txn) abort(ctx context.Context) error {
	if !t.open {
		return nil
	}
	t.open = false
	if err := t.cl.AbortBufferedRecords(ctx); err != nil {
		return fmt.Errorf("dropping buffered records: %w", err)
	}
	_ = t.failed.take()
	if err := t.cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
		return fmt.Errorf("aborting transaction: %w", err)
	}
	t.ended(ctx)
	return nil
}

// Client is the underlying client, for requests that must share its
// connections.
func (t *Txn) Client() TxnClient { return t.cl }

// Close aborts nothing by itself: an open transaction is left for the next
// instance's Fence (or the transaction timeout) to abort. Call Abort first
// for a clean stop.
func (t *Txn) Close() { t.cl.Close() }

// Plain is an idempotent, non-transactional producer, for outputs under
// at_least_once (flushed before each checkpoint commits) and at_most_once.
type Plain struct {
	cl      PlainClient
	failed  firstError
	promise func(*kgo.Record, error) // as Txn's
}

// NewPlain creates an idempotent producer.
func NewPlain(conn []kgo.Opt, extra ...kgo.Opt) (*Plain, error) {
	opts := append(append([]kgo.Opt{}, conn...), kgo.ProducerLinger(5*time.Millisecond))
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		return nil, err
	}
	return NewPlainOn(cl), nil
}

// NewPlainOn is NewPlain on a client made by the caller; the Plain owns
// it.
func NewPlainOn(cl PlainClient) *Plain {
	p := &Plain{cl: cl}
	p.promise = p.failed.promise
	return p
}

// Produce sends rec asynchronously; a failure is returned by the next Flush.
func (p *Plain) Produce(ctx context.Context, rec *kgo.Record) {
	p.cl.Produce(ctx, rec, p.promise)
}

// Flush waits until every record produced so far is acknowledged, and
// reports the first failure since the last Flush.
func (p *Plain) Flush(ctx context.Context) error {
	if err := p.cl.Flush(ctx); err != nil {
		return err
	}
	return p.failed.take()
}

// Close flushes nothing; call Flush first.
func (p *Plain) Close() { p.cl.Close() }

var _ twophase.Participant = (*Plain)(nil)

// Name names the at_least_once outputs as a participant.
func (p *Plain) Name() string { return "outputs" }

// Begin has nothing to open: the producer is not transactional.
func (p *Plain) Begin(context.Context, twophase.Epoch) error { return nil }

// Prepare flushes, so no checkpoint is decided while an output it covers
// could still be lost.
func (p *Plain) Prepare(ctx context.Context, _ twophase.Epoch) error { return p.Flush(ctx) }

// Commit has nothing to do: the outputs are visible once written. Abort
// cannot take them back, which is exactly why at_least_once may repeat
// outputs after a crash.
func (p *Plain) Commit(context.Context, twophase.Epoch) error { return nil }

// Abort: see Commit.
func (p *Plain) Abort(context.Context, twophase.Epoch) error { return nil }

// Recover has no predecessor to fence and holds nothing in doubt.
func (p *Plain) Recover(context.Context) ([]twophase.Epoch, error) { return nil, nil }
