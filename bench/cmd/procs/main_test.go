package main

import (
	"os"
	"testing"
)

// Every copy runs with its own instance id, and the first failure is the
// exit status.
func TestRunGivesEachCopyItsInstanceID(t *testing.T) {
	dir := t.TempDir()
	script := `echo "$PIPELINE_INSTANCE_ID" > "` + dir + `/$PIPELINE_INSTANCE_ID"`
	if code := run(3, []string{"sh", "-c", script}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, id := range []string{"p0", "p1", "p2"} {
		b, err := os.ReadFile(dir + "/" + id)
		if err != nil || string(b) != id+"\n" {
			t.Fatalf("copy %s: %q %v", id, b, err)
		}
	}
	if code := run(2, []string{"sh", "-c", `[ "$PIPELINE_INSTANCE_ID" = p0 ] || exit 3`}); code != 3 {
		t.Fatalf("exit %d, want 3 (copy p1's)", code)
	}
}
