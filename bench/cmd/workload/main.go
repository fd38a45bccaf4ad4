// Command workload pre-produces the benchmark input: n JSON records of
// about 100 bytes, {"key":"k<0..K-1>","amount":<int>,"ts":<unix ms>,"pad":"..."},
// keyed by their "key" field, over p partitions of a new topic.
//
// -shape wide makes each record of -size bytes out of many fields, most of
// them unused by the jobs (bench/shape); key and amount are drawn as for
// the flat shape, so both shapes give the same sums. -stats writes what was
// produced (records, distinct keys, bytes) as JSON.
//
// -join-table writes the join workload instead (join.go): a compacted
// table topic of -table-keys customers, then -n orders to -topic.
//
//	go run ./bench/cmd/workload -brokers 127.0.0.1:9092 -topic bench-in -n 5000000
package main

import (
	"context"
	"encoding/json"
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

	"github.com/eoflow/pipeline/bench/shape"
)

func main() {
	brokers := flag.String("brokers", os.Getenv("KAFKA_BOOTSTRAP"), "seed brokers, comma separated")
	topic := flag.String("topic", "bench-in", "input topic to create and fill")
	n := flag.Int("n", 5_000_000, "records to produce")
	keys := flag.Int("keys", 100_000, "distinct keys")
	parts := flag.Int("partitions", 8, "partitions of the topic")
	size := flag.Int("size", 100, "record value size in bytes (flat: padded with a \"pad\" field; wide: about that many bytes of fields)")
	seed := flag.Uint64("seed", 1, "random seed for keys and amounts")
	flag.IntVar(&eventRate, "event-rate", 0, "windowed input: ts advances by 1/rate s per record from an hour ago (instead of the time of writing), every partition ends with a sentinel record 10 s of event time later so that every window closes, and -expect gets the number of (key, 1 s window) outputs")
	flag.StringVar(&expectFile, "expect", "", "with -event-rate: file to write the expected number of 1 s window outputs to")
	flag.StringVar(&shapeName, "shape", "flat", "record shape: flat (key, amount, ts and a \"pad\" string) or wide (key, amount, ts among many unused fields of every JSON type; bench/shape)")
	flag.StringVar(&statsFile, "stats", "", "file to write {\"records\",\"distinct_keys\",\"bytes\"} of the produced records to (optional)")
	flag.StringVar(&format, "format", "json", "json, or avro: the flat shape's fields (key, amount, ts, pad) as an Avro record in the Confluent wire format, its schema registered under <topic>-value at -registry")
	flag.StringVar(&registry, "registry", os.Getenv("SCHEMA_REGISTRY_URL"), "with -format avro: the schema registry's URL")
	joinTable := flag.String("join-table", "", "join workload: the compacted customers topic to create and fill with -table-keys keys first; -topic then gets -n orders that look them up (join.go)")
	tableKeys := flag.Int("table-keys", 100_000, "with -join-table: customers in the table")
	missing := flag.Float64("join-missing", 0.05, "with -join-table: the fraction of orders whose customer the table never held")
	flag.Parse()
	if *joinTable != "" {
		if *brokers == "" {
			log.Fatal("workload: -brokers or KAFKA_BOOTSTRAP required")
		}
		if err := runJoin(*brokers, *joinTable, *topic, *n, *tableKeys, *parts, *missing, *seed); err != nil {
			log.Fatalf("workload: %v", err)
		}
		return
	}
	if format != "json" && (format != "avro" || shapeName != "flat" || eventRate > 0) {
		log.Fatal("workload: -format is json, or avro with the flat shape and no -event-rate")
	}
	if err := shape.Check(shapeName); err != nil {
		log.Fatalf("workload: %v", err)
	}
	if *brokers == "" {
		log.Fatal("workload: -brokers or KAFKA_BOOTSTRAP required")
	}
	if err := run(*brokers, *topic, *n, *keys, *parts, *size, *seed); err != nil {
		log.Fatalf("workload: %v", err)
	}
}

var (
	eventRate  int
	expectFile string
	shapeName  string
	statsFile  string
	format     string
	registry   string
)

// Stats is what -stats writes: the records produced, how many distinct
// keys they hold, and their bytes (keys and values, without Kafka's
// framing).
type Stats struct {
	Records      int   `json:"records"`
	DistinctKeys int   `json:"distinct_keys"`
	Bytes        int64 `json:"bytes"`
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
	var enc *avroEvents
	if format == "avro" {
		if enc, err = newAvroEvents(ctx, registry, topic); err != nil {
			return err
		}
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	// The wide shape's unused fields draw from a stream of their own, so
	// keys and amounts are the flat shape's.
	fill := rand.New(rand.NewPCG(seed^0x5851f42d4c957f2d, seed))
	seen := make([]uint64, (keys+63)/64)
	var st Stats
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	start := time.Now()
	base := start.Add(-time.Hour).UnixMilli() / 1000 * 1000
	type window struct {
		key string
		sec int64
	}
	windows := map[window]struct{}{}
	var lastTs int64
	for i := 0; i < n; i++ {
		ki := rng.IntN(keys)
		k := "k" + strconv.Itoa(ki)
		if seen[ki/64]&(1<<(ki%64)) == 0 {
			seen[ki/64] |= 1 << (ki % 64)
			st.DistinctKeys++
		}
		ts := time.Now().UnixMilli()
		if eventRate > 0 {
			ts = base + int64(i)*1000/int64(eventRate)
			windows[window{k, ts / 1000}] = struct{}{}
			lastTs = ts
		}
		v := shape.Value(shapeName, k, rng.IntN(1000)+1, ts, size, fill)
		if enc != nil {
			if v, err = enc.encode(v); err != nil {
				return err
			}
		}
		st.Records++
		st.Bytes += int64(len(k) + len(v))
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
	if eventRate > 0 {
		// One record per partition 10 s of event time after the last: every
		// window of the input closes, in every contender.
		for p := range int32(parts) {
			// A key of its own per partition: Kafka Streams keeps state per
			// partition, and one key in many would be many windows there.
			k := fmt.Sprintf("sentinel-%d", p)
			r := &kgo.Record{Key: []byte(k), Partition: p, Value: shape.Value(shapeName, k, 0, lastTs+10_000, size, fill)}
			st.Records++
			st.DistinctKeys++
			st.Bytes += int64(len(r.Key) + len(r.Value))
			if err := sentinel(ctx, brokers, topic, r); err != nil {
				return err
			}
		}
		if err := os.WriteFile(expectFile, []byte(strconv.Itoa(len(windows))+"\n"), 0o644); err != nil {
			return err
		}
		fmt.Printf("windowed input: %d events/s of event time, %d (key, 1 s window) outputs expected\n", eventRate, len(windows))
	}
	el := time.Since(start)
	fmt.Printf("produced %d records (%d keys, %d partitions) to %s in %s (%.0f records/s)\n",
		n, keys, parts, topic, el.Round(time.Millisecond), float64(n)/el.Seconds())
	if statsFile != "" {
		b, _ := json.Marshal(st)
		if err := os.WriteFile(statsFile, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// sentinel writes r to its partition.
func sentinel(ctx context.Context, brokers, topic string, r *kgo.Record) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	return cl.ProduceSync(ctx, r).FirstErr()
}
