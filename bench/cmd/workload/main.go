// Command workload pre-produces the benchmark input: n JSON records of
// about 100 bytes, {"key":"k<0..K-1>","amount":<int>,"ts":<unix ms>,"pad":"..."},
// keyed by their "key" field, over p partitions of a new topic.
//
//	go run ./bench/cmd/workload -brokers 127.0.0.1:9092 -topic bench-in -n 5000000
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/internal/datagen"
)

func main() {
	brokers := flag.String("brokers", os.Getenv("KAFKA_BOOTSTRAP"), "seed brokers, comma separated")
	topic := flag.String("topic", "bench-in", "input topic to create and fill")
	n := flag.Int("n", 5_000_000, "records to produce")
	keys := flag.Int("keys", 100_000, "distinct keys")
	parts := flag.Int("partitions", 8, "partitions of the topic")
	size := flag.Int("size", 100, "approximate record value size in bytes (padded with a \"pad\" field)")
	seed := flag.Uint64("seed", 1, "random seed for keys and amounts")
	flag.Parse()
	if *brokers == "" {
		log.Fatal("workload: -brokers or KAFKA_BOOTSTRAP required")
	}
	if err := run(*brokers, *topic, *n, *keys, *parts, *size, *seed); err != nil {
		log.Fatalf("workload: %v", err)
	}
}

func run(brokers, topic string, n, keys, parts, size int, seed uint64) error {
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...),
		kgo.DefaultProduceTopic(topic),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(1<<20),
		kgo.MaxBufferedRecords(200_000),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, int32(parts), -1, nil, topic); err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	start := time.Now()
	for i := 0; i < n; i++ {
		k := "k" + strconv.Itoa(rng.IntN(keys))
		v := datagen.Event(k, rng.IntN(1000)+1, time.Now().UnixMilli(), size)
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Key: []byte(k), Value: v}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	el := time.Since(start)
	fmt.Printf("produced %d records (%d keys, %d partitions) to %s in %s (%.0f records/s)\n",
		n, keys, parts, topic, el.Round(time.Millisecond), float64(n)/el.Seconds())
	return nil
}
