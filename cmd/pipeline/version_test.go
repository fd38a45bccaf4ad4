package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// `make build` stamps the binary with the git description of the tree it
// was built from (as `git describe --always --dirty` prints it), so a
// user's `pipeline version` says which commit runs.
func TestMakeBuildStampsTheVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("links a binary")
	}
	for _, tool := range []string{"make", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s here", tool)
		}
	}
	out, err := exec.Command("git", "describe", "--always", "--dirty").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	want := strings.TrimSpace(string(out))
	bin := filepath.Join(t.TempDir(), "pipeline")
	if out, err := exec.Command("make", "-C", "../..", "--no-print-directory", "build", "BIN="+bin).CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	got, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "pipeline "+want+"\n" {
		t.Fatalf("pipeline version printed %q, want %q", got, "pipeline "+want+"\n")
	}
}
