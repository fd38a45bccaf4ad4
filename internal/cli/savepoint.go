package cli

import (
	"fmt"
	"io"

	"github.com/eoflow/pipeline/checkpoint/savepoint"
)

// savepointCmd is `pipeline savepoint inspect PATH`: what a savepoint
// holds, after verifying its manifest's checksum.
func savepointCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) != 2 || args[0] != "inspect" {
		fmt.Fprintln(stderr, "usage: pipeline savepoint inspect PATH")
		return exitUsage
	}
	s, err := savepoint.Inspect(args[1])
	if err != nil {
		fmt.Fprintf(stderr, "pipeline savepoint inspect: %v\n", err)
		return exitFail
	}
	if err := s.WriteText(stdout); err != nil {
		fmt.Fprintf(stderr, "pipeline savepoint inspect: %v\n", err)
		return exitFail
	}
	return exitOK
}
