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
//     aborted. Only then does the job resume from checkpoint D and open
//     epoch D+1; epoch numbers of aborted attempts are used again, which is
//     why every in-doubt epoch must be settled first.
//  2. Begin. An epoch opens at every participant (Begin) when it enters the
//     window of Config.MaxInFlight epochs in flight (opened, not done or
//     aborted): at the end of recovery, and whenever an epoch is done. From
//     then on the runtime hands the participants its records. A failed
//     Begin fails the job like a failed Prepare (step 6).
//  3. Prepare. When barrier N has reached the participants (Barrier), every
//     participant prepares N, each once it reported Begun(N).
//  4. Decide. When the checkpoint coordinator hands out commit N (Decide:
//     every task acked N), every participant prepared N and N-1 is
//     decided, the decision log commits N. That commit is the decision:
//     decisions are made one at a time, strictly in epoch order.
//  5. Commit. Once the decision log's commit returned (Decided), every
//     other participant commits N, each in epoch order and one commit at a
//     time. When all did, N is Done.
//  6. Abort before the decision. A failure before step 4 (a failed Begin
//     or Prepare, or the caller's Abort, which may name the open epoch) aborts N and every later undecided
//     epoch at every participant, the decision log first (once its abort
//     lands, N can never be decided), and fails the job: a later epoch
//     cannot commit without N, so the job restarts from the last decided
//     checkpoint and replays (checkpoint.FailError says why).
//  7. No abort after the decision. If the decision log's commit of N fails,
//     N is in doubt (the commit may have landed and its reply been lost):
//     it is aborted nowhere, the job fails, and recovery settles it by
//     reading the decision log back. If another participant's commit of N
//     fails, N is decided and stays decided: the job fails and recovery
//     commits N there. Nothing undoes a decision.
//  8. Fenced. An error that Config.IsFenced recognises (ErrFenced) means
//     another instance owns the job: the failure is permanent, nothing is
//     committed after it, and this instance must exit, not restart.
//  9. Crash. Whatever step a crash interrupts, step 1 of the next instance
//     settles it: before the decision landed every participant aborts N,
//     after it every participant commits N.
//
// # Driving a Protocol
//
// One goroutine owns a Protocol (or uses the Driver, which does all of
// this for one epoch at a time). Like etcd raft and checkpoint.Coordinator,
// inputs go in through methods and actions accumulate until the caller
// takes them with Ready:
//
//  1. NewProtocol, then Start, once. Feed Barrier(N) when barrier N reached
//     the participants, Decide(N) when the checkpoint coordinator hands out
//     commit N, Abort(N) when the runtime gives epoch N up (a declined or
//     timed-out checkpoint, a shutdown, the end of the attempt that fed the
//     open epoch). Report the outcome of every call action exactly once, as
//     it arrives, with the matching input: Recovered or RecoverFailed,
//     DecisionRead or DecisionReadFailed, Begun or BeginFailed, Prepared or
//     PrepareFailed, Committed or CommitFailed, Aborted or AbortFailed. An
//     input that returns an error changed nothing and emitted nothing: log
//     it (it is a bug in the caller, or a Barrier beyond MaxInFlight).
//  2. When HasReady, take rd := Ready(), act on rd.Actions in order, and
//     call Advance; outcomes reported between Ready and Advance are kept
//     for the next Ready. An action that needs an outcome is emitted only
//     after that outcome was reported, so calls on different participants
//     may run concurrently, but calls on one participant run one at a
//     time, in the order emitted (a producer is not re-entrant, and a
//     participant's calls must stay in epoch order).
//  3. ActRecover, ActReadDecision, ActBegin, ActPrepare, ActCommit,
//     ActAbort: call the named participant and report the outcome (step 1).
//  4. ActDecided(N): checkpoint N is complete and durable. Report
//     checkpoint.Coordinator.Committed(N).
//  5. ActDone(N): epoch N is visible everywhere and leaves the epochs in
//     flight; the ActBegin of the next epoch follows.
//  6. ActResume(D): recovery is over. Restore state and source offsets from
//     checkpoint D (0: the configured start positions), build the
//     checkpoint coordinator with LastCompleted D; the ActBegin of D+1
//     follows in the same Ready. A Resume does not prove this instance still owns the
//     job; its next call does.
//  7. ActFail: the last action of the input that failed; Action.Err is the
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
// committed; every participant receives Begin(N) before Prepare(N) and
// Commit(N); a failed Begin aborts and fails; every participant commits in
// epoch order and the decision log without a gap; never more than
// MaxInFlight epochs are in flight, nor begun and not yet committed or
// aborted at any participant; after a
// fenced outcome nothing is committed; when recovery ends, every
// participant has committed exactly the decision log's epochs and holds
// nothing in doubt.
//
// # Kafka as the decision log
//
// The Kafka participant (a franz-go transactional producer whose
// transaction N carries epoch N's outputs, state changes and checkpoint
// record N) implements DecisionLog as follows; it holds one transaction at
// a time, so it needs MaxInFlight 1:
//
//   - Begin(N): BeginTransaction.
//   - Prepare(N): flush, and return the first asynchronous produce error.
//     The runtime produces checkpoint record N into the transaction as the
//     epoch's last record, so nothing is staged. Everything of epoch N is
//     then on the brokers, invisible to read_committed readers. It survives
//     no crash of ours (the next instance's fence aborts it), which a
//     decision log may do: not committed means not decided.
//   - Commit(N): EndTransaction(TryCommit). An error leaves N in doubt
//     (step 7). Idempotent: nothing to do if N already committed.
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
