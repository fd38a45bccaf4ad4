// Package memkafka is an in-memory model of the Kafka a job talks to:
// partitioned logs, transactional producers, read_committed readers and
// consumer-group offsets. It is the broker of the broker-free simulation
// (docs/testing.md, "The seeded simulations"): deterministic (no goroutines, no clock of its own: time
// moves only through Advance), and faithful where exactly-once is won or
// lost. TestModelMatchesTheRealBroker runs the same scripts against a real
// broker and against the model and compares every observation, offsets
// and error codes included.
//
// What it models:
//
//  1. A partition is a log of entries with consecutive offsets. A record
//     written inside a transaction stays invisible to read_committed
//     readers until its transaction commits; an aborted one never becomes
//     visible. Ending a transaction writes one control marker into every
//     partition the transaction wrote, which takes an offset, as Kafka's
//     does.
//  2. The last stable offset (LSO) of a partition is the offset of its
//     first record whose transaction is still open, or its high watermark
//     when none is. A read_committed reader never reads past it: one open
//     transaction holds back every later record of the partition, whoever
//     wrote it.
//  3. InitProducer for a transactional id aborts the transaction that id
//     left open (a crashed predecessor's) and bumps the id's epoch: every
//     older Producer of that id is fenced.
//  4. A transaction open for longer than its producer's timeout is aborted
//     by the coordinator at the next Advance, which bumps the epoch too.
//     Nobody else owns the id, though: the producer may go on.
//  5. Offsets committed to a group inside a transaction (TxnCommitOffsets)
//     take effect when the transaction commits, and never if it aborts.
//  6. Consumer-group membership as KIP-447 needs it (group.go): members
//     join into generations, a static member replaced by a process with
//     its instance id is fenced without a rebalance, and an offset commit
//     made on behalf of a member (TxnCommitOffsetsAs) is refused for an
//     old generation (kerr.IllegalGeneration), a replaced instance
//     (kerr.FencedInstanceID) or a stranger (kerr.UnknownMemberID).
//     TestGroupModelMatchesTheRealBroker checks each against Kafka.
//  7. Marker lag, when asked for (SetMarkerLag): Kafka's coordinator
//     decides a transaction, answers, and only then writes its markers,
//     to each partition and to the offsets topic on their own. Until a
//     partition's marker is written the transaction is open to that
//     partition's readers, and until the offsets topic's is, its offsets
//     have not taken effect (PendingOffsets). DeliverMarker writes one;
//     the transactional id's next transaction or InitProducer writes its
//     own first. Off by default: the conformance tests cannot make a real
//     broker delay one marker.
//  8. A client of the cluster (Client, client.go): a model of franz-go's
//     *kgo.Client with the calls the job's Kafka adapters make, so the
//     real sink.Txn, sink.Plain, source.Reader and source.GroupReader run
//     on the model (their *On constructors), and the restore reads too
//     (the Cluster is a kread.Cluster). A transactional client fences
//     (InitProducer) at its first ProducerID or Produce; its consumer
//     reads with read_committed, markers included as control records when
//     asked; a group consumer joins, takes its share of the partitions and
//     commits as its member. The requests the adapters send themselves
//     are answered as the brokers answer them: AddOffsetsToTxn and
//     TxnOffsetCommit on behalf of a member (checked as in point 6, or not
//     at all for a commit that names no member: KIP-447 lets any producer
//     make one), EndTxn (sink's probe: PRODUCER_FENCED after a newer
//     InitProducer, accepted as the retry of the coordinator's own abort
//     after a timeout, and at the current epoch an abort that moves the
//     epoch on), DescribeTransactions (Empty, Ongoing, PrepareCommit,
//     CompleteCommit, PrepareAbort, CompleteAbort) and OffsetCommit.
//     TestModelMatchesTheRealBroker and TestGroupModelMatchesTheRealBroker
//     run their scripts three times: on a real broker through franz-go's
//     clients, on the model through its Client, and on the model through
//     its own API; the three transcripts must be the same.
//
// What a producer with an old epoch is told depends on who checks, not on
// why its epoch is old, exactly as Kafka 4 and franz-go answer (the
// conformance test found each of these):
//
//   - a write (Produce, checked by the partition's leader):
//     kerr.InvalidProducerEpoch, fenced or timed out alike; the producer
//     then refuses to try a commit (kerr.OperationNotAttempted);
//   - adding offsets to the transaction: kerr.ProducerFenced, fenced or
//     timed out alike;
//   - ending the transaction: kerr.ProducerFenced when fenced,
//     kerr.InvalidTxnState when it timed out;
//   - an abort after a failed write asks for the id again with the epoch
//     the producer has (KIP-360): that succeeds after a timeout and fails
//     with kerr.ProducerFenced when a newer producer owns the id. It is
//     the one answer that tells the two apart.
//
// What it leaves out: replication, leaders and broker failures (the
// real-broker tests cover them), compaction (reading a compacted topic
// whole gives what the newest entry per key gives), retention (every log
// starts at offset 0), record batches and sizes (no MESSAGE_TOO_LARGE),
// idempotence sequence numbers, and the epoch bump at every transaction
// end of transaction protocol v2: a client sees other epoch numbers than
// Kafka's, which the adapters only hand back as they got them.
//
// A Cluster is safe for concurrent use: the runtime's goroutines call it
// as they would call their Kafka clients.
package memkafka
