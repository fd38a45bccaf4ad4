// Package sink writes a job's results to Kafka under the job's guarantee.
//
//   - at_most_once: an idempotent producer, no checkpoint coordination.
//   - at_least_once: an idempotent producer flushed before each checkpoint
//     commits; replay after a crash may repeat outputs.
//   - exactly_once: one Kafka transaction per checkpoint epoch, holding the
//     epoch's output records, its state changelog records and the checkpoint
//     record itself, so "checkpoint N complete" and "transaction N
//     committed" are the same event (docs/exactly-once.md). Records that arrive
//     after barrier N never enter transaction N.
//
// Records that cannot be decoded or evaluated go to the sink's dead-letter
// topic, inside the same transaction, with the reason in headers.
//
// Txn and Plain make their calls through TxnClient and PlainClient, the
// calls of franz-go's client they use: NewTxn and NewPlain make a
// *kgo.Client, NewTxnOn and NewPlainOn take any client, such as the
// in-memory model's that the broker-free tests run them on
// (internal/testkit/memkafka). The model answers the requests Txn sends
// itself (offset commits on behalf of a group member, the probe of a
// failed transaction) as the brokers do.
package sink
