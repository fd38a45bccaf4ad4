package cli

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
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
	for _, file := range []string{"../../../config.yaml", "../../../examples/parity-sum/config.yaml"} {
		code, out, errOut := runCLI("validate", "-c", file)
		if code != 0 || !strings.Contains(out, ": ok: job \"parity-sum\"") || !strings.Contains(out, "\n  sums             aggregate (keyed state)\n") {
			t.Errorf("validate %s: exit %d, stdout %q, stderr %q", file, code, out, errOut)
		}
	}
}

// Plain validate does not connect, so it cannot know whether the job's
// last checkpoint takes the file: it says so, and how to check.
func TestValidateSaysWhatItDidNotCheck(t *testing.T) {
	code, out, errOut := runCLI("validate", "-c", "../../../examples/parity-sum/config.yaml")
	if code != 0 || !strings.Contains(out, "not checked: whether the job's last checkpoint takes this file") ||
		!strings.Contains(out, "pipeline validate --against-checkpoint -c ../../../examples/parity-sum/config.yaml") {
		t.Fatalf("validate: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, _, errOut = runCLI("validate", "-c", "../../../examples/parity-sum/config.yaml", "--against-checkpoint", "--from-savepoint", t.TempDir())
	if code != 2 || !strings.Contains(errOut, "give one") {
		t.Fatalf("validate --against-checkpoint --from-savepoint: exit %d, stderr %q", code, errOut)
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

// TestValidateEveryProblemAtOnce: validate (and run) print every problem
// of a file, schema, interpolation and expression problems together, one
// FILE:LINE:COL: path: message line each, and nothing that follows from
// another.
func TestValidateEveryProblemAtOnce(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string // FILE stands for the file's path
	}{
		{
			name: "schema, interpolation and expression problems together",
			yaml: `name: parity-sum
guarantee: ${GUARANTEE:-exactly_once
workers: many
kafka:
  brokers: [127.0.0.1:9092]
sources:
  - id: numbers
    topics: [numbers]
    start: earliest
    formatt: json
steps:
  - filter: 'n + 1'
  - id: parity
    key_by: 'n %'
  - id: sums
    aggregate:
      values:
        count: count()
        sum: sum(n *)
sinks:
  - topic: parity-sums
    key: 'n +'
`,
			want: []string{
				"FILE:2:12: unterminated ${: missing } on the same line (write $$ for a literal $)",
				`FILE:3:10: workers: want a whole number, got the string "many"`,
				"FILE:10:5: sources[0].formatt: unknown field; did you mean format?",
				"FILE:12:13: steps[0].filter: expected bool, but its result is never true or false: a filter needs a condition, such as a comparison (at 1:3 of the expression)",
				"FILE:14:13: steps[1].key_by: unexpected token EOF (at 1:3 of the expression)",
				"FILE:19:14: steps[2].aggregate.values.sum: unexpected token EOF (at 1:3 of the expression)",
				"FILE:22:10: sinks[0].key: unexpected token EOF (at 1:3 of the expression)",
			},
		},
		{
			name: "a broken key_by is still a key_by",
			yaml: `name: demo
kafka:
  brokers: [127.0.0.1:9092]
sources:
  - topics: [in]
steps:
  - key_by: 'n %'
  - aggregate:
      values:
        total: sum(n)
sinks:
  - topic: out
`,
			want: []string{"FILE:7:13: steps[0].key_by: unexpected token EOF (at 1:3 of the expression)"},
		},
		{
			name: "on_checkpoint under at_most_once",
			yaml: `name: demo
guarantee: at_most_once
kafka:
  brokers: [127.0.0.1:9092]
sources:
  - topics: [in]
steps:
  - key_by: n
  - aggregate:
      emit: on_checkpoint
      values:
        total: sum(n)
sinks:
  - topic: out
`,
			want: []string{"FILE:10:13: steps[1].aggregate.emit: on_checkpoint emits when a checkpoint completes, and guarantee: at_most_once takes no checkpoints, so nothing would ever be written: use emit: every_record (or guarantee: at_least_once or exactly_once)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := writeFile(t, tt.yaml)
			want := strings.ReplaceAll(strings.Join(tt.want, "\n")+"\n", "FILE:", p+":")
			for _, cmd := range []string{"validate", "run"} {
				code, out, errOut := runCLI(cmd, "-c", p)
				if code != 1 || out != want {
					t.Errorf("%s: exit %d, stdout:\n%s\nwant exit 1, stdout:\n%s", cmd, code, out, want)
				}
				if wantErr := fmt.Sprintf("%s: %d problem(s)\n", p, len(tt.want)); errOut != wantErr {
					t.Errorf("%s: stderr %q, want %q", cmd, errOut, wantErr)
				}
			}
		})
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
	code, out, errOut := runCLI("savepoint", "inspect", "../../../checkpoint/savepoint/testdata/v1")
	if code != 0 || !strings.Contains(out, "sums") {
		t.Fatalf("inspect the golden savepoint: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := runCLI("savepoint", "inspect", t.TempDir()); code != 1 || errOut == "" {
		t.Fatalf("inspect an empty directory: exit %d, %q", code, errOut)
	}
	if code, _, _ := runCLI("savepoint", "create"); code != 2 {
		t.Fatalf("savepoint create without a directory: exit %d, want 2", code)
	}
	if code, _, _ := runCLI("savepoint", "delete", "x"); code != 2 {
		t.Fatalf("an unknown savepoint command: exit %d, want 2", code)
	}
}

// goldenJob is a configuration the golden savepoint (testdata/v1 of
// checkpoint/savepoint) fits: 8 key groups, topics numbers and more, the
// parity sums. topic is what it reads instead of numbers.
func goldenJob(t *testing.T, topic string, keyGroups int) string {
	return writeFile(t, fmt.Sprintf(`name: parity-sum
kafka:
  brokers: [127.0.0.1:9092]
checkpoint:
  key_groups: %d
sources:
  - id: numbers
    topics: [%s, more]
steps:
  - key_by: 'n %% 2 == 0 ? "even" : "odd"'
  - id: sums
    aggregate:
      values:
        count: count()
        sum: sum(n)
sinks:
  - topic: out
`, keyGroups, topic))
}

const goldenSavepoint = "../../../checkpoint/savepoint/testdata/v1"

func TestValidateFromSavepoint(t *testing.T) {
	code, out, errOut := runCLI("validate", "-c", goldenJob(t, "numbers", 8), "--from-savepoint", goldenSavepoint)
	if code != 0 || !strings.Contains(out, "fits (job \"parity-sum\", checkpoint 42)") ||
		!strings.Contains(out, "restores the state of sums") || !strings.Contains(out, "resumes topic numbers (3 partitions)") {
		t.Fatalf("validate with the golden savepoint: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI("validate", "-c", goldenJob(t, "numbers-v2", 8), "--from-savepoint", goldenSavepoint, "--remap-topic", "numbers=numbers-v2")
	if code != 0 || !strings.Contains(out, "resumes topic numbers as numbers-v2") {
		t.Fatalf("validate with a remapped topic: exit %d\n%s%s", code, out, errOut)
	}
	// A refusal is printed alone: no "ok" for a job that cannot start.
	code, out, errOut = runCLI("validate", "-c", goldenJob(t, "numbers-v2", 128), "--from-savepoint", goldenSavepoint)
	if code != 1 || out != "" || !strings.Contains(errOut, "key groups") || !strings.Contains(errOut, `"numbers"`) || !strings.Contains(errOut, "--remap-topic") {
		t.Fatalf("validate with other key groups and an unmapped topic: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

func TestRestoreFlags(t *testing.T) {
	job := goldenJob(t, "numbers", 8)
	tests := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--allow-dropped-state"}, 2, "need --from-savepoint"},
		{[]string{"--remap-topic", "a=b"}, 2, "need --from-savepoint"},
		{[]string{"--from-savepoint", goldenSavepoint, "--remap-topic", "a"}, 2, "want OLD=NEW"},
		{[]string{"--from-savepoint", goldenSavepoint, "--remap-topic", "a=b", "--remap-topic", "a=c"}, 2, "remapped twice"},
		{[]string{"--from-savepoint", "/nonexistent/savepoint"}, 1, "/nonexistent/savepoint"},
	}
	for _, cmd := range []string{"validate", "run"} {
		for _, tt := range tests {
			code, _, errOut := runCLI(append([]string{cmd, "-c", job}, tt.args...)...)
			if code != tt.code || !strings.Contains(errOut, tt.msg) {
				t.Errorf("%s %v: exit %d, %q; want %d with %q", cmd, tt.args, code, errOut, tt.code, tt.msg)
			}
		}
	}
}

// --stop-with-savepoint checks its directory before the job starts, not
// when it stops hours later.
func TestRunChecksTheStopSavepointFirst(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI("run", "-c", goldenJob(t, "numbers", 8), "--stop-with-savepoint", dir)
	if code != 1 || !strings.Contains(errOut, "never overwritten") {
		t.Fatalf("run --stop-with-savepoint into a taken directory: exit %d, %q", code, errOut)
	}
}

func TestSavepointCreate(t *testing.T) {
	var gotAuth, gotBody string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth = r.Header.Get("Authorization")
		b, _ := io.ReadAll(r.Body)
		gotBody = string(b)
		if strings.Contains(gotBody, "taken") {
			w.WriteHeader(http.StatusConflict)
			_, _ = io.WriteString(w, `{"error": "savepoint exists: /sp/taken holds \"x\""}`)
			return
		}
		_, _ = io.WriteString(w, `{"savepoint": {"dir": "/sp/1", "id": "abc", "checkpoint_id": 12, "keys": 2, "bytes": 40}}`)
	}))
	defer srv.Close()

	t.Setenv(tokenEnv, "")
	code, out, errOut := runCLI("savepoint", "create", "-admin", srv.URL, "-token", "t0k", "/sp/1")
	if code != 0 || !strings.Contains(out, "savepoint written: /sp/1") || !strings.Contains(out, "checkpoint: 12") {
		t.Fatalf("create: exit %d\n%s%s", code, out, errOut)
	}
	if gotAuth != "Bearer t0k" || gotBody != `{"dir":"/sp/1"}` {
		t.Fatalf("request: %q %q", gotAuth, gotBody)
	}
	// The token from the environment; flags after the directory.
	t.Setenv(tokenEnv, "from-env")
	if code, _, errOut := runCLI("savepoint", "create", "/sp/taken", "-admin", srv.URL); code != 1 || !strings.Contains(errOut, "/sp/taken holds") || !strings.Contains(errOut, "HTTP 409") {
		t.Fatalf("create into a taken directory: exit %d, %q", code, errOut)
	}
	if gotAuth != "Bearer from-env" {
		t.Fatalf("token from $%s: %q", tokenEnv, gotAuth)
	}
	// No token anywhere.
	t.Setenv(tokenEnv, "")
	if code, _, errOut := runCLI("savepoint", "create", "-c", goldenJob(t, "numbers", 8), "-admin", srv.URL, "/sp/2"); code != 1 || !strings.Contains(errOut, "no token") {
		t.Fatalf("create without a token: exit %d, %q", code, errOut)
	}
	// The address from the job's file.
	if got := adminURL("0.0.0.0:8080"); got != "http://127.0.0.1:8080" {
		t.Errorf("adminURL(0.0.0.0:8080) = %s", got)
	}
	if got := adminURL("[::]:9"); got != "http://127.0.0.1:9" {
		t.Errorf("adminURL([::]:9) = %s", got)
	}
	if got := adminURL("10.1.2.3:8080"); got != "http://10.1.2.3:8080" {
		t.Errorf("adminURL(10.1.2.3:8080) = %s", got)
	}
}

// -h on every command and subcommand prints its help to stdout and exits
// 0, without doing anything else (no file read, no connection).
func TestHelpOnEveryCommand(t *testing.T) {
	commands := [][]string{
		{}, {"run"}, {"validate"}, {"test"}, {"datagen"}, {"demo"}, {"version"},
		{"savepoint"}, {"savepoint", "create"}, {"savepoint", "inspect"},
		{"topics"}, {"topics", "create"}, {"topics", "list"}, {"topics", "describe"},
	}
	for _, cmd := range commands {
		for _, h := range []string{"-h", "--help", "-help"} {
			args := append(append([]string{}, cmd...), h)
			code, out, errOut := runCLI(args...)
			want := "pipeline " + strings.Join(cmd, " ")
			if code != 0 || errOut != "" || !strings.Contains(strings.ToLower(out), "usage") || !strings.Contains(out, want) {
				t.Errorf("pipeline %s: exit %d, stdout %q, stderr %q; want exit 0 and help naming %q on stdout",
					strings.Join(args, " "), code, out, errOut, want)
			}
		}
	}
	// A bad flag is still a usage error, on stderr.
	if code, out, errOut := runCLI("savepoint", "inspect", "-x"); code != 2 || out != "" || !strings.Contains(errOut, "-x") {
		t.Errorf("savepoint inspect -x: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, _, errOut := runCLI("version", "extra"); code != 2 || !strings.Contains(errOut, "extra") {
		t.Errorf("version extra: exit %d, stderr %q", code, errOut)
	}
}
