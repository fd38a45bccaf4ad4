#!/usr/bin/env bash
# The side-by-side benchmark (issue 7), end to end: starts a local Kafka
# 4.1.1 broker (unless KAFKA_BOOTSTRAP is set), builds every contender
# (the Flink peer only when one of its contenders is selected),
# pre-produces the workload, runs the contenders one after another and
# writes bench/results/<date>.md and .png. See bench/README.md.
#
#   make bench                       # the full run: 5,000,000 records
#   BENCH_N=200000 make bench        # a quick run (results file marked quick)
#
# Settings (environment): BENCH_N (5000000), BENCH_KEYS (100000),
# BENCH_PARTITIONS (8), BENCH_PROBE (10000 latency probe records per
# contender), BENCH_PROBE_RATE (2000/s), BENCH_CONTENDERS (all, or a comma
# list from `bin/bench-runner -list`), BENCH_BROKER_HEAP (1g), the join's
# BENCH_JOIN_* (bench/join-workload.sh),
# BENCH_OUT (bench/results/<date>[-quick]).
set -euo pipefail
cd "$(dirname "$0")/.."

n=${BENCH_N:-5000000}
keys=${BENCH_KEYS:-100000}
parts=${BENCH_PARTITIONS:-8}
probe=${BENCH_PROBE:-10000}
rate=${BENCH_PROBE_RATE:-2000}
contenders=${BENCH_CONTENDERS:-all}
day=$(date -u +%Y-%m-%d)
quick=
if [ "$n" -lt 5000000 ]; then quick=1; fi
out=${BENCH_OUT:-bench/results/$day${quick:+-quick}}
run=$(date -u +%Y%m%dT%H%M%S)

echo "== building"
go build -o bin/pipeline ./cmd/pipeline
go build -o bin/bench-workload ./bench/cmd/workload
go build -o bin/bench-plaincopy ./bench/cmd/plaincopy
go build -o bin/bench-procs ./bench/cmd/procs
go build -o bin/bench-runner ./bench/cmd/runner
go build -o bin/bench-report ./bench/cmd/report
go build -o bin/bench-registry ./bench/cmd/registry
. bench/jars.sh
build_jar bench/peers/kstreams bench/peers/kstreams/target/kstreams-bench.jar
# The Flink peer is big (Flink's runtime, about 90 MB of jars) and optional:
# built only when a Flink contender is selected (or all are). If it does not
# build, the other contenders still run and the Flink rows say failed.
case ",$contenders," in
*,all,* | *,flink-*) want_flink=1 ;;
*) want_flink= ;;
esac
fjar=bench/peers/flink/target/flink-bench.jar
if [ -n "$want_flink" ] && ! build_jar bench/peers/flink "$fjar"; then
  echo "bench: the Flink peer did not build; its contenders will fail, the others run" >&2
fi

. bench/broker.sh
trap stop_broker EXIT
start_broker
kafka_libs=${KAFKATEST_CACHE:-$HOME/.cache/eoflow-pipeline}/kafka-4.1.1/libs

echo "== workload: $n records, $keys keys, $parts partitions"
input="bench-$run-in"
bin/bench-workload -brokers "$KAFKA_BOOTSTRAP" -topic "$input" -n "$n" -keys "$keys" -partitions "$parts"
# The windowed contenders read the same records with event time spread
# evenly over BENCH_EVENT_SECONDS (default 10) seconds: 1 s windows of
# n/10 records each, closed at the end by a sentinel per partition.
case ",$contenders," in
*,all,* | *windowed*)
  winput="bench-$run-win"
  wexpect=$(mktemp)
  secs=${BENCH_EVENT_SECONDS:-10}
  bin/bench-workload -brokers "$KAFKA_BOOTSTRAP" -topic "$winput" -n "$n" -keys "$keys" -partitions "$parts" \
    -event-rate $((n / secs)) -expect "$wexpect"
  windowed_args=(-windowed-input "$winput" -windowed-expect "$(cat "$wexpect")")
  ;;
*) windowed_args=() ;;
esac

# The Avro contenders read the same records in Avro, their schema in an
# in-memory registry (bench/cmd/registry) that lives as long as this run.
avro_args=()
case ",$contenders," in
*,all,* | *avro*)
  reglog=$(mktemp)
  bin/bench-registry >"$reglog" 2>&1 &
  registry_pid=$!
  trap 'kill $registry_pid 2>/dev/null; stop_broker' EXIT
  for _ in $(seq 50); do [ -s "$reglog" ] && break; sleep 0.1; done
  registry=$(head -1 "$reglog")
  ainput="bench-$run-avro"
  bin/bench-workload -brokers "$KAFKA_BOOTSTRAP" -topic "$ainput" -n "$n" -keys "$keys" -partitions "$parts" \
    -format avro -registry "$registry"
  avro_args=(-avro-input "$ainput" -registry "$registry")
  ;;
esac

# The stream–table join contenders read orders and a customers table, and
# are timed on a start on a table of a million keys (bench/join-workload.sh).
join_args=()
case ",$contenders," in
*,all,* | *join*)
  . bench/join-workload.sh
  join_workload "bench-$run"
  ;;
esac

echo "== contenders"
mkdir -p "$(dirname "$out")"
raw="$out.jsonl"
: >"$raw"
bin/bench-runner -brokers "$KAFKA_BOOTSTRAP" -input "$input" -run "$run" -out "$raw" \
  -contenders "$contenders" -probe "$probe" -probe-rate "$rate" -keys "$keys" -partitions "$parts" \
  -kafka-libs "$kafka_libs" -flink-jar "$fjar" "${windowed_args[@]}" "${avro_args[@]}" "${join_args[@]}"

echo "== report"
note=
if [ -n "$quick" ]; then
  note="**Quick run** (BENCH_N=$n): proves the harness end to end; the numbers are dominated by start-up and are not the 5,000,000-record benchmark."
fi
settings="Workload: $n JSON records of about 100 bytes, $keys distinct keys, $parts partitions, record key = the key field; one shared input topic, drained by each contender into its own $parts-partition output topic. Latency probe: $probe records at $rate/s appended after each drain (so each contender drains the records of the probes before it too: see the records column). Pipeline: workers = GOMAXPROCS, emit every_record. Kafka Streams: num.stream.threads = nproc, statestore.cache.max.bytes = 0, commit.interval.ms = the interval. Flink: a local MiniCluster job, parallelism = nproc, heap state, checkpoint interval = the interval, KafkaSink EXACTLY_ONCE (transactions committed on checkpoint completion) or AT_LEAST_ONCE. TransactionalMessageCopier: --group-mode --use-group-metadata, transactions of 200 (its default) or 10,000 records. Join contenders: BENCH_JOIN_N (BENCH_N) orders keyed by customer, 5% of no customer, left-joined with a compacted table of BENCH_JOIN_KEYS (100000) customers (1% of them deleted by tombstones, 2% updated); their restore: a start on a table of BENCH_JOIN_RESTORE_KEYS (1000000) keys; Kafka Streams with topology.optimization=all (its source KTable restored from its own topic). Windowed contenders: their own copy of the records with ts spread over BENCH_EVENT_SECONDS (10) seconds of event time; Kafka Streams TimeWindows.ofSizeAndGrace(1s, 0) + suppress(untilWindowCloses); Flink forBoundedOutOfOrderness(0) + TumblingEventTimeWindows(1s) with an AggregateFunction."
chart=
if python3 -c 'import matplotlib' 2>/dev/null || pip install --quiet matplotlib >/dev/null 2>&1 || python3 -m pip install --quiet --user matplotlib >/dev/null 2>&1; then
  chart=$(basename "$out").png
fi
bin/bench-report -raw "$raw" -md "$out.md" -csv "$out.csv" -chart "$chart" \
  -title "Benchmark $day${quick:+ (quick run, N=$n)}" -note "$note" -settings "$settings"
if [ -n "$chart" ]; then
  python3 bench/chart.py "$out.csv" "$out.png" "eoflow pipeline vs peers, N=$n, $(nproc) CPUs"
else
  echo "matplotlib unavailable: no chart" >&2
fi
echo "== wrote $out.md"
