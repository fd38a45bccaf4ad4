// Package engine builds a job's task graph from its configuration and
// runs it, restarting it from the last complete checkpoint after a failure.
//
// The graph, inside one process:
//
//	source tasks ──► workers (keyed operators) ──► sink task
//	 (S goroutines)   (W goroutines, key groups     (1 goroutine: the
//	  read partitions, spread as ranges)             producers and the
//	  run the stateless                              transaction)
//	  steps, route by
//	  key group)
//
// Tasks are joined by bounded channels of message batches, so a slow sink
// slows the sources (backpressure) instead of growing memory.
//
// Checkpoints are barriers (asynchronous barrier snapshotting). One
// coordinator loop per attempt (coordinate.go) owns the epoch machine
// (twophase.Machine) and is the only way an epoch commits: it triggers
// checkpoint N; each source records its next offsets and sends barrier N
// (carrying them) to every worker; a worker that has barrier N from every
// source snapshots the keys its operator changed since N-1, sends those
// changelog records and then barrier N to the sink; once the sink has
// barrier N from every worker, everything of epoch N has been handed to
// the producers: it writes checkpoint record N into the transaction, last,
// acks, and holds what arrives after barrier N until epoch N+1 is open.
// When every task acked, the loop has the participants prepare (flush),
// the transaction commit (the decision: checkpoint N is complete) and the
// next epoch begin, each call on the loop's committer goroutine, while the
// graph goes on. A task that received barrier N from one input holds that
// input's later messages back until barrier N arrived from all inputs, so
// every task's snapshot describes the same input prefix.
// docs/exactly-once.md explains the protocol and its invariants.
//
// Any failure (a commit, a timeout, a lost broker) ends the attempt: every
// goroutine is stopped and waited for, the epoch left open is aborted (or
// left to the next attempt's fencing), and the next attempt restores from
// the newest committed checkpoint. Being fenced by another instance, or a
// checkpoint that does not fit the configuration, ends the job instead.
//
// Tables (table.go) are read to their ends after the restore and before
// the graph starts, then kept up to date by one task each, which the
// graph starts with the others; the source tasks' join steps look keys
// up in them, and every checkpoint record carries their offsets. A join
// as of event time (asof.go) keeps the table's versions besides, and the
// source tasks hold its stream's records until the table's event time
// passes them, releasing them at barriers; the records still held are in
// the checkpoint record.
//
// Savepoints (savepoints.go; the format is checkpoint/savepoint) ride on a
// checkpoint: Job.Savepoint and Job.StopWithSavepoint register an export
// for checkpoint N before it is triggered; each worker, at barrier N, sends
// its snapshot on as always and then, before any later record, writes its
// whole state into the savepoint. The coordinator loop commits the
// savepoint once N completed and every worker exported; an export that
// fails fails the savepoint, never the checkpoint. A job started with
// WithSavepointRestore checks the savepoint against its configuration
// before it changes anything on the cluster, then imports it in one
// transaction as its newest checkpoint.
//
// Group mode (scale.mode: group; group.go, groupmode.go, membership.go)
// runs one job on many processes: the job's consumer group deals out the
// source partitions and the partitions of <job>-repartition, each
// process runs the task graph above over what it owns with a
// transactional id of its own, and commits the barrier offsets to the
// group in each epoch's transaction, as the member of its generation.
// Keyed records cross the repartition topic, or skip it when their key
// group is the reading process's own (localshuffle.go). Every rebalance
// ends the attempt after a final checkpoint; the next keeps the state of
// what it still owns when its generation follows (keptstate.go) and
// restores the rest.
package engine
