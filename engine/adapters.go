package engine

import (
	"github.com/eoflow/pipeline/sink"
	"github.com/eoflow/pipeline/source"
)

// adapters make the Kafka adapters an attempt runs: the transactional
// producer (the decision log), the plain producer of the outputs, the
// source readers. dialedAdapters make them on franz-go clients of the
// job's cluster; the simulations make the same adapters on clients of
// the Kafka model (internal/testkit/memkafka), so what they prove is
// about the code that runs here, not about stand-ins for it.
type adapters interface {
	// txn is the job's transactional producer (single mode).
	txn(a *attempt) (*sink.Txn, error)
	// memberTxn is a group member's, whose records of the internal
	// topics carry their partition.
	memberTxn(a *attempt, internal, mixed []string) (*sink.Txn, error)
	// plain is the outputs' idempotent producer.
	plain(a *attempt) (*sink.Plain, error)
	// reader reads the partitions from the offsets given.
	reader(a *attempt, offsets map[source.TopicPartition]int64) (*source.Reader, error)
}

// dialedAdapters are the adapters on franz-go clients of the job's
// cluster.
type dialedAdapters struct{}

func (dialedAdapters) txn(a *attempt) (*sink.Txn, error) {
	j := a.j
	return sink.NewTxn(j.conn, j.cfg.Name, j.cfg.Kafka.TransactionTimeout, append(a.limits.Opts(), j.metrics.KafkaHooks("txn"))...)
}

func (dialedAdapters) memberTxn(a *attempt, internal, mixed []string) (*sink.Txn, error) {
	j := a.j
	return sink.NewMemberTxn(j.conn, j.cfg.Name, j.instance, internal, mixed, j.cfg.Kafka.TransactionTimeout, append(a.limits.Opts(), j.metrics.KafkaHooks("txn"))...)
}

func (dialedAdapters) plain(a *attempt) (*sink.Plain, error) {
	return sink.NewPlain(a.j.conn, append(a.limits.Opts(), a.j.metrics.KafkaHooks("outputs"))...)
}

func (dialedAdapters) reader(a *attempt, offsets map[source.TopicPartition]int64) (*source.Reader, error) {
	return source.NewReader(a.j.conn, offsets, a.j.metrics.KafkaHooks("source"))
}
