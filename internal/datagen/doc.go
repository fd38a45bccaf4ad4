// Package datagen writes test and demo input: the natural numbers as JSON
// records {"n": <int>}, the input of the parity-sum reference job. Every
// number is written exactly once (an idempotent producer, each record
// acknowledged before Numbers returns), so a checker knows the true input.
// With Resume it continues after the highest number the topic holds and
// writes in transactions, so a generator restarted any number of times,
// crashes included, still leaves 1..n each once (resume.go).
// Event is the record of the benchmark workload, for every benchmark that
// builds its input.
package datagen
