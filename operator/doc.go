// Package operator evaluates a job's steps on one record at a time: decode,
// filter, map, key_by, and a running aggregate per group key. It is pure:
// no I/O, no goroutines, no clocks. The runtime feeds it records and
// persists what it returns.
//
// # Pieces
//
//   - Record: one Kafka record, its decoded value and its group key.
//   - Expr: one expression (github.com/expr-lang/expr), compiled once.
//   - Chain: the compiled steps. Process runs the stateless steps where
//     records are read; the Aggregator runs where keyed state lives.
//   - Aggregator and AggregateState: the aggregate step and the running
//     state of one group key, made of one Accumulator per named value.
//   - RecordError: why a record failed, with a stable Code.
//   - Table: a table's state, the latest value of each record key, which
//     join steps look records up in (join.go: the value is shown to the
//     later steps under the join's name, never written into the record).
//
// # Invariants
//
//  1. Numbers are exact. A JSON integer that fits int64 is decoded as an
//     integer (never through float64), and count, sum, min and max stay
//     exact int64 while every input is an integer. An integer sum that would
//     overflow int64 is refused (CodeOverflow), never silently rounded; avg
//     sums integers in 128 bits and rounds once. A fractional input (1.5,
//     1e3, a float an expression computed) counts as its decimal of 15
//     significant digits, and sums, min and max of decimals are exact
//     decimals (decimal.go); avg of decimals is rounded to 15 digits.
//  2. Bad input never panics and never stops anything. Every failure of one
//     record (not JSON, not UTF-8, not an object, a missing field, an
//     expression error, a result of the wrong type, an integer overflow) is
//     a *RecordError naming the config path of the step or value and a
//     Code; the runtime sends the record to the dead-letter topic. Corrupt
//     state encodings (non-minimal varints included) are errors, naming the
//     field and its byte offset.
//  3. A failed record leaves the state as it was: the named values of one
//     aggregate are added all or nothing.
//  4. The same input gives the same bytes. Outputs are compact JSON in a
//     fixed field order, state encodings are canonical, and expressions
//     cannot read the wall clock (now() is refused; _timestamp is the
//     record's time, in UTC), so a replay after a crash reproduces the
//     first run exactly, which exactly-once depends on.
//  5. Compilation reports every problem of the steps at once, each a
//     *CompileError with the config path (steps[1].filter) and, inside an
//     expression, the line and column.
//
// # Expressions
//
// A record's top-level JSON fields are variables (n % 2 == 0, amount > 10,
// user.id), with _key, _timestamp, _topic, _partition and _offset. Exact
// integers are int (so % works), other numbers float64. A raw record is
// seen as {value: string, key: string}. A field an expression needs and
// the record lacks is CodeMissingField; x ?? default and x?.y make x
// optional.
//
// # Decoding
//
// Process decodes a JSON value once per record, building only the
// top-level fields the chain's expressions read (all of them when one reads
// $env); the rest is validated and skipped, so a bad value fails the same
// way whatever is read of it. What nothing reads (a whole record when no
// field is, a container) is validated by skipFast in one loop, which
// leaves every value it refuses to the scanner and so never changes an
// error (skip.go). An expression that reads more of the record
// later (a sink key) gets the whole value decoded first. The decoded map
// comes from the records the runtime gave back with Chain.Recycle, once
// nothing read them any more.
//
// # Concurrency
//
// Expr and compiled programs are immutable and shared. A Chain and an
// Aggregator each reuse a VM and decode buffers, so each goroutine uses its
// own Clone. A Record and an AggregateState belong to one goroutine at a
// time. Chain.Recycle is safe from any goroutine.
package operator
