package memkafka

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Request answers the requests the job's adapters send themselves, as the
// brokers do (kgo.Client.Request): AddOffsetsToTxn and TxnOffsetCommit
// (offsets committed in the transaction on behalf of a group member),
// EndTxn (sink's probe of a failed transaction), DescribeTransactions and
// OffsetCommit. Any other request is an error: the model does not answer
// it.
func (c *Client) Request(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, kgo.ErrClientClosed
	}
	switch r := req.(type) {
	case *kmsg.AddOffsetsToTxnRequest:
		resp := kmsg.NewPtrAddOffsetsToTxnResponse()
		resp.ErrorCode = codeOf(c.addOffsetsToTxn(r))
		return resp, nil
	case *kmsg.TxnOffsetCommitRequest:
		return c.txnOffsetCommit(r), nil
	case *kmsg.EndTxnRequest:
		resp := kmsg.NewPtrEndTxnResponse()
		resp.ErrorCode = codeOf(c.c.endTxn(r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Commit))
		return resp, nil
	case *kmsg.DescribeTransactionsRequest:
		return c.c.describeTransactions(r.TransactionalIDs), nil
	case *kmsg.OffsetCommitRequest:
		return c.c.offsetCommit(r), nil
	}
	return nil, fmt.Errorf("memkafka: %T is not modelled", req)
}

// ownProducer is the client's producer if the request names it: its
// transactional id, producer id and epoch; c.mu is held.
func (c *Client) ownProducer(id string, pid int64, epoch int16) (*Producer, error) {
	if c.prod == nil || id != c.cfg.TransactionalID || pid != c.prod.pid || epoch != c.prod.epoch {
		return nil, fmt.Errorf("memkafka: a request for transactional id %s (producer %d, epoch %d) from %s: only a client's own producer is modelled", id, pid, epoch, c)
	}
	return c.prod, nil
}

// addOffsetsToTxn adds group to the open transaction (starting it at the
// coordinator, as a first write does): the transaction coordinator
// checks the producer's epoch; c.mu is held.
func (c *Client) addOffsetsToTxn(r *kmsg.AddOffsetsToTxnRequest) error {
	p, err := c.ownProducer(r.TransactionalID, r.ProducerID, r.ProducerEpoch)
	if err != nil {
		return err
	}
	c.c.mu.Lock()
	defer c.c.mu.Unlock()
	t, err := p.open(p.checkOffsets)
	if err != nil {
		return err
	}
	if t.groups == nil {
		t.groups = map[string]bool{}
	}
	t.groups[r.Group] = true
	c.offsetsTxn = t
	return nil
}

// txnOffsetCommit puts offsets into the transaction they were added to:
// the group coordinator checks the member the request names (KIP-447),
// unless it names none (generation -1, no member id, no instance id),
// which a transactional commit may do whoever the group's members are;
// c.mu is held.
func (c *Client) txnOffsetCommit(r *kmsg.TxnOffsetCommitRequest) *kmsg.TxnOffsetCommitResponse {
	err := c.txnOffsetCommitErr(r)
	resp := kmsg.NewPtrTxnOffsetCommitResponse()
	for _, rt := range r.Topics {
		topic := kmsg.NewTxnOffsetCommitResponseTopic()
		topic.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			part := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			part.Partition, part.ErrorCode = rp.Partition, codeOf(err)
			topic.Partitions = append(topic.Partitions, part)
		}
		resp.Topics = append(resp.Topics, topic)
	}
	return resp
}

func (c *Client) txnOffsetCommitErr(r *kmsg.TxnOffsetCommitRequest) error {
	p, err := c.ownProducer(r.TransactionalID, r.ProducerID, r.ProducerEpoch)
	if err != nil {
		return err
	}
	c.c.mu.Lock()
	defer c.c.mu.Unlock()
	t := c.offsetsTxn
	if t == nil || !t.groups[r.Group] {
		return fmt.Errorf("memkafka: TxnOffsetCommit for group %s before AddOffsetsToTxn added it to the transaction", r.Group)
	}
	if _, err := p.checkOffsets(); err != nil {
		return err
	}
	if t.status != txnOpen {
		// Aborted meanwhile (a fence, a timeout): the epoch moved on.
		return fmt.Errorf("transactional id %s: the transaction ended: %w", p.name, kerr.ProducerFenced)
	}
	offsets := map[TP]int64{}
	for _, rt := range r.Topics {
		for _, rp := range rt.Partitions {
			tp := TP{rt.Topic, rp.Partition}
			if _, err := c.c.partition(tp); err != nil {
				return err
			}
			offsets[tp] = rp.Offset
		}
	}
	m := GroupMember{MemberID: r.MemberID, Generation: r.Generation}
	if r.InstanceID != nil {
		m.InstanceID = *r.InstanceID
	}
	if !m.anonymous() {
		if err := c.c.group(r.Group).check(m, true); err != nil {
			return err
		}
	}
	if t.offsets == nil {
		t.offsets = map[string]map[TP]int64{}
	}
	if t.offsets[r.Group] == nil {
		t.offsets[r.Group] = map[TP]int64{}
	}
	for tp, o := range offsets {
		t.offsets[r.Group][tp] = o
	}
	return nil
}

// endTxn is an EndTxn request with the given producer id and epoch, as
// sink's probe sends it after a failure (Kafka 4, transaction.version 2):
//
//   - from a producer a newer InitProducer fenced: PRODUCER_FENCED;
//   - at the epoch the coordinator bumped when it aborted the
//     transaction for its timeout (or an earlier EndTxn aborted it): the
//     retry of that abort, accepted;
//   - at the current epoch: the open transaction (if any) ends, and the
//     epoch is bumped, as every end of a transaction bumps it.
//
// c.mu is not held.
func (c *Cluster) endTxn(name string, pid int64, epoch int16, commit bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := c.ids[name]
	if id == nil || id.pid != pid {
		return fmt.Errorf("transactional id %s, producer %d: %w", name, pid, kerr.InvalidProducerIDMapping)
	}
	switch {
	case epoch < id.initEpoch:
		return fmt.Errorf("transactional id %s, epoch %d < %d: %w", name, epoch, id.initEpoch, kerr.ProducerFenced)
	case epoch < id.epoch:
		if commit {
			return fmt.Errorf("transactional id %s: commit at epoch %d after an abort: %w", name, epoch, kerr.InvalidTxnState)
		}
		return nil
	}
	c.flushMarkers(name)
	if id.open != nil {
		c.end(id.open, commit)
		id.open = nil
	} else {
		id.last = &txn{id: name, status: txnAborted}
		if commit {
			id.last.status = txnCommitted
		}
	}
	id.epoch++
	return nil
}

// describeTransactions answers DescribeTransactions: each id's state as
// the coordinator names it (Empty, Ongoing, PrepareCommit, CompleteCommit,
// PrepareAbort, CompleteAbort), its producer id and epoch and timeout.
// c.mu is not held.
func (c *Cluster) describeTransactions(names []string) *kmsg.DescribeTransactionsResponse {
	c.mu.Lock()
	defer c.mu.Unlock()
	resp := kmsg.NewPtrDescribeTransactionsResponse()
	for _, name := range names {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID = name
		id := c.ids[name]
		if id == nil {
			st.ErrorCode = kerr.TransactionalIDNotFound.Code
			resp.TransactionStates = append(resp.TransactionStates, st)
			continue
		}
		st.ProducerID, st.ProducerEpoch = id.pid, id.epoch
		st.TimeoutMillis = int32(id.timeout.Milliseconds())
		st.State = "Empty"
		switch t := id.open; {
		case t != nil:
			st.State = "Ongoing"
			st.StartTimestamp = t.started.UnixMilli()
			for _, tp := range t.written {
				i := -1
				for j, dt := range st.Topics {
					if dt.Topic == tp.Topic {
						i = j
					}
				}
				if i < 0 {
					dt := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
					dt.Topic = tp.Topic
					st.Topics = append(st.Topics, dt)
					i = len(st.Topics) - 1
				}
				st.Topics[i].Partitions = append(st.Topics[i].Partitions, tp.Partition)
			}
		case id.last != nil:
			prefix := "Complete"
			if len(id.last.unmarked) > 0 || c.pendingFor(id.last) {
				prefix = "Prepare"
			}
			st.State = prefix + "Abort"
			if id.last.status == txnCommitted {
				st.State = prefix + "Commit"
			}
		}
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp
}

// pendingFor reports whether a marker of t is still pending; c.mu is
// held.
func (c *Cluster) pendingFor(t *txn) bool {
	for _, m := range c.pending {
		if m.t == t {
			return true
		}
	}
	return false
}

// offsetCommit answers an OffsetCommit (CommitOffsetsAs); c.mu is not
// held.
func (c *Cluster) offsetCommit(r *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	m := GroupMember{MemberID: r.MemberID, Generation: r.Generation}
	if r.InstanceID != nil {
		m.InstanceID = *r.InstanceID
	}
	offsets := map[TP]int64{}
	for _, rt := range r.Topics {
		for _, rp := range rt.Partitions {
			offsets[TP{rt.Topic, rp.Partition}] = rp.Offset
		}
	}
	err := c.CommitOffsetsAs(r.Group, m, offsets)
	resp := kmsg.NewPtrOffsetCommitResponse()
	for _, rt := range r.Topics {
		topic := kmsg.NewOffsetCommitResponseTopic()
		topic.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			part := kmsg.NewOffsetCommitResponseTopicPartition()
			part.Partition, part.ErrorCode = rp.Partition, codeOf(err)
			topic.Partitions = append(topic.Partitions, part)
		}
		resp.Topics = append(resp.Topics, topic)
	}
	return resp
}
