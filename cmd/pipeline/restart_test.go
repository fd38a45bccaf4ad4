package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
	// validate --against-checkpoint finds the refusal before a run does,
	// and says it in run's words; the unchanged file fits.
	code, stdout, stderr := j.pipelineCmd("validate", "--against-checkpoint", "-c", "../../examples/parity-sum/config.yaml")
	if code != 0 || !regexp.MustCompile(`checkpoint \d+ of job "`+j.env["JOB_NAME"]+`" fits`).MatchString(stdout) {
		t.Fatalf("validate --against-checkpoint of the unchanged file: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, validated := j.pipelineCmd("validate", "--against-checkpoint", "-c", j.config)
	refusal, found := strings.CutPrefix(validated, "pipeline validate: ")
	if code != 1 || !found || !strings.Contains(refusal, `value "sum" was sum(n), the config has sum(n * 2)`) ||
		!strings.Contains(refusal, "pipeline savepoint create --stop DIR") {
		t.Fatalf("validate --against-checkpoint of the changed file: exit %d\n%s%s", code, stdout, validated)
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
	out := j.output()
	if !strings.Contains(out, want) || !strings.Contains(out, `value "sum" was sum(n), the config has sum(n * 2)`) {
		t.Fatalf("the output does not say %q with the changed value", want)
	}
	// Once, as plain lines (not also as a log value of \n escapes), and
	// in the words validate used.
	if n := strings.Count(out, "does not fit the job's configuration"); n != 1 {
		t.Errorf("the refusal is printed %d times, want once:\n%s", n, out)
	}
	if !strings.Contains(out, "pipeline run: "+refusal) {
		t.Errorf("run's refusal differs from validate's:\nvalidate: %s\nrun output:\n%s", refusal, out)
	}
}
