#!/usr/bin/env bash
# The recovery benchmark (issue 7): SIGKILL to the first new committed
# output of the keyed sum (exactly_once, 1s checkpoints) with 100k and 1M
# keys of state, each killed RECOVERY_REPS times. See bench/README.md.
#
#   make bench-recovery
#   RECOVERY_KEYS=100000 RECOVERY_REPS=1 make bench-recovery   # quick
#
# Settings (environment): RECOVERY_KEYS (100000,1000000), RECOVERY_REPS (3),
# RECOVERY_RATE (2000 input records/s while killing), RECOVERY_OUT
# (bench/results/<date>-recovery), RECOVERY_PROFILE (a directory: one more
# restart per size is CPU-profiled there, not counted), KAFKA_BOOTSTRAP (a
# running broker; else one is started, as by run.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

out=${RECOVERY_OUT:-bench/results/$(date -u +%Y-%m-%d)-recovery}
go build -o bin/pipeline ./cmd/pipeline
go build -o bin/bench-recovery ./bench/cmd/recovery

. bench/broker.sh
trap stop_broker EXIT
start_broker

mkdir -p "$(dirname "$out")"
bin/bench-recovery -brokers "$KAFKA_BOOTSTRAP" -pipeline bin/pipeline \
  -keys "${RECOVERY_KEYS:-100000,1000000}" -reps "${RECOVERY_REPS:-3}" -rate "${RECOVERY_RATE:-2000}" \
  -out "$out.jsonl" -md "$out.table.md" ${RECOVERY_PROFILE:+-profile "$RECOVERY_PROFILE"}
echo "== wrote $out.jsonl and $out.table.md"
