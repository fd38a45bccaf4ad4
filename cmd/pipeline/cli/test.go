package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/eoflow/pipeline/internal/jobtest"
)

const testSynopsis = `  pipeline test [-c FILE] [--crashes N] [--seed S] [--timeout 60s] [--run REGEXP] [-v] TESTFILE...
      run the job's real engine on an in-memory Kafka with each case's input
      and compare what it commits (the sink topics a case lists, the dead
      letters, the late records) with what the case expects: a diff and exit
      1 on a difference, exit 0 when every case passes, exit 2 on a bad test
      or job file. --crashes N runs each case again under N seeded crash
      schedules (exactly_once) that must commit the same records.
      A job that names a schema_registry gets an in-memory one too.
      The job is -c FILE, else the test file's job: (relative to it).`

// testJobs is `pipeline test`.
func testJobs(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("pipeline test", testSynopsis)
	jobFile := fs.String("c", "", "the job's YAML `FILE` (default: the test file's job:)")
	crashes := fs.Int("crashes", 0, "also run each case under `N` seeded crash schedules; needs guarantee: exactly_once")
	var seed uint64
	seedSet := false
	fs.Func("seed", "`S`, the seed of the first crash schedule (the next ones take S+1, S+2, ...); without --crashes, runs that one schedule again (default: random)", func(s string) error {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return errors.New("want a whole number")
		}
		seed, seedSet = v, true
		return nil
	})
	timeout := fs.Duration("timeout", jobtest.DefaultTimeout, "bound on each run of a case; a job still running then is reported as hung")
	only := fs.String("run", "", "run only the cases whose name matches `REGEXP`")
	verbose := fs.Bool("v", false, "print each run's job log, and every crash run")
	files, code, ok := parseFlags(fs, args, true, stdout, stderr)
	if !ok {
		return code
	}
	switch {
	case len(files) == 0:
		fmt.Fprintf(stderr, "pipeline test: name at least one test file\n\nusage:\n%s\n", testSynopsis)
		return exitUsage
	case *crashes < 0:
		fmt.Fprintln(stderr, "pipeline test: --crashes must be 0 or more")
		return exitUsage
	case *timeout <= 0:
		fmt.Fprintln(stderr, "pipeline test: --timeout must be more than 0")
		return exitUsage
	}
	if seedSet && *crashes == 0 {
		*crashes = 1
	}
	if !seedSet {
		seed = rand.Uint64N(1_000_000) // short enough to type back
	}
	var selected func(*jobtest.Case) bool
	if *only != "" {
		re, err := regexp.Compile(*only)
		if err != nil {
			fmt.Fprintf(stderr, "pipeline test: --run: %v\n", err)
			return exitUsage
		}
		selected = func(c *jobtest.Case) bool { return re.MatchString(c.Name) }
	}

	// Every file is read and checked against its job before anything
	// runs: a bad file costs no run.
	var suites []*jobtest.Suite
	for _, path := range files {
		s, ok := prepareTest(path, *jobFile, *crashes > 0, stdout, stderr)
		if !ok {
			return exitUsage
		}
		suites = append(suites, s)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	st := jobtest.Style{Color: isTerminal(stdout) && os.Getenv("NO_COLOR") == ""}
	opts := jobtest.Options{Timeout: *timeout, Crashes: *crashes, Seed: seed}
	if *verbose {
		opts.Logs = stderr
	}
	p := &testPrinter{w: stdout, st: st, verbose: *verbose, timeout: *timeout}
	for _, s := range suites {
		fmt.Fprintf(stdout, "%s %s\n", st.Bold(s.File.Path), st.Dim("(job "+s.Job.Path+")"))
		for _, n := range s.Notes {
			fmt.Fprintf(stdout, "  note: %s\n", n)
		}
		s.Run(ctx, opts, selected, func(r *jobtest.Result) { p.result(s, r) })
		if ctx.Err() != nil {
			fmt.Fprintln(stderr, "pipeline test: interrupted")
			return exitFail
		}
	}
	switch {
	case p.cases == 0:
		fmt.Fprintf(stderr, "pipeline test: no case matches --run %q\n", *only)
		return exitUsage
	case p.failed > 0:
		fmt.Fprintf(stdout, "%s: %d of %s failed\n", st.Red("FAIL"), p.failed, plural(p.cases, "case"))
		return exitFail
	}
	fmt.Fprintf(stdout, "%s: %s passed%s\n", st.Green("ok"), plural(p.cases, "case"), p.crashSummary())
	return exitOK
}

// prepareTest reads a test file and binds it to its job, printing every
// problem when it cannot.
func prepareTest(path, jobFile string, crashes bool, stdout, stderr io.Writer) (*jobtest.Suite, bool) {
	f, err := jobtest.ReadFile(path)
	if err != nil {
		if !printProblems(path, err, stdout, stderr) {
			fmt.Fprintf(stderr, "pipeline test: %v\n", err)
		}
		return nil, false
	}
	if jobFile == "" {
		jobFile = f.Job
	}
	if jobFile == "" {
		fmt.Fprintf(stderr, "pipeline test: %s names no job: give -c FILE, or job: FILE in the test file\n", path)
		return nil, false
	}
	job, err := jobtest.ReadJob(jobFile)
	if err != nil {
		fmt.Fprintf(stderr, "pipeline test: job file: %v\n", err)
		return nil, false
	}
	s, err := jobtest.Prepare(f, job, crashes)
	if err != nil {
		var je *jobtest.JobError
		if errors.As(err, &je) {
			fmt.Fprintf(stderr, "pipeline test: the job %s does not load with the variables of case %q:\n", je.Job, je.Case)
			if !printProblems(je.Job, je.Err, stdout, stderr) {
				fmt.Fprintf(stderr, "pipeline test: %v\n", je.Err)
			}
			return nil, false
		}
		if !printProblems(path, err, stdout, stderr) {
			fmt.Fprintf(stderr, "pipeline test: %v\n", err)
		}
		return nil, false
	}
	return s, true
}

// testPrinter prints results as they come and keeps the tally.
type testPrinter struct {
	w                  io.Writer
	st                 jobtest.Style
	verbose            bool
	timeout            time.Duration
	cases, failed      int
	crashRuns, crashed int
}

const resultIndent = "      "

func (p *testPrinter) result(s *jobtest.Suite, r *jobtest.Result) {
	p.cases++
	if !r.Passed() {
		p.failed++
	}
	st, w := p.st, p.w
	status := func(ok bool) string {
		if ok {
			return st.Green("ok  ")
		}
		return st.Red("FAIL")
	}
	caseOK := r.Err == nil && len(r.Diffs) == 0
	fmt.Fprintf(w, "  %s  %s %s\n", status(caseOK), r.Case.Name, st.Dim(seconds(r.Elapsed)))
	if r.Err != nil {
		fmt.Fprintf(w, "%s%v\n", resultIndent, r.Err)
		p.log(r.Log)
	}
	for _, d := range r.Diffs {
		jobtest.WriteDiff(w, d, jobtest.Sides{Expected: "expected", Written: "written"}, resultIndent, st)
	}
	if len(r.Crashes) == 0 {
		return
	}
	var passed, restarts int
	var took time.Duration
	for _, c := range r.Crashes {
		p.crashRuns++
		restarts += c.Restarts
		took += c.Elapsed
		p.crashed += c.Restarts
		if c.Passed() {
			passed++
		}
		if c.Passed() && !p.verbose {
			if len(c.Unfired) > 0 {
				fmt.Fprintf(w, "%snote: seed %d (%s): %s never failed; the run restarted %s\n", resultIndent, c.Seed, c.Schedule, c.Unfired, plural(c.Restarts, "time"))
			}
			continue
		}
		fmt.Fprintf(w, "  %s  %s: crash schedule seed %d (%s), %s %s\n", status(c.Passed()), r.Case.Name, c.Seed, c.Schedule,
			plural(c.Restarts, "restart"), st.Dim(seconds(c.Elapsed)))
		switch {
		case c.Err != nil:
			fmt.Fprintf(w, "%s%v\n", resultIndent, c.Err)
			p.log(c.Log)
		case c.Restarts == 0:
			fmt.Fprintf(w, "%sthe schedule never made the job fail: the run proves nothing\n", resultIndent)
		case len(c.Diffs) > 0:
			fmt.Fprintf(w, "%sthe committed records differ from the crash-free run's:\n", resultIndent)
		}
		if len(c.Unfired) > 0 {
			fmt.Fprintf(w, "%s%s never failed\n", resultIndent, c.Unfired)
		}
		for _, d := range c.Diffs {
			jobtest.WriteDiff(w, d, jobtest.Sides{Expected: "crash-free run", Written: "crash run"}, resultIndent+"  ", st)
		}
		if !c.Passed() {
			fmt.Fprintf(w, "%sreplay: %s\n", resultIndent, p.replay(s, r.Case, c.Seed))
		}
	}
	if !p.verbose || passed == len(r.Crashes) {
		fmt.Fprintf(w, "  %s  %s: %d of %s, %s %s\n", status(passed == len(r.Crashes)), r.Case.Name,
			passed, plural(len(r.Crashes), "crash schedule"), plural(restarts, "restart"), st.Dim(seconds(took)))
	}
}

// log prints the end of a failed run's job log.
func (p *testPrinter) log(tail string) {
	if tail == "" || p.verbose {
		return // -v printed all of it already
	}
	fmt.Fprintf(p.w, "%sthe end of the job's log:\n", resultIndent)
	for _, line := range strings.Split(tail, "\n") {
		fmt.Fprintf(p.w, "%s  %s\n", resultIndent, p.st.Dim(line))
	}
}

// replay is the command line that runs one crash schedule again.
func (p *testPrinter) replay(s *jobtest.Suite, c *jobtest.Case, seed uint64) string {
	args := []string{"pipeline", "test", "-c", shellQuote(s.Job.Path), "--seed", strconv.FormatUint(seed, 10),
		"--run", shellQuote("^" + regexp.QuoteMeta(c.Name) + "$")}
	if p.timeout != jobtest.DefaultTimeout {
		args = append(args, "--timeout", p.timeout.String())
	}
	return strings.Join(append(args, shellQuote(s.File.Path)), " ")
}

func (p *testPrinter) crashSummary() string {
	if p.crashRuns == 0 {
		return ""
	}
	return fmt.Sprintf(", each under crash schedules too (%s, %s)", plural(p.crashRuns, "crash run"), plural(p.crashed, "restart"))
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:@", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func seconds(d time.Duration) string { return fmt.Sprintf("(%.2fs)", d.Seconds()) }

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}
