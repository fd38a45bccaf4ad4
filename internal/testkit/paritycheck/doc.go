// Package paritycheck is the independent judge of the parity-sum reference
// job (examples/parity-sum): given the numbers 1..n as input, it reads the
// job's output topic with read_committed and says exactly what was lost or
// duplicated. Tests, the crash harness and benchmarks share it.
//
// For emit: every_record, a correct exactly-once run writes one output per
// input: for each parity, counts 1, 2, 3, ... each once and in order, and
// the differences between consecutive sums are that parity's numbers, each
// once; the last output of each parity is its exact total.
package paritycheck
