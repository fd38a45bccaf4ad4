package memkafka

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TP names one partition of a topic.
type TP struct {
	Topic     string
	Partition int32
}

func (tp TP) String() string { return fmt.Sprintf("%s/%d", tp.Topic, tp.Partition) }

// Header is one record header.
type Header struct {
	Key   string
	Value []byte
}

// Record is one record of a partition as a reader sees it.
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte
	Value     []byte
	Headers   []Header
	Timestamp time.Time
}

// TP is the record's partition.
func (r *Record) TP() TP { return TP{r.Topic, r.Partition} }

// Cluster is the model of a Kafka cluster. The zero value is not usable:
// call New.
type Cluster struct {
	mu sync.Mutex
	// now is the model's time: it moves only through Advance.
	now time.Time
	// maxTxnTimeout is the brokers' transaction.max.timeout.ms.
	maxTxnTimeout time.Duration
	topics        map[string]*topic
	ids           map[string]*txnID
	groups        map[string]map[TP]int64
	// members is the group coordinator's membership of each group
	// (group.go).
	members map[string]*group
	nextPID int64
}

type topic struct {
	partitions []*partition
}

type partition struct {
	entries []entry
	// settled is a prefix of entries known to hold no open transaction:
	// an entry's transaction only ever leaves the open state, and new
	// entries are appended past it, so the prefix never shrinks and
	// stable need not rescan it.
	settled int64
}

// entry is one offset of a partition: a record, or the control marker a
// transaction's end wrote (marker true).
type entry struct {
	rec    Record
	txn    *txn // nil: written outside any transaction
	marker bool
}

// txnID is the coordinator's view of one transactional id.
type txnID struct {
	pid int64
	// epoch is the id's current epoch; initEpoch the one the newest
	// InitProducer handed out. A producer whose epoch is below initEpoch
	// was fenced by a newer one; one at initEpoch but below epoch had its
	// transaction aborted for its timeout.
	epoch, initEpoch int16
	timeout          time.Duration
	open             *txn
}

// txn is one transaction: what it wrote, and how it ended.
type txn struct {
	status  txnStatus
	started time.Time
	written []TP // partitions it wrote, in order of first write
	offsets map[string]map[TP]int64
}

type txnStatus uint8

const (
	txnOpen txnStatus = 1 + iota
	txnCommitted
	txnAborted
)

// New returns an empty cluster whose clock starts at start, with the
// brokers' default transaction.max.timeout.ms (15 minutes).
func New(start time.Time) *Cluster {
	return &Cluster{
		now:           start,
		maxTxnTimeout: 15 * time.Minute,
		topics:        map[string]*topic{},
		ids:           map[string]*txnID{},
		groups:        map[string]map[TP]int64{},
	}
}

// Now is the model's time.
func (c *Cluster) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the model's time on by d, and the transaction coordinator
// aborts every transaction open for longer than its producer's timeout,
// bumping that producer's epoch (point 4 of the package doc).
func (c *Cluster) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	for _, name := range slices.Sorted(maps.Keys(c.ids)) {
		id := c.ids[name]
		if id.open != nil && c.now.Sub(id.open.started) > id.timeout {
			c.end(id.open, false)
			id.open = nil
			id.epoch++
		}
	}
}

// CreateTopic creates a topic with the given number of partitions.
func (c *Cluster) CreateTopic(name string, partitions int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.topics[name]; ok {
		return fmt.Errorf("topic %s: %w", name, kerr.TopicAlreadyExists)
	}
	if name == "" || partitions < 1 {
		return fmt.Errorf("topic %q with %d partitions: %w", name, partitions, kerr.InvalidRequest)
	}
	t := &topic{}
	for range partitions {
		t.partitions = append(t.partitions, &partition{})
	}
	c.topics[name] = t
	return nil
}

// AddPartitions grows a topic to total partitions.
func (c *Cluster) AddPartitions(name string, total int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.topics[name]
	if !ok {
		return fmt.Errorf("topic %s: %w", name, kerr.UnknownTopicOrPartition)
	}
	if total <= len(t.partitions) {
		return fmt.Errorf("topic %s has %d partitions, asked for %d: %w", name, len(t.partitions), total, kerr.InvalidPartitions)
	}
	for len(t.partitions) < total {
		t.partitions = append(t.partitions, &partition{})
	}
	return nil
}

// DeleteTopic removes a topic and everything in it.
func (c *Cluster) DeleteTopic(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.topics[name]; !ok {
		return fmt.Errorf("topic %s: %w", name, kerr.UnknownTopicOrPartition)
	}
	delete(c.topics, name)
	return nil
}

// Partitions is how many partitions a topic has.
func (c *Cluster) Partitions(name string) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.topics[name]
	if !ok {
		return 0, fmt.Errorf("topic %s: %w", name, kerr.UnknownTopicOrPartition)
	}
	return len(t.partitions), nil
}

// partition returns tp's log; c.mu is held.
func (c *Cluster) partition(tp TP) (*partition, error) {
	t, ok := c.topics[tp.Topic]
	if !ok || tp.Partition < 0 || int(tp.Partition) >= len(t.partitions) {
		return nil, fmt.Errorf("partition %s: %w", tp, kerr.UnknownTopicOrPartition)
	}
	return t.partitions[tp.Partition], nil
}

// Append writes r outside any transaction (an idempotent producer's
// write), visible at once unless an open transaction holds the partition
// back. It returns r with its offset.
func (c *Cluster) Append(r Record) (Record, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.append(r, nil)
}

// append writes r to its partition; c.mu is held.
func (c *Cluster) append(r Record, t *txn) (Record, error) {
	p, err := c.partition(r.TP())
	if err != nil {
		return Record{}, err
	}
	r.Offset = int64(len(p.entries))
	r.Key, r.Value = slices.Clone(r.Key), slices.Clone(r.Value)
	r.Headers = slices.Clone(r.Headers)
	p.entries = append(p.entries, entry{rec: r, txn: t})
	return r, nil
}

// end commits or aborts t: a marker in every partition it wrote, and its
// group offsets applied on commit; c.mu is held.
func (c *Cluster) end(t *txn, commit bool) {
	t.status = txnAborted
	if commit {
		t.status = txnCommitted
		for _, group := range slices.Sorted(maps.Keys(t.offsets)) {
			g := c.groups[group]
			if g == nil {
				g = map[TP]int64{}
				c.groups[group] = g
			}
			for tp, o := range t.offsets[group] {
				g[tp] = o
			}
		}
	}
	for _, tp := range t.written {
		p, err := c.partition(tp)
		if err != nil {
			continue // the topic was deleted meanwhile
		}
		p.entries = append(p.entries, entry{rec: Record{Topic: tp.Topic, Partition: tp.Partition, Offset: int64(len(p.entries)), Timestamp: c.now}, txn: t, marker: true})
	}
}

// stable is p's last stable offset: the first entry of a transaction
// still open, or the high watermark; c.mu is held.
func (p *partition) stable() int64 {
	for ; p.settled < int64(len(p.entries)); p.settled++ {
		if e := p.entries[p.settled]; e.txn != nil && e.txn.status == txnOpen {
			break
		}
	}
	return p.settled
}

// Offsets are a partition's log end (high watermark) and last stable
// offset.
type Offsets struct {
	HighWatermark, LastStable int64
}

// EndOffsets returns tp's high watermark and last stable offset.
func (c *Cluster) EndOffsets(tp TP) (Offsets, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, err := c.partition(tp)
	if err != nil {
		return Offsets{}, err
	}
	return Offsets{HighWatermark: int64(len(p.entries)), LastStable: p.stable()}, nil
}

// ReadCommitted returns up to max records of tp from offset from on, as a
// read_committed reader sees them: nothing at or past the last stable
// offset, no aborted record, no marker. next is where the following read
// starts: past every entry this read looked at, so markers and aborted
// records are never looked at twice.
func (c *Cluster) ReadCommitted(tp TP, from int64, max int) (recs []Record, next int64, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, err := c.partition(tp)
	if err != nil {
		return nil, from, err
	}
	if from < 0 || from > int64(len(p.entries)) {
		return nil, from, fmt.Errorf("offset %d of %s (log end %d): %w", from, tp, len(p.entries), kerr.OffsetOutOfRange)
	}
	stable := p.stable()
	next = from
	for next < stable && len(recs) < max {
		e := p.entries[next]
		next++
		if e.marker || (e.txn != nil && e.txn.status == txnAborted) {
			continue
		}
		r := e.rec
		r.Key, r.Value, r.Headers = slices.Clone(r.Key), slices.Clone(r.Value), slices.Clone(r.Headers)
		recs = append(recs, r)
	}
	return recs, next, nil
}

// CommitOffsets commits offsets to group outside any transaction (a
// consumer's commit).
func (c *Cluster) CommitOffsets(group string, offsets map[TP]int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for tp := range offsets {
		if _, err := c.partition(tp); err != nil {
			return err
		}
	}
	g := c.groups[group]
	if g == nil {
		g = map[TP]int64{}
		c.groups[group] = g
	}
	for tp, o := range offsets {
		g[tp] = o
	}
	return nil
}

// GroupOffsets returns a copy of the offsets committed to group.
func (c *Cluster) GroupOffsets(group string) map[TP]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[TP]int64, len(c.groups[group]))
	for tp, o := range c.groups[group] {
		out[tp] = o
	}
	return out
}

// OpenTransactions lists the transactional ids with a transaction open,
// sorted: what `kafka-transactions list` shows as Ongoing.
func (c *Cluster) OpenTransactions() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var open []string
	for name, id := range c.ids {
		if id.open != nil {
			open = append(open, name)
		}
	}
	slices.Sort(open)
	return open
}
