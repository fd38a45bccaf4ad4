// Command plaincopy is the benchmark's physical limit: a plain franz-go
// consume->produce copy of every partition of one topic to the same
// partition of another, no transactions, no consumer group (idempotent
// producer, acks=all: the franz-go defaults). It runs until SIGTERM/SIGINT.
package main

import (
	"context"
	"flag"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	brokers := flag.String("brokers", os.Getenv("KAFKA_BOOTSTRAP"), "seed brokers, comma separated")
	in := flag.String("input", "", "topic to read from the start")
	out := flag.String("output", "", "topic to write")
	flag.Parse()
	if *brokers == "" || *in == "" || *out == "" {
		log.Fatal("plaincopy: -brokers, -input and -output are required")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(*brokers, ",")...),
		kgo.ConsumeTopics(*in),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DefaultProduceTopic(*out),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MaxBufferedRecords(100_000),
	)
	if err != nil {
		log.Fatalf("plaincopy: %v", err)
	}
	defer cl.Close()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(t string, p int32, err error) {
			if ctx.Err() == nil {
				log.Printf("plaincopy: fetch %s/%d: %v", t, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			cl.Produce(ctx, &kgo.Record{Key: r.Key, Value: r.Value, Partition: r.Partition}, func(_ *kgo.Record, err error) {
				if err != nil && ctx.Err() == nil {
					log.Printf("plaincopy: produce: %v", err)
				}
			})
		})
	}
	_ = cl.Flush(context.Background())
}
