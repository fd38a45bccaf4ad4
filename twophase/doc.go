// Package twophase is the commit protocol that makes a job's results
// exactly-once across several participants: a pure state machine, Protocol,
// that decides which participant to call and when, and a thin synchronous
// Driver that makes those calls. Protocol does no I/O, starts no goroutine
// and reads no clock, so every run replays from its inputs.
//
// # Participants and the decision log
//
// An epoch is everything a job produced between barrier N-1 and barrier N;
// Epoch N commits with checkpoint N, so the two share a number. Every
// Participant holds part of each epoch: it can prepare it (durable but
// invisible), commit it (visible) or abort it. One of them, the
// DecisionLog, is special: its commit of epoch N IS the durable decision "N
// commits". Today that is the Kafka transaction of epoch N, which carries
// checkpoint record N (DESIGN.md §2), and it is the only participant; a
// database with prepared transactions can join later as another
// Participant, with that same checkpoint record as its decision log.
//
// # The protocol
//
//  1. Recover, before any epoch. Every participant's Recover fences its
//     predecessors (a crashed or still running earlier instance) and
//     reports the epochs it holds prepared but neither committed nor
//     aborted: in doubt. Once the decision log is fenced, so that no
//     decision can land any more, its LastDecided is read: D. Each
//     participant's in-doubt epochs are then settled by that one number:
//     e <= D is committed (in epoch order, one at a time), e > D is
//     aborted. Only then does the job resume from checkpoint D and begin
//     epoch D+1; epoch numbers of aborted attempts are used again, which is
//     why every in-doubt epoch must be settled first.
//  2. Prepare. When barrier N has reached the participants (Begin), every
//     participant prepares N. At most Config.MaxInFlight epochs are in
//     flight (begun, not done or aborted).
//  3. Decide. When the checkpoint coordinator hands out commit N (Decide:
//     every task acked N), every participant prepared N and N-1 is
//     decided, the decision log commits N. That commit is the decision:
//     decisions are made one at a time, strictly in epoch order.
//  4. Commit. Once the decision log's commit returned (Decided), every
//     other participant commits N, each in epoch order and one commit at a
//     time. When all did, N is Done.
//  5. Abort before the decision. A failure before step 3 (a failed
//     Prepare, or the caller's Abort) aborts N and every later undecided
//     epoch at every participant, the decision log first (once its abort
//     lands, N can never be decided), and fails the job: a later epoch
//     cannot commit without N, so the job restarts from the last decided
//     checkpoint and replays (checkpoint.FailError says why).
//  6. No abort after the decision. If the decision log's commit of N fails,
//     N is in doubt (the commit may have landed and its reply been lost):
//     it is aborted nowhere, the job fails, and recovery settles it by
//     reading the decision log back. If another participant's commit of N
//     fails, N is decided and stays decided: the job fails and recovery
//     commits N there. Nothing undoes a decision.
//  7. Fenced. An error that Config.IsFenced recognises (ErrFenced) means
//     another instance owns the job: the failure is permanent, nothing is
//     committed after it, and this instance must exit, not restart.
//  8. Crash. Whatever step a crash interrupts, step 1 of the next instance
//     settles it: before the decision landed every participant aborts N,
//     after it every participant commits N.
//
// # Driving a Protocol
//
// One goroutine owns a Protocol (or uses the Driver, which does all of
// this for one epoch at a time). Like etcd raft, inputs go in and actions
// come out, but each input returns its own actions at once, so no action
// is ever withdrawn before the caller saw it:
//
//  1. NewProtocol, then Start, once. Feed Begin(N) when barrier N reached
//     the participants, Decide(N) when the checkpoint coordinator hands out
//     commit N, Abort(N) when the runtime gives epoch N up (a declined or
//     timed-out checkpoint, a shutdown). Report the outcome of every call
//     action exactly once, with the matching input: Recovered or
//     RecoverFailed, DecisionRead or DecisionReadFailed, Prepared or
//     PrepareFailed, Committed or CommitFailed, Aborted or AbortFailed. An
//     input that returns an error changed nothing and emitted nothing: log
//     it (it is a bug in the caller, or a Begin beyond MaxInFlight).
//  2. Act on the returned actions in order. Actions of one batch never
//     depend on one another: an action that needs an outcome is emitted
//     only after that outcome was reported. So calls on different
//     participants may run concurrently, but calls on one participant run
//     one at a time, in the order emitted (a producer is not re-entrant,
//     and a participant's commits must stay in epoch order).
//  3. ActRecover, ActReadDecision, ActPrepare, ActCommit, ActAbort: call
//     the named participant and report the outcome (step 1).
//  4. ActDecided(N): checkpoint N is complete and durable. Report
//     checkpoint.Coordinator.Committed(N); the sink may start the next
//     transaction and release what it held back for epoch N+1.
//  5. ActDone(N): epoch N is visible everywhere and leaves the epochs in
//     flight, making room for a Begin.
//  6. ActResume(D): recovery is over. Restore state and source offsets from
//     checkpoint D (0: the configured start positions), build the
//     checkpoint coordinator with LastCompleted D, and Begin(D+1) at the
//     next barrier. A Resume does not prove this instance still owns the
//     job; its next call does.
//  7. ActFail: always the last action of its batch; Action.Err is the
//     *FailError. Make the aborts before it (best effort: the next recovery
//     repeats them), skip every other call not yet started, stop the task
//     graph. If errors.Is(err, ErrFenced) (FailError.Permanent), exit with
//     its message and do not restart. Otherwise restart: a new Protocol
//     and Start; FailError.Decided and FailError.InDoubt say what recovery
//     will commit. After Fail a Protocol emits nothing but ActDecided, for
//     a decision that was in flight and landed; outcomes of calls still
//     running are accepted and change nothing else.
//  8. Give each Protocol (each incarnation of the task graph) its own
//     channels: an outcome from an older one must never reach a newer one.
//
// # Guarantees
//
// Checked after every step of the seeded simulation and the fuzz target in
// the tests, against in-memory participants that fail before or after
// taking effect, crash, are taken over by a second instance while the first
// still runs, and are fenced: a participant commits epoch N only after the
// decision log committed the same attempt of N, and never aborts an epoch it
// committed; every participant commits in epoch order and the decision log
// without a gap; never more than MaxInFlight epochs are in flight; after a
// fenced outcome nothing is committed; when recovery ends, every
// participant has committed exactly the decision log's epochs and holds
// nothing in doubt.
//
// # Kafka as the decision log
//
// The Kafka participant (a franz-go transactional producer whose
// transaction N carries epoch N's outputs, state changes and checkpoint
// record N) implements DecisionLog as follows:
//
//   - Prepare(N): produce checkpoint record N into the open transaction,
//     flush, and return the first asynchronous produce error. Everything
//     of epoch N is then on the brokers, invisible to read_committed
//     readers. It survives no crash of ours (the next instance's fence
//     aborts it), which a decision log may do: not committed means not
//     decided.
//   - Commit(N): EndTransaction(TryCommit). An error leaves N in doubt
//     (step 6). Idempotent: nothing to do if N already committed.
//   - Abort(N): abort the buffered records and EndTransaction(TryAbort);
//     nothing to do if N is not the open transaction.
//   - Recover: InitProducerId (sink.Txn.Fence), which aborts whatever a
//     predecessor left open and fences it; it reports nothing in doubt.
//   - LastDecided: the id of the newest checkpoint record, read with
//     read_committed (kstore.Latest), 0 if none.
//   - IsFenced: sink.IsFenced, a takeover by another instance (errors the
//     producer marked sink.ErrFenced, which wraps ErrFenced). An epoch error
//     of a transaction that outlived transaction.timeout.ms is told apart
//     by asking the coordinator (sink.Classify): it is not fenced, and the
//     job restarts from its last checkpoint.
package twophase
