// Package kstore keeps a job's checkpoints in Kafka: two compacted topics
// per job, written only inside transactions and read only with
// read_committed.
//
//   - <job>-checkpoints: one partition, key = job name, value = the
//     encoded checkpoint.Record. Compaction keeps the newest committed one.
//     A record larger than a record of the topic is written in pieces
//     before it (pieces.go).
//   - <job>-state: the keyed-state changelog, key = (operator, key group,
//     user key), value = the encoded state or a tombstone. Compaction keeps
//     the latest value per key, so the topic stays as big as the state. A
//     value larger than a record is written in pieces under keys of their
//     own (state/pieces.go).
//
// A checkpoint record and the state changes of its epoch commit in the same
// transaction, so reading both topics to their last stable offset always
// yields state and offsets of the same input prefix.
package kstore
