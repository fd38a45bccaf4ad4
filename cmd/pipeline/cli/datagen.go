package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/internal/datagen"
)

// generate is `pipeline datagen`: the parity-sum input, {"n": <int>}.
func generate(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("pipeline datagen", "  pipeline datagen [flags]\n      write the numbers from, from+1, ... as {\"n\": <int>} to a topic (the parity-sum input)")
	brokers := fs.String("brokers", envOr("KAFKA_BROKERS", "127.0.0.1:9092"), "seed brokers, comma-separated")
	topic := fs.String("topic", envOr("INPUT_TOPIC", "numbers"), "topic to write (created if missing)")
	partitions := fs.Int("partitions", 4, "partitions when the topic is created")
	from := fs.Int64("from", 1, "first number (with -resume: when the topic holds none)")
	count := fs.Int64("count", 0, "how many numbers; 0 writes until interrupted")
	rate := fs.Float64("rate", 0, "records per second; 0 is as fast as the broker takes them")
	eventTime := fs.Bool("ts", false, `add "ts": the time of writing in epoch milliseconds (the parity-windows input)`)
	disorder := fs.Duration("disorder", 0, "with -ts: move each ts back by a random amount up to this (out-of-order input)")
	parity := fs.Bool("parity", false, `add "parity": "even" or "odd" (the input of examples/parity-sum-by-field)`)
	keyParity := fs.Bool("key-parity", false, `key each record "even" or "odd", its number's parity, placed by Kafka's default partitioner (murmur2): the input of a group-mode job with scale.key_by_is_record_key, e.g. KEY_BY_IS_RECORD_KEY=true in examples/parity-windows`)
	format := fs.String("format", "json", `json, or avro: the record Number{n, parity, amount (n cents, a decimal), ts} in the Confluent wire format, its schema registered under <topic>-value`)
	registry := fs.String("registry", envOr("SCHEMA_REGISTRY_URL", "http://127.0.0.1:8081"), "with -format avro: the schema registry's URL")
	schemaVersion := fs.Int("schema-version", 1, `with -format avro: 1, or 2, which adds "note" (a string with a default): an evolved producer`)
	resume := fs.Bool("resume", false, "continue after the highest number the topic holds, writing in transactions, so that restarts (a crash included) leave 1..n each once")
	if _, code, ok := parseFlags(fs, args, false, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "pipeline datagen: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	var avro *datagen.Avro
	switch *format {
	case "json":
	case "avro":
		avro = &datagen.Avro{Registry: *registry, Version: *schemaVersion}
	default:
		fmt.Fprintf(stderr, "pipeline datagen: -format %q: want json or avro\n", *format)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	n, err := datagen.Numbers(ctx, []kgo.Opt{kgo.SeedBrokers(strings.Split(*brokers, ",")...)}, datagen.Options{
		Topic: *topic, Partitions: int32(*partitions), From: *from, Count: *count, Rate: *rate, Resume: *resume,
		EventTime: *eventTime, Disorder: *disorder, Parity: *parity, KeyParity: *keyParity, Avro: avro,
		Progress: func(written int64) { fmt.Fprintf(stderr, "datagen: %d written\n", written) },
		Started: func(first int64) {
			if *resume {
				fmt.Fprintf(stderr, "datagen: writing from %d\n", first)
			}
			*from = first
		},
	})
	if n > 0 {
		fmt.Fprintf(stdout, "wrote %d numbers (%d..%d) to %s\n", n, *from, *from+n-1, *topic)
	}
	if err != nil {
		fmt.Fprintf(stderr, "pipeline datagen: %v\n", err)
		return exitFail
	}
	return exitOK
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
