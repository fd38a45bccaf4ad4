package memkafka

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Client is a model of a franz-go client (*kgo.Client) of the cluster:
// the calls the job's Kafka adapters make of theirs, with franz-go's
// names, types and answers, so the real adapters run on the model
// (sink.TxnClient and sink.PlainClient, source.ReaderClient and
// source.GroupClient; kread.Cluster is the Cluster's). What a call does
// is the model's (the package doc); what the client adds is franz-go's
// own behaviour:
//
//   - A transactional client initializes its producer id (InitProducerId:
//     the fence of point 3) at the first ProducerID or Produce, not
//     before: BeginTransaction asks no broker anything.
//   - Produce is synchronous: the record is in the log (or failed) when
//     its promise runs, inside Produce. Flush has nothing to wait for.
//   - A consumer reads with read_committed; control records (the markers)
//     come with the data only with KeepControlRecords. A poll with nothing
//     to read returns at once (the simulations' way) unless
//     WaitForRecords, when it waits for a record or its context, as
//     franz-go's does.
//   - A group consumer (Group set) joins at its first poll, takes its
//     share of the topics' partitions (dealt round-robin over the members
//     sorted by member id), resumes each from the group's committed
//     offset or ResetOffset, and sees a rebalance at its next poll. A
//     dynamic member leaves the group on Close; a static one stays, as
//     franz-go's do.
//
// Requests (Request) are answered for the ones the adapters send
// themselves: AddOffsetsToTxn, TxnOffsetCommit, EndTxn and
// DescribeTransactions (requests.go). A Client is safe for concurrent
// use.
type Client struct {
	c   *Cluster
	cfg ClientConfig

	mu     sync.Mutex
	closed bool
	// prod is the transactional producer, once initialized; inTxn is
	// BeginTransaction..EndTransaction as the client sees it.
	prod  *Producer
	inTxn bool
	// offsetsTxn is the transaction AddOffsetsToTxn added offsets to.
	offsetsTxn *txn
	// partitioners by topic (cfg.Partitioner's), and the next partition
	// of keyless records by topic (the default partitioner).
	partitioners map[string]kgo.TopicPartitioner
	roundRobin   map[string]int
	// The consumer: each partition's fetch position, the partitions in
	// order, and where the next poll starts in that order (round-robin,
	// so no partition starves).
	pos   map[TP]int64
	order []TP
	start int
	// The group member (cfg.Group): who it is, once joined.
	member *GroupMember
}

// ClientConfig is what a Client is: the franz-go options it stands for.
type ClientConfig struct {
	// TransactionalID makes a transactional producer (kgo.TransactionalID);
	// TransactionTimeout is its timeout (kgo.TransactionTimeout; default
	// 40 s, franz-go's).
	TransactionalID    string
	TransactionTimeout time.Duration
	// Partitioner chooses a produced record's partition
	// (kgo.RecordPartitioner). By default a keyed record goes where the
	// Java client's and franz-go's murmur2 hash of its key says, a keyless
	// one round-robin. A partitioner that chooses at random makes the
	// model's runs differ.
	Partitioner kgo.Partitioner
	// KeepControlRecords hands out the markers that end transactions
	// (kgo.KeepControlRecords).
	KeepControlRecords bool
	// WaitForRecords makes a poll with nothing to read wait for a record
	// or its context's end, as franz-go's does.
	WaitForRecords bool
	// ResetOffset is where a partition without a valid position starts
	// (kgo.ConsumeResetOffset): NewOffset().AtStart() (the default) or
	// AtEnd().
	ResetOffset kgo.Offset
	// Group makes a consumer group member of Topics (kgo.ConsumerGroup,
	// kgo.ConsumeTopics), static with InstanceID (kgo.InstanceID).
	Group      string
	Topics     []string
	InstanceID string
}

// NewClient returns a client of c configured as cfg says.
func NewClient(c *Cluster, cfg ClientConfig) *Client {
	if cfg.TransactionTimeout == 0 {
		cfg.TransactionTimeout = 40 * time.Second
	}
	if cfg.ResetOffset == (kgo.Offset{}) {
		cfg.ResetOffset = kgo.NewOffset().AtStart()
	}
	return &Client{c: c, cfg: cfg, partitioners: map[string]kgo.TopicPartitioner{}, roundRobin: map[string]int{}, pos: map[TP]int64{}}
}

// errNotTransactional and errNotInTransaction are franz-go's answers, by
// message (its errors are not exported).
var (
	errNotTransactional = errors.New("invalid attempt to begin a transaction with a non-transactional client")
	errNotInTransaction = errors.New("cannot produce record transactionally if not in a transaction")
	errInTransaction    = errors.New("invalid attempt to begin a transaction while already in a transaction")
)

// producer initializes the transactional producer if it is not yet:
// InitProducerId, which fences the id's older producers; c.mu is held.
func (c *Client) producer() (*Producer, error) {
	if c.prod != nil {
		return c.prod, nil
	}
	p, err := c.c.InitProducer(c.cfg.TransactionalID, c.cfg.TransactionTimeout)
	if err != nil {
		return nil, err
	}
	c.prod = p
	if c.inTxn {
		if err := p.Begin(); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// ProducerID returns the producer id and epoch, initializing them first
// if need be (kgo.Client.ProducerID).
func (c *Client) ProducerID(context.Context) (int64, int16, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return -1, -1, kgo.ErrClientClosed
	}
	if c.cfg.TransactionalID == "" {
		return -1, -1, errors.New("memkafka: the model's idempotent producers have no producer id")
	}
	p, err := c.producer()
	if err != nil {
		return -1, -1, err
	}
	c.c.mu.Lock()
	defer c.c.mu.Unlock()
	return p.pid, p.epoch, nil
}

// BeginTransaction starts a transaction on the client's side only.
func (c *Client) BeginTransaction() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return kgo.ErrClientClosed
	case c.cfg.TransactionalID == "":
		return errNotTransactional
	case c.inTxn:
		return errInTransaction
	}
	if c.prod != nil {
		if err := c.prod.Begin(); err != nil {
			return err
		}
	}
	c.inTxn = true
	return nil
}

// Produce writes rec, in the open transaction of a transactional client,
// and calls promise with the outcome before it returns. rec gets its
// partition, offset and (if it had none) the model's time as timestamp.
func (c *Client) Produce(_ context.Context, rec *kgo.Record, promise func(*kgo.Record, error)) {
	err := c.produce(rec)
	if promise != nil {
		promise(rec, err)
	}
}

func (c *Client) produce(rec *kgo.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return kgo.ErrClientClosed
	}
	n, err := c.c.Partitions(rec.Topic)
	if err != nil {
		return err
	}
	rec.Partition = c.partition(rec, n)
	if rec.Timestamp.IsZero() {
		rec.Timestamp = c.c.Now()
	}
	m := Record{Topic: rec.Topic, Partition: rec.Partition, Key: rec.Key, Value: rec.Value, Timestamp: rec.Timestamp}
	for _, h := range rec.Headers {
		m.Headers = append(m.Headers, Header{Key: h.Key, Value: h.Value})
	}
	var written Record
	if c.cfg.TransactionalID == "" {
		written, err = c.c.Append(m)
	} else {
		if !c.inTxn {
			return errNotInTransaction
		}
		p, perr := c.producer()
		if perr != nil {
			return perr
		}
		written, err = p.Produce(m)
	}
	if err != nil {
		return err
	}
	rec.Offset = written.Offset
	return nil
}

// partition chooses rec's partition of n; c.mu is held.
func (c *Client) partition(rec *kgo.Record, n int) int32 {
	if c.cfg.Partitioner != nil {
		tp := c.partitioners[rec.Topic]
		if tp == nil {
			tp = c.cfg.Partitioner.ForTopic(rec.Topic)
			c.partitioners[rec.Topic] = tp
		}
		if bp, ok := tp.(kgo.TopicBackupPartitioner); ok {
			// franz-go's own partitioners (its default among them) choose
			// by the load of each partition's buffer, which the model has
			// none of: a keyed record goes where its key hashes to
			// whatever the load; a keyless one, which franz-go places at
			// random, goes round-robin here, so runs replay.
			if rec.Key == nil {
				return c.nextRoundRobin(rec.Topic, n)
			}
			return int32(bp.PartitionByBackup(rec, n, &idleBackup{n: n}))
		}
		return int32(tp.Partition(rec, n))
	}
	if rec.Key != nil {
		return int32(murmur2Partitioner.ForTopic(rec.Topic).Partition(rec, n))
	}
	return c.nextRoundRobin(rec.Topic, n)
}

// nextRoundRobin is the next partition of topic's keyless records; c.mu
// is held.
func (c *Client) nextRoundRobin(topic string, n int) int32 {
	p := c.roundRobin[topic] % n
	c.roundRobin[topic] = p + 1
	return int32(p)
}

// idleBackup is every partition with nothing buffered, as a
// TopicBackupPartitioner is told of them.
type idleBackup struct{ n, next int }

func (b *idleBackup) Next() (int, int64) { b.next++; return b.next - 1, 0 }
func (b *idleBackup) Rem() int           { return b.n - b.next }

// murmur2Partitioner places keyed records as the Java client does; its
// keyless choice, which is random, is never asked for.
var murmur2Partitioner = kgo.StickyKeyPartitioner(nil)

// Flush returns at once: every record produced is in the log already.
func (c *Client) Flush(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return kgo.ErrClientClosed
	}
	return nil
}

// AbortBufferedRecords has nothing buffered to drop.
func (c *Client) AbortBufferedRecords(context.Context) error { return nil }

// EndTransaction commits or aborts the open transaction (Producer.End).
// Ending none, or one that wrote nothing, asks the coordinator nothing; a
// commit not attempted leaves the transaction open, to abort.
func (c *Client) EndTransaction(_ context.Context, try kgo.TransactionEndTry) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return kgo.ErrClientClosed
	}
	if !c.inTxn {
		return nil
	}
	c.offsetsTxn = nil
	if c.prod == nil {
		c.inTxn = false
		return nil
	}
	err := c.prod.End(bool(try))
	c.c.mu.Lock()
	c.inTxn = c.prod.begun
	c.c.mu.Unlock()
	return err
}

// Close closes the client. An open transaction stays open (for the next
// InitProducer of its id, or its timeout); a dynamic group member leaves
// its group.
func (c *Client) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	if c.member != nil && c.member.InstanceID == "" {
		_ = c.c.LeaveGroup(c.cfg.Group, *c.member)
	}
	c.c.mu.Lock()
	c.c.notify() // wakes this client's own waiting poll
	c.c.mu.Unlock()
}

// partitionsOf lists every partition of topics, sorted; c.mu is held.
func (c *Cluster) partitionsOf(topics []string) []TP {
	var tps []TP
	for _, name := range slices.Sorted(slices.Values(topics)) {
		if t, ok := c.topics[name]; ok {
			for _, p := range t.partitions {
				tps = append(tps, p.tp)
			}
		}
	}
	return tps
}

// sortedTPs returns the keys of m in topic and partition order.
func sortedTPs[V any](m map[TP]V) []TP {
	return slices.SortedFunc(maps.Keys(m), func(a, b TP) int {
		if a.Topic != b.Topic {
			if a.Topic < b.Topic {
				return -1
			}
			return 1
		}
		return int(a.Partition - b.Partition)
	})
}

// codeOf is the Kafka error code of err: 0 for none, and
// kerr.UnknownServerError's for an error that is no Kafka error.
func codeOf(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.UnknownServerError.Code
}

// String names the client for errors.
func (c *Client) String() string {
	switch {
	case c.cfg.TransactionalID != "":
		return fmt.Sprintf("memkafka client %s", c.cfg.TransactionalID)
	case c.cfg.Group != "":
		return fmt.Sprintf("memkafka client of group %s", c.cfg.Group)
	}
	return "memkafka client"
}
