// Package checkpoint coordinates aligned barrier checkpoints (asynchronous
// barrier snapshotting, after Chandy–Lamport) and encodes the checkpoint
// record that commits with each of them. It does no I/O, starts no
// goroutines and reads no clock: time arrives as arguments, so every run is
// reproducible from its inputs.
//
// # The coordinator
//
// A Coordinator decides, for a fixed set of tasks, when checkpoint N starts,
// when it may commit, and when the job must restart. Checkpoint N is
// complete exactly when its Kafka transaction committed (DESIGN.md §2); the
// coordinator never calls it complete before the caller says so.
//
// Like etcd raft, inputs go in through methods and outputs come out as a
// Ready value. One goroutine of the runtime owns the Coordinator and loops:
//
//  1. Feed inputs as they happen: Tick(now) on a timer (a tenth of the
//     interval is plenty); Ack or Decline when a task reports on barrier N;
//     Committed(N, now) or CommitFailed(N, err) when transaction N ended;
//     TriggerNow for a savepoint; Stop on SIGTERM. An input that returns
//     an error changed nothing: log it and go on.
//  2. When HasReady, take rd := Ready() and act on its fields in the order
//     of steps 3 to 7.
//  3. rd.Fail (a *FailError): the job must restart. Inject nothing, commit
//     nothing, stop the task graph. If FailError.InDoubt is set, that
//     commit is already on its way: let it end (its outcome may still be
//     fed in) or let the restart's fencing settle it. Then recover as
//     DESIGN.md says (fence, read the newest checkpoint record with
//     read_committed, restore) and build a new Coordinator whose
//     LastCompleted is the id recovery read: that is the truth, not
//     FailError.RestartFrom.
//  4. rd.Aborted: tasks drop their snapshots of those ids and their
//     transactions are aborted (or left to the restart's fencing). An abort
//     always comes with or after Fail: see FailError for why a lost epoch
//     cannot be skipped.
//  5. rd.Trigger: for each id, in order, every source records its next
//     offsets and injects barrier id. Barriers enter a source in id order.
//  6. rd.Commit: write checkpoint record N (EncodeRecord) into transaction
//     N, which already holds epoch N's outputs and state changes, commit
//     it, and report Committed or CommitFailed. Commit nothing that was not
//     handed out here: the coordinator hands out N only when every task
//     acked N and N-1 committed, and never two at once.
//  7. rd.Completed: checkpoint N is durable. Answer savepoint and stop
//     waiters, update metrics, let the sink release what it held back for
//     the next epoch.
//  8. Call Advance. Inputs fed between Ready and Advance are kept for the
//     next Ready, never lost; Ready without Advance repeats itself.
//
// Timing. Tick triggers a periodic checkpoint when Interval passed since the
// previous trigger, MinPause passed since the previous checkpoint ended, and
// fewer than MaxConcurrent are in flight; the first one is due Interval
// after NewCoordinator. Every input that carries a time (Tick, Committed,
// TriggerNow, Stop) applies it, so a checkpoint that fell due while
// MaxConcurrent were in flight starts at the Committed that frees a slot;
// the interval never "catches up" with a burst. TriggerNow and Stop skip Interval and MinPause but
// not MaxConcurrent: with no free slot the request is queued and served by
// the very next trigger, whose id they return. Timeout runs from the trigger
// until the commit is handed out; after that only the caller's outcome
// counts (its own bound is the transaction timeout), because timing out a
// commit in progress would call "aborted" what may yet commit. Time never
// runs backward inside the coordinator: an earlier now is treated as the
// latest seen.
//
// Failure. Any abort (timeout, decline, failed commit) fails the job: every
// checkpoint in flight is aborted, except one whose commit was handed out,
// which is left in doubt. After Fail nothing is triggered or handed out for
// commit; only the in-doubt outcome is still accepted.
//
// Restart. Numbering continues at LastCompleted+1, so ids of checkpoints
// aborted by a failure are used again. Aborted transactions are invisible to
// read_committed readers, so Kafka does not mind, but the runtime must drop
// every ack, decline and commit outcome from the previous task graph (give
// each incarnation its own channels) before it feeds the new Coordinator.
//
// Guarantees, checked by the seeded simulation in the tests: trigger ids
// are LastCompleted+1, +2, … with no gap or repeat; at most MaxConcurrent
// checkpoints are in flight; commits are handed out strictly in id order,
// one at a time, only when every task acked; a checkpoint is reported
// Completed only after Committed; after Fail nothing new is triggered or
// handed out for commit.
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
