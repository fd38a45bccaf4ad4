// Package datagen writes test and demo input: the natural numbers as JSON
// records {"n": <int>}, the input of the parity-sum reference job. Every
// number is written exactly once (an idempotent producer, each record
// acknowledged before Numbers returns), so a checker knows the true input.
// Event is the record of the benchmark workload, for every benchmark that
// builds its input.
package datagen
