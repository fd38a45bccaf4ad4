package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A restart with a changed aggregate that cannot take the job's state is
// a permanent failure: the process exits 1 with the refusal, at once,
// instead of restarting forever where no supervisor sees it.
func TestRefusedRestartExits(t *testing.T) {
	j := newJob(t, "exactly_once")
	j.numbers(1, 100)
	j.start()
	j.awaitFinal(100, false)
	j.terminate()

	data, err := os.ReadFile("../../examples/parity-sum/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(data), "sum: sum(n)", "sum: sum(n * 2)", 1)
	j.config = filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(j.config, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	j.start()
	select {
	case err := <-j.exited:
		j.cmd = nil
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 {
			t.Fatalf("pipeline run exited with %v, want exit status 1", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("pipeline run did not exit after refusing the restart")
	}
	want := "pipeline run: checkpoint does not fit the job's configuration"
	if out := j.output(); !strings.Contains(out, want) || !strings.Contains(out, `value "sum" was sum(n), the config has sum(n * 2)`) {
		t.Fatalf("the output does not say %q with the changed value", want)
	}
}
