// Command mutants runs the mutation suite (`make mutants`): for each
// mutant in its list, the fast tests of the packages that must catch it,
// with that one mutant on, and a table of what caught what.
//
//	mutants [-run REGEXP] [-v] [-timeout 2m]
//
// Each mutant is a named branch in production code that only a
// `-tags mutants` build compiles (internal/mutant); PIPELINE_MUTANT turns
// one on. First the packages' tests run with none on and must pass; then,
// for each mutant, `go test -short -tags mutants -count=1` of its
// packages must fail. The last line is "mutants: caught X of Y"; the exit
// status is 1 when a mutant survived (or the tests fail without one).
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/eoflow/pipeline/internal/mutant"
)

// mutantSpec is one entry of the list.
type mutantSpec struct {
	name, breaks string
	// packages are the packages whose fast tests must catch it, space
	// separated.
	packages string
	// run, when set, narrows those tests (go test -run): a package whose
	// whole fast suite takes minutes names the tests meant to catch it.
	run string
}

func (m mutantSpec) pkgs() []string { return strings.Fields(m.packages) }

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mutants", flag.ContinueOnError)
	fs.SetOutput(stderr)
	pattern := fs.String("run", "", "run only the mutants whose name matches this regular expression")
	verbose := fs.Bool("v", false, "print the test output of every mutant that survived")
	timeout := fs.Duration("timeout", 2*time.Minute, "go test's -timeout for each mutant's packages")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	selected, err := selectMutants(*pattern)
	if err != nil {
		fmt.Fprintln(stderr, "mutants:", err)
		return 2
	}
	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintln(stderr, "mutants:", err)
		return 2
	}
	inCode, err := namesInCode(root)
	if err != nil {
		fmt.Fprintln(stderr, "mutants:", err)
		return 2
	}
	for _, m := range selected {
		if !inCode[m.name] {
			fmt.Fprintf(stderr, "mutants: %s is in the list but no mutant.On(%q) is in the code\n", m.name, m.name)
			return 1
		}
	}

	start := time.Now()
	// The baseline: every package (and -run filter) the selected
	// mutants name, with no mutant on.
	var runs []string
	all := map[string][]string{} // by -run filter
	for _, m := range selected {
		if _, ok := all[m.run]; !ok {
			runs = append(runs, m.run)
		}
		for _, p := range m.pkgs() {
			if !slices.Contains(all[m.run], p) {
				all[m.run] = append(all[m.run], p)
			}
		}
	}
	var baseElapsed time.Duration
	for _, run := range runs {
		what := strings.Join(all[run], " ")
		if run != "" {
			what += " -run " + run
		}
		fmt.Fprintf(stdout, "baseline: %s with no mutant on\n", what)
		base := goTest(root, "", all[run], run, *timeout)
		baseElapsed += base.elapsed
		if !base.passed {
			fmt.Fprintf(stdout, "the tests fail with no mutant on (%s):\n%s\n", base.summary(), base.output)
			return 1
		}
	}

	results := make([]result, 0, len(selected))
	for _, m := range selected {
		r := goTest(root, m.name, m.pkgs(), m.run, *timeout)
		results = append(results, r)
		if *verbose && r.passed {
			fmt.Fprintf(stdout, "--- %s survived; the output of its tests:\n%s\n", m.name, r.output)
		}
	}
	caught := table(stdout, selected, results)
	fmt.Fprintf(stdout, "total %.0fs (baseline %.1fs)\n", time.Since(start).Seconds(), baseElapsed.Seconds())
	fmt.Fprintf(stdout, "mutants: caught %d of %d\n", caught, len(selected))
	if caught < len(selected) {
		return 1
	}
	return 0
}

func selectMutants(pattern string) ([]mutantSpec, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("-run: %w", err)
	}
	var out []mutantSpec
	for _, m := range mutants {
		if re.MatchString(m.name) {
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no mutant matches %q", pattern)
	}
	return out, nil
}

// moduleRoot is the directory of the go.mod above the working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// onCall finds the mutants' branches: mutant.On("name").
var onCall = regexp.MustCompile(`mutant\.On\("([^"]+)"\)`)

// namesInCode returns the names of every mutant.On in the code of the
// module's non-test Go files.
func namesInCode(root string) (map[string]bool, error) {
	names := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "//") {
				continue // a comment showing the idiom
			}
			for _, m := range onCall.FindAllStringSubmatch(line, -1) {
				names[m[1]] = true
			}
		}
		return nil
	})
	return names, err
}

// result is how one run of go test went.
type result struct {
	passed  bool
	elapsed time.Duration
	// failed are the top-level tests that failed, by package, in order.
	failed []string
	// broken are the packages that failed without a failing test: a
	// panic outside a test, a timeout.
	broken []string
	// unbuilt are the packages that did not build: nothing was tested.
	unbuilt []string
	output  string
}

// caught reports whether the tests caught the mutant: a test failed, or a
// package's tests failed outside a test (a panic, a timeout), and every
// package built.
func (r result) caught() bool {
	return !r.passed && len(r.unbuilt) == 0 && (len(r.failed) > 0 || len(r.broken) > 0)
}

func (r result) summary() string {
	var parts []string
	if n := len(r.failed); n > 0 {
		shown := r.failed[:min(n, 2)]
		s := strings.Join(shown, ", ")
		if n > 2 {
			s += fmt.Sprintf(" (+%d)", n-2)
		}
		parts = append(parts, s)
	}
	for _, p := range r.broken {
		parts = append(parts, p+" failed outside a test")
	}
	for _, p := range r.unbuilt {
		parts = append(parts, p+" did not build")
	}
	if len(parts) == 0 {
		if r.passed {
			return "SURVIVED"
		}
		return "did not run (see -v)"
	}
	return strings.Join(parts, "; ")
}

// goTest runs the packages' fast tests with the mutant name on ("" for
// none).
func goTest(root, name string, pkgs []string, run string, timeout time.Duration) result {
	args := []string{"test", "-short", "-tags", "mutants", "-count=1", "-json", "-timeout", timeout.String()}
	if run != "" {
		args = append(args, "-run", run)
	}
	args = append(args, pkgs...)
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), mutant.EnvVar+"="+name)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := parseEvents(&stdout)
	r.elapsed = time.Since(start)
	r.passed = err == nil
	r.output += stderr.String()
	return r
}

// event is one line of go test -json.
type event struct {
	Action      string
	Package     string
	Test        string
	Output      string
	FailedBuild string
}

// parseEvents reads go test -json output: the top-level tests that
// failed, the packages that failed without one, and the text output.
func parseEvents(rd io.Reader) result {
	var r result
	var out strings.Builder
	failedIn := map[string]bool{}
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			out.WriteString(sc.Text() + "\n")
			continue
		}
		out.WriteString(e.Output)
		if e.Action != "fail" {
			continue
		}
		pkg := strings.TrimPrefix(e.Package, "github.com/eoflow/pipeline/")
		if e.FailedBuild != "" {
			r.unbuilt = append(r.unbuilt, pkg)
			continue
		}
		if e.Test == "" {
			if !failedIn[e.Package] {
				r.broken = append(r.broken, pkg)
			}
			continue
		}
		failedIn[e.Package] = true
		top, _, _ := strings.Cut(e.Test, "/")
		name := pkg + "." + top
		if !slices.Contains(r.failed, name) {
			r.failed = append(r.failed, name)
		}
	}
	r.output = out.String()
	return r
}

// table prints the mutants' results and returns how many were caught.
func table(w io.Writer, ms []mutantSpec, rs []result) int {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "mutant\twhat it breaks\tcaught by\tseconds")
	caught := 0
	for i, m := range ms {
		r := rs[i]
		by := r.summary()
		if r.caught() {
			caught++
		} else if !r.passed {
			by = "NOT CAUGHT: " + by
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f\n", m.name, m.breaks, by, r.elapsed.Seconds())
	}
	tw.Flush()
	return caught
}
