// Package wire reads and writes the primitives of the project's binary
// formats: the checkpoint record (checkpoint), the savepoint data file
// (checkpoint/savepoint), the state changelog key (state) and the
// accumulator and aggregate state encodings (operator). Each format keeps
// its own layout and its own error sentinels; this package only decides
// the rules they share, once:
//
//   - Varints are Go's encoding/binary varints (LEB128; signed ones
//     zig-zag). A varint must be minimally encoded: a longer-than-needed
//     encoding (a trailing zero group, e.g. 81 00 for 1) is corrupt, as is
//     one that overflows 64 bits. Every encoder of these formats has
//     always written minimal varints (binary.AppendUvarint, PutUvarint),
//     so no stored value is refused; accepting a second encoding of a
//     number would break the canonical, byte-exact round trips that
//     compaction (changelog keys), checksums and the fuzzers rely on.
//   - A length prefix (Bytes, String) and a list count (Count) are checked
//     against the bytes left before anything is sliced or allocated, so a
//     corrupt length can never make a decoder allocate.
//   - Fixed-width integers say their byte order in their name.
//   - End demands that the input is used up.
//
// A Reader works over a []byte and keeps its first error: every later
// read returns zero, so a decoder reads straight through and checks Err
// once. The error is an *Error naming what was being read and the byte
// offset where it starts; its Msg is the bare problem so that a format
// can phrase its own message around it. ReadUvarint applies the same
// varint rule to a streaming io.ByteReader (the savepoint data file).
//
// The Append functions are the matching writers.
package wire
