// Command pipeline runs one stateful Kafka-to-Kafka stream-processing job,
// described by a YAML file, with the delivery guarantee the file asks for.
// See README.md.
package main

import (
	"os"

	"github.com/eoflow/pipeline/cmd/pipeline/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
