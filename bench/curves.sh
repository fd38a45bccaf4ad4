#!/usr/bin/env bash
# One scaling curve of issue 15 (bench/cmd/curves): the same contenders at
# every point of one dimension, each point on a fresh input topic. See
# bench/README.md#scaling-curves.
#
#   bench/curves.sh keys         # 10k, 100k, 1M, 10M distinct keys (+ restore after SIGKILL)
#   bench/curves.sh partitions   # 8, 64, 256 partitions
#   bench/curves.sh size         # 100 B, 1 KB, 10 KB records (wide JSON)
#   BENCH_N=200000 BENCH_POINTS=10000,100000 bench/curves.sh keys   # a quick check
#
# Settings (environment): BENCH_N (5000000 records per point; keys curve
# at least 2 x keys, size curve at most BENCH_MAX_BYTES (2000000000) bytes
# of records), BENCH_POINTS (a comma list; default the curve's),
# BENCH_CONTENDERS (a comma list from `bin/bench-runner -list`; default
# plain-copy,pipeline-keyed-sum-exactly_once-1s and the Kafka Streams and
# Flink keyed sums, exactly once at 1 s, whose jars exist),
# BENCH_PEERS=1 (build the Kafka Streams and Flink jars, so that they are
# in the default list),
# BENCH_KEYS (100000, partitions and size curves), BENCH_PARTITIONS (8,
# keys and size curves), BENCH_PROBE (10000), BENCH_PROBE_RATE (2000),
# RECOVERY_REPS (3 SIGKILLs per point of the keys curve; 0: none),
# RECOVERY_RATE (2000), BENCH_JVM_HEAP (1g), BENCH_OUT
# (bench/results/<date>-curve-<curve>), BENCH_APPEND=1 (add the points
# to an existing BENCH_OUT.jsonl), BENCH_RUN (run id, the prefix of every
# topic; default curves-<time>), KAFKA_BOOTSTRAP (a running broker; else one
# is started, as by run.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

curve=${1:?usage: bench/curves.sh keys|partitions|size}
case "$curve" in
keys | partitions | size) ;;
*) echo "bench/curves.sh: the curve is keys, partitions or size, not $curve" >&2; exit 2 ;;
esac
contenders=${BENCH_CONTENDERS:-}
peers=${BENCH_PEERS:-}

echo "== building"
go build -o bin/pipeline ./cmd/pipeline
go build -o bin/bench-workload ./bench/cmd/workload
go build -o bin/bench-plaincopy ./bench/cmd/plaincopy
go build -o bin/bench-runner ./bench/cmd/runner
go build -o bin/bench-recovery ./bench/cmd/recovery
go build -o bin/bench-curves ./bench/cmd/curves
# The peers' jars: built (when out of date) if BENCH_PEERS=1 or a named
# contender needs one. A jar that does not build leaves its contender out of
# the default list (or failed, when named).
want() { [ "$peers" = 1 ] || case ",$contenders," in *,"$1"*) true ;; *) false ;; esac; }
. bench/jars.sh
kjar=bench/peers/kstreams/target/kstreams-bench.jar
fjar=bench/peers/flink/target/flink-bench.jar
if want kstreams-; then build_jar bench/peers/kstreams "$kjar" || true; fi
if want flink-; then build_jar bench/peers/flink "$fjar" || true; fi

. bench/broker.sh
trap stop_broker EXIT
start_broker
kafka_libs=${KAFKATEST_CACHE:-$HOME/.cache/eoflow-pipeline}/kafka-4.1.1/libs

chart=bench/chart.py
if ! { python3 -c 'import matplotlib' 2>/dev/null || pip install --quiet matplotlib >/dev/null 2>&1 || python3 -m pip install --quiet --user matplotlib >/dev/null 2>&1; }; then
  echo "matplotlib unavailable: no chart" >&2
  chart=
fi

args=(-curve "$curve" -brokers "$KAFKA_BOOTSTRAP" -n "${BENCH_N:-5000000}" -max-bytes "${BENCH_MAX_BYTES:-2000000000}"
  -keys "${BENCH_KEYS:-100000}" -partitions "${BENCH_PARTITIONS:-8}"
  -probe "${BENCH_PROBE:-10000}" -probe-rate "${BENCH_PROBE_RATE:-2000}"
  -recovery-reps "${RECOVERY_REPS:-3}" -recovery-rate "${RECOVERY_RATE:-2000}"
  -kstreams-jar "$kjar" -flink-jar "$fjar" -kafka-libs "$kafka_libs" -jvm-heap "${BENCH_JVM_HEAP:-1g}"
  -chart "$chart" -points "${BENCH_POINTS:-}" -contenders "$contenders")
if [ "${BENCH_APPEND:-}" = 1 ]; then args+=(-append); fi
if [ -n "${BENCH_OUT:-}" ]; then args+=(-out "$BENCH_OUT"); fi
if [ -n "${BENCH_RUN:-}" ]; then args+=(-run "$BENCH_RUN"); fi
bin/bench-curves "${args[@]}"
