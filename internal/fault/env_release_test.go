//go:build !faultpoints

package fault

import (
	"strings"
	"testing"
)

// A binary built without the tag cannot be armed: setting the variable is
// an error that names the tag, never a silent run without crashes.
func TestFromEnvRefusedWithoutTheTag(t *testing.T) {
	t.Setenv(EnvVar, "")
	if i, err := FromEnv(); i != nil || err != nil {
		t.Fatalf("unset: %v, %v", i, err)
	}
	t.Setenv(EnvVar, "after-barrier@2")
	i, err := FromEnv()
	if i != nil || err == nil || !strings.Contains(err.Error(), "-tags faultpoints") {
		t.Fatalf("FromEnv = %v, %v; want a refusal naming the build tag", i, err)
	}
}
