// Package window is the pure logic of event-time windows: which windows a
// timestamp belongs to, how sessions merge, when a window fires, each
// source partition's clock and lateness, the job's watermark, and the
// timers that find due keys. It does no I/O, starts no goroutines and
// reads no clock: every function is deterministic, so the runtime's
// windows depend on the input alone (the runtime's eventtime.go states
// the invariant and why it holds).
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
// A PartitionClock is one partition's largest event time; its watermark
// is that minus max_out_of_orderness. Lateness is per window, judged
// against the watermark wp of the record's own partition just before the
// record (Observe returns it), which depends on the partition's log
// alone: a window is closed for the record when End + lateness <= wp
// (Fires), and the record is late when every window it belongs to is
// closed (Spec.Late). For tumbling and hopping windows that is Flink's
// rule; for sessions the window judged is [ts, ts+1), the earliest end of
// a session the record could join, so that no session it merges with can
// have fired. JobWatermark advances the job's watermark only when asked
// (at checkpoint barriers): the largest of the previous one and the least
// partition watermark, never above a non-idle partition's. A window fires
// once the job's watermark reaches its end plus the allowed lateness
// (Fires), so a window open for a record has not fired yet.
package window
