package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = Main(args, &out, &errb)
	return code, out.String(), errb.String()
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestValidateGoodFiles(t *testing.T) {
	for _, file := range []string{"../../config.yaml", "../../examples/parity-sum/config.yaml"} {
		code, out, errOut := runCLI("validate", "-c", file)
		if code != 0 || !strings.Contains(out, ": ok: job \"parity-sum\"") || strings.Count(out, "\n") != 1 {
			t.Errorf("validate %s: exit %d, stdout %q, stderr %q", file, code, out, errOut)
		}
	}
}

func TestValidateReportsEveryProblemWithPosition(t *testing.T) {
	p := writeFile(t, `name: demo
kafka:
  brokers: [127.0.0.1:9092]
sources:
  - topics: [in]
steps:
  - key_by: n %
  - aggregate:
      values:
        total: sum(n)
sinks:
  - topic: out
    formatt: json
`)
	code, out, errOut := runCLI("validate", "-c", p)
	if code != 1 {
		t.Fatalf("exit %d, want 1; stdout %q stderr %q", code, out, errOut)
	}
	if !strings.Contains(out, p+":13:5: sinks[0].formatt:") {
		t.Errorf("unknown field not reported at 13:5:\n%s", out)
	}
	if !strings.Contains(errOut, "problem(s)") {
		t.Errorf("no problem count on stderr: %q", errOut)
	}
}

// Expression errors are found by validate too, at the expression's line.
func TestValidateCompilesExpressions(t *testing.T) {
	p := writeFile(t, `name: demo
kafka:
  brokers: [127.0.0.1:9092]
sources:
  - topics: [in]
steps:
  - filter: 'n >'
sinks:
  - topic: out
`)
	code, out, _ := runCLI("validate", "-c", p)
	if code != 1 || !strings.Contains(out, p+":7:") || !strings.Contains(out, "steps[0].filter") {
		t.Fatalf("exit %d, stdout:\n%s", code, out)
	}
}

func TestValidateMissingFile(t *testing.T) {
	code, out, errOut := runCLI("validate", "-c", filepath.Join(t.TempDir(), "nope.yaml"))
	if code != 1 || out != "" || !strings.Contains(errOut, "nope.yaml") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestUsage(t *testing.T) {
	if code, _, errOut := runCLI(); code != 2 || !strings.Contains(errOut, "Usage") {
		t.Errorf("no arguments: exit %d, %q", code, errOut)
	}
	if code, _, errOut := runCLI("frobnicate"); code != 2 || !strings.Contains(errOut, `unknown command "frobnicate"`) {
		t.Errorf("unknown command: exit %d, %q", code, errOut)
	}
	if code, out, _ := runCLI("version"); code != 0 || !strings.HasPrefix(out, "pipeline ") {
		t.Errorf("version: exit %d, %q", code, out)
	}
	if code, _, _ := runCLI("validate", "extra"); code != 2 {
		t.Errorf("validate with a stray argument: exit %d, want 2", code)
	}
}

func TestRunRefusesBadConfigBeforeStarting(t *testing.T) {
	p := writeFile(t, "name: demo\nguarantee: exactly_twice\n")
	code, out, _ := runCLI("run", "-c", p)
	if code != 1 || !strings.Contains(out, p+":2:12: guarantee:") {
		t.Fatalf("exit %d, stdout:\n%s", code, out)
	}
}

func TestSavepointInspect(t *testing.T) {
	code, out, errOut := runCLI("savepoint", "inspect", "../../checkpoint/savepoint/testdata/v1")
	if code != 0 || !strings.Contains(out, "sums") {
		t.Fatalf("inspect the golden savepoint: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := runCLI("savepoint", "inspect", t.TempDir()); code != 1 || errOut == "" {
		t.Fatalf("inspect an empty directory: exit %d, %q", code, errOut)
	}
	if code, _, _ := runCLI("savepoint", "create"); code != 2 {
		t.Fatalf("an unknown savepoint command: exit %d, want 2", code)
	}
}
