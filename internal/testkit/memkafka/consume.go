package memkafka

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/internal/kread"
)

// The consuming side of a Client, and the Cluster as a kread.Cluster.

// controlKey is the key of a transaction marker: version 0, then the
// type, 0 for an abort and 1 for a commit.
func controlKey(commit bool) []byte {
	if commit {
		return []byte{0, 0, 0, 1}
	}
	return []byte{0, 0, 0, 0}
}

var (
	txnAttrs     = kgo.NewRecordAttrs(kgo.RecordAttrsOpts{Transactional: true})
	controlAttrs = kgo.NewRecordAttrs(kgo.RecordAttrsOpts{Transactional: true, Control: true})
)

// fetch reads tp from offset from as a read_committed consumer does: up
// to max data records (markers too with control; they do not count
// against max), never past the last stable offset, aborted records
// skipped. next is where the following fetch starts. c.mu is held.
func (c *Cluster) fetch(tp TP, from int64, max int, control bool) (recs []*kgo.Record, next int64, p *partition, err error) {
	p, err = c.partition(tp)
	if err != nil {
		return nil, from, nil, err
	}
	if from < 0 || from > int64(len(p.entries)) {
		return nil, from, p, fmt.Errorf("offset %d of %s (log end %d): %w", from, tp, len(p.entries), kerr.OffsetOutOfRange)
	}
	stable := p.stable()
	n := 0
	for next = from; next < stable && n < max; next++ {
		e := p.entries[next]
		switch {
		case e.marker:
			if control {
				recs = append(recs, &kgo.Record{Topic: tp.Topic, Partition: tp.Partition, Offset: e.rec.Offset,
					Key: controlKey(e.txn.status == txnCommitted), Timestamp: e.rec.Timestamp, Attrs: controlAttrs})
			}
			continue
		case e.txn != nil && e.txn.status == txnAborted:
			continue
		}
		r := &kgo.Record{Topic: tp.Topic, Partition: tp.Partition, Offset: e.rec.Offset, Timestamp: e.rec.Timestamp,
			Key: slices.Clone(e.rec.Key), Value: slices.Clone(e.rec.Value)}
		for _, h := range e.rec.Headers {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: h.Key, Value: slices.Clone(h.Value)})
		}
		if e.txn != nil {
			r.Attrs = txnAttrs
		}
		recs = append(recs, r)
		n++
	}
	return recs, next, p, nil
}

// AddConsumePartitions starts consuming the partitions, each at its
// offset: an exact one, NewOffset().AtStart() or AtEnd().
func (c *Client) AddConsumePartitions(partitions map[string]map[int32]kgo.Offset) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for topic, ps := range partitions {
		for p, o := range ps {
			tp := TP{topic, p}
			if _, ok := c.pos[tp]; !ok {
				c.order = append(c.order, tp)
			}
			c.pos[tp] = c.resolve(tp, o)
		}
	}
	c.order = sortedTPs(c.pos)
}

// resolve is where offset o of tp is: -2 the log start, -1 its end; c.mu
// is held.
func (c *Client) resolve(tp TP, o kgo.Offset) int64 {
	at := o.EpochOffset().Offset
	if at >= 0 {
		return at
	}
	if at == -1 {
		if end, err := c.c.EndOffsets(tp); err == nil {
			return end.HighWatermark
		}
	}
	return 0
}

// PollFetches is PollRecords without a limit.
func (c *Client) PollFetches(ctx context.Context) kgo.Fetches { return c.PollRecords(ctx, 0) }

// PollRecords returns up to max records (max <= 0: no limit) of the
// partitions consumed, with read_committed, starting where the last poll
// stopped in the round of partitions. A position past the log end (or
// before its start) is reset to ResetOffset, as franz-go resets on
// OFFSET_OUT_OF_RANGE. With nothing to read it returns at once, or, with
// WaitForRecords, waits for a record or ctx's end.
func (c *Client) PollRecords(ctx context.Context, max int) kgo.Fetches {
	if max <= 0 {
		max = 1 << 30
	}
	for {
		fs, wait := c.poll(max)
		switch {
		case len(fs) > 0:
			return fs
		case ctx.Err() != nil:
			return kgo.NewErrFetch(ctx.Err())
		case wait == nil:
			return fs
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return kgo.NewErrFetch(ctx.Err())
		}
	}
}

// poll is one PollRecords attempt: the fetches, or, when there is nothing
// and the client waits, what to wait on.
func (c *Client) poll(max int) (kgo.Fetches, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return kgo.NewErrFetch(kgo.ErrClientClosed), nil
	}
	if c.cfg.Group != "" {
		if err := c.rebalance(); err != nil {
			return kgo.NewErrFetch(err), nil
		}
	}
	c.c.mu.Lock()
	defer c.c.mu.Unlock()
	var fetch kgo.Fetch
	got := 0
	for i := range c.order {
		tp := c.order[(c.start+i)%len(c.order)]
		recs, next, p, err := c.c.fetch(tp, c.pos[tp], max-got, c.cfg.KeepControlRecords)
		if err != nil && p != nil {
			// Out of range: reset, and read from there at the next poll.
			c.pos[tp] = 0
			if c.cfg.ResetOffset.EpochOffset().Offset == -1 {
				c.pos[tp] = int64(len(p.entries))
			}
			continue
		}
		if err != nil || len(recs) == 0 {
			c.pos[tp] = next
			continue
		}
		c.pos[tp] = next
		part := kgo.FetchPartition{Partition: tp.Partition, HighWatermark: int64(len(p.entries)), LastStableOffset: p.stable(), LogStartOffset: 0, Records: recs}
		if n := len(fetch.Topics); n > 0 && fetch.Topics[n-1].Topic == tp.Topic {
			fetch.Topics[n-1].Partitions = append(fetch.Topics[n-1].Partitions, part)
		} else {
			fetch.Topics = append(fetch.Topics, kgo.FetchTopic{Topic: tp.Topic, Partitions: []kgo.FetchPartition{part}})
		}
		for _, r := range recs {
			if !r.Attrs.IsControl() {
				got++
			}
		}
		if got >= max {
			break
		}
	}
	if len(c.order) > 0 {
		c.start = (c.start + 1) % len(c.order)
	}
	if len(fetch.Topics) > 0 {
		return kgo.Fetches{fetch}, nil
	}
	if c.cfg.WaitForRecords {
		return nil, c.c.waitChange()
	}
	return kgo.Fetches{}, nil
}

// rebalance joins the group at the first poll, and at every poll takes
// the member's share of the topics' partitions in the group's current
// generation: a partition newly assigned starts at the group's committed
// offset, or ResetOffset without one. c.mu is held.
func (c *Client) rebalance() error {
	if c.member == nil {
		m, err := c.c.JoinGroup(c.cfg.Group, c.cfg.InstanceID)
		if err != nil {
			return err
		}
		c.member = &m
	}
	c.c.mu.Lock()
	g := c.c.group(c.cfg.Group)
	if err := g.check(GroupMember{MemberID: c.member.MemberID, InstanceID: c.member.InstanceID}, false); err != nil {
		c.c.mu.Unlock()
		return err
	}
	c.member.Generation = g.generation
	members := slices.Sorted(func(yield func(string) bool) {
		for id := range g.members {
			if !yield(id) {
				return
			}
		}
	})
	mine := slices.Index(members, c.member.MemberID)
	all := c.c.partitionsOf(c.cfg.Topics)
	committed := c.c.groups[c.cfg.Group]
	pos := map[TP]int64{}
	for i, tp := range all {
		if i%len(members) != mine {
			continue
		}
		if at, ok := c.pos[tp]; ok {
			pos[tp] = at
			continue
		}
		if at, ok := committed[tp]; ok {
			pos[tp] = at
			continue
		}
		pos[tp] = 0
		if c.cfg.ResetOffset.EpochOffset().Offset == -1 {
			p, _ := c.c.partition(tp)
			pos[tp] = int64(len(p.entries))
		}
	}
	c.c.mu.Unlock()
	c.pos, c.order = pos, sortedTPs(pos)
	return nil
}

// CommitRecords commits, for each partition of recs, the offset after the
// highest record, as the group member (Cluster.CommitOffsetsAs).
func (c *Client) CommitRecords(_ context.Context, recs ...*kgo.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return kgo.ErrClientClosed
	case c.member == nil:
		return fmt.Errorf("memkafka: %s commits before it joined its group", c)
	}
	offsets := map[TP]int64{}
	for _, r := range recs {
		tp := TP{r.Topic, r.Partition}
		offsets[tp] = max(offsets[tp], r.Offset+1)
	}
	return c.c.CommitOffsetsAs(c.cfg.Group, *c.member, offsets)
}

// GroupMetadata is the member id and generation of a group consumer
// (kgo.Client.GroupMetadata): "" and -1 before it joined.
func (c *Client) GroupMetadata() (string, int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.member == nil {
		return "", -1
	}
	return c.member.MemberID, c.member.Generation
}

// The Cluster is a kread.Cluster: restores and the tests' reads run on it.
var _ kread.Cluster = (*Cluster)(nil)

// Offsets lists the log start (always 0: the model keeps every entry) and
// the last stable offset of every partition of topic.
func (c *Cluster) Offsets(_ context.Context, topic string) (map[int32]kread.Offsets, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.topics[topic]
	if !ok {
		return nil, fmt.Errorf("listing offsets of %s: %w", topic, kerr.UnknownTopicOrPartition)
	}
	out := make(map[int32]kread.Offsets, len(t.partitions))
	for _, p := range t.partitions {
		out[p.tp.Partition] = kread.Offsets{Start: 0, LastStable: p.stable()}
	}
	return out, nil
}

// Consume is a Client reading the partitions of topic from the given
// offsets, control records kept.
func (c *Cluster) Consume(topic string, from map[int32]int64) (kread.Consumer, error) {
	cl := NewClient(c, ClientConfig{KeepControlRecords: true})
	assign := map[int32]kgo.Offset{}
	for p, o := range from {
		assign[p] = kgo.NewOffset().At(o)
	}
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: assign})
	return cl, nil
}
