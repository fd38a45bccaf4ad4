// Package cli is the pipeline command line: it parses arguments, loads the
// configuration and hands over to the packages that do the work. It holds
// no logic of its own beyond wiring, so cmd/pipeline stays a few lines.
package cli
