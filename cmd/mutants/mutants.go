package main

// The mutants: each a named branch in production code (mutant.On(name),
// internal/mutant) standing for a plausible bug of the exactly-once
// machinery, what it breaks, and the packages whose `go test -short` must
// catch it. Adding one is a line here and its branch in the code
// (TestEveryMutantIsInTheCode keeps the two in step).
var mutants = []mutantSpec{
	{"txn-recover-no-fence", "sink.Txn.Recover reads the last checkpoint before it fences: a zombie's commit lands after the read", "./sink", ""},
	{"txn-offsets-no-generation", "TxnOffsetCommit without generation and member id: a zombie of an old generation commits offsets", "./sink", ""},
	{"txn-commit-despite-failed-produce", "a transaction commits though one of its records failed: the epoch is committed without it", "./sink", ""},
	{"probe-believes-young-timeout", "a takeover under way is read as a timeout: the instance restarts and fences its successor", "./sink", ""},
	{"reader-advance-offset", "source.Reader.Advance stores the offset, not offset+1: a restore reads the last record again", "./source", ""},
	{"reader-poll-drops-on-cancel", "a poll cancelled by a barrier trigger drops the records it was handed: they are skipped for good", "./source", ""},
	{"commit-before-last-ack", "the coordinator prepares and decides an epoch before its last task acked the barrier", "./twophase", ""},
	{"decide-out-of-order", "an epoch is decided while an earlier one is not yet prepared", "./twophase", ""},
	{"recovery-aborts-decided-epoch", "recovery aborts the epoch the decision log decided last where it was in doubt", "./twophase", ""},
	{"sink-early-release", "the sink writes what arrived after barrier N into transaction N, before the loop says N+1 is open: a crash after commit N replays records already written", "./engine", "^TestSimulation$/^(parity-sum|keyed-sums)$"},
	{"checkpoint-record-after-commit", "checkpoint record N goes into transaction N+1: commit N is visible while the last checkpoint says N-1", "./engine", "^TestSimulation$/^(parity-sum|keyed-sums)$"},
	{"open-epoch-announced-late", "the sink learns that epoch N+1 is open only with the next checkpoint's trigger: it holds everything for a whole interval (throughput, not correctness: 80k instead of 900k records/s)", "./engine", "^TestSinkToldAtOnceWhenTheNextEpochOpens$"},
	{"savepoint-drops-held", "a savepoint of a job with a join as of event time keeps the offsets but not the records the join held: a start from it never joins them", "./engine", "^TestSimulation$/^asof-join$"},
	{"table-not-read-before-join", "a table is not read to its end before the first join: records meet an empty table after every start and restore", "./engine", "^TestSimulation$/^join$"},
	{"window-fires-ignoring-lateness", "windows fire at their end, not allowed_lateness after it: records within the lateness are dropped as late", "./engine", "Window|Session|Late"},
	{"interval-join-arrival-order", "an interval join emits a barrier's results in the order their records arrived: a replay after a crash writes them in another order", "./operator/keyed", ""},
	{"upsert-no-tombstone", "a key deleted from an aggregate (TTL) gets no tombstone in an upsert sink: a job reading the topic as a table keeps joining with it", "./operator/keyed", ""},
	{"group-savepoint-no-partition-times", "a live savepoint of a group with event time holds the watermark but not each partition's largest event time: after a restore the partitions' clocks start over and lateness is judged anew", "./engine", "^TestSimulationGroupMode$/^windows_live_savepoint$"},
	{"balancer-forgets-assignment", "the group's sticky balancer is not told what each member owned (franz-go's eager client forgets it): a rebalance moves partitions that could stay, and restores them elsewhere", "./engine", "^TestRebalancesMoveOnlyWhatBalanceNeeds$"},
	{"shuffle-bundle-after-barrier", "group mode's source side sends its repartition bundles after the barrier of their inputs: they commit with the next epoch, while the checkpoint before already covers their inputs", "./engine", "^TestSimulationGroupMode$/^faults$"},
	{"local-shuffle-over-backlog", "group mode takes the local shuffle for a repartition partition with records still to read: a partition's older records, written there by its earlier owner, reach the keyed operator after its later ones", "./engine", "^TestSimulationGroupMode$/^faults$"},
	{"state-moved-not-redirtied", "a dirty state record that moved to a larger place is not dirty there: the snapshot loses its change", "./state", ""},
}
