package engine

// A plantedBug is a known mistake put into a production code path by a
// test, to show that the simulations catch it
// (TestSimulationGroupModeFindsBugs, TestSimulationFindsBugs) in every `go test -short` run. Only
// withPlantedBug sets one, an option no other package can name: a release
// build runs none, and each branch it guards is one comparison off the hot
// path. (The mutation suite, internal/mutant, switches its bugs on by build
// tag instead: it runs apart, under `make mutants`.)
type plantedBug uint8

const (
	noPlantedBug plantedBug = iota
	// plantedMemberlessCommit: an epoch's offsets are committed without
	// the member id and generation (a plain TxnOffsetCommit, which the
	// group coordinator takes from anyone): a zombie of an old generation
	// commits.
	plantedMemberlessCommit
	// plantedOffsetsAtAssignment: every attempt on an assignment restores
	// from the offsets its first attempt fetched, not the newest
	// committed: one that restarts on the same assignment reads again
	// what its predecessor committed, on top of the state that counts it.
	plantedOffsetsAtAssignment
	// plantedRestoreBeforeMarkers: an attempt restores its state
	// partitions without waiting for the markers of the transactions that
	// wrote them (awaitSettled): the previous owner's last epoch is
	// missing from the state while the offsets include its input.
	plantedRestoreBeforeMarkers
	// plantedStopWithoutPause: a stop with a savepoint drains the
	// repartition topic without pausing the sources, so the savepoint's
	// source offsets cover records whose shuffled copies its state lacks.
	plantedStopWithoutPause
	// plantedExportWithoutRecheck: a group savepoint's export takes the
	// group's offsets and reads the state without making sure the
	// members did not read on in between (their pause may run out).
	plantedExportWithoutRecheck
	// plantedLostBarrier: a source task sends every fourth barrier to
	// every worker but the first, which never aligns it: the checkpoint
	// times out (single-mode simulation, TestSimulationFindsBugs).
	plantedLostBarrier
	// plantedEarlyRelease: while epoch N commits, the sink writes what
	// arrives into transaction N instead of holding it until N+1 is open.
	plantedEarlyRelease
	// plantedWatermarkOfOwnSources: group mode's keyed side fires its
	// windows at the watermark of the source partitions its own process
	// reads (single mode's rule), not at what the repartition partitions
	// it owns reported: a window fires while records of it are still on
	// their way through the repartition topic.
	plantedWatermarkOfOwnSources
	// plantedOwnClocksOnly: a group member restores its source
	// partitions' clocks from its own newest checkpoint record only: a
	// partition that moved to it starts its clock over, and judges
	// lateness from its later records alone.
	plantedOwnClocksOnly
	// plantedKeptAcrossGenerations: a member keeps its state across a
	// rebalance (keptstate.go) whatever generation comes next: another
	// member may have changed it in a generation between.
	plantedKeptAcrossGenerations
	// plantedKeptMovedAway: a member that keeps its state across a
	// rebalance keeps the state partitions that moved away too: stale
	// state that fires windows twice when they come back.
	plantedKeptMovedAway
	// plantedHeldStayBehind: the records a join as of event time holds
	// are written and restored under the member's key instead of their
	// source partition's (groupheld.go): a partition that moves to
	// another member leaves them behind, and one that comes back finds
	// what it held when it left.
	plantedHeldStayBehind
	// plantedHeldPassedByWatermark: a member tells the repartition topic
	// its source partitions' largest event times as read, not lowered to
	// the records a join as of event time holds (reportedTimes): a
	// window fires before a held record that belongs in it is released.
	plantedHeldPassedByWatermark
	// plantedBundleAfterBarrier: group mode's source side sends its
	// repartition bundles after the next barrier, not with the records
	// they were filled from: they commit with the next epoch, while the
	// checkpoint of theirs already covers their inputs' offsets.
	plantedBundleAfterBarrier
	// plantedLocalShuffleOverBacklog: an attempt takes the local shuffle
	// for every repartition partition it owns (localshuffle.go), even
	// one with records still to read: records of its source partitions
	// an earlier owner wrote there reach the keyed operator after later
	// ones sent locally, and a "last" takes the wrong value.
	plantedLocalShuffleOverBacklog
	// plantedResumeOwnWatermark: a co-partitioned member's attempt
	// resumes its windows at the watermark of its own newest checkpoint
	// record, as a single-mode restore does: a watermark of the
	// partitions it owned then, which may be past the clock of a
	// partition it owns now. Its windows fire early, and the window
	// operator judges that partition's records late against it.
	plantedResumeOwnWatermark
	// plantedTableNotReadOn: a table kept across a rebalance
	// (tablekept.go) is not read on to its topic's end: the next
	// attempt joins with the table as it stood at the revocation.
	plantedTableNotReadOn
	// plantedGroupSavepointDropsHeld: a group savepoint's export keeps the
	// group's offsets, which are past the records joins as of event time
	// hold, but not the records: a start from it never joins them.
	plantedGroupSavepointDropsHeld
	// plantedReleaseWhilePaused: a source task releases held records
	// while the group pauses for a savepoint or a stop with a savepoint
	// drains: a final checkpoint's savepoint holds records whose results
	// are in the repartition topic, not in its state.
	plantedReleaseWhilePaused
	// plantedImportDropsHeld: a group-mode start from a savepoint commits
	// its offsets to the group but writes none of its held records where
	// the members restore them (groupheld.go): they are never joined.
	plantedImportDropsHeld
	// plantedImportedUnsettled: a member looks whether the savepoint the
	// job starts from was imported without waiting for the transactions
	// on the checkpoint topic to be decided: an import committed with its
	// markers on their way, or behind a crashed member's open
	// transaction, is not seen, and the savepoint is imported again.
	plantedImportedUnsettled
	// plantedJoinTableFollowsStream: a job that repartitions its stream
	// by a join key (config/joinrepartition.go) deals its partitioned
	// table out with the stream topic's partitions, not the repartition
	// topic's: a join key is looked up in a process that may not read
	// its table partition.
	plantedJoinTableFollowsStream
	// plantedCoHeldPassedByWatermark: a co-partitioned member's source
	// tasks send their barriers with the partitions' watermarks as read,
	// not lowered to the least event time a join as of event time holds
	// (sourceHold.atBarrier), as if only what crosses the repartition
	// topic needed it: the process's windows fire before a held record
	// that belongs in one is released.
	plantedCoHeldPassedByWatermark
	// plantedJoinTimeFromRecords: a partition of a join's repartition
	// topic takes its watermark from the event times of its own records,
	// as a source partition does, not from what the stream's partitions
	// report through it (jointime.go): a record of a stream partition
	// behind the others finds its windows fired.
	plantedJoinTimeFromRecords
	// plantedJoinTimeNotKept: a reader of a partition of a join's
	// repartition topic restarts from the partition's watermark alone,
	// not from what the partition knew of each stream partition
	// (jointime.go, step 4): it waits for the report of a stream
	// partition whose time no longer changes, and its windows never fire.
	plantedJoinTimeNotKept
)

// withPlantedBug puts m into the job's code paths (tests).
func withPlantedBug(m plantedBug) Option { return func(j *Job) { j.plantedBug = m } }
