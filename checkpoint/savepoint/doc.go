// Package savepoint is the portable, versioned savepoint format and the
// rules for restoring a job from one. A savepoint is a complete snapshot
// that a user takes and keeps (docs/operations.md, "Savepoints"): every key group's
// state, the source offsets, the key-group count and the configuration's
// fingerprint, as of one completed checkpoint. It is how a job is
// upgraded, rescaled, paused, or moved to other topics or another cluster.
// The package reads and writes local files only, starts no goroutines and
// reads no clock; the engine does the Kafka side.
//
// # Layout (format versions 1 and 2)
//
// A savepoint is a directory:
//
//	DIR/
//	  savepoint.json                the manifest (Manifest), indented JSON
//	  savepoint.json.sha256         "<sha256 hex>  savepoint.json\n"
//	  sums-2220e3c5.g0-63.state     the data files: one per aggregate and
//	  sums-2220e3c5.g64-127.state   exported key-group range
//
// The manifest holds the format name and version, the job name, the
// creation time, the checkpoint id, the config fingerprint, the key-group
// count, the guarantee, and the stateful operators sorted by id:
//
//   - a source ("kind": "source"): the next offset of every partition
//     0..n-1 of each topic it reads;
//   - an aggregate ("kind": "aggregate"): its compatibility descriptor
//     (the text of its key_by expression; its values' names, functions and
//     arguments in order), its number of keys and of key+value bytes, and
//     its data files, each with its key-group range, keys, bytes, size and
//     SHA-256. The ranges tile [0, key groups) in order;
//   - a window ("kind": "window", KindWindow): the same as an aggregate,
//     its descriptor with the window's shape in milliseconds
//     ("window": {"kind": "tumbling", "size_ms": 10000}, or "hopping" with
//     size_ms and advance_ms, or "session" with gap_ms). Its state is one
//     value per group key holding the key's open windows, in the same data
//     files.
//
// A job with tables also has "tables": each table's id, topic, and the
// next offset of every partition of the topic at the checkpoint (what
// checkpoint.Record.Tables holds), sorted by id (tables.go).
//
// A job with event time also has "event_time": the watermark and each
// partition's largest event time at the checkpoint, in epoch ms, null for
// none yet; partitions sorted, once each, and only partitions a source
// holds an offset of. A manifest without windows, event time or tables has
// none of these fields and is byte for byte what it was before they
// existed.
//
// Format version 2 is version 1 plus "held" and the file held.records:
// the stream records that joins as of event time held at the checkpoint
// (checkpoint.Record.Held), how many each source partition holds, and
// the file's size and SHA-256 (held.go has the byte layout). Only a
// savepoint with held records is version 2; every other is still
// version 1, so a build that reads only version 1 refuses exactly the
// savepoints whose held records it would lose.
//
// A data file holds entries (key group, key, value) in key-group then key
// order, in CRC-32C-checked blocks between a checksummed header and
// trailer; data.go has the byte layout. A value is exactly the bytes the
// operator's state.Codec writes, what the changelog holds for the key, so
// a savepoint restores through the same state.Restorer as the state topic
// (Reader.Restore).
//
// Why JSON for the manifest: it is small, read once, and kept for months
// by people who may look into it with jq; the checksum file turns a
// flipped digit in an offset into an error instead of a silent skip or
// replay (and `sha256sum -c savepoint.json.sha256` checks it by hand). The
// state is binary because it is large. Why one file per key-group range:
// each worker exports its own range at the barrier, in parallel, into its
// own file; a restoring worker reads only the files that overlap its
// range, whatever the worker counts then and now.
//
// # Invariants
//
//  1. DIR exists only complete: everything is written into a sibling
//     DIR.tmp-*, fsynced, and renamed to DIR, whose parent is then
//     fsynced. A non-empty DIR is never overwritten. A crash leaves a
//     DIR.tmp-* that nothing reads; delete it. The files are readable by
//     their owner only: a savepoint holds the job's data.
//  2. Nothing is trusted unverified: Open checks the manifest's SHA-256,
//     its structure, and every data file's presence and size; reading a
//     data file checks its header against the manifest, every block's
//     CRC-32C, the order and key group of every entry, the trailer's
//     totals, and the file's SHA-256. Damage is an error wrapping
//     ErrCorrupt that names the file and the byte; never a panic.
//  3. A reader reads every version ever written. Version 1 is pinned by
//     testdata/v1, and its window and event time fields by
//     testdata/v1-windows; version 2 by testdata/v2-held. A change to
//     any encoding is a new version with a new golden directory, and the
//     old ones keep passing.
//  4. Reader.ID, the SHA-256 of the manifest, identifies the content: it
//     covers every data file through their SHA-256, wherever the copy is.
//
// # Restoring: the rules
//
// CheckRestore compares a savepoint with a configuration described by
// DescribeConfig and refuses with every problem at once, each saying what
// differs and how to fix it:
//
//  1. The key-group count must be equal (a key's group is hash(key) mod
//     the count). The number of workers may change freely: key groups are
//     redistributed.
//  2. Aggregate state maps to operators by stable id (steps[].id). State of
//     an aggregate the config no longer has, or whose id now names another
//     kind of step, is refused unless --allow-dropped-state. An aggregate
//     of the config without state in the savepoint starts empty.
//  3. An aggregate keeps its state only if its key_by text and its values
//     (name, function, argument) are unchanged, e.g.
//     `operator "sums": value "sum" was sum(n), the config has sum(amount)`.
//     Expressions are compared as text: reformatting one is a change.
//     Values may be reordered: each one's state is stored under its name.
//     A window keeps its state under the same rule, and only if its shape
//     (kind, size, advance, gap) is unchanged: its open windows are stored
//     by their start and end. An aggregate that became a window, or the
//     reverse, is a change of kind (rule 2). allowed_lateness and
//     max_out_of_orderness may change: neither is stored. Event time that
//     only one side has is a note: the watermarks start over.
//  4. Offsets belong to partitions, not to sources, so sources may be
//     renamed, split or merged. Topics may be renamed with --remap-topic
//     old=new; a savepoint topic that nobody reads after remapping is
//     refused unless --allow-dropped-state; a topic must keep its
//     partition count.
//
// CheckRestart applies the same rules to a plain restart from the job's
// own checkpoint record (format v3 describes each operator's state, see
// checkpoint.Record.Operators), without flags and without the partition
// count rule, so a changed configuration cannot silently read old state as
// something else.
//
// # Using it from the runtime
//
// Taking a savepoint (POST /api/v1/savepoints, --stop-with-savepoint):
//
//  1. d := DescribeConfig(cfg). Get the id N of the checkpoint that will
//     hold it (Coordinator.TriggerNow, or Stop for the final one), then
//     w, err := Create(dir, d.Meta(N, now), opts) and, for each aggregate,
//     ow, err := w.Aggregate(id, *d.Operator(id).Aggregate). Hand ow to the
//     workers on barrier N itself, so no worker can miss it.
//  2. Each worker, at barrier N, takes its Snapshot and forwards its
//     changelog records and the barrier as always (the checkpoint must not
//     wait for, or fail with, the export), then, before it processes any
//     record after the barrier, calls ow.WriteAll(store.Range(),
//     store.All()) and reports the result to whoever commits.
//  3. When checkpoint N completed and every worker reported: offs, err :=
//     d.SourceOffsets(record.Offsets); w.Source(id, offs[id]) for each
//     source; w.SetHeld(the records record N holds, record.Held, if
//     any); m, err := w.Commit(). If N aborted or an export failed:
//     w.Abort(). Log Progress lines while it runs.
//
// Restoring (run --from-savepoint PATH):
//
//  1. r, err := Open(PATH); plan, err := CheckRestore(r.Manifest(), d,
//     RestoreOptions{...the flags..., Partitions: the cluster's counts}).
//     On error print it and start nothing. Log plan.Notes.
//  2. Each worker: r.Restore(restorer, its range, plan.Restore) into
//     empty stores registered with a state.Restorer. Sources start at
//     plan.Offsets; plan.NewTopics at their start position. The held
//     records, r.HeldRecords(plan), go back to the source tasks that
//     read their partitions (after the offsets: they are read already).
//  3. The job's own state topic must then hold exactly the savepoint's
//     state before anything else commits: restored keys are clean and
//     would otherwise never reach the changelog. runtime imports it in one
//     transaction before the job's tasks start (every key, a tombstone for
//     each key the topic held that the savepoint lacks, and a checkpoint
//     record with plan's offsets). That record, and every later one,
//     carries Reader.ID (checkpoint.Record.Savepoint): a restart with the
//     same command line sees it and continues instead of rewinding.
package savepoint
