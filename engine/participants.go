package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint/kstore"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/internal/kread"
	"github.com/eoflow/pipeline/sink"
	"github.com/eoflow/pipeline/source"
	"github.com/eoflow/pipeline/twophase"
)

// The seam between the task graph and Kafka's producers. Records go in
// through Produce; an epoch begins, prepares, commits or aborts only as the
// epoch machine (twophase.Machine) says, through the participant
// interfaces. sink.Txn and sink.Plain implement them against Kafka, the
// broker-free simulation against its model (internal/testkit/memkafka).

// transaction is the job's transactional producer and the decision log:
// transaction N holds epoch N's state changes (and, under exactly_once,
// its outputs and dead letters) and, produced last, checkpoint record N.
// Its LastDecided is the checkpoint the attempt restores.
type transaction interface {
	twophase.DecisionLog
	Produce(ctx context.Context, rec *kgo.Record)
}

// outputProducer writes the outputs outside the transaction
// (at_least_once, at_most_once). As a participant it prepares by
// flushing.
type outputProducer interface {
	twophase.Participant
	Produce(ctx context.Context, rec *kgo.Record)
	Flush(ctx context.Context) error
}

var (
	_ transaction    = (*sink.Txn)(nil)
	_ outputProducer = (*sink.Plain)(nil)
)

// cluster is what an attempt reads of the cluster to restore, besides the
// checkpoint (which the decision log reads): the source partitions, where
// a start position is in them, and the state topic; and, in group mode,
// the group's committed offsets, whether the internal topics' transactions
// are settled, the group's members, and the pause records of a group
// savepoint. kafkaCluster reads Kafka; the simulations read its model
// (internal/testkit/memkafka).
//
// The two calls that wait (FetchStableOffsets, AwaitSettled) wait inside:
// Kafka's polls until the answer is there; the model's, which runs on the
// simulation's one goroutine and cannot wait, says so with an error (the
// simulation asks again later).
type cluster interface {
	Partitions(ctx context.Context, topics []string) ([]source.TopicPartition, error)
	ResolveStart(ctx context.Context, tps []source.TopicPartition, start config.StartPosition) (map[source.TopicPartition]int64, error)
	ReadState(ctx context.Context, fn func(key, value []byte) error) error

	// Read calls fn with every committed record of topic (of the given
	// partitions; none: all), to the last stable offset.
	Read(ctx context.Context, topic string, fn func(*kgo.Record) error, partitions ...int32) error
	// FetchOffsets is every offset committed to group, stable or not
	// (a partition without one is absent).
	FetchOffsets(ctx context.Context, group string) (map[source.TopicPartition]int64, error)
	// FetchStableOffsets is group's committed offsets of tps, once no
	// undecided transaction holds offsets for them (fetchStableOffsets).
	FetchStableOffsets(ctx context.Context, group string, tps []source.TopicPartition, timeout time.Duration) (map[source.TopicPartition]int64, error)
	// AwaitSettled returns once every transaction that wrote the given
	// partitions of topic is decided and marked (awaitSettled).
	AwaitSettled(ctx context.Context, topic string, partitions []int32, timeout time.Duration) error
	// RepartitionDrained reports whether no record of topic is left after
	// the positions position gives, and why not (repartitionDrained).
	RepartitionDrained(ctx context.Context, topic string, position func(partition int32) (int64, bool)) (bool, string, error)
	// Unread reports, for each partition p of the repartition topic in
	// from, whether a committed record of inputs is left at or after
	// from[p] (event-time records do not count), or a transaction is
	// open on p (which may hold more): it does not wait (unread).
	Unread(ctx context.Context, topic string, from map[int32]int64) (map[int32]bool, error)
	// Members are the instance ids of group's members.
	Members(ctx context.Context, group string) ([]string, error)
	// Write appends rec outside any transaction and waits for the ack.
	Write(ctx context.Context, rec *kgo.Record) error
	// EndOffsets are the high watermarks of topic's partitions.
	EndOffsets(ctx context.Context, topic string) (map[int32]int64, error)
}

// kafkaCluster is the cluster as Kafka has it.
type kafkaCluster struct {
	cl   *kgo.Client
	adm  *kadm.Client
	conn []kgo.Opt
	job  string
}

func newKafkaCluster(cl *kgo.Client, conn []kgo.Opt, job string) kafkaCluster {
	return kafkaCluster{cl: cl, adm: kadm.NewClient(cl), conn: conn, job: job}
}

var _ cluster = kafkaCluster{}

func (c kafkaCluster) EndOffsets(ctx context.Context, topic string) (map[int32]int64, error) {
	ends, err := c.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("listing the end offsets of %s: %w", topic, err)
	}
	out := map[int32]int64{}
	var failed error
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil && failed == nil {
			failed = fmt.Errorf("listing the end offset of %s/%d: %w", topic, o.Partition, o.Err)
		}
		out[o.Partition] = o.Offset
	})
	return out, failed
}

func (c kafkaCluster) Partitions(ctx context.Context, topics []string) ([]source.TopicPartition, error) {
	return source.Discover(ctx, c.adm, topics)
}

func (c kafkaCluster) ResolveStart(ctx context.Context, tps []source.TopicPartition, start config.StartPosition) (map[source.TopicPartition]int64, error) {
	return source.ResolveStart(ctx, c.adm, tps, start)
}

func (c kafkaCluster) ReadState(ctx context.Context, fn func(key, value []byte) error) error {
	return kstore.ReadState(ctx, c.conn, c.job, fn)
}

func (c kafkaCluster) Read(ctx context.Context, topic string, fn func(*kgo.Record) error, partitions ...int32) error {
	return kread.All(ctx, c.conn, topic, fn, partitions...)
}

func (c kafkaCluster) FetchOffsets(ctx context.Context, group string) (map[source.TopicPartition]int64, error) {
	fetched, err := c.adm.FetchOffsets(ctx, group)
	if err != nil {
		return nil, fmt.Errorf("fetching the offsets of group %s: %w", group, err)
	}
	out := map[source.TopicPartition]int64{}
	fetched.Each(func(o kadm.OffsetResponse) {
		if o.Err == nil && o.At >= 0 {
			out[source.TopicPartition{Topic: o.Topic, Partition: o.Partition}] = o.At
		}
	})
	return out, nil
}

func (c kafkaCluster) FetchStableOffsets(ctx context.Context, group string, tps []source.TopicPartition, timeout time.Duration) (map[source.TopicPartition]int64, error) {
	return fetchStableOffsets(ctx, c.adm, group, tps, timeout)
}

func (c kafkaCluster) AwaitSettled(ctx context.Context, topic string, partitions []int32, timeout time.Duration) error {
	return awaitSettled(ctx, c.adm, topic, partitions, timeout)
}

func (c kafkaCluster) RepartitionDrained(ctx context.Context, topic string, position func(partition int32) (int64, bool)) (bool, string, error) {
	return repartitionDrained(ctx, c.adm, c.conn, topic, position)
}

func (c kafkaCluster) Unread(ctx context.Context, topic string, from map[int32]int64) (map[int32]bool, error) {
	return unread(ctx, c.adm, c.conn, topic, from)
}

func (c kafkaCluster) Members(ctx context.Context, group string) ([]string, error) {
	described, err := c.adm.DescribeGroups(ctx, group)
	if err != nil {
		return nil, fmt.Errorf("describing the group: %w", err)
	}
	var members []string
	for _, g := range described {
		for _, m := range g.Members {
			if m.InstanceID != nil {
				members = append(members, *m.InstanceID)
			}
		}
	}
	return members, nil
}

func (c kafkaCluster) Write(ctx context.Context, rec *kgo.Record) error {
	return c.cl.ProduceSync(ctx, rec).FirstErr()
}
