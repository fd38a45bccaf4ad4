// Package mutant holds the switches of the mutation suite (`make mutants`,
// docs/testing.md): plausible bugs of the exactly-once machinery, each a
// named branch in production code, that the fast tests must catch.
//
//	if mutant.On("reader-advance-offset") {
//		r.next[tp] = rec.Offset // the bug: the offset, not the next one
//		return
//	}
//
// In a build without the mutants tag, On is a constant false: the compiler
// drops every such branch, so no release binary can turn a mutant on and
// the hot path pays nothing. In a `-tags mutants` build, On(name) reports
// whether PIPELINE_MUTANT names that mutant; cmd/mutants sets it for one
// mutant at a time and runs the packages' `go test -short`.
//
// A mutant branch changes as little as the bug it stands for, and says
// what that bug is; the list of mutants, what each breaks and which
// packages must catch it, is internal/mutant/suite.
package mutant

// EnvVar names the mutant a `-tags mutants` build turns on.
const EnvVar = "PIPELINE_MUTANT"
