//go:build !mutants

package mutant

// Enabled reports whether this build has the mutants' branches.
const Enabled = false

// On is false in every build without the mutants tag, whatever the
// environment says: the branches it guards are dead code, and the
// compiler removes them.
func On(string) bool { return false }
