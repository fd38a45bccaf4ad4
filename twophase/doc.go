// Package twophase is the epoch lifecycle that makes a job's results
// exactly-once: one pure state machine, Machine, that is both the
// checkpoint coordinator (when barrier N is injected, when checkpoint N may
// commit, when the job must restart) and the two-phase commit of epoch N
// across every participant, because they are one protocol: checkpoint N is
// complete exactly when the decision log committed epoch N. The Machine
// does no I/O, starts no goroutine and reads no clock (time arrives in
// messages), so every run replays from its inputs.
//
// # Epochs, participants and the decision log
//
// Epoch N is everything a job produced between barrier N-1 and barrier N;
// it commits with checkpoint N, so the two share a number (Epoch is
// checkpoint.ID). Every Participant holds part of each epoch: it can begin
// it, prepare it (durable but invisible), commit it (visible) or abort it.
// One of them, the DecisionLog, is special: its commit of epoch N IS the
// durable decision "checkpoint N is complete". That is the Kafka
// transaction of epoch N, which carries the epoch's outputs, state changes
// and, produced last, checkpoint record N. Under at_least_once the output
// producer is a second participant (it prepares by flushing); a database
// with prepared transactions could be another.
//
// # The protocol
//
//  1. Recover, before any epoch. Every participant fences its predecessors
//     (a crashed or still running earlier instance) and reports the epochs
//     it holds prepared but neither committed nor aborted: in doubt. Once
//     the decision log is fenced, so that no decision can land any more,
//     its last decided checkpoint D is read. Every in-doubt epoch is
//     settled by that one number: e <= D is committed (in epoch order, one
//     at a time), e > D is aborted. Only then does the job resume from
//     checkpoint D (ActResume); epoch numbers of aborted attempts are used
//     again, which is why every in-doubt epoch must be settled first.
//  2. Begin. Epoch N opens at every participant (ActBegin) when it enters
//     the window of Config.MaxInFlight epochs in flight: at the end of
//     recovery, and whenever an epoch is done. Once every participant began
//     it, the caller hands them its records.
//  3. Trigger. Once epoch N is open everywhere, checkpoint N is triggered
//     (ActTrigger: inject barrier N at every source) when its time comes:
//     Interval after the previous trigger and MinPause after the previous
//     end, or at once for TriggerNow and Stop. Ids are contiguous from the
//     restored checkpoint on. Every task acks barrier N once it passed it;
//     the sink acks last, once checkpoint record N is in the transaction.
//  4. Prepare. When every task acked N, everything of epoch N was handed
//     to the participants: every participant prepares N (ActPrepare).
//  5. Decide. When every participant prepared N and N-1 is decided, the
//     decision log commits N (ActCommit at the decision log). That commit
//     is the decision: decisions are made one at a time, strictly in epoch
//     order. When it returned, checkpoint N is complete (ActCompleted).
//  6. Commit. Then every other participant commits N, each in epoch order
//     and one commit at a time. When all did, N is done (ActDone) and the
//     next epoch opens (step 2).
//  7. Abort before the decision. A failure before step 5 (a task declines,
//     the checkpoint times out, a participant cannot begin or prepare, the
//     caller gives up) aborts N and every later undecided epoch at every
//     participant, the decision log first (once its abort landed, N can
//     never be decided), and fails the job: a later epoch cannot commit
//     without N, so the job restarts from the last decided checkpoint and
//     replays (FailError says why). Timeout runs from the trigger until
//     the decision is asked for; after that only its outcome counts.
//  8. No abort after the decision. If the decision log's commit of N fails,
//     N is in doubt (the commit may have landed and its reply been lost): it
//     is aborted nowhere, the job fails, and the next recovery settles it by
//     reading the decision log back. If another participant's commit of N
//     fails, N is decided and stays decided: the job fails and recovery
//     commits N there. Nothing undoes a decision.
//  9. Fenced. An error that Config.IsFenced recognises (ErrFenced) means
//     another instance owns the job: the failure is permanent, nothing is
//     committed after it, and this instance must exit, not restart.
//  10. Stop. After Stop the final checkpoint is triggered like TriggerNow's
//     and nothing after it; no epoch opens after it, and once it is done
//     everywhere the Machine is Stopped (epochs opened after it are
//     aborted).
//  11. Crash. Whatever step a crash interrupts, step 1 of the next instance
//     settles it: before the decision landed every participant aborts N,
//     after it every participant commits N.
//
// # Driving a Machine
//
// One goroutine owns a Machine. Like etcd raft, every input goes in
// through Step and the outputs come out as a Ready:
//
//  1. NewMachine; its first Ready starts recovery. Feed every event as a
//     Msg, as it happens: MsgStart once the task graph runs (the tasks that
//     ack checkpoints, the schedule's start), MsgTick on a timer (a tenth of
//     the interval is plenty), MsgAck or MsgDecline when a task reports on
//     barrier N, MsgTriggerNow for a savepoint and MsgStop on SIGTERM (the
//     checkpoint that serves them is Promised), MsgAbort when the task graph
//     stops without a stop, and the outcome of every call action exactly
//     once, as it arrives (Outcome). A Step that returns an error changed
//     nothing and emitted nothing: log it (an ack for a checkpoint already
//     aborted is a normal race; an unknown task is a bug of the caller).
//  2. When HasReady, take rd := Ready(), act on rd.Actions in order, and
//     call Advance; messages stepped between Ready and Advance keep their
//     actions for the next Ready. An action that needs an outcome is
//     emitted only after that outcome came, so calls on different
//     participants may run concurrently, but calls on one participant run
//     one at a time, in the order emitted (a producer is not re-entrant,
//     and a participant's calls must stay in epoch order).
//  3. ActRecover, ActReadDecision, ActBegin, ActPrepare, ActCommit,
//     ActAbort: call the participant and report the outcome. Before
//     MsgStart, a TriggerNow's checkpoint needs no ack: the caller wrote its
//     checkpoint record into the open epoch itself (importing a savepoint).
//  4. ActResume(D): restore state and source offsets from checkpoint D (0:
//     the configured start positions). The ActBegin of D+1 follows.
//  5. ActTrigger(N): inject barrier N at every source, in order. Register
//     what must happen at barrier N (a savepoint's export) before.
//  6. ActCompleted(N): checkpoint N is durable. Answer savepoints and stop
//     waiters, update metrics. ActDone(N): N is visible everywhere; Open
//     becomes N+1 once every participant began it, and the records held
//     back since barrier N go to it.
//  7. ActFail: the last action of the message that failed; Action.Err is
//     the *FailError. Make the aborts before it (best effort: the next
//     recovery repeats them), skip every other call not yet started, stop
//     the task graph. If FailError.Permanent (errors.Is(err, ErrFenced)),
//     exit and do not restart. Otherwise restart with a new Machine. After
//     Fail a Machine emits nothing but ActCompleted, for a decision that
//     was in flight and landed; outcomes of calls still running are taken
//     and change nothing else.
//  8. Give each Machine (each incarnation of the task graph) its own
//     channels: an ack or outcome from an older one must never reach a
//     newer one.
//
// # Guarantees
//
// Checked after every message of the seeded simulation and the fuzz target
// in the tests, against in-memory participants that fail before or after
// taking effect, crash, are taken over by a second instance while the first
// still runs, and are fenced: checkpoint ids are contiguous; at most
// MaxInFlight epochs are in flight; a periodic checkpoint keeps Interval
// and MinPause; no checkpoint outlives Timeout before its decision; the
// decision log commits N only when every task acked N, every participant
// prepared this attempt of N and N-1 is decided, one decision at a time;
// Completed only after the decision log committed; a participant commits N
// only after the decision log committed the same attempt of N, in epoch
// order, never aborting what it committed; the committed outputs are a
// prefix of the input, each record exactly once; after Fail nothing but
// the in-doubt outcome; after a fenced outcome nothing is committed; when
// recovery ends, every participant committed exactly the decision log's
// epochs and holds nothing in doubt.
//
// # Kafka as the decision log
//
// The Kafka participant (sink.Txn, a franz-go transactional producer whose
// transaction N carries epoch N's outputs, state changes and checkpoint
// record N) holds one transaction at a time, so it needs MaxInFlight 1:
//
//   - Begin(N): BeginTransaction.
//   - Prepare(N): flush, and return the first asynchronous produce error
//     (in group mode, then add the epoch's source offsets to the
//     transaction). Everything of epoch N is then on the brokers, invisible
//     to read_committed readers. It survives no crash of ours (the next
//     instance's fence aborts it), which a decision log may do: not
//     committed means not decided.
//   - Commit(N): EndTransaction(TryCommit). An error leaves N in doubt
//     (step 8).
//   - Abort(N): abort the buffered records and EndTransaction(TryAbort);
//     nothing to do if no transaction is open.
//   - Recover: InitProducerId (sink.Txn.Fence), which aborts whatever a
//     predecessor left open and fences it; it reports nothing in doubt.
//   - LastDecided: the newest checkpoint record, read with read_committed
//     (kstore.Latest), nil if none: the caller reports its id and restores
//     from it.
//   - IsFenced: sink.IsFenced, a takeover by another instance. An epoch
//     error of a transaction that outlived transaction.timeout.ms is told
//     apart by asking the coordinator (sink.Classify): it is not fenced, and
//     the job restarts from its last checkpoint.
package twophase
