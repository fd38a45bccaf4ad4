// Package kread reads a topic from its start to its last stable offset with
// read_committed, exactly once through, and stops: how a job restores its
// checkpoint and state topics, and how tests read a job's whole output.
// After reads from given offsets the same way and says whether a committed
// record is there: how a group-mode job tells that its repartition topic
// is drained, with an answer that does not depend on how soon a fetch
// returns. Range reads one partition between two offsets the same way
// (how datagen -resume finds the last number written), and Tail the last
// offsets of every partition (the admin API's dead-letter tail).
//
// Knowing where "the end" is needs care under transactions: the last data
// record is often followed by commit or abort markers (and aborted records),
// which a read_committed consumer never returns. The reader therefore also
// asks for control records and stops at the first offset at or past the
// last stable offset listed before reading. Every transaction ends with a
// marker and the active segment is never compacted, so the record at LSO-1
// always exists to be seen.
//
// A read asks Kafka through a Cluster: Dial's makes franz-go clients from
// connection options (what All, After and Range do), and the in-memory
// model (internal/testkit/memkafka) is another, which AllOn, AfterOn and
// RangeOn read the same way.
package kread
