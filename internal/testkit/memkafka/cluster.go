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
	// markerLag: a transaction's end leaves its markers pending, to be
	// written one at a time by DeliverMarker (SetMarkerLag); pending are
	// those not written yet, in the order the transactions ended.
	markerLag bool
	pending   []pendingMarker
	// changed is closed and cleared at every change a poll may wait for
	// (a record or marker written, a group's membership changed): Clients
	// that wait for records wait on it.
	changed chan struct{}
}

// pendingMarker is a decided transaction's marker not yet written: into
// partition tp, or, with group set, the one that makes its offsets for
// group take effect.
type pendingMarker struct {
	t     *txn
	tp    TP
	group string
}

type topic struct {
	partitions []*partition
}

type partition struct {
	tp      TP
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
	// last is the id's newest transaction that ended, for
	// DescribeTransactions.
	last *txn
}

// txn is one transaction: what it wrote, and how it ended.
type txn struct {
	id      string // its transactional id
	status  txnStatus
	started time.Time
	written []TP // partitions it wrote, in order of first write
	offsets map[string]map[TP]int64
	// groups are the groups AddOffsetsToTxn added to it (Client.Request).
	groups map[string]bool
	// unmarked are the partitions whose marker is still pending (marker
	// lag): to their readers the transaction is still open.
	unmarked map[TP]bool
}

// openIn reports whether a read_committed reader of tp still sees t as
// open: undecided, or decided with its marker in tp not written yet.
func (t *txn) openIn(tp TP) bool { return t.status == txnOpen || t.unmarked[tp] }

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
		t.partitions = append(t.partitions, &partition{tp: TP{Topic: name, Partition: int32(len(t.partitions))}})
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
		t.partitions = append(t.partitions, &partition{tp: TP{Topic: name, Partition: int32(len(t.partitions))}})
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
	c.notify()
	return r, nil
}

// notify wakes the polls waiting for a change; c.mu is held.
func (c *Cluster) notify() {
	if c.changed != nil {
		close(c.changed)
		c.changed = nil
	}
}

// waitChange returns a channel closed at the next change; c.mu is held.
func (c *Cluster) waitChange() <-chan struct{} {
	if c.changed == nil {
		c.changed = make(chan struct{})
	}
	return c.changed
}

// end commits or aborts t: a marker in every partition it wrote, and its
// group offsets applied on commit; c.mu is held.
func (c *Cluster) end(t *txn, commit bool) {
	if id := c.ids[t.id]; id != nil {
		id.last = t
	}
	t.status = txnAborted
	var groups []string
	if commit {
		t.status = txnCommitted
		groups = slices.Sorted(maps.Keys(t.offsets))
	}
	if c.markerLag {
		for _, group := range groups {
			c.pending = append(c.pending, pendingMarker{t: t, group: group})
		}
		t.unmarked = map[TP]bool{}
		for _, tp := range t.written {
			t.unmarked[tp] = true
			c.pending = append(c.pending, pendingMarker{t: t, tp: tp})
		}
		return
	}
	for _, group := range groups {
		c.applyOffsets(t, group)
	}
	for _, tp := range t.written {
		c.writeMarker(t, tp)
	}
	c.notify()
}

// applyOffsets makes committed transaction t's offsets for group take
// effect; c.mu is held.
func (c *Cluster) applyOffsets(t *txn, group string) {
	g := c.groups[group]
	if g == nil {
		g = map[TP]int64{}
		c.groups[group] = g
	}
	for tp, o := range t.offsets[group] {
		g[tp] = o
	}
}

// writeMarker appends decided transaction t's control marker to tp; c.mu
// is held.
func (c *Cluster) writeMarker(t *txn, tp TP) {
	delete(t.unmarked, tp)
	p, err := c.partition(tp)
	if err != nil {
		return // the topic was deleted meanwhile
	}
	p.entries = append(p.entries, entry{rec: Record{Topic: tp.Topic, Partition: tp.Partition, Offset: int64(len(p.entries)), Timestamp: c.now}, txn: t, marker: true})
	c.notify()
}

// SetMarkerLag makes every transaction end from now on leave its markers
// pending (point 7 of the package doc), to be written by DeliverMarker.
func (c *Cluster) SetMarkerLag(on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.markerLag = on
}

// PendingMarkers is how many markers of decided transactions are not
// written yet.
func (c *Cluster) PendingMarkers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

// DeliverMarker writes pending marker i (0 <= i < PendingMarkers): into
// its partition, or, for a group's offsets, by making them take effect.
func (c *Cluster) DeliverMarker(i int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deliver(i)
}

// deliver writes pending marker i; c.mu is held.
func (c *Cluster) deliver(i int) {
	m := c.pending[i]
	c.pending = slices.Delete(c.pending, i, i+1)
	if m.group != "" {
		c.applyOffsets(m.t, m.group)
		return
	}
	c.writeMarker(m.t, m.tp)
}

// flushMarkers writes every pending marker of transactional id name's
// transactions, as the coordinator does before it answers that id again
// (a client meanwhile is told CONCURRENT_TRANSACTIONS and retries); c.mu
// is held.
func (c *Cluster) flushMarkers(name string) {
	for i := 0; i < len(c.pending); {
		if c.pending[i].t.id == name {
			c.deliver(i)
			continue
		}
		i++
	}
}

// stable is p's last stable offset: the first entry of a transaction
// still open, or the high watermark; c.mu is held.
func (p *partition) stable() int64 {
	for ; p.settled < int64(len(p.entries)); p.settled++ {
		if e := p.entries[p.settled]; e.txn != nil && e.txn.openIn(p.tp) {
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
