package admin

import (
	"os/exec"
	"path"
	"testing"

	"github.com/eoflow/pipeline/config"
)

// Savepoints taken over the API land in admin.savepoint_dir, by default
// ./savepoints of the job's working directory: for a job run from the
// checkout (the quick start), git must not offer them for a commit.
func TestGitIgnoresTheDefaultSavepointDir(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git here")
	}
	if err := exec.Command("git", "-C", "../..", "rev-parse", "--git-dir").Run(); err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	sp := path.Join(path.Clean(config.DefaultSavepointDir), "sp-1", "MANIFEST")
	err := exec.Command("git", "-C", "../..", "check-ignore", "-q", "--no-index", sp).Run()
	if err != nil {
		t.Fatalf("git does not ignore %s (git check-ignore: %v): add /%s/ to .gitignore", sp, err, path.Clean(config.DefaultSavepointDir))
	}
}
