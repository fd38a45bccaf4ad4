package checkpoint

// ID numbers checkpoints of one job: 1-based and strictly increasing, one
// per epoch. Checkpoint N is the state after epoch N, and under exactly_once
// it commits in Kafka transaction N. The zero ID means "none".
// (twophase.Epoch is this type.)
type ID uint64

// TaskID names a task that must acknowledge every checkpoint (a source, a
// keyed operator, a sink). It is stable for the life of a task graph.
type TaskID string
