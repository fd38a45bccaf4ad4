package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"strings"
	"time"

	"github.com/eoflow/pipeline/checkpoint/savepoint"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/engine"
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
      [--against-checkpoint]        the operator ids (and whether the job's last checkpoint,
      [--from-savepoint PATH ...]   or the savepoint, takes it)
  pipeline test TESTFILE...         run the job on an in-memory Kafka with each case's input and
      [-c FILE] [--crashes N]       compare what it commits with what the case expects
  pipeline datagen [flags]          write the numbers 1, 2, 3, ... as {"n": <int>} to a topic
  pipeline demo                     everything in one process (in-process broker, generator, job)
  pipeline savepoint create DIR     ask the running job for a savepoint into DIR
      [--stop]                      (--stop: as its final checkpoint, and stop the job)
  pipeline savepoint inspect PATH   what a savepoint holds
  pipeline topics create NAME       create a topic on the cluster of the job's file (-c FILE,
                                    or --brokers, else $KAFKA_BROKERS without ./config.yaml)
  pipeline topics list|describe     the cluster's topics; partitions, offsets and configs of some
  pipeline topics read TOPIC        print a topic's committed records (--from-beginning: to its end)
  pipeline topics write TOPIC       write a record per line of stdin: key TAB value (key TAB: a tombstone)
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
		fs := newFlags("pipeline version", "  pipeline version\n      print the version: the one make build stamped (git describe), else the module's, else the VCS revision built from, else devel")
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

const validateSynopsis = `  pipeline validate [-c FILE] [--against-checkpoint] [--from-savepoint PATH [--allow-dropped-state] [--remap-topic OLD=NEW]...] [--graph mermaid|dot]
      check a job file: print every problem as FILE:LINE:COL: path: message
      (exit 1), or a summary, the job graph and the operator ids (exit 0);
      --graph mermaid or --graph dot prints only the graph, as a Mermaid
      flowchart or Graphviz DOT, for the docs. Without a flag it
      does not connect to Kafka, so it cannot tell whether a restart will
      refuse the file; with --against-checkpoint it connects, reads the job's
      last checkpoint and runs the check a restart runs (exit 1 with run's
      refusal); with --from-savepoint, whether the savepoint fits`

func validate(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("pipeline validate", validateSynopsis)
	file := fs.String("c", "config.yaml", "the job's YAML `FILE`")
	graph := fs.String("graph", "", "print only the job graph, as `FORMAT` mermaid or dot")
	againstCheckpoint := fs.Bool("against-checkpoint", false, "also connect to the job's cluster, read its last checkpoint and run the check a restart runs: whether the checkpoint's state still fits this file, and whether the internal topics agree (changes nothing on the cluster)")
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
	if *graph != "" && *graph != "mermaid" && *graph != "dot" {
		fmt.Fprintf(stderr, "pipeline validate: --graph %q: want mermaid or dot\n", *graph)
		return exitUsage
	}
	if *againstCheckpoint && restore.path != "" {
		fmt.Fprintln(stderr, "pipeline validate: --against-checkpoint checks a restart from the job's own checkpoints, --from-savepoint a start from the savepoint: give one")
		return exitUsage
	}
	cfg, ok := loadConfig(*file, stdout, stderr)
	if !ok {
		return exitFail
	}
	// What only building the job refuses is refused here too (expressions
	// were compiled when loading).
	job, err := engine.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		if !printProblems(*file, err, stdout, stderr) {
			fmt.Fprintf(stderr, "pipeline validate: %v\n", err)
		}
		return exitFail
	}
	var restart *engine.RestartCheck
	if *againstCheckpoint && cfg.Guarantee.Checkpoints() {
		ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
		defer cancel()
		check, err := job.CheckRestart(ctx)
		if err != nil {
			// The words `run` would exit with.
			fmt.Fprintf(stderr, "pipeline validate: %v\n", err)
			return exitFail
		}
		restart = &check
	}
	// What starting from the savepoint would do; partition counts are
	// checked against the cluster by `run`. A job that cannot start from
	// it is not ok: its refusal is printed alone.
	var (
		sp   *savepoint.Reader
		plan *savepoint.RestorePlan
	)
	if restore.path != "" {
		if sp, plan, err = restore.plan(cfg); err != nil {
			fmt.Fprintf(stderr, "pipeline validate: %v\n", err)
			return exitFail
		}
	}
	switch *graph {
	case "mermaid":
		fmt.Fprint(stdout, cfg.Graph().Mermaid(cfg))
		return exitOK
	case "dot":
		fmt.Fprint(stdout, cfg.Graph().DOT(cfg))
		return exitOK
	}
	fmt.Fprintf(stdout, "%s: ok: %s\n", *file, cfg.Summary())
	fmt.Fprintln(stdout, "graph (each node, then what it reads):")
	fmt.Fprint(stdout, cfg.Graph().Text(cfg))
	printOperators(stdout, cfg)
	switch {
	case restart != nil:
		printRestartCheck(stdout, cfg, *restart)
	case sp == nil && cfg.Guarantee.Checkpoints():
		fmt.Fprintf(stdout, "not checked: whether the job's last checkpoint takes this file (a restart refuses a changed key_by or values);\n"+
			"  pipeline validate --against-checkpoint -c %s connects and checks it\n", *file)
	}
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
	for _, t := range plan.Tables {
		fmt.Fprintf(stdout, "  reads table %s (topic %s) to its end, at least to the savepoint's position\n", t.ID, t.Topic)
	}
	for _, n := range plan.Notes {
		fmt.Fprintf(stdout, "  note: %s\n", n)
	}
	return exitOK
}

// checkTimeout bounds validate --against-checkpoint: reading the
// checkpoint topic, and the state topic of a job that lost its
// checkpoints.
const checkTimeout = 2 * time.Minute

// printRestartCheck says what a restart would continue from.
func printRestartCheck(w io.Writer, cfg *config.Config, check engine.RestartCheck) {
	if len(check.Checkpoints) == 0 {
		fmt.Fprintf(w, "job %q has no checkpoint yet: it starts from its sources' start positions\n", cfg.Name)
		return
	}
	for _, c := range check.Checkpoints {
		who := fmt.Sprintf("job %q", cfg.Name)
		if c.Member != "" {
			who = fmt.Sprintf("member %q of job %q", c.Member, cfg.Name)
		}
		fmt.Fprintf(w, "checkpoint %d of %s fits: a restart continues from it\n", c.ID, who)
		if c.Undescribed {
			fmt.Fprintln(w, "  note: an older build wrote it without saying what its state means: only the key groups and operator ids were compared")
		}
		for _, n := range c.Notes {
			fmt.Fprintf(w, "  note: %s\n", n)
		}
	}
}

// printOperators lists the operators with their stable ids: state maps to
// operators by id when a job starts from a savepoint, so a user sees what
// a derived id is before relying on it (or writes it into the file).
func printOperators(w io.Writer, cfg *config.Config) {
	fmt.Fprintln(w, "operators (savepoint state maps to them by id):")
	for _, s := range cfg.Sources {
		fmt.Fprintf(w, "  %-16s source (offsets are its state): %s\n", s.ID, strings.Join(s.Topics, ", "))
	}
	for _, t := range cfg.Tables {
		fmt.Fprintf(w, "  %-16s table (read again from its topic on every restore): %s\n", t.ID, t.Topic)
	}
	for _, s := range cfg.Steps {
		what := string(s.Kind())
		switch {
		case s.Kind() == config.StepAggregate || s.Kind() == config.StepWindow:
			what += " (keyed state)"
		case s.Join.Interval():
			what = "interval join (keyed state: both streams' records)"
		}
		fmt.Fprintf(w, "  %-16s %s\n", s.ID, what)
	}
}

// stampedVersion is set at link time by `make build` (and the Dockerfile's
// VERSION build argument): -ldflags "-X
// github.com/eoflow/pipeline/cmd/pipeline/cli.stampedVersion=$(git describe
// --always --dirty)".
var stampedVersion string

// version is the version stamped at link time, else the module version
// when built from a tagged module, else the VCS revision the binary was
// built from, else "devel".
func version() string {
	if stampedVersion != "" {
		return stampedVersion
	}
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
