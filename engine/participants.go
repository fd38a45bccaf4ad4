package engine

import (
	"context"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/checkpoint/kstore"
	"github.com/eoflow/pipeline/config"
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
// a start position is in them, and the state topic. kafkaCluster reads
// Kafka; the simulation reads its model.
type cluster interface {
	Partitions(ctx context.Context, topics []string) ([]source.TopicPartition, error)
	ResolveStart(ctx context.Context, tps []source.TopicPartition, start config.StartPosition) (map[source.TopicPartition]int64, error)
	ReadState(ctx context.Context, fn func(key, value []byte) error) error
}

// kafkaCluster is the cluster as Kafka has it.
type kafkaCluster struct {
	adm  *kadm.Client
	conn []kgo.Opt
	job  string
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
