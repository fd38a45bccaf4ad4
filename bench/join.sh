#!/usr/bin/env bash
# The stream–table join (issue 34) against Kafka Streams, in rounds: the
# join's workload once (bench/join-workload.sh), then BENCH_ROUNDS (3)
# rounds of the two join contenders, each drained and then timed on a
# start on a table of BENCH_JOIN_RESTORE_KEYS (1000000) keys; the order of
# the two alternates from round to round. Writes <out>.jsonl, <out>.md
# (each round's numbers and ratios, and their spread) and <out>-load.txt
# (the load average before and after every round: the host is shared).
#
#   bench/join.sh                                   # 2,000,000 orders, 3 rounds
#   BENCH_JOIN_N=200000 BENCH_ROUNDS=1 bench/join.sh  # a quick check
#
# Settings: BENCH_ROUNDS, BENCH_JOIN_* (bench/join-workload.sh; BENCH_JOIN_N
# defaults to 2000000 here), BENCH_PARTITIONS, BENCH_JVM_HEAP (1g),
# KAFKA_BOOTSTRAP (a running broker; else one is started), BENCH_OUT
# (bench/results/<date>-join).
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=${BENCH_ROUNDS:-3}
export BENCH_JOIN_N=${BENCH_JOIN_N:-2000000}
day=$(date -u +%Y-%m-%d)
out=${BENCH_OUT:-bench/results/$day-join}
run=join$(date -u +%Y%m%dT%H%M%S)

echo "== building"
go build -o bin/pipeline ./cmd/pipeline
go build -o bin/bench-workload ./bench/cmd/workload
go build -o bin/bench-runner ./bench/cmd/runner
go build -o bin/bench-report ./bench/cmd/report
. bench/jars.sh
build_jar bench/peers/kstreams bench/peers/kstreams/target/kstreams-bench.jar

. bench/broker.sh
trap stop_broker EXIT
start_broker
trap 'bin/bench-runner -brokers "$KAFKA_BOOTSTRAP" -delete-topics "bench-$run-"; stop_broker' EXIT

echo "== workload"
. bench/join-workload.sh
join_workload "bench-$run"

mkdir -p "$(dirname "$out")"
raw="$out.jsonl"
load="$out-load.txt"
: >"$raw"
: >"$load"
ours=pipeline-join-enrich-exactly_once-1s
theirs=kstreams-join-enrich-exactly_once_v2-1s
for i in $(seq "$rounds"); do
  order="$ours,$theirs"
  if [ $((i % 2)) -eq 0 ]; then order="$theirs,$ours"; fi
  echo "== round $i: $order"
  echo "round $i before: $(uptime)" >>"$load"
  bin/bench-runner -brokers "$KAFKA_BOOTSTRAP" -run "$run-r$i" -out "$raw" -contenders "$order" \
    -partitions "${BENCH_PARTITIONS:-8}" -jvm-heap "${BENCH_JVM_HEAP:-1g}" "${join_args[@]}"
  echo "round $i after: $(uptime)" >>"$load"
done

echo "== report"
settings="$BENCH_JOIN_N orders ({\"id\",\"customer\",\"n\",\"ts\"}, record key the customer, ${BENCH_JOIN_MISSING:-0.05} of them of a customer never in the table) left-joined with a compacted table of ${BENCH_JOIN_KEYS:-100000} customers ({\"tier\"}; 2% of them updated, 1% deleted by a tombstone), ${BENCH_PARTITIONS:-8} partitions each; restore: a table of ${BENCH_JOIN_RESTORE_KEYS:-1000000} customers and no orders. $rounds rounds, the order of the two contenders alternating. Pipeline: bench/jobs/join-enrich.yaml, exactly_once, 1 s checkpoints, workers = GOMAXPROCS. Kafka Streams 4.1.1: bench/peers/kstreams JoinEnrich (KStream.leftJoin(KTable)), exactly_once_v2, commit.interval.ms 1000, num.stream.threads = nproc, statestore.cache.max.bytes 0, topology.optimization=all (the source KTable's topic is its changelog), -Xmx${BENCH_JVM_HEAP:-1g}. Load average before and after each round: $(basename "$load")."
bin/bench-report -raw "$raw" -md "$out.md" -title "Stream–table join $day" -settings "$settings"
echo "== wrote $out.md"
