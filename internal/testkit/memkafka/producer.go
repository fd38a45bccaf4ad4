package memkafka

import (
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Producer is one transactional producer: a transactional id at the epoch
// InitProducer gave it. A crashed instance's Producer is simply dropped;
// what it left open stays open until its id's next InitProducer or its
// timeout.
type Producer struct {
	c     *Cluster
	name  string
	pid   int64
	epoch int16
	// begun: Begin was called and the transaction not ended yet. The
	// coordinator learns of a transaction at its first write, as Kafka's
	// learns at the first AddPartitionsToTxn.
	begun bool
	// failed is the epoch error a produce of this transaction met: like
	// franz-go, the producer then refuses to try a commit
	// (kerr.OperationNotAttempted) and only aborts.
	failed error
}

// ErrNoTransaction: Produce or TxnCommitOffsets outside Begin..End, or
// Begin twice: a bug of the caller, which a real client refuses too.
var ErrNoTransaction = errors.New("memkafka: not in a transaction")

// InitProducer initializes transactional id name with the given
// transaction timeout: it aborts the transaction the id left open, and
// fences every older Producer of the id (point 3 of the package doc).
func (c *Cluster) InitProducer(name string, timeout time.Duration) (*Producer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if timeout <= 0 || timeout > c.maxTxnTimeout {
		return nil, fmt.Errorf("transaction timeout %v (the brokers allow up to %v): %w", timeout, c.maxTxnTimeout, kerr.InvalidTransactionTimeout)
	}
	id := c.ids[name]
	if id == nil {
		c.nextPID++
		id = &txnID{pid: c.nextPID, epoch: -1}
		c.ids[name] = id
	}
	c.flushMarkers(name)
	if id.open != nil {
		c.end(id.open, false)
		id.open = nil
	}
	id.last = nil
	id.epoch++
	id.initEpoch = id.epoch
	id.timeout = timeout
	return &Producer{c: c, name: name, pid: id.pid, epoch: id.epoch}, nil
}

// checkCoordinator is the transaction coordinator's check of p's epoch
// (EndTxn, TxnOffsetCommit); c.mu is held.
func (p *Producer) checkCoordinator() (*txnID, error) {
	id := p.c.ids[p.name]
	switch {
	case p.epoch < id.initEpoch:
		return nil, fmt.Errorf("transactional id %s, epoch %d < %d: %w", p.name, p.epoch, id.initEpoch, kerr.ProducerFenced)
	case p.epoch < id.epoch:
		// What Kafka 4 answers a producer whose transaction the
		// coordinator aborted for its timeout (and bumped its epoch).
		return nil, fmt.Errorf("transactional id %s, epoch %d < %d (the transaction timed out): %w", p.name, p.epoch, id.epoch, kerr.InvalidTxnState)
	}
	return id, nil
}

// checkOffsets is the coordinator's check of AddOffsetsToTxn: Kafka 4
// answers PRODUCER_FENCED to a stale epoch whatever bumped it, a timeout
// included; c.mu is held.
func (p *Producer) checkOffsets() (*txnID, error) {
	id := p.c.ids[p.name]
	if p.epoch < id.epoch {
		return nil, fmt.Errorf("transactional id %s, epoch %d < %d: %w", p.name, p.epoch, id.epoch, kerr.ProducerFenced)
	}
	return id, nil
}

// checkLeader is a partition leader's check of p's epoch (Produce): a
// leader knows only that the epoch is old, not why, so a fenced producer
// and one whose transaction timed out get the same answer; c.mu is held.
func (p *Producer) checkLeader() (*txnID, error) {
	id := p.c.ids[p.name]
	if p.epoch < id.epoch {
		return nil, fmt.Errorf("transactional id %s, epoch %d < %d: %w", p.name, p.epoch, id.epoch, kerr.InvalidProducerEpoch)
	}
	return id, nil
}

// Begin starts a transaction. Like a client's, it asks no broker
// anything: a fenced producer learns so at its first write or at End.
func (p *Producer) Begin() error {
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	if p.begun {
		return fmt.Errorf("begin: %w (one is already open)", ErrNoTransaction)
	}
	p.begun, p.failed = true, nil
	return nil
}

// open returns the id's open transaction, starting it at the first write;
// c.mu is held.
func (p *Producer) open(check func() (*txnID, error)) (*txn, error) {
	if !p.begun {
		return nil, ErrNoTransaction
	}
	id, err := check()
	if err != nil {
		return nil, err
	}
	if id.open == nil {
		// The id's previous transaction's markers first, as the
		// coordinator finishes them before it takes the id's next one.
		p.c.flushMarkers(p.name)
		id.open = &txn{id: p.name, status: txnOpen, started: p.c.now}
	}
	return id.open, nil
}

// Produce writes r inside the transaction and returns it with its offset.
func (p *Producer) Produce(r Record) (Record, error) {
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	if _, err := p.c.partition(r.TP()); err != nil {
		return Record{}, err
	}
	t, err := p.open(p.checkLeader)
	if err != nil {
		if p.failed == nil {
			p.failed = err
		}
		return Record{}, err
	}
	if !containsTP(t.written, r.TP()) {
		t.written = append(t.written, r.TP())
	}
	return p.c.append(r, t)
}

// TxnCommitOffsets commits offsets to group as part of the transaction
// (KIP-98's TxnOffsetCommit): they take effect when it commits.
func (p *Producer) TxnCommitOffsets(group string, offsets map[TP]int64) error {
	return p.txnCommitOffsets(group, nil, offsets)
}

// txnCommitOffsets is TxnCommitOffsets, on behalf of member m when not
// nil: AddOffsetsToTxn (the transaction coordinator checks the producer),
// then TxnOffsetCommit (the group coordinator checks the member).
func (p *Producer) txnCommitOffsets(group string, m *GroupMember, offsets map[TP]int64) error {
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	for tp := range offsets {
		if _, err := p.c.partition(tp); err != nil {
			return err
		}
	}
	t, err := p.open(p.checkOffsets)
	if err != nil {
		return err
	}
	if m != nil && !m.anonymous() {
		if err := p.c.group(group).check(*m, true); err != nil {
			return err
		}
	}
	if t.offsets == nil {
		t.offsets = map[string]map[TP]int64{}
	}
	if t.offsets[group] == nil {
		t.offsets[group] = map[TP]int64{}
	}
	for tp, o := range offsets {
		t.offsets[group][tp] = o
	}
	return nil
}

// End commits (commit true) or aborts the transaction. As with franz-go:
// ending when none was begun, or one that wrote nothing, asks the
// coordinator nothing and succeeds; a commit after a failed write is not
// attempted (kerr.OperationNotAttempted) and leaves the transaction to
// abort; any other End ends it on the producer's side whatever the
// coordinator answers.
func (p *Producer) End(commit bool) error {
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	if !p.begun {
		return nil
	}
	if commit && p.failed != nil {
		return fmt.Errorf("commit after a failed write (%v): %w", p.failed, kerr.OperationNotAttempted)
	}
	p.begun = false
	id := p.c.ids[p.name]
	if p.failed != nil {
		// An abort after an epoch error: the client asks for its id
		// again with the epoch it has (KIP-360). That works when only
		// the coordinator bumped the epoch (a timeout), and is refused
		// when a newer producer owns the id.
		if p.epoch < id.initEpoch {
			return fmt.Errorf("transactional id %s, epoch %d < %d: %w", p.name, p.epoch, id.initEpoch, kerr.ProducerFenced)
		}
		if id.open != nil {
			p.c.end(id.open, false)
			id.open = nil
		}
		id.last = nil
		id.epoch++
		id.initEpoch, p.epoch, p.failed = id.epoch, id.epoch, nil
		return nil
	}
	wrote := p.epoch == id.epoch && id.open != nil
	if !wrote && p.epoch == id.epoch {
		return nil
	}
	id, err := p.checkCoordinator()
	if err != nil {
		return err
	}
	p.c.end(id.open, commit)
	id.open = nil
	return nil
}

func containsTP(tps []TP, tp TP) bool {
	for _, t := range tps {
		if t == tp {
			return true
		}
	}
	return false
}
