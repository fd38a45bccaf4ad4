// Command runner runs the benchmark contenders one after another over the
// same pre-produced input topic, each into its own output topic, and
// appends one JSON line per contender to -out.
//
// For each contender it measures, with an independent read_committed reader
// of the contender's output topic:
//   - throughput: records drained / (last output visible - first output
//     written), where "first output written" is the first time the output
//     topic's end offsets (read_uncommitted high watermark, polled every
//     10ms) are above zero: about the time of the first read;
//   - CPU seconds per million records: utime+stime from /proc/PID/stat at the
//     moment the last drained output became visible (startup included);
//   - peak RSS: VmHWM from /proc/PID/status at the same moment;
//   - end-to-end latency p50/p99: after the drain, a probe of -probe records
//     at -probe-rate is appended to the input with ts = now; latency is the
//     time the reader sees each probe's output minus the probe's ts. (The
//     drained records were produced long before the run, so their ts says
//     nothing about the contender.) Contenders that stop at the end of the
//     input (Kafka's TransactionalMessageCopier) get no latency;
//   - MB/s: the bytes (keys and values) of the records drained over the
//     same time as records/s; the input is read once to count them;
//   - for pipeline contenders, checkpoints and state: a scrape of the
//     pipeline's Prometheus /metrics (its admin listener, named in its log)
//     at the moment the last drained output became visible.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/bench/shape"
)

func main() {
	var o options
	flag.StringVar(&o.brokers, "brokers", os.Getenv("KAFKA_BOOTSTRAP"), "seed brokers")
	flag.StringVar(&o.input, "input", "bench-in", "input topic (already filled by workload)")
	flag.StringVar(&o.run, "run", time.Now().UTC().Format("20060102T150405"), "run id, names output topics and jobs")
	flag.StringVar(&o.contenders, "contenders", "all", "comma-separated contender names, or all")
	flag.StringVar(&o.out, "out", "bench/results/raw.jsonl", "file to append one JSON result per contender to")
	flag.IntVar(&o.probe, "probe", 10000, "latency probe records appended after each drain")
	flag.IntVar(&o.probeRate, "probe-rate", 2000, "latency probe records per second")
	flag.IntVar(&o.keys, "keys", 100_000, "distinct keys of the probe records")
	flag.IntVar(&o.partitions, "partitions", 8, "partitions of each output topic")
	flag.StringVar(&o.pipeline, "pipeline", "bin/pipeline", "pipeline binary")
	flag.StringVar(&o.plaincopy, "plaincopy", "bin/bench-plaincopy", "plain copy binary")
	flag.StringVar(&o.procs, "procs", "bin/bench-procs", "the launcher of the group-mode contenders' processes (bench/cmd/procs)")
	flag.StringVar(&o.kstreamsJar, "kstreams-jar", "bench/peers/kstreams/target/kstreams-bench.jar", "Kafka Streams peer jar")
	flag.StringVar(&o.flinkJar, "flink-jar", "bench/peers/flink/target/flink-bench.jar", "Apache Flink peer jar")
	flag.StringVar(&o.kafkaLibs, "kafka-libs", os.ExpandEnv("$HOME/.cache/eoflow-pipeline/kafka-4.1.1/libs"), "Kafka jars (kafka-tools)")
	flag.StringVar(&o.jobs, "jobs", "bench/jobs", "directory of the pipeline job files")
	flag.DurationVar(&o.idle, "idle", 60*time.Second, "give up on a contender after this long without new output")
	flag.BoolVar(&o.keep, "keep", false, "keep each contender's topics (deleted after measuring by default)")
	flag.BoolVar(&o.list, "list", false, "print the contender names and exit")
	flag.StringVar(&o.shape, "shape", "flat", "shape of the latency probe records, as the workload's -shape: flat (today's small probe records) or wide (-size bytes)")
	flag.IntVar(&o.size, "size", 100, "with -shape wide: bytes of each probe record")
	flag.StringVar(&o.jvmHeap, "jvm-heap", "1g", "-Xmx of the Java contenders (Kafka Streams, Flink, the transactional copier)")
	flag.BoolVar(&o.countBytes, "bytes", true, "count the input's bytes for MB/s (one read of the input topic before the first contender)")
	flag.StringVar(&o.windowedInput, "windowed-input", "", "input topic of the windowed contenders (workload -event-rate); none: they are skipped")
	flag.StringVar(&o.avroInput, "avro-input", "", "input topic of the Avro contenders (workload -format avro); none: they are skipped")
	flag.StringVar(&o.registry, "registry", "", "the schema registry of the Avro contenders")
	flag.StringVar(&o.joinOrders, "join-orders", "", "orders topic of the join contenders (workload -join-table); none: they are skipped")
	flag.StringVar(&o.joinTable, "join-table", "", "customers table topic of the join contenders")
	flag.StringVar(&o.restoreTable, "restore-table", "", "with -join-orders: after each join contender's drain, time its start on this customers topic (workload -join-table -n 0) to the table read to its end, and its memory per key against -restore-empty")
	flag.StringVar(&o.restoreEmpty, "restore-empty", "", "with -restore-table: an empty customers topic (workload -join-table -table-keys 0 -n 0)")
	flag.StringVar(&o.restoreOrders, "restore-orders", "", "with -restore-table: an empty orders topic, co-partitioned with both tables")
	flag.Int64Var(&o.windowedExpect, "windowed-expect", 0, "window outputs the windowed input gives (workload -expect)")
	flag.DurationVar(&o.window, "steady-window", 0, "measure each contender at steady state over this long instead of over the drain (0: drain); the input must outlast it")
	flag.DurationVar(&o.warmup, "steady-warmup", 3*time.Second, "with -steady-window: how long each contender runs before the window")
	flag.StringVar(&o.pairWith, "pair-with", "", "with -steady-window: run each pipeline contender together with the same contender of this other pipeline binary (named <name>-base), over the same window, so that both meet the same machine")
	deletePrefix := flag.String("delete-topics", "", "delete every topic whose name starts with this (a script's inputs) and exit")
	flag.Parse()
	if err := shape.Check(o.shape); err != nil {
		log.Fatalf("runner: -shape: %v", err)
	}
	cs := contenders(o)
	if o.list {
		for _, c := range cs {
			fmt.Println(c.Name)
		}
		return
	}
	if o.brokers == "" {
		log.Fatal("runner: -brokers or KAFKA_BOOTSTRAP required")
	}
	if o.restoreTable != "" && (o.restoreEmpty == "" || o.restoreOrders == "") {
		log.Fatal("runner: -restore-table needs -restore-empty and -restore-orders")
	}
	if o.pairWith != "" && o.window == 0 {
		log.Fatal("runner: -pair-with needs -steady-window")
	}
	// Named contenders run in the order named; "all" in the listed order.
	if o.contenders != "all" {
		byName := map[string]contender{}
		for _, c := range cs {
			byName[c.Name] = c
		}
		var sel []contender
		for _, n := range strings.Split(o.contenders, ",") {
			c, ok := byName[strings.TrimSpace(n)]
			if !ok {
				log.Fatalf("runner: unknown contender %q (see -list)", n)
			}
			sel = append(sel, c)
		}
		cs = sel
	}
	if *deletePrefix != "" {
		cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(o.brokers, ",")...))
		if err != nil {
			log.Fatal(err)
		}
		cleanup(context.Background(), kadm.NewClient(cl), *deletePrefix)
		cl.Close()
		return
	}
	f, err := os.OpenFile(o.out, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(o.brokers, ",")...))
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	sizes := &inputSizes{}
	restoreKeys := int64(-1) // keys of -restore-table, read once
	for _, c := range cs {
		if c.Job == "windowed" && o.windowedInput == "" {
			log.Printf("runner: %s skipped: no -windowed-input", c.Name)
			continue
		}
		if c.Job == "keyed-sum-avro" && o.avroInput == "" {
			log.Printf("runner: %s skipped: no -avro-input", c.Name)
			continue
		}
		if c.Job == "join-enrich" && o.joinOrders == "" {
			log.Printf("runner: %s skipped: no -join-orders", c.Name)
			continue
		}
		log.Printf("runner: %s ...", c.Name)
		var r result
		switch {
		case o.pairWith != "" && c.Kind == "pipeline":
			var rs []result
			rs, err = measureTogether(context.Background(), o, adm, []contender{c, baseOf(o, c)})
			if err != nil {
				rs[1].Error = err.Error()
			} else {
				log.Printf("runner: %s: steady state, with %s: %.0f records/s, %.2f CPU s/M; %s: %.0f records/s, %.2f CPU s/M; CPU per record new/base %.3f",
					c.Name, rs[1].Name, rs[0].RecordsPerSec, rs[0].CPUSecPerMillion, rs[1].Name, rs[1].RecordsPerSec, rs[1].CPUSecPerMillion,
					rs[0].CPUSecPerMillion/rs[1].CPUSecPerMillion)
			}
			b, _ := json.Marshal(rs[1])
			if _, err := f.Write(append(b, '\n')); err != nil {
				log.Fatal(err)
			}
			r = rs[0]
		case o.window > 0:
			r, err = measureSteady(context.Background(), o, adm, c)
		default:
			r, err = measure(context.Background(), o, adm, sizes, c)
		}
		if err == nil && c.Job == "join-enrich" && o.restoreTable != "" && o.window == 0 {
			if restoreKeys < 0 {
				tiers, terr := readTiers(context.Background(), o.brokers, o.restoreTable)
				if terr != nil {
					log.Fatal(terr)
				}
				restoreKeys = int64(len(tiers))
			}
			err = addRestore(context.Background(), o, adm, c, restoreKeys, &r)
			if err == nil {
				log.Printf("runner: %s: table of %d keys read to its end %.2f s after a first start, %.2f s after a restart (its own count %.2f s, %d records), %.1f CPU s; VmRSS %.0f MiB, %.0f MiB with an empty table: %.0f bytes per key, %.0f on disk",
					c.Name, r.TableKeys, r.FirstLoadSeconds, r.RestoreSeconds, r.RestoreEngineSeconds, r.RestoreRecords, r.RestoreCPUSeconds, r.TableRSSMiB, r.BaseRSSMiB, r.TableBytesPerKey, r.TableDiskBytesPerKey)
			}
		}
		if err != nil {
			log.Printf("runner: %s: %v", c.Name, err)
			r.Error = err.Error()
		}
		switch {
		case o.pairWith != "" && c.Kind == "pipeline":
		case o.window > 0:
			log.Printf("runner: %s: steady state: %.0f records/s, %.2f CPU s/M, broker %.2f CPU s/M",
				c.Name, r.RecordsPerSec, r.CPUSecPerMillion, r.BrokerCPUSecPerMillion)
		default:
			log.Printf("runner: %s: %.0f records/s (%.1f MB/s), p50 %.0fms p99 %.0fms, %.1f CPU s/M, peak RSS %.0f MiB",
				c.Name, r.RecordsPerSec, r.MBPerSec, r.LatencyP50ms, r.LatencyP99ms, r.CPUSecPerMillion, r.PeakRSSMiB)
		}
		if c.Kind == "pipeline" && o.window == 0 {
			log.Printf("runner: %s: %d checkpoints, mean %.0f bytes, %.0f ms; state %d keys, %d bytes",
				c.Name, r.Checkpoints, r.CheckpointMeanBytes, r.CheckpointMeanMs, r.StateKeys, r.StateBytes)
		}
		if !o.keep {
			cleanup(context.Background(), adm, "bench-"+o.run+"-"+c.Name) // and its -base pair's
		}
		b, _ := json.Marshal(r)
		b = append(b, '\n')
		if _, err := f.Write(b); err != nil {
			log.Fatal(err)
		}
	}
}

type options struct {
	brokers, input, run, contenders, out string
	// avroInput and registry are the Avro contenders' input (workload
	// -format avro) and schema registry.
	avroInput, registry string
	// windowedInput is the input of the windowed contenders (workload
	// -event-rate), windowedExpect the number of window outputs it gives.
	windowedInput string
	// joinOrders and joinTable are the join contenders' orders and
	// customers topics; restoreTable, restoreEmpty and restoreOrders
	// those of their restore (addRestore).
	joinOrders, joinTable                       string
	restoreTable, restoreEmpty, restoreOrders   string
	windowedExpect                              int64
	pipeline, plaincopy, kstreamsJar, kafkaLibs string
	procs                                       string
	flinkJar, jobs                              string
	probe, probeRate, keys, partitions          int
	idle                                        time.Duration
	list, keep                                  bool
	// shape and size are the probe records' (bench/shape); jvmHeap the
	// Java contenders' -Xmx; countBytes whether to count input bytes.
	shape, jvmHeap string
	size           int
	countBytes     bool
	// window and warmup: steady-state measurement (measureSteady);
	// pairWith: the base pipeline binary each pipeline contender runs
	// beside (measureTogether).
	window, warmup time.Duration
	pairWith       string
}

// baseOf is pipeline contender c run by o.pairWith's binary, named
// <name>-base.
func baseOf(o options, c contender) contender {
	ob := o
	ob.pipeline = o.pairWith
	for _, b := range contenders(ob) {
		if b.Name == c.Name {
			b.Name += "-base"
			return b
		}
	}
	panic("no base contender " + c.Name)
}

// windowEndOf returns the "window_end" field (RFC 3339) of a window
// output in unix ms, or -1.
func windowEndOf(v []byte) int64 {
	i := bytes.Index(v, []byte(`"window_end":"`))
	if i < 0 {
		return -1
	}
	rest := v[i+len(`"window_end":"`):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return -1
	}
	t, err := time.Parse(time.RFC3339Nano, string(rest[:j]))
	if err != nil {
		return -1
	}
	return t.UnixMilli()
}

// tsOf returns the "ts" field of a flat JSON value, or -1.
func tsOf(v []byte) int64 {
	i := bytes.Index(v, []byte(`"ts":`))
	if i < 0 {
		return -1
	}
	var ts int64
	j := i + 5
	for j < len(v) && v[j] == ' ' {
		j++
	}
	for ; j < len(v) && v[j] >= '0' && v[j] <= '9'; j++ {
		ts = ts*10 + int64(v[j]-'0')
	}
	return ts
}
