// Package fault injects failures at named points of the job, so tests can
// make a crash land exactly where it hurts most (between flush and commit,
// halfway through writing state, during restore) as well as at random.
//
// A nil *Injector does nothing and costs one comparison: production code
// calls Hit unconditionally. Tests arm points in-process (the attempt fails
// with ErrInjected and the job restarts), or through the environment of a
// child process:
//
//	PIPELINE_FAULTS=before-commit@3,during-restore@1
//
// arms before-commit to kill the process with SIGKILL on its third hit and
// during-restore on its first: a real kill -9, with nothing flushed or
// closed.
//
// Only a binary built with the faultpoints tag reads the variable
// (`go build -tags faultpoints`, as the crash tests of cmd/pipeline do; the
// same idea as etcd's gofail). Any other build refuses to start while it is
// set, so the production binary can never be made to kill itself, and a
// crash test run against the wrong binary fails instead of passing without
// crashes.
package fault
