# Sourced by bench/run.sh and bench/join.sh: join_workload RUN writes the
# stream–table join's topics (issue 34; bench/cmd/workload -join-table)
# and sets join_args, the runner's arguments naming them:
#   <run>-join-customers  BENCH_JOIN_KEYS (100000) customers, compacted,
#   <run>-join-orders     then BENCH_JOIN_N (BENCH_N) orders keyed by customer,
#                         BENCH_JOIN_MISSING (0.05) of them of no customer;
#   <run>-restore-customers, -orders  BENCH_JOIN_RESTORE_KEYS (1000000)
#                         customers and no orders (the restore; 0: none),
#   <run>-restore-empty,  -empty-orders  an empty table (its baseline RSS).
# Every topic has BENCH_PARTITIONS (8) partitions. They stay as run.sh's
# inputs do (a broker bench/broker.sh started goes with its data dir);
# bench/join.sh deletes its own (bench-runner -delete-topics).

join_workload() {
  local run=$1 parts=${BENCH_PARTITIONS:-8} n=${BENCH_JOIN_N:-${BENCH_N:-5000000}}
  local keys=${BENCH_JOIN_KEYS:-100000} rkeys=${BENCH_JOIN_RESTORE_KEYS:-1000000}
  local missing=${BENCH_JOIN_MISSING:-0.05}
  bin/bench-workload -brokers "$KAFKA_BOOTSTRAP" -partitions "$parts" -join-missing "$missing" \
    -join-table "$run-join-customers" -table-keys "$keys" -topic "$run-join-orders" -n "$n"
  join_args=(-join-orders "$run-join-orders" -join-table "$run-join-customers")
  if [ "$rkeys" -gt 0 ]; then
    bin/bench-workload -brokers "$KAFKA_BOOTSTRAP" -partitions "$parts" \
      -join-table "$run-restore-customers" -table-keys "$rkeys" -topic "$run-restore-orders" -n 0
    bin/bench-workload -brokers "$KAFKA_BOOTSTRAP" -partitions "$parts" \
      -join-table "$run-restore-empty" -table-keys 0 -topic "$run-restore-empty-orders" -n 0
    join_args+=(-restore-table "$run-restore-customers" -restore-empty "$run-restore-empty" -restore-orders "$run-restore-orders")
  fi
}
