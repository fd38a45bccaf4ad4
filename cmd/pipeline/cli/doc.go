// Package cli is the pipeline command line: it parses arguments, loads the
// configuration and hands over to the packages that do the work, so
// cmd/pipeline stays a few lines. Beyond wiring it holds only what is about
// presenting things to a person: each command's help (-h prints it and
// exits 0), the `topics` commands (kadm, connected as the job's file
// says), and run's progress line, which reads the job's metrics registry
// and status and so adds nothing to the hot path.
package cli
