package cli

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"

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
  pipeline run -c FILE        run the job until SIGINT or SIGTERM
  pipeline validate -c FILE   check a job file; print every problem, or a summary
  pipeline datagen [flags]    write the numbers 1, 2, 3, ... as {"n": <int>} to a topic
  pipeline demo               everything in one process (in-process broker, generator, job)
  pipeline savepoint inspect PATH   what a savepoint holds
  pipeline version            print the version

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
	case "datagen":
		return generate(args[1:], stdout, stderr)
	case "demo":
		return demo(args[1:], stdout, stderr)
	case "savepoint":
		return savepointCmd(args[1:], stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "pipeline", version())
		return exitOK
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "pipeline: unknown command %q\n\n%s", args[0], usage)
		return exitUsage
	}
}

func validate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("pipeline validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("c", "config.yaml", "the job's YAML file")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "pipeline validate: unexpected argument %q (the file goes after -c)\n", fs.Arg(0))
		return exitUsage
	}
	cfg, ok := loadConfig(*file, stdout, stderr)
	if !ok {
		return exitFail
	}
	// Compiling the steps finds expression errors too, at their lines.
	if _, err := runtime.New(cfg, slog.New(slog.DiscardHandler)); err != nil {
		if !printProblems(*file, err, stdout, stderr) {
			fmt.Fprintf(stderr, "pipeline validate: %v\n", err)
		}
		return exitFail
	}
	fmt.Fprintf(stdout, "%s: ok: %s\n", *file, cfg.Summary())
	return exitOK
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
