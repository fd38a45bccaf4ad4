package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
)

// newFlags is the flag set of one command. Its usage is the synopsis (the
// command line with its arguments, then what it does), then the flags.
func newFlags(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage:\n%s\n", synopsis)
		hasFlags := false
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		if hasFlags {
			fmt.Fprintln(fs.Output(), "\nflags:")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parseFlags parses args into fs. When it returns ok false, the command
// ends with code: -h (or -help, --help) printed the usage to stdout and
// exits 0, because help that was asked for is an answer, not an error; a
// bad flag printed the problem and the usage to stderr and exits 2. With
// interspersed, flags may also follow the positional arguments, which are
// returned in order.
func parseFlags(fs *flag.FlagSet, args []string, interspersed bool, stdout, stderr io.Writer) (positional []string, code int, ok bool) {
	// flag prints to the set's output before Parse returns, without
	// saying why: buffer it, and send it where the outcome belongs.
	var buf bytes.Buffer
	fs.SetOutput(&buf)
	defer fs.SetOutput(stderr)
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			_, _ = buf.WriteTo(stdout)
			return nil, exitOK, false
		}
		if err != nil {
			_, _ = buf.WriteTo(stderr)
			return nil, exitUsage, false
		}
		if !interspersed || fs.NArg() == 0 {
			return append(positional, fs.Args()...), exitOK, true
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// isHelp reports whether arg asks for help, for commands that dispatch on
// their first argument before any flag set parses.
func isHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
}
