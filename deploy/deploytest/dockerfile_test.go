package deploytest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd  string // upper case: FROM, RUN, ...
	args string
}

type stage struct {
	base, name string
	body       []instruction
}

// parseDockerfile reads the stages of a Dockerfile: enough of the syntax
// (comments, parser directives, backslash continuations) for the checks
// below, not a general parser.
func parseDockerfile(t *testing.T, path string) []stage {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var stages []stage
	var cur strings.Builder
	flush := func() {
		line := strings.TrimSpace(cur.String())
		cur.Reset()
		if line == "" {
			return
		}
		cmd, args, _ := strings.Cut(line, " ")
		in := instruction{strings.ToUpper(cmd), strings.TrimSpace(args)}
		if in.cmd == "FROM" {
			f := strings.Fields(in.args)
			s := stage{base: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				s.name = f[2]
			}
			stages = append(stages, s)
			return
		}
		if len(stages) == 0 {
			t.Fatalf("%s: %s before FROM", path, in.cmd)
		}
		stages[len(stages)-1].body = append(stages[len(stages)-1].body, in)
	}
	for line := range strings.Lines(string(b)) {
		line = strings.TrimRight(line, "\r\n")
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		if strings.HasSuffix(line, `\`) {
			cur.WriteString(strings.TrimSuffix(line, `\`) + " ")
			continue
		}
		cur.WriteString(line)
		flush()
	}
	flush()
	return stages
}

func (s stage) all(cmd string) []string {
	var args []string
	for _, in := range s.body {
		if in.cmd == cmd {
			args = append(args, in.args)
		}
	}
	return args
}

// last returns the last cmd of the stage (the one that takes effect).
func (s stage) last(t *testing.T, cmd string) string {
	t.Helper()
	a := s.all(cmd)
	if len(a) == 0 {
		t.Fatalf("stage %q (FROM %s) has no %s", s.name, s.base, cmd)
	}
	return a[len(a)-1]
}

func execForm(t *testing.T, what, args string) []string {
	t.Helper()
	var v []string
	if err := json.Unmarshal([]byte(args), &v); err != nil {
		t.Fatalf("%s %s: want the exec (JSON) form: %v", what, args, err)
	}
	return v
}

// The image is built from ./cmd/pipeline by Go 1.26, statically, and runs
// the binary as a non-root user with the job config by default.
func TestDockerfile(t *testing.T) {
	dir := root(t)
	stages := parseDockerfile(t, filepath.Join(dir, "Dockerfile"))
	if len(stages) < 2 {
		t.Fatalf("want a multi-stage build, got %d stage(s)", len(stages))
	}
	build, run := stages[0], stages[len(stages)-1]
	if build.base != "golang:1.26" || build.name == "" {
		t.Errorf("build stage: FROM %s AS %q, want golang:1.26 with a name", build.base, build.name)
	}
	if strings.HasPrefix(run.base, "golang") {
		t.Errorf("runtime stage is FROM %s: the Go toolchain does not belong in the image", run.base)
	}

	var goBuild string
	for _, r := range build.all("RUN") {
		if strings.Contains(r, "go build") {
			goBuild = r
		}
	}
	// The version is stamped from the VERSION build argument, as make
	// build stamps it (the context has no .git to read it from).
	for _, want := range []string{"CGO_ENABLED=0", "-o /out/pipeline", "./cmd/pipeline", "-X github.com/eoflow/pipeline/cmd/pipeline/cli.stampedVersion=${VERSION}"} {
		if !strings.Contains(goBuild, want) {
			t.Errorf("go build line %q lacks %q", goBuild, want)
		}
	}
	if main, err := os.ReadFile(filepath.Join(dir, "cmd", "pipeline", "main.go")); err != nil || !strings.Contains(string(main), "package main") {
		t.Errorf("./cmd/pipeline is not a main package: %v", err)
	}

	// The binary the runtime stage copies is the one the build stage built,
	// and the entrypoint is that file.
	var binary string
	for _, c := range run.all("COPY") {
		if f := strings.Fields(c); len(f) == 3 && f[0] == "--from="+build.name && f[1] == "/out/pipeline" {
			binary = f[2]
		}
	}
	if binary == "" {
		t.Fatalf("runtime stage does not COPY --from=%s /out/pipeline", build.name)
	}
	if ep := execForm(t, "ENTRYPOINT", run.last(t, "ENTRYPOINT")); len(ep) != 1 || ep[0] != binary {
		t.Errorf("ENTRYPOINT %q, want [%q]", ep, binary)
	}
	if cmd := execForm(t, "CMD", run.last(t, "CMD")); strings.Join(cmd, " ") != "run -c /etc/pipeline/config.yaml" {
		t.Errorf("CMD %q, want run -c /etc/pipeline/config.yaml", cmd)
	}
	if user := run.last(t, "USER"); user == "root" || user == "0" || strings.HasPrefix(user, "0:") || strings.HasPrefix(user, "root:") {
		t.Errorf("USER %s: the image must not run as root", user)
	}
	if expose := run.all("EXPOSE"); len(expose) != 1 || expose[0] != "8080" {
		t.Errorf("EXPOSE %q, want 8080", expose)
	}
}

// .dockerignore keeps out what the build does not need, and nothing it
// does need.
func TestDockerignore(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root(t), ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	for line := range strings.Lines(string(b)) {
		if p := strings.TrimSpace(line); p != "" && !strings.HasPrefix(p, "#") {
			patterns = append(patterns, p)
		}
	}
	ignored := func(path string) bool {
		for _, p := range patterns {
			for prefix := path; prefix != "."; prefix = filepath.Dir(prefix) {
				if ok, _ := filepath.Match(p, prefix); ok {
					return true
				}
			}
		}
		return false
	}
	for _, need := range []string{"go.mod", "go.sum", "config.yaml", "cmd/pipeline/main.go", "cmd/pipeline/cli/cli.go", "metrics/metrics.go"} {
		if ignored(need) {
			t.Errorf(".dockerignore excludes %s, which the build needs", need)
		}
	}
	for _, leak := range []string{".git/config", ".kafka-local/server.properties", "bin/pipeline"} {
		if !ignored(leak) {
			t.Errorf(".dockerignore lets %s into the build context", leak)
		}
	}
}
