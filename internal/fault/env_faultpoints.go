//go:build faultpoints

package fault

import (
	"fmt"
	"os"
	"syscall"
)

// Enabled reports whether this build can arm points from the environment.
const Enabled = true

// FromEnv reads PIPELINE_FAULTS; points armed there kill the process. It
// returns nil when the variable is unset.
func FromEnv() (*Injector, error) {
	spec := os.Getenv(EnvVar)
	if spec == "" {
		return nil, nil
	}
	armed, err := Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvVar, err)
	}
	return &Injector{armed: armed, kill: true}, nil
}

// killProcess is kill -9 of this process at p: nothing flushed, nothing
// closed.
func killProcess(p Point) {
	fmt.Fprintf(os.Stderr, "fault: killing the process at %s\n", p)
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is on its way
}
