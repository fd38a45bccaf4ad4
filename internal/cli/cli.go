package cli

import (
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"strings"

	"github.com/eoflow/pipeline/checkpoint/savepoint"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/runtime"
)

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1 // the job or the check failed
	exitUsage = 2 // the command line was wrong
)

const usage = `pipeline: stateful Kafka-to-Kafka stream processing with exactly-once results

Usage:
  pipeline run -c FILE              run the job until SIGINT or SIGTERM (a final checkpoint, exit 0)
      [--from-savepoint PATH [--allow-dropped-state] [--remap-topic OLD=NEW]...]
      [--stop-with-savepoint DIR] [--progress] [--instance-id ID]
  pipeline validate -c FILE         check a job file; print every problem, or a summary and
      [--from-savepoint PATH ...]   the operator ids (and whether the savepoint fits)
  pipeline test TESTFILE...         run the job on an in-memory Kafka with each case's input and
      [-c FILE] [--crashes N]       compare what it commits with what the case expects
  pipeline datagen [flags]          write the numbers 1, 2, 3, ... as {"n": <int>} to a topic
  pipeline demo                     everything in one process (in-process broker, generator, job)
  pipeline savepoint create DIR     ask the running job for a savepoint into DIR
  pipeline savepoint inspect PATH   what a savepoint holds
  pipeline topics create NAME       create a topic on the cluster of the job's file (-c FILE)
  pipeline topics list|describe     the cluster's topics; partitions, offsets and configs of some
  pipeline version                  print the version

Run 'pipeline COMMAND -h' for a command's flags.
`

// Main runs the command line and returns the process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "run":
		return runJob(args[1:], stdout, stderr)
	case "validate":
		return validate(args[1:], stdout, stderr)
	case "test":
		return testJobs(args[1:], stdout, stderr)
	case "datagen":
		return generate(args[1:], stdout, stderr)
	case "demo":
		return demo(args[1:], stdout, stderr)
	case "savepoint":
		return savepointCmd(args[1:], stdout, stderr)
	case "topics":
		return topicsCmd(args[1:], stdout, stderr)
	case "version":
		fs := newFlags("pipeline version", "  pipeline version\n      print the version: the module's, else the VCS revision built from, else devel")
		if _, code, ok := parseFlags(fs, args[1:], false, stdout, stderr); !ok {
			return code
		}
		if fs.NArg() > 0 {
			fmt.Fprintf(stderr, "pipeline version: unexpected argument %q\n", fs.Arg(0))
			return exitUsage
		}
		fmt.Fprintln(stdout, "pipeline", version())
		return exitOK
	default:
		if isHelp(args[0]) {
			fmt.Fprint(stdout, usage)
			return exitOK
		}
		fmt.Fprintf(stderr, "pipeline: unknown command %q\n\n%s", args[0], usage)
		return exitUsage
	}
}

const validateSynopsis = `  pipeline validate [-c FILE] [--from-savepoint PATH [--allow-dropped-state] [--remap-topic OLD=NEW]...]
      check a job file without connecting to Kafka: print every problem as
      FILE:LINE:COL: path: message (exit 1), or a summary and the operator
      ids (exit 0); with --from-savepoint, also whether the savepoint fits`

func validate(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("pipeline validate", validateSynopsis)
	file := fs.String("c", "config.yaml", "the job's YAML `FILE`")
	var restore restoreFlags
	restore.register(fs)
	if _, code, ok := parseFlags(fs, args, false, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "pipeline validate: unexpected argument %q (the file goes after -c)\n", fs.Arg(0))
		return exitUsage
	}
	if err := restore.check(); err != nil {
		fmt.Fprintf(stderr, "pipeline validate: %v\n", err)
		return exitUsage
	}
	cfg, ok := loadConfig(*file, stdout, stderr)
	if !ok {
		return exitFail
	}
	// What only building the job refuses is refused here too (expressions
	// were compiled when loading).
	if _, err := runtime.New(cfg, slog.New(slog.DiscardHandler)); err != nil {
		if !printProblems(*file, err, stdout, stderr) {
			fmt.Fprintf(stderr, "pipeline validate: %v\n", err)
		}
		return exitFail
	}
	// What starting from the savepoint would do; partition counts are
	// checked against the cluster by `run`. A job that cannot start from
	// it is not ok: its refusal is printed alone.
	var (
		sp   *savepoint.Reader
		plan *savepoint.RestorePlan
		err  error
	)
	if restore.path != "" {
		if sp, plan, err = restore.plan(cfg); err != nil {
			fmt.Fprintf(stderr, "pipeline validate: %v\n", err)
			return exitFail
		}
	}
	fmt.Fprintf(stdout, "%s: ok: %s\n", *file, cfg.Summary())
	printOperators(stdout, cfg)
	if sp == nil {
		return exitOK
	}
	fmt.Fprintf(stdout, "savepoint %s fits (job %q, checkpoint %d):\n", sp.Dir(), sp.Manifest().Job, sp.Manifest().CheckpointID)
	if len(plan.Restore) > 0 {
		fmt.Fprintf(stdout, "  restores the state of %s\n", strings.Join(plan.Restore, ", "))
	}
	for _, m := range plan.Topics {
		if m.From == m.To {
			fmt.Fprintf(stdout, "  resumes topic %s (%d partitions)\n", m.From, m.Partitions)
		} else {
			fmt.Fprintf(stdout, "  resumes topic %s as %s (%d partitions)\n", m.From, m.To, m.Partitions)
		}
	}
	for _, n := range plan.Notes {
		fmt.Fprintf(stdout, "  note: %s\n", n)
	}
	return exitOK
}

// printOperators lists the operators with their stable ids: state maps to
// operators by id when a job starts from a savepoint, so a user sees what
// a derived id is before relying on it (or writes it into the file).
func printOperators(w io.Writer, cfg *config.Config) {
	fmt.Fprintln(w, "operators (savepoint state maps to them by id):")
	for _, s := range cfg.Sources {
		fmt.Fprintf(w, "  %-16s source (offsets are its state): %s\n", s.ID, strings.Join(s.Topics, ", "))
	}
	for _, s := range cfg.Steps {
		what := string(s.Kind())
		if s.Kind() == config.StepAggregate {
			what += " (keyed state)"
		}
		fmt.Fprintf(w, "  %-16s %s\n", s.ID, what)
	}
}

// version is the module version when built from a tagged module, otherwise
// the VCS revision the binary was built from, otherwise "devel".
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" {
			return s.Value
		}
	}
	return "devel"
}
