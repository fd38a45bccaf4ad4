package memkafka

import (
	"context"
	"errors"
	"fmt"
	"strings"
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

// side is what the conformance script does to a Kafka: the model, or a
// real broker through franz-go. Producers are numbered in the order
// initProducer made them.
type side interface {
	createTopic(name string, partitions int) error
	initProducer(id string) (int, error)
	initProducerTimeout(id string, timeout time.Duration) (int, error)
	begin(p int) error
	produce(p int, tp TP, value string) error
	txnCommitOffsets(p int, group string, tp TP, offset int64) error
	end(p int, commit bool) error
	appendPlain(tp TP, value string) error
	// read is the whole partition as a read_committed reader sees it,
	// "offset:value" each, and where the reader stops (the LSO).
	read(tp TP) ([]string, int64, error)
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
	observe := func(step string, tp TP) {
		recs, stop, err := s.read(tp)
		fmt.Fprintf(&out, "%s: read %s = %v up to %d (%s)\n", step, tp, recs, stop, errName(err))
		o, err := s.endOffsets(tp)
		fmt.Fprintf(&out, "%s: end offsets %s = hw %d, lso %d (%s)\n", step, tp, o.HighWatermark, o.LastStable, errName(err))
	}
	p0, p1 := TP{topic, 0}, TP{topic, 1}
	say("create", s.createTopic(topic, 2))
	a, err := s.initProducer(topic + "-x")
	say("init A", err)

	// A committed transaction over two partitions, then an aborted one.
	say("A begin", s.begin(a))
	say("A produce p0 a1", s.produce(a, p0, "a1"))
	say("A produce p1 a2", s.produce(a, p1, "a2"))
	say("A commit", s.end(a, true))
	say("A begin", s.begin(a))
	say("A produce p0 a3", s.produce(a, p0, "a3"))
	say("A abort", s.end(a, false))
	say("plain n1", s.appendPlain(p0, "n1"))
	observe("after abort", p0)
	observe("after abort", p1)

	// An open transaction holds back what others write after it.
	say("A begin", s.begin(a))
	say("A produce p0 a4", s.produce(a, p0, "a4"))
	say("plain n2", s.appendPlain(p0, "n2"))
	observe("open", p0)

	// A newer producer of the same id aborts it and fences A.
	b, err := s.initProducer(topic + "-x")
	say("init B", err)
	observe("fenced", p0)
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
	say("Z commit", s.end(z, true))
	say("Z abort", s.end(z, false))
	observe("after Z", p1)

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

func TestModelMatchesTheRealBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a Kafka broker")
	}
	k := kafkatest.Broker(t)
	topic := kafkatest.Topic(t, "conformance")
	group := topic + "-group"
	real := newRealSide(t, k.Bootstrap())
	got := script(real, topic, group)
	want := script(&modelSide{c: New(time.Unix(0, 0))}, topic, group)
	if got != want {
		t.Fatalf("the model differs from the real broker\nreal broker:\n%s\nmodel:\n%s", got, want)
	}
	t.Logf("transcript (both):\n%s", got)

	topic = kafkatest.Topic(t, "timeout")
	got = timeoutScript(real, topic)
	want = timeoutScript(&modelSide{c: New(time.Unix(0, 0))}, topic)
	if got != want {
		t.Fatalf("after a transaction timeout the model differs from the real broker\nreal broker:\n%s\nmodel:\n%s", got, want)
	}
	t.Logf("transcript (both):\n%s", got)
}

// modelSide runs the script against a Cluster.
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

func (m *modelSide) appendPlain(tp TP, value string) error {
	_, err := m.c.Append(Record{Topic: tp.Topic, Partition: tp.Partition, Value: []byte(value)})
	return err
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

func (m *modelSide) endOffsets(tp TP) (Offsets, error) { return m.c.EndOffsets(tp) }

func (m *modelSide) groupOffset(group string, tp TP) (int64, error) {
	o, ok := m.c.GroupOffsets(group)[tp]
	if !ok {
		return -1, nil
	}
	return o, nil
}

// realSide runs the script against a real broker: one franz-go client per
// producer, as the runtime uses them.
type realSide struct {
	t         *testing.T
	brokers   []string
	adm       *kadm.Client
	plain     *kgo.Client
	producers []*kgo.Client
	ids       []string // each producer's transactional id
}

func newRealSide(t *testing.T, brokers []string) *realSide {
	plain := kafkatest.Client(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	return &realSide{t: t, brokers: brokers, adm: kadm.NewClient(kafkatest.Client(t, brokers)), plain: plain}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func (r *realSide) createTopic(name string, partitions int) error {
	kafkatest.CreateTopic(r.t, r.brokers, name, int32(partitions), nil)
	return nil
}

func (r *realSide) initProducer(id string) (int, error) {
	return r.initProducerTimeout(id, time.Minute)
}

// outlive waits until the coordinator has aborted p's transaction: the
// partition's last stable offset reaches its high watermark (the broker
// looks for timed-out transactions every 10 s by default).
func (r *realSide) outlive(p int, tp TP) error {
	deadline := time.Now().Add(time.Minute)
	for {
		o, err := r.endOffsets(tp)
		if err != nil {
			return err
		}
		if o.LastStable == o.HighWatermark {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("transaction of producer %d still open after a minute (lso %d, hw %d)", p, o.LastStable, o.HighWatermark)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (r *realSide) initProducerTimeout(id string, timeout time.Duration) (int, error) {
	cl := kafkatest.Client(r.t, r.brokers,
		kgo.TransactionalID(id), kgo.TransactionTimeout(timeout),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	r.producers = append(r.producers, cl)
	r.ids = append(r.ids, id)
	_, _, err := cl.ProducerID(ctx(r.t))
	return len(r.producers) - 1, err
}

func (r *realSide) begin(p int) error { return r.producers[p].BeginTransaction() }

func (r *realSide) produce(p int, tp TP, value string) error {
	rec := &kgo.Record{Topic: tp.Topic, Partition: tp.Partition, Value: []byte(value)}
	return r.producers[p].ProduceSync(ctx(r.t), rec).FirstErr()
}

func (r *realSide) txnCommitOffsets(p int, group string, tp TP, offset int64) error {
	return r.txnCommitOffsetsAs(p, group, GroupMember{Generation: -1}, tp, offset)
}

// txnCommitOffsetsAs is what a transactional commit of consumed offsets
// sends (KIP-98): add the group to the transaction, then TxnOffsetCommit
// with the producer's id and epoch, on behalf of group member m (KIP-447;
// no member and generation -1: on behalf of no one).
func (r *realSide) txnCommitOffsetsAs(p int, group string, m GroupMember, tp TP, offset int64) error {
	cl, c := r.producers[p], ctx(r.t)
	id, epoch, err := cl.ProducerID(c)
	if err != nil {
		return err
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = r.ids[p], id, epoch, group
	addResp, err := add.RequestWith(c, cl)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(addResp.ErrorCode); err != nil {
		return err
	}
	commit := kmsg.NewPtrTxnOffsetCommitRequest()
	commit.TransactionalID, commit.Group, commit.ProducerID, commit.ProducerEpoch = r.ids[p], group, id, epoch
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

func (r *realSide) end(p int, commit bool) error {
	try := kgo.TryAbort
	if commit {
		try = kgo.TryCommit
	}
	err := r.producers[p].EndTransaction(ctx(r.t), try)
	r.settle(p)
	return err
}

// settle waits until the coordinator has written the markers of p's
// transaction: EndTxn answers once the outcome is decided, and the
// markers (and so the last stable offsets) follow. The model ends a
// transaction in one step.
func (r *realSide) settle(p int) {
	deadline := time.Now().Add(time.Minute)
	for {
		d, err := r.adm.DescribeTransactions(ctx(r.t), r.ids[p])
		if err == nil {
			if tx, ok := d[r.ids[p]]; ok && !strings.HasPrefix(tx.State, "Prepare") {
				return
			}
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("transaction %s did not settle: %v %v", r.ids[p], d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *realSide) appendPlain(tp TP, value string) error {
	rec := &kgo.Record{Topic: tp.Topic, Partition: tp.Partition, Value: []byte(value)}
	return r.plain.ProduceSync(ctx(r.t), rec).FirstErr()
}

func (r *realSide) endOffsets(tp TP) (Offsets, error) {
	c := ctx(r.t)
	hw, err := r.adm.ListEndOffsets(c, tp.Topic)
	if err != nil {
		return Offsets{}, err
	}
	lso, err := r.adm.ListCommittedOffsets(c, tp.Topic)
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

func (r *realSide) read(tp TP) ([]string, int64, error) {
	var out []string
	err := kread.All(ctx(r.t), []kgo.Opt{kgo.SeedBrokers(r.brokers...)}, tp.Topic, func(rec *kgo.Record) error {
		out = append(out, fmt.Sprintf("%d:%s", rec.Offset, rec.Value))
		return nil
	}, tp.Partition)
	if err != nil {
		return out, 0, err
	}
	o, err := r.endOffsets(tp)
	return out, o.LastStable, err
}

func (r *realSide) groupOffset(group string, tp TP) (int64, error) {
	// As a read_committed consumer would: offsets of a transaction still
	// being completed are waited for.
	resp, err := r.adm.FetchOffsets(kadm.RequireStable(ctx(r.t)), group)
	if err != nil {
		return -1, err
	}
	o, ok := resp.Lookup(tp.Topic, tp.Partition)
	if !ok {
		return -1, nil
	}
	return o.At, o.Err
}
