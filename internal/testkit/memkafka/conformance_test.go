package memkafka

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eoflow/pipeline/internal/kread"
	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
)

func TestMain(m *testing.M) { kafkatest.Main(m) }

// side is what the conformance script does to a Kafka: a real broker
// through franz-go clients, the model through the same calls on its
// Client (clientSide over a backend), or the model through its own API
// (modelSide). Producers are numbered in the order initProducer made
// them.
type side interface {
	createTopic(name string, partitions int) error
	initProducer(id string) (int, error)
	initProducerTimeout(id string, timeout time.Duration) (int, error)
	begin(p int) error
	produce(p int, tp TP, value string) error
	txnCommitOffsets(p int, group string, tp TP, offset int64) error
	end(p int, commit bool) error
	// probe sends EndTxn(abort) with the producer id and epoch p last
	// learnt, as sink's probe of a failed transaction does.
	probe(p int) error
	// state is the coordinator's state of p's transactional id
	// (DescribeTransactions), once no marker is being written.
	state(p int) (string, error)
	appendPlain(tp TP, value string) error
	// commitOffsetsAs is a consumer's OffsetCommit on behalf of m
	// (generation -1 and no member: on behalf of no one).
	commitOffsetsAs(group string, m GroupMember, tp TP, offset int64) error
	// read is the whole partition as a read_committed reader sees it,
	// "offset:value" each, and where the reader stops (the LSO).
	read(tp TP) ([]string, int64, error)
	// readRaw is the same read with the transaction markers kept:
	// "offset:<commit>" or "offset:<abort>" each.
	readRaw(tp TP) ([]string, error)
	endOffsets(tp TP) (Offsets, error)
	groupOffset(group string, tp TP) (int64, error)
	// outlive lets p's open transaction outlive its timeout, until the
	// coordinator has aborted it.
	outlive(p int, tp TP) error
}

// script is one history of transactions, fencings and reads, with its
// observations written into a transcript: the model must write the same
// transcript as the real broker, offsets included.
func script(s side, topic, group string) string {
	var out strings.Builder
	say := func(step string, err error) {
		fmt.Fprintf(&out, "%s: %s\n", step, errName(err))
	}
	state := func(step string, p int) {
		st, err := s.state(p)
		fmt.Fprintf(&out, "%s: state %s (%s)\n", step, st, errName(err))
	}
	observe := func(step string, tp TP) {
		recs, stop, err := s.read(tp)
		fmt.Fprintf(&out, "%s: read %s = %v up to %d (%s)\n", step, tp, recs, stop, errName(err))
		raw, err := s.readRaw(tp)
		fmt.Fprintf(&out, "%s: with markers %s = %v (%s)\n", step, tp, raw, errName(err))
		o, err := s.endOffsets(tp)
		fmt.Fprintf(&out, "%s: end offsets %s = hw %d, lso %d (%s)\n", step, tp, o.HighWatermark, o.LastStable, errName(err))
	}
	p0, p1 := TP{topic, 0}, TP{topic, 1}
	say("create", s.createTopic(topic, 2))
	a, err := s.initProducer(topic + "-x")
	say("init A", err)
	state("after init", a)

	// A committed transaction over two partitions, then an aborted one.
	say("A begin", s.begin(a))
	say("A produce p0 a1", s.produce(a, p0, "a1"))
	say("A produce p1 a2", s.produce(a, p1, "a2"))
	state("writing", a)
	say("A commit", s.end(a, true))
	state("committed", a)
	say("A begin", s.begin(a))
	say("A produce p0 a3", s.produce(a, p0, "a3"))
	say("A abort", s.end(a, false))
	state("aborted", a)
	say("plain n1", s.appendPlain(p0, "n1"))
	observe("after abort", p0)
	observe("after abort", p1)

	// An open transaction holds back what others write after it.
	say("A begin", s.begin(a))
	say("A produce p0 a4", s.produce(a, p0, "a4"))
	say("plain n2", s.appendPlain(p0, "n2"))
	observe("open", p0)

	// A newer producer of the same id aborts it and fences A; asked
	// about its epoch, the coordinator says so.
	b, err := s.initProducer(topic + "-x")
	say("init B", err)
	state("fenced", b)
	observe("fenced", p0)
	say("A probe", s.probe(a))
	say("A produce p1 a5", s.produce(a, p1, "a5"))
	say("A commit", s.end(a, true))
	say("A abort", s.end(a, false))
	observe("after zombie", p1)

	// A zombie that only ends its transaction asks the coordinator alone.
	z, err := s.initProducer(topic + "-z")
	say("init Z", err)
	say("Z begin", s.begin(z))
	say("Z produce p1 z1", s.produce(z, p1, "z1"))
	_, err = s.initProducer(topic + "-z")
	say("init Z2", err)
	say("Z probe", s.probe(z))
	say("Z commit", s.end(z, true))
	say("Z abort", s.end(z, false))
	observe("after Z", p1)

	// An abort at the current epoch with nothing open is taken (and
	// moves the epoch on, so the producer's next write is refused and its
	// abort takes the id back).
	q, err := s.initProducer(topic + "-q")
	say("init Q", err)
	say("Q begin", s.begin(q))
	say("Q produce p0 q1", s.produce(q, p0, "q1"))
	say("Q commit", s.end(q, true))
	say("Q probe", s.probe(q))
	state("after Q's probe", q)
	say("Q probe again", s.probe(q))
	say("Q begin", s.begin(q))
	say("Q produce p0 q2", s.produce(q, p0, "q2"))
	say("Q abort", s.end(q, false))
	say("Q begin", s.begin(q))
	say("Q produce p0 q3", s.produce(q, p0, "q3"))
	say("Q commit", s.end(q, true))
	observe("after Q", p0)

	// Offsets committed inside a transaction count only if it commits.
	say("B begin", s.begin(b))
	say("B produce p1 b1", s.produce(b, p1, "b1"))
	say("B offsets 7", s.txnCommitOffsets(b, group, p0, 7))
	say("B commit", s.end(b, true))
	o, err := s.groupOffset(group, p0)
	fmt.Fprintf(&out, "group after commit: %d (%s)\n", o, errName(err))
	say("B begin", s.begin(b))
	say("B offsets 9", s.txnCommitOffsets(b, group, p0, 9))
	say("B produce p1 b2", s.produce(b, p1, "b2"))
	say("B abort", s.end(b, false))
	o, err = s.groupOffset(group, p0)
	fmt.Fprintf(&out, "group after abort: %d (%s)\n", o, errName(err))
	// A plain commit on behalf of no one, to a group without members.
	say("plain offsets 11", s.commitOffsetsAs(group, GroupMember{Generation: -1}, p0, 11))
	o, err = s.groupOffset(group, p0)
	fmt.Fprintf(&out, "group after the plain commit: %d (%s)\n", o, errName(err))
	observe("end", p0)
	observe("end", p1)
	return out.String()
}

// timeoutScript is a transaction that outlives its timeout: the
// coordinator aborts it, and its producer learns so at its next call.
func timeoutScript(s side, topic string) string {
	var out strings.Builder
	say := func(step string, err error) {
		fmt.Fprintf(&out, "%s: %s\n", step, errName(err))
	}
	p0 := TP{topic, 0}
	say("create", s.createTopic(topic, 1))
	a, err := s.initProducerTimeout(topic+"-t", time.Second)
	say("init A", err)
	say("A begin", s.begin(a))
	say("A produce t1", s.produce(a, p0, "t1"))
	say("A outlives its timeout", s.outlive(a, p0))
	st, err := s.state(a)
	fmt.Fprintf(&out, "timed out: state %s (%s)\n", st, errName(err))
	say("A probe", s.probe(a))
	say("A probe again", s.probe(a))
	say("A produce t2", s.produce(a, p0, "t2"))
	say("A commit", s.end(a, true))
	say("A abort", s.end(a, false))
	b, err := s.initProducerTimeout(topic+"-u", time.Second)
	say("init B", err)
	say("B begin", s.begin(b))
	say("B produce u1", s.produce(b, p0, "u1"))
	say("B outlives its timeout", s.outlive(b, p0))
	say("B commit", s.end(b, true))
	say("B abort", s.end(b, false))
	c, err := s.initProducerTimeout(topic+"-v", time.Second)
	say("init C", err)
	say("C begin", s.begin(c))
	say("C produce v1", s.produce(c, p0, "v1"))
	say("C outlives its timeout", s.outlive(c, p0))
	say("C offsets", s.txnCommitOffsets(c, topic+"-group", p0, 1))
	say("C commit", s.end(c, true))
	say("C abort", s.end(c, false))
	recs, stop, err := s.read(p0)
	fmt.Fprintf(&out, "read = %v up to %d (%s)\n", recs, stop, errName(err))
	again, err := s.initProducerTimeout(topic+"-t", time.Second)
	say("init A again", err)
	say("A again begin", s.begin(again))
	say("A again produce t3", s.produce(again, p0, "t3"))
	say("A again commit", s.end(again, true))
	recs, stop, err = s.read(p0)
	fmt.Fprintf(&out, "read = %v up to %d (%s)\n", recs, stop, errName(err))
	raw, err := s.readRaw(p0)
	fmt.Fprintf(&out, "with markers = %v (%s)\n", raw, errName(err))
	return out.String()
}

// errName is how the transcript names an outcome: the Kafka error code, so
// that wrapping differences between the model and franz-go do not count.
func errName(err error) string {
	if err == nil {
		return "ok"
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	return "error: " + err.Error()
}

// sides are the three ways to run a script: the real broker, and the
// model through its Client and through its own API.
func sides(t *testing.T) (real, client, model func() side) {
	k := kafkatest.Broker(t)
	real = func() side { return newClientSide(t, &kafkaBackend{t: t, brokers: k.Bootstrap()}) }
	client = func() side { return newClientSide(t, &modelBackend{t: t, c: New(time.Unix(0, 0))}) }
	model = func() side { return &modelSide{c: New(time.Unix(0, 0))} }
	return real, client, model
}

// conform runs run on the real broker and on both sides of the model,
// and fails unless all three transcripts are the same.
func conform(t *testing.T, what string, run func(s side, topic string) string, real, client, model side) {
	t.Helper()
	topic := kafkatest.Topic(t, what)
	want := run(real, topic)
	for name, s := range map[string]side{"the model's client": client, "the model": model} {
		if got := run(s, topic); got != want {
			t.Errorf("%s: %s differs from the real broker\nreal broker:\n%s\n%s:\n%s", what, name, want, name, got)
		}
	}
	t.Logf("%s transcript (all three):\n%s", what, want)
}

func TestModelMatchesTheRealBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a Kafka broker")
	}
	real, client, model := sides(t)
	conform(t, "conformance", func(s side, topic string) string { return script(s, topic, topic+"-group") }, real(), client(), model())
	conform(t, "timeout", timeoutScript, real(), client(), model())
}

// modelSide runs the script against a Cluster, through its own API.
type modelSide struct {
	c         *Cluster
	producers []*Producer
}

func (m *modelSide) createTopic(name string, partitions int) error {
	return m.c.CreateTopic(name, partitions)
}

func (m *modelSide) initProducer(id string) (int, error) {
	return m.initProducerTimeout(id, time.Minute)
}

func (m *modelSide) outlive(p int, tp TP) error {
	m.c.Advance(m.producers[p].c.ids[m.producers[p].name].timeout + time.Millisecond)
	return nil
}

func (m *modelSide) initProducerTimeout(id string, timeout time.Duration) (int, error) {
	p, err := m.c.InitProducer(id, timeout)
	m.producers = append(m.producers, p)
	return len(m.producers) - 1, err
}

func (m *modelSide) begin(p int) error { return m.producers[p].Begin() }

func (m *modelSide) produce(p int, tp TP, value string) error {
	_, err := m.producers[p].Produce(Record{Topic: tp.Topic, Partition: tp.Partition, Value: []byte(value)})
	return err
}

func (m *modelSide) txnCommitOffsets(p int, group string, tp TP, offset int64) error {
	return m.producers[p].TxnCommitOffsets(group, map[TP]int64{tp: offset})
}

func (m *modelSide) end(p int, commit bool) error { return m.producers[p].End(commit) }

func (m *modelSide) probe(p int) error {
	pr := m.producers[p]
	m.c.mu.Lock()
	pid, epoch := pr.pid, pr.epoch
	m.c.mu.Unlock()
	return m.c.endTxn(pr.name, pid, epoch, false)
}

func (m *modelSide) state(p int) (string, error) {
	resp := m.c.describeTransactions([]string{m.producers[p].name})
	st := resp.TransactionStates[0]
	return st.State, kerr.ErrorForCode(st.ErrorCode)
}

func (m *modelSide) appendPlain(tp TP, value string) error {
	_, err := m.c.Append(Record{Topic: tp.Topic, Partition: tp.Partition, Value: []byte(value)})
	return err
}

func (m *modelSide) commitOffsetsAs(group string, gm GroupMember, tp TP, offset int64) error {
	return m.c.CommitOffsetsAs(group, gm, map[TP]int64{tp: offset})
}

func (m *modelSide) read(tp TP) ([]string, int64, error) {
	var out []string
	from := int64(0)
	for {
		recs, next, err := m.c.ReadCommitted(tp, from, 1000)
		if err != nil {
			return out, from, err
		}
		for _, r := range recs {
			out = append(out, fmt.Sprintf("%d:%s", r.Offset, r.Value))
		}
		if next == from {
			return out, next, nil
		}
		from = next
	}
}

func (m *modelSide) readRaw(tp TP) ([]string, error) { return readRaw(context.Background(), m.c, tp) }

func (m *modelSide) endOffsets(tp TP) (Offsets, error) { return m.c.EndOffsets(tp) }

func (m *modelSide) groupOffset(group string, tp TP) (int64, error) {
	o, ok := m.c.GroupOffsets(group)[tp]
	if !ok {
		return -1, nil
	}
	return o, nil
}

// readRaw reads tp to its last stable offset through cl, markers kept.
func readRaw(ctx context.Context, cl kread.Cluster, tp TP) ([]string, error) {
	offsets, err := cl.Offsets(ctx, tp.Topic)
	if err != nil {
		return nil, err
	}
	end := offsets[tp.Partition].LastStable
	if end == 0 {
		return nil, nil
	}
	cons, err := cl.Consume(tp.Topic, map[int32]int64{tp.Partition: 0})
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	var out []string
	for {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			return out, err
		}
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			if done || r.Offset >= end {
				return
			}
			switch {
			case !r.Attrs.IsControl():
				out = append(out, fmt.Sprintf("%d:%s", r.Offset, r.Value))
			case len(r.Key) == 4 && r.Key[3] == 1:
				out = append(out, fmt.Sprintf("%d:<commit>", r.Offset))
			default:
				out = append(out, fmt.Sprintf("%d:<abort>", r.Offset))
			}
			done = r.Offset >= end-1
		})
		if done {
			return out, nil
		}
	}
}

// kclient is a franz-go client as the scripts use it: *kgo.Client, or the
// model's Client, which must answer alike.
type kclient interface {
	ProducerID(ctx context.Context) (int64, int16, error)
	BeginTransaction() error
	Produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error))
	Flush(ctx context.Context) error
	EndTransaction(ctx context.Context, try kgo.TransactionEndTry) error
	Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
	PollFetches(ctx context.Context) kgo.Fetches
	GroupMetadata() (string, int32)
	Close()
}

var (
	_ kclient = (*kgo.Client)(nil)
	_ kclient = (*Client)(nil)
)

// backend is what a clientSide runs on besides its clients: the admin
// calls and the time a timeout takes.
type backend interface {
	createTopic(name string, partitions int) error
	// client makes a client as cfg describes it; the test closes it.
	client(cfg ClientConfig) kclient
	reads() kread.Cluster
	endOffsets(tp TP) (Offsets, error)
	groupOffset(group string, tp TP) (int64, error)
	// outlive returns once the transaction of id, with the given
	// timeout and open on tp, was aborted by the coordinator.
	outlive(id string, timeout time.Duration, tp TP) error
}

// clientSide runs the script through clients: franz-go's on a real broker
// (kafkaBackend), the model's on the model (modelBackend). One client per
// producer, as the runtime uses them.
type clientSide struct {
	t         *testing.T
	b         backend
	plain     kclient
	producers []kclient
	ids       []string
	timeouts  []time.Duration
	// pids and epochs are each producer's as it last learnt them: at its
	// init and after every transaction it ended (Kafka 4 moves the epoch
	// on at every end), as sink.Txn keeps them for its probe.
	pids   []int64
	epochs []int16
	// consumers are the group members, by instance id.
	consumers map[string]kclient
}

func newClientSide(t *testing.T, b backend) *clientSide {
	return &clientSide{t: t, b: b, plain: b.client(ClientConfig{Partitioner: kgo.ManualPartitioner()}), consumers: map[string]kclient{}}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func (s *clientSide) createTopic(name string, partitions int) error {
	return s.b.createTopic(name, partitions)
}

func (s *clientSide) initProducer(id string) (int, error) {
	return s.initProducerTimeout(id, time.Minute)
}

func (s *clientSide) outlive(p int, tp TP) error { return s.b.outlive(s.ids[p], s.timeouts[p], tp) }

func (s *clientSide) initProducerTimeout(id string, timeout time.Duration) (int, error) {
	cl := s.b.client(ClientConfig{TransactionalID: id, TransactionTimeout: timeout, Partitioner: kgo.ManualPartitioner()})
	pid, epoch, err := cl.ProducerID(ctx(s.t))
	s.producers, s.ids, s.timeouts = append(s.producers, cl), append(s.ids, id), append(s.timeouts, timeout)
	s.pids, s.epochs = append(s.pids, pid), append(s.epochs, epoch)
	return len(s.producers) - 1, err
}

func (s *clientSide) begin(p int) error { return s.producers[p].BeginTransaction() }

// produceSync writes r through cl and waits for its outcome.
func produceSync(c context.Context, cl kclient, r *kgo.Record) error {
	var err error
	cl.Produce(c, r, func(_ *kgo.Record, perr error) { err = perr })
	if ferr := cl.Flush(c); ferr != nil {
		return ferr
	}
	return err
}

func (s *clientSide) produce(p int, tp TP, value string) error {
	return produceSync(ctx(s.t), s.producers[p], &kgo.Record{Topic: tp.Topic, Partition: tp.Partition, Value: []byte(value)})
}

func (s *clientSide) txnCommitOffsets(p int, group string, tp TP, offset int64) error {
	return s.txnCommitOffsetsAs(p, group, GroupMember{Generation: -1}, tp, offset)
}

// txnCommitOffsetsAs is what a transactional commit of consumed offsets
// sends (KIP-98): add the group to the transaction, then TxnOffsetCommit
// with the producer's id and epoch, on behalf of group member m (KIP-447;
// no member and generation -1: on behalf of no one).
func (s *clientSide) txnCommitOffsetsAs(p int, group string, m GroupMember, tp TP, offset int64) error {
	cl, c := s.producers[p], ctx(s.t)
	id, epoch, err := cl.ProducerID(c)
	if err != nil {
		return err
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = s.ids[p], id, epoch, group
	addResp, err := add.RequestWith(c, cl)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(addResp.ErrorCode); err != nil {
		return err
	}
	commit := kmsg.NewPtrTxnOffsetCommitRequest()
	commit.TransactionalID, commit.Group, commit.ProducerID, commit.ProducerEpoch = s.ids[p], group, id, epoch
	commit.Generation, commit.MemberID = m.Generation, m.MemberID
	if m.InstanceID != "" {
		commit.InstanceID = &m.InstanceID
	}
	part := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	part.Partition, part.Offset, part.LeaderEpoch = tp.Partition, offset, -1
	topic := kmsg.NewTxnOffsetCommitRequestTopic()
	topic.Topic, topic.Partitions = tp.Topic, []kmsg.TxnOffsetCommitRequestTopicPartition{part}
	commit.Topics = []kmsg.TxnOffsetCommitRequestTopic{topic}
	resp, err := commit.RequestWith(c, cl)
	if err != nil {
		return err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *clientSide) commitOffsetsAs(group string, m GroupMember, tp TP, offset int64) error {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation, req.MemberID = group, m.Generation, m.MemberID
	if m.InstanceID != "" {
		req.InstanceID = &m.InstanceID
	}
	part := kmsg.NewOffsetCommitRequestTopicPartition()
	part.Partition, part.Offset, part.LeaderEpoch = tp.Partition, offset, -1
	topic := kmsg.NewOffsetCommitRequestTopic()
	topic.Topic, topic.Partitions = tp.Topic, []kmsg.OffsetCommitRequestTopicPartition{part}
	req.Topics = []kmsg.OffsetCommitRequestTopic{topic}
	resp, err := req.RequestWith(ctx(s.t), s.plain)
	if err != nil {
		return err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *clientSide) end(p int, commit bool) error {
	try := kgo.TryAbort
	if commit {
		try = kgo.TryCommit
	}
	err := s.producers[p].EndTransaction(ctx(s.t), try)
	s.settle(p)
	if err == nil {
		if pid, epoch, perr := s.producers[p].ProducerID(ctx(s.t)); perr == nil {
			s.pids[p], s.epochs[p] = pid, epoch
		}
	}
	return err
}

func (s *clientSide) probe(p int) error {
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = s.ids[p], s.pids[p], s.epochs[p], false
	resp, err := req.RequestWith(ctx(s.t), s.producers[p])
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	s.settle(p)
	return err
}

// describe is DescribeTransactions of p's transactional id.
func (s *clientSide) describe(p int) (string, error) {
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{s.ids[p]}
	resp, err := req.RequestWith(ctx(s.t), s.plain)
	if err != nil {
		return "", err
	}
	if len(resp.TransactionStates) != 1 {
		return "", fmt.Errorf("%d states of one transactional id", len(resp.TransactionStates))
	}
	st := resp.TransactionStates[0]
	return st.State, kerr.ErrorForCode(st.ErrorCode)
}

// settle waits until the coordinator has written the markers of p's
// transaction: EndTxn answers once the outcome is decided, and the
// markers (and so the last stable offsets) follow. The model writes them
// at once.
func (s *clientSide) settle(p int) {
	deadline := time.Now().Add(time.Minute)
	for {
		st, err := s.describe(p)
		if err == nil && !strings.HasPrefix(st, "Prepare") {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("transaction %s did not settle: %s %v", s.ids[p], st, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *clientSide) state(p int) (string, error) {
	s.settle(p)
	return s.describe(p)
}

func (s *clientSide) appendPlain(tp TP, value string) error {
	return produceSync(ctx(s.t), s.plain, &kgo.Record{Topic: tp.Topic, Partition: tp.Partition, Value: []byte(value)})
}

func (s *clientSide) endOffsets(tp TP) (Offsets, error) { return s.b.endOffsets(tp) }

func (s *clientSide) read(tp TP) ([]string, int64, error) {
	var out []string
	err := kread.AllOn(ctx(s.t), s.b.reads(), tp.Topic, func(rec *kgo.Record) error {
		out = append(out, fmt.Sprintf("%d:%s", rec.Offset, rec.Value))
		return nil
	}, tp.Partition)
	if err != nil {
		return out, 0, err
	}
	o, err := s.endOffsets(tp)
	return out, o.LastStable, err
}

func (s *clientSide) readRaw(tp TP) ([]string, error) { return readRaw(ctx(s.t), s.b.reads(), tp) }

func (s *clientSide) groupOffset(group string, tp TP) (int64, error) {
	return s.b.groupOffset(group, tp)
}

// kafkaBackend is a real broker.
type kafkaBackend struct {
	t       *testing.T
	brokers []string
	adm     *kadm.Client
}

func (k *kafkaBackend) createTopic(name string, partitions int) error {
	kafkatest.CreateTopic(k.t, k.brokers, name, int32(partitions), nil)
	return nil
}

func (k *kafkaBackend) client(cfg ClientConfig) kclient {
	opts := []kgo.Opt{kgo.SeedBrokers(k.brokers...)}
	if cfg.TransactionalID != "" {
		opts = append(opts, kgo.TransactionalID(cfg.TransactionalID), kgo.TransactionTimeout(cfg.TransactionTimeout))
	}
	if cfg.Partitioner != nil {
		opts = append(opts, kgo.RecordPartitioner(cfg.Partitioner))
	}
	if cfg.Group != "" {
		opts = append(opts, kgo.ConsumerGroup(cfg.Group), kgo.ConsumeTopics(cfg.Topics...),
			kgo.InstanceID(cfg.InstanceID), kgo.SessionTimeout(30*time.Second), kgo.DisableAutoCommit(),
			// Eager: one rebalance per change, as the model has it (the
			// cooperative default follows a revoking rebalance with another).
			kgo.Balancers(kgo.RangeBalancer()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		k.t.Fatal(err)
	}
	o := &closingOnce{Client: cl}
	k.t.Cleanup(o.Close)
	return o
}

// closingOnce is a franz-go client that a second Close leaves alone: a
// replaced group member's is closed when its successor joins, and again
// at the test's end.
type closingOnce struct {
	*kgo.Client
	once sync.Once
}

func (o *closingOnce) Close() { o.once.Do(o.Client.Close) }

func (k *kafkaBackend) reads() kread.Cluster {
	return kread.Dial([]kgo.Opt{kgo.SeedBrokers(k.brokers...)})
}

func (k *kafkaBackend) admin() *kadm.Client {
	if k.adm == nil {
		k.adm = kadm.NewClient(kafkatest.Client(k.t, k.brokers))
	}
	return k.adm
}

func (k *kafkaBackend) endOffsets(tp TP) (Offsets, error) {
	c := ctx(k.t)
	hw, err := k.admin().ListEndOffsets(c, tp.Topic)
	if err != nil {
		return Offsets{}, err
	}
	lso, err := k.admin().ListCommittedOffsets(c, tp.Topic)
	if err != nil {
		return Offsets{}, err
	}
	h, _ := hw.Lookup(tp.Topic, tp.Partition)
	l, _ := lso.Lookup(tp.Topic, tp.Partition)
	if h.Err != nil {
		return Offsets{}, h.Err
	}
	return Offsets{HighWatermark: h.Offset, LastStable: l.Offset}, l.Err
}

// groupOffset reads as a read_committed consumer would, waiting out the
// window in which the coordinator still applies a just committed
// transaction's offsets (UNSTABLE_OFFSET_COMMIT).
func (k *kafkaBackend) groupOffset(group string, tp TP) (int64, error) {
	for range 50 {
		resp, err := k.admin().FetchOffsets(kadm.RequireStable(ctx(k.t)), group)
		if err == nil {
			o, ok := resp.Lookup(tp.Topic, tp.Partition)
			if !ok {
				return -1, nil
			}
			if err = o.Err; err == nil {
				return o.At, nil
			}
		}
		if !errors.Is(err, kerr.UnstableOffsetCommit) {
			return -1, err
		}
		time.Sleep(100 * time.Millisecond)
	}
	return -1, kerr.UnstableOffsetCommit
}

// outlive waits until the coordinator has aborted the transaction: the
// partition's last stable offset reaches its high watermark (the broker
// looks for timed-out transactions every 10 s by default).
func (k *kafkaBackend) outlive(id string, _ time.Duration, tp TP) error {
	deadline := time.Now().Add(time.Minute)
	for {
		o, err := k.endOffsets(tp)
		if err != nil {
			return err
		}
		if o.LastStable == o.HighWatermark {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("transaction of %s still open after a minute (lso %d, hw %d)", id, o.LastStable, o.HighWatermark)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// modelBackend is the model, used through its Client.
type modelBackend struct {
	t *testing.T
	c *Cluster
}

func (m *modelBackend) createTopic(name string, partitions int) error {
	return m.c.CreateTopic(name, partitions)
}

func (m *modelBackend) client(cfg ClientConfig) kclient {
	cl := NewClient(m.c, cfg)
	m.t.Cleanup(cl.Close)
	return cl
}

func (m *modelBackend) reads() kread.Cluster { return m.c }

func (m *modelBackend) endOffsets(tp TP) (Offsets, error) { return m.c.EndOffsets(tp) }

func (m *modelBackend) groupOffset(group string, tp TP) (int64, error) {
	o, ok := m.c.GroupOffsets(group)[tp]
	if !ok {
		return -1, nil
	}
	return o, nil
}

func (m *modelBackend) outlive(_ string, timeout time.Duration, _ TP) error {
	m.c.Advance(timeout + time.Millisecond)
	return nil
}
