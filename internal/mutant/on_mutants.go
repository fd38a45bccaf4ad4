//go:build mutants

package mutant

import "os"

// Enabled reports whether this build has the mutants' branches.
const Enabled = true

// active is the mutant PIPELINE_MUTANT names, read once.
var active = os.Getenv(EnvVar)

// On reports whether the mutant name is the one turned on.
func On(name string) bool { return active != "" && name == active }
