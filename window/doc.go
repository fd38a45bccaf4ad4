// Package window is the pure logic of event-time windows: which windows a
// timestamp belongs to, how sessions merge, when a window fires, each
// source partition's clock and lateness, the job's watermark, and the
// timers that find due keys. It does no I/O, starts no goroutines and
// reads no clock: every function is deterministic, so the runtime's
// windows depend on the input alone (../shared/design/windows.md).
//
// All times are int64 epoch milliseconds. NoWatermark (math.MinInt64)
// means "no time yet": a partition that has not delivered a record, a job
// whose watermark has not started. Arithmetic saturates instead of
// overflowing, so timestamps near the ends of int64 behave.
//
// # Windows
//
// A Window is the half-open interval [Start, End). Tumbling windows of
// size S are [kS, (k+1)S); hopping windows of size S every A are
// [kA, kA+S) (a timestamp is in ceil(S/A) of them, fewer when A does not
// divide S); both are aligned to the epoch, so every worker and every run
// assigns the same windows. A session starts as [ts, ts+gap) and two
// sessions of a key merge when they overlap: records gap or more apart
// are separate sessions.
//
// # Time
//
// A PartitionClock is one partition's largest event time. A record is
// late when it is behind its own partition's watermark (largest minus
// max_out_of_orderness) by more than the allowed lateness, which depends
// on the partition's log alone. JobWatermark advances the job's watermark
// only when asked (at checkpoint barriers): the largest of the previous
// one and the least partition watermark. A window fires once the job's
// watermark reaches its end plus the allowed lateness (Fires). A record
// that is not late therefore never meets a fired window.
package window
