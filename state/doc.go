// Package state is the in-memory keyed state backend: key groups, per-key
// values with dirty tracking, incremental snapshots as changelog records
// for the job's compacted <job>-state topic, and the restore that rebuilds
// the stores from that topic. It does no I/O and starts no goroutines.
//
// # Concepts
//
// A job has G key groups (checkpoint.key_groups; Flink's max parallelism),
// fixed for the life of its state. A key's group is
// murmur3_x86_32(key, seed 0) mod G (KeyGroupOf). Worker w of W owns the
// contiguous groups RangeFor(w, W, G); WorkerOf is the inverse. A store
// holds one keyed operator's state on one worker, the keys of its range,
// in one of two forms with one contract:
//
//   - Store[V]: a map per key group from key to a value of the operator's
//     type V, encoded by the operator's Codec only when it is written out.
//     The window operator uses it: its values are open windows, costly to
//     decode and encode on every record.
//   - Compact: each value kept as its encoding, in a hash table and an
//     arena outside the Go heap. The running aggregate uses it: a small
//     state decodes and encodes in tens of nanoseconds, while a Go object
//     per key made a million keys cost ~560 bytes each and a third of the
//     CPU in the garbage collector (bench/results/2026-12-04-keys.md).
//
// Each Put or Delete marks its key dirty. At barrier N the operator calls
// Snapshot, which returns the Delta of epoch N (the current value of every
// dirty key, or a tombstone) and clears the dirty sets. The runtime turns
// it into ChangelogRecords and writes them into transaction N together
// with checkpoint record N. The state topic is thus the concatenation of
// the deltas of all completed checkpoints, and compaction shrinks it to
// the latest record per (operator, key) without changing what it means.
// On start, a Restorer per worker reads the topic and fills empty stores.
// A value larger than one record of the state topic is written as several
// (see pieces.go), which the Restorer joins once it has read them all.
//
// # Invariants
//
//  1. KeyGroupOf never changes: its value is persisted in every changelog
//     key and decides where every key lives. Tests pin it.
//  2. For every W >= 1, the ranges RangeFor(0..W-1, W, G) partition
//     [0, G), and WorkerOf(kg) = w exactly when kg is in RangeFor(w). So
//     restoring the same topic with any worker count gives every key to
//     exactly one worker: rescaling needs no data migration.
//  3. A Store holds only keys of its range; Put, Get or Delete of another
//     key panics, because it means the shuffle routed a record wrongly.
//  4. Restoring the concatenation of all deltas returned by Snapshot (in
//     order, compacted or not) yields exactly the keys and values the
//     stores had at the last Snapshot.
//  5. A changelog key is an injective, canonical encoding of (format
//     version, operator id, key group, key); decoding arbitrary bytes
//     returns the parts or an error and never panics.
//  6. A record whose key group does not fit G is refused with
//     ErrKeyGroupCount: G must not change under existing state.
//  7. With a record limit (SetRecordLimit), no record of a Delta holds
//     more than the limit in key and value, except the whole value of a
//     key too long to split (a piece's key would leave less than half a
//     record for the value): a larger value is written in pieces, and
//     after every Delta the changelog holds each key either whole or in
//     one complete set of pieces (pieces.go). Without a limit, or with
//     values that fit, a Delta's records are exactly those of version 1.
//
// # Aborted checkpoints
//
// Snapshot clears the dirty sets, so its Delta is the only copy of epoch
// N's changes. If checkpoint N aborts, the stores no longer match the
// changelog and must not Snapshot again: the job restarts from the last
// completed checkpoint, which rebuilds every store from the topic (whose
// aborted transaction read_committed readers never see). Hence there is
// no undo here.
//
// # Ownership
//
// A Store belongs to its operator's goroutine; nothing in it is safe for
// concurrent use. A Restorer's stores must not be used until the last
// record has been added.
package state
