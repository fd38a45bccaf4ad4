//go:build !faultpoints

package fault

import (
	"fmt"
	"os"
)

// Enabled reports whether this build can arm points from the environment.
const Enabled = false

// FromEnv refuses PIPELINE_FAULTS in a build without the faultpoints tag:
// a production binary has no way to kill itself, and a crash test that
// sets the variable on such a binary must fail loudly rather than pass
// without a single crash.
func FromEnv() (*Injector, error) {
	if os.Getenv(EnvVar) != "" {
		return nil, fmt.Errorf("%s is set, but this binary was built without fault points (go build -tags faultpoints)", EnvVar)
	}
	return nil, nil
}

// killProcess is never reached: only FromEnv arms points that kill, and
// this build's FromEnv arms none.
func killProcess(p Point) {
	panic(fmt.Sprintf("fault: kill at %s armed in a build without fault points", p))
}
