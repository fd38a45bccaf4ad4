# Sourced by the bench scripts: the broker they run against.
#
# start_broker: unless KAFKA_BOOTSTRAP already names one, start a local
# single-node Kafka (cmd/kafka-local; heap BENCH_BROKER_HEAP, default 1g)
# and point KAFKA_BOOTSTRAP at it; either way KAFKA_BOOTSTRAP is exported.
# stop_broker stops a broker start_broker started (nothing otherwise):
# call it from the script's EXIT trap.

start_broker() {
  if [ -z "${KAFKA_BOOTSTRAP:-}" ]; then
    bench_kafka_dir=$(mktemp -d /tmp/eoflow-bench-kafka.XXXXXX)
    echo "== starting Kafka in $bench_kafka_dir"
    KAFKATEST_HEAP=${BENCH_BROKER_HEAP:-1g} go run ./cmd/kafka-local up -dir "$bench_kafka_dir" -port 0
    KAFKA_BOOTSTRAP=$(cat "$bench_kafka_dir/bootstrap")
  fi
  export KAFKA_BOOTSTRAP
}

stop_broker() {
  if [ -n "${bench_kafka_dir:-}" ]; then
    go run ./cmd/kafka-local down -dir "$bench_kafka_dir" >/dev/null 2>&1 || true
  fi
}
