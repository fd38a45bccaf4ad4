package sink

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrFenced means another instance of the job took over its transactional
// id: this instance must stop and never make a later checkpoint visible.
var ErrFenced = errors.New("fenced: another instance of this job took over its transactional id (or its transaction outlived kafka.transaction_timeout)")

// IsFenced reports whether err says this producer was fenced by a newer one.
//
// INVALID_PRODUCER_EPOCH counts too, though the brokers also answer it for
// a transaction that outlived transaction.timeout.ms: a fenced producer's
// next flush often sees only that code, and an instance that took it for a
// timeout would restart, fence its successor, and the two would take turns
// forever. Stopping is the safe reading; the stop message names both causes.
//
// INVALID_TXN_STATE counts for the same reason: the coordinator answers it
// to a commit (or a produce) of a transaction it is already aborting, and
// on Kafka 4 that is what an instance fenced between its Prepare and its
// commit sees (TestSecondInstanceFencesTheFirst caught the old instance
// restarting on it and fencing its successor). Our own sequence never
// provokes it: without an open transaction the client ends none and asks
// the broker nothing.
func IsFenced(err error) bool {
	return errors.Is(err, ErrFenced) ||
		errors.Is(err, kerr.ProducerFenced) ||
		errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.InvalidTxnState) ||
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed)
}

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

// Txn is a transactional producer: everything produced between Begin and
// Commit becomes visible to read_committed readers atomically, or not at all.
// One goroutine uses it.
type Txn struct {
	cl     *kgo.Client
	id     string
	failed firstError
	open   bool
	// promise records a failed produce; made once, because a closure
	// made per Produce is an allocation per record.
	promise func(*kgo.Record, error)
}

// NewTxn creates a transactional producer with a transactional id that must
// be stable across restarts of the job (so a restart fences the previous
// instance). conn are the connection options (kclient.Options).
func NewTxn(conn []kgo.Opt, transactionalID string, timeout time.Duration, extra ...kgo.Opt) (*Txn, error) {
	opts := append(append([]kgo.Opt{}, conn...),
		kgo.TransactionalID(transactionalID),
		kgo.TransactionTimeout(timeout),
		// Outputs of an epoch go out as they come and are flushed at the
		// barrier; a short linger batches them without adding latency that
		// matters next to a checkpoint interval.
		kgo.ProducerLinger(5*time.Millisecond),
	)
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		return nil, err
	}
	t := &Txn{cl: cl, id: transactionalID}
	t.promise = t.failed.promise
	return t, nil
}

// Fence initializes the producer id now. The transaction coordinator then
// aborts whatever a previous instance with the same transactional id left
// open and fences it, at once rather than after the transaction timeout;
// read_committed reads of the job's own topics would otherwise stall on
// that open transaction.
func (t *Txn) Fence(ctx context.Context) error {
	if _, _, err := t.cl.ProducerID(ctx); err != nil {
		return t.fenced(fmt.Errorf("initializing transactional id %s: %w", t.id, err))
	}
	return nil
}

// Begin opens a transaction.
func (t *Txn) Begin() error {
	if err := t.cl.BeginTransaction(); err != nil {
		return err
	}
	t.open = true
	return nil
}

// Produce adds rec to the open transaction, asynchronously; a failure fails
// the Commit.
func (t *Txn) Produce(ctx context.Context, rec *kgo.Record) {
	t.cl.Produce(ctx, rec, t.promise)
}

// Flush waits until every record of the open transaction reached the
// brokers (still invisible to read_committed readers) and reports the
// first that failed. After a failure the transaction can only abort.
func (t *Txn) Flush(ctx context.Context) error {
	if err := t.cl.Flush(ctx); err != nil {
		return t.fenced(fmt.Errorf("flushing transaction: %w", err))
	}
	if err := t.failed.peek(); err != nil {
		return t.fenced(fmt.Errorf("producing in transaction: %w", err))
	}
	return nil
}

// Commit flushes every record of the transaction and commits it. If any
// record failed, the transaction is aborted and the failure returned.
func (t *Txn) Commit(ctx context.Context) error {
	if err := t.cl.Flush(ctx); err != nil {
		return t.abortAfter(ctx, fmt.Errorf("flushing transaction: %w", err))
	}
	if err := t.failed.take(); err != nil {
		return t.abortAfter(ctx, fmt.Errorf("producing in transaction: %w", err))
	}
	err := t.cl.EndTransaction(ctx, kgo.TryCommit)
	t.open = false
	if err != nil {
		return t.fenced(fmt.Errorf("committing transaction: %w", err))
	}
	return nil
}

func (t *Txn) abortAfter(ctx context.Context, cause error) error {
	if err := t.Abort(ctx); err != nil {
		cause = errors.Join(cause, err)
	}
	return t.fenced(cause)
}

// fenced marks err with ErrFenced when the broker said a newer producer took
// over, so callers branch on one sentinel.
func (t *Txn) fenced(err error) error {
	if err != nil && IsFenced(err) && !errors.Is(err, ErrFenced) {
		return fmt.Errorf("%w (transactional id %s): %w", ErrFenced, t.id, err)
	}
	return err
}

// Abort drops the open transaction's records and aborts it. Aborting with
// nothing open does nothing.
func (t *Txn) Abort(ctx context.Context) error {
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
	return nil
}

// Client is the underlying client, for reads and admin requests that must
// share its connections.
func (t *Txn) Client() *kgo.Client { return t.cl }

// Close aborts nothing by itself: an open transaction is left for the next
// instance's Fence (or the transaction timeout) to abort. Call Abort first
// for a clean stop.
func (t *Txn) Close() { t.cl.Close() }

// Plain is an idempotent, non-transactional producer, for outputs under
// at_least_once (flushed before each checkpoint commits) and at_most_once.
type Plain struct {
	cl      *kgo.Client
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
	p := &Plain{cl: cl}
	p.promise = p.failed.promise
	return p, nil
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
