// Package source reads Kafka partitions as the start of a job's task graph.
//
// A source task owns a set of partitions and reads them with
// isolation.level=read_committed, so a job never consumes another job's
// aborted output. Its state is its position: the next offset of every
// partition. That position is the source's part of a checkpoint, and it is
// recorded exactly when the source injects barrier N into its output, so
// that "offsets of checkpoint N" and "records before barrier N" describe the
// same input prefix (docs/exactly-once.md, "Invariants"). On restore, each partition
// is sought to its checkpointed offset; without a checkpoint it starts where
// the configuration says (earliest, latest or a timestamp).
//
// The consumer group named after the job is written to only for the outside
// world's lag tools; the checkpoint, not the group, is the source of truth.
//
// Reader and GroupReader make their calls through ReaderClient and
// GroupClient, the calls of franz-go's client they use: NewReader and
// NewGroupReader make a *kgo.Client, NewReaderOn and NewGroupReaderOn take
// any client, such as the in-memory model's that the broker-free tests run
// them on (internal/testkit/memkafka).
package source
