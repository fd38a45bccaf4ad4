// Package checkpoint is the checkpoint record that commits with each epoch
// of a job, and its identifiers: ID numbers checkpoints (twophase.Epoch is
// the same number) and TaskID names the tasks that ack them. When a
// checkpoint starts, when it may commit and when the job restarts is the
// epoch machine's (package twophase); this package encodes what a
// checkpoint holds. It does no I/O; kstore reads and writes records on
// Kafka, savepoint exports them to files.
//
// # The checkpoint record
//
// Record is the value of the compacted <job>-checkpoints topic (key: the
// job name), written inside transaction N: id, job, config fingerprint,
// key-group count, stateful operator ids, next source offsets, creation
// time, guarantee, a per-operator state summary and (format v3) what each
// operator's state means, for the restart's compatibility check
// (savepoint.CheckRestart). EncodeRecord writes a
// versioned, CRC-32C-protected binary format (see codec.go for the layout);
// DecodeRecord reads it and rejects an unknown version, a truncated or
// corrupt value, or a non-canonical one, with an error and never a panic.
// testdata/record-v*.golden pin each format byte for byte: never
// regenerate one, add a new file for a new version. Compatible tells
// whether a job's configuration can restore a record of a build before v3,
// naming both sides of any mismatch.
package checkpoint
