package main

import (
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// contender is one thing benchmarked: how to start it against an output
// topic, and whether it keeps running after the input is drained (only
// then can the latency probe be measured).
type contender struct {
	Name     string
	Kind     string // limit, txn-copier, pipeline, kstreams, flink
	Job      string // passthrough, keyed-sum or windowed
	Guar     string
	Interval string
	Daemon   bool
	Cmd      func(out, id string) (argv, env []string)
}

func contenders(o options) []contender {
	cs := []contender{{
		Name: "plain-copy", Kind: "limit", Job: "passthrough", Guar: "none", Daemon: true,
		Cmd: func(out, _ string) ([]string, []string) {
			return []string{o.plaincopy, "-brokers", o.brokers, "-input", o.input, "-output", out}, nil
		},
	}, {
		Name: "kafka-txn-copier", Kind: "txn-copier", Job: "passthrough", Guar: "exactly_once",
		Cmd: func(out, id string) ([]string, []string) {
			return []string{"java", "-Xmx" + o.jvmHeap, "-cp", filepath.Join(o.kafkaLibs, "*"),
				"org.apache.kafka.tools.TransactionalMessageCopier",
				"--broker-list", o.brokers, "--input-topic", o.input, "--input-partition", "0",
				"--group-mode", "--use-group-metadata", "--consumer-group", id,
				"--output-topic", out, "--transactional-id", id}, nil
		},
	}, {
		// The same with transactions of 10,000 records instead of the
		// tool's default 200 (it has no time-based commit).
		Name: "kafka-txn-copier-10000", Kind: "txn-copier", Job: "passthrough", Guar: "exactly_once",
		Cmd: func(out, id string) ([]string, []string) {
			return []string{"java", "-Xmx" + o.jvmHeap, "-cp", filepath.Join(o.kafkaLibs, "*"),
				"org.apache.kafka.tools.TransactionalMessageCopier",
				"--broker-list", o.brokers, "--input-topic", o.input, "--input-partition", "0",
				"--group-mode", "--use-group-metadata", "--consumer-group", id,
				"--output-topic", out, "--transactional-id", id, "--transaction-size", "10000"}, nil
		},
	}}
	for _, job := range []string{"passthrough", "keyed-sum"} {
		for _, g := range []string{"at_most_once", "at_least_once", "exactly_once"} {
			ivs := []string{"1s", "100ms"}
			switch g {
			case "at_most_once":
				ivs = []string{"-"} // no checkpoints
			case "exactly_once":
				// Short intervals show what a commit costs the graph.
				ivs = append(ivs, "20ms")
			}
			for _, iv := range ivs {
				job, g, iv := job, g, iv
				name := fmt.Sprintf("pipeline-%s-%s", job, g)
				if iv != "-" {
					name += "-" + iv
				}
				cs = append(cs, contender{
					Name: name, Kind: "pipeline", Job: job, Guar: g, Interval: iv, Daemon: true,
					Cmd: func(out, id string) ([]string, []string) {
						civ := iv
						if civ == "-" {
							civ = "1s"
						}
						return []string{o.pipeline, "run", "-c", filepath.Join(o.jobs, job+".yaml")}, []string{
							"JOB_NAME=" + id, "GUARANTEE=" + g, "CHECKPOINT_INTERVAL=" + civ,
							"KAFKA_BROKERS=" + o.brokers, "INPUT_TOPIC=" + o.input, "OUTPUT_TOPIC=" + out,
							"ADMIN_LISTEN=127.0.0.1:0", "LOG_LEVEL=info"}
					},
				})
			}
		}
	}
	// Job graphs (issue 32): two keyed sums over one input as one job
	// (two-sums: keyed-sum and keyed-sum-b; two-sums-expr: keyed-sum-c and
	// keyed-sum-b, both keyed by an expression), and each sum as a job of
	// its own: a graph against the two jobs it replaces.
	for _, job := range []string{"keyed-sum-b", "two-sums", "keyed-sum-c", "two-sums-expr"} {
		job := job
		cs = append(cs, contender{
			Name: "pipeline-" + job + "-exactly_once-1s", Kind: "pipeline", Job: job, Guar: "exactly_once", Interval: "1s", Daemon: true,
			Cmd: func(out, id string) ([]string, []string) {
				return []string{o.pipeline, "run", "-c", filepath.Join(o.jobs, job+".yaml")}, []string{
					"JOB_NAME=" + id, "GUARANTEE=exactly_once", "CHECKPOINT_INTERVAL=1s",
					"KAFKA_BROKERS=" + o.brokers, "INPUT_TOPIC=" + o.input, "OUTPUT_TOPIC=" + out,
					"ADMIN_LISTEN=127.0.0.1:0", "LOG_LEVEL=info"}
			},
		})
	}
	// Group mode (scale.mode: group, issue 35): the keyed sum shared by
	// one and by two processes of one job through its consumer group,
	// beside the single-mode rows of the same input. Every kept record
	// crosses the job's repartition topic. bench/cmd/procs starts the
	// processes, each with its instance id; CPU and memory are their sums.
	for _, n := range []int{1, 2} {
		cs = append(cs, contender{
			Name: fmt.Sprintf("pipeline-keyed-sum-group%d-exactly_once-1s", n), Kind: "pipeline", Job: "keyed-sum", Guar: "exactly_once", Interval: "1s", Daemon: true,
			Cmd: func(out, id string) ([]string, []string) {
				return []string{o.procs, "-n", strconv.Itoa(n), "--", o.pipeline, "run", "-c", filepath.Join(o.jobs, "keyed-sum.yaml")}, []string{
					"JOB_NAME=" + id, "GUARANTEE=exactly_once", "CHECKPOINT_INTERVAL=1s",
					"KAFKA_BROKERS=" + o.brokers, "INPUT_TOPIC=" + o.input, "OUTPUT_TOPIC=" + out,
					"SCALE_MODE=group", "SCALE_PARTITIONS=8", "SESSION_TIMEOUT=6s",
					"ADMIN_LISTEN=127.0.0.1:0", "LOG_LEVEL=info"}
			},
		})
	}
	// The keyed sum over Avro in and out (issue 33): its own input (the
	// same records in Avro: workload -format avro), the registry of
	// -registry. No latency probe: the probe records are JSON.
	for _, iv := range []string{"1s", "100ms"} {
		iv := iv
		cs = append(cs, contender{
			Name: "pipeline-keyed-sum-avro-exactly_once-" + iv, Kind: "pipeline", Job: "keyed-sum-avro", Guar: "exactly_once", Interval: iv, Daemon: true,
			Cmd: func(out, id string) ([]string, []string) {
				return []string{o.pipeline, "run", "-c", filepath.Join(o.jobs, "keyed-sum-avro.yaml")}, []string{
					"JOB_NAME=" + id, "GUARANTEE=exactly_once", "CHECKPOINT_INTERVAL=" + iv,
					"KAFKA_BROKERS=" + o.brokers, "INPUT_TOPIC=" + o.avroInput, "OUTPUT_TOPIC=" + out,
					"SCHEMA_REGISTRY_URL=" + o.registry, "ADMIN_LISTEN=127.0.0.1:0", "LOG_LEVEL=info"}
			},
		})
	}
	for _, g := range []string{"at_least_once", "exactly_once_v2"} {
		for _, iv := range []string{"1s", "100ms"} {
			g, iv := g, iv
			ms := strings.TrimSuffix(iv, "ms")
			if iv == "1s" {
				ms = "1000"
			}
			cs = append(cs, contender{
				Name: "kstreams-keyed-sum-" + g + "-" + iv, Kind: "kstreams", Job: "keyed-sum", Guar: g, Interval: iv, Daemon: true,
				Cmd: func(out, id string) ([]string, []string) {
					return []string{"java", "-Xmx" + o.jvmHeap, "-jar", o.kstreamsJar, o.brokers, o.input, out, id, g, ms, strconv.Itoa(runtime.NumCPU())}, nil
				},
			})
		}
	}
	// Windowed: per key and 1 s tumbling window of event time (the ts
	// field), the count and sum of amount, one output per window once it
	// closes, exactly once; same input (workload -event-rate) for all.
	cs = append(cs, contender{
		Name: "pipeline-windowed-exactly_once-1s", Kind: "pipeline", Job: "windowed", Guar: "exactly_once", Interval: "1s", Daemon: true,
		Cmd: func(out, id string) ([]string, []string) {
			return []string{o.pipeline, "run", "-c", filepath.Join(o.jobs, "windowed.yaml")}, []string{
				"JOB_NAME=" + id, "GUARANTEE=exactly_once", "CHECKPOINT_INTERVAL=1s",
				"KAFKA_BROKERS=" + o.brokers, "INPUT_TOPIC=" + o.windowedInput, "OUTPUT_TOPIC=" + out,
				"ADMIN_LISTEN=127.0.0.1:0", "LOG_LEVEL=info"}
		},
	}, contender{
		Name: "kstreams-windowed-exactly_once_v2-1s", Kind: "kstreams", Job: "windowed", Guar: "exactly_once_v2", Interval: "1s", Daemon: true,
		Cmd: func(out, id string) ([]string, []string) {
			return []string{"java", "-Xmx" + o.jvmHeap, "-cp", o.kstreamsJar, "bench.WindowedSum", o.brokers, o.windowedInput, out, id, "exactly_once_v2", "1000", strconv.Itoa(runtime.NumCPU())}, nil
		},
	}, contender{
		Name: "flink-windowed-exactly_once-1s", Kind: "flink", Job: "windowed", Guar: "exactly_once", Interval: "1s", Daemon: true,
		Cmd: func(out, id string) ([]string, []string) {
			return []string{"java", "-Xmx" + o.jvmHeap, "-cp", o.flinkJar, "bench.WindowedSum", o.brokers, o.windowedInput, out, id, "exactly_once", "1000", strconv.Itoa(runtime.NumCPU())}, nil
		},
	})
	// Stream–table join (issue 34): orders left-joined with the customers
	// table, one output per order with the customer's tier; exactly once.
	cs = append(cs, contender{
		Name: "pipeline-join-enrich-exactly_once-1s", Kind: "pipeline", Job: "join-enrich", Guar: "exactly_once", Interval: "1s", Daemon: true,
		Cmd: func(out, id string) ([]string, []string) {
			return []string{o.pipeline, "run", "-c", filepath.Join(o.jobs, "join-enrich.yaml")}, []string{
				"JOB_NAME=" + id, "GUARANTEE=exactly_once", "CHECKPOINT_INTERVAL=1s",
				"KAFKA_BROKERS=" + o.brokers, "INPUT_TOPIC=" + o.joinOrders, "TABLE_TOPIC=" + o.joinTable, "OUTPUT_TOPIC=" + out,
				"ADMIN_LISTEN=127.0.0.1:0", "LOG_LEVEL=info"}
		},
	}, contender{
		Name: "kstreams-join-enrich-exactly_once_v2-1s", Kind: "kstreams", Job: "join-enrich", Guar: "exactly_once_v2", Interval: "1s", Daemon: true,
		Cmd: func(out, id string) ([]string, []string) {
			return []string{"java", "-Xmx" + o.jvmHeap, "-cp", o.kstreamsJar, "bench.JoinEnrich", o.brokers, o.joinOrders, o.joinTable, out, id, "exactly_once_v2", "1000", strconv.Itoa(runtime.NumCPU())}, nil
		},
	})
	// Apache Flink: a local MiniCluster job in one JVM (bench/peers/flink),
	// parallelism = nproc, checkpoints at the interval; under exactly_once
	// its transactional sink commits when a checkpoint completes.
	for _, v := range []struct{ g, iv string }{
		{"exactly_once", "1s"}, {"exactly_once", "100ms"}, {"at_least_once", "1s"},
	} {
		g, iv := v.g, v.iv
		ms := strings.TrimSuffix(iv, "ms")
		if iv == "1s" {
			ms = "1000"
		}
		cs = append(cs, contender{
			Name: "flink-keyed-sum-" + g + "-" + iv, Kind: "flink", Job: "keyed-sum", Guar: g, Interval: iv, Daemon: true,
			Cmd: func(out, id string) ([]string, []string) {
				return []string{"java", "-Xmx" + o.jvmHeap, "-jar", o.flinkJar, o.brokers, o.input, out, id, g, ms, strconv.Itoa(runtime.NumCPU())}, nil
			},
		})
	}
	return cs
}
