#!/usr/bin/env bash
# What does a checkpoint cost? Runs the parity-sum job under exactly_once
# over the same pre-produced input at several checkpoint intervals and
# prints throughput and its ratio to the 1s baseline of the same run.
#
# The sink holds back records that arrive after barrier N until transaction
# N has committed (instead of rotating through a pool of producers), so the
# whole per-checkpoint stall shows up here: if 100ms costs little against
# 1s, a producer pool cannot win more than that difference.
#
#   KAFKA_BOOTSTRAP=127.0.0.1:9092 bench/checkpoint-cost.sh [numbers] [intervals...]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-300000}
shift || true
intervals=("${@:-1s 100ms 20ms}")
read -r -a intervals <<<"${intervals[*]}"
brokers=${KAFKA_BOOTSTRAP:?set KAFKA_BOOTSTRAP (make kafka-up gives 127.0.0.1:9092)}

go build -o bin/pipeline ./cmd/pipeline
run=$(date +%s)
input="bench-ckpt-$run-in"
bin/pipeline datagen -brokers "$brokers" -topic "$input" -partitions 8 -count "$n" >/dev/null

printf '%-10s %12s %10s %10s\n' interval records/s seconds vs_1s
base=
i=0
for iv in "${intervals[@]}"; do
  i=$((i + 1))
  job="bench-ckpt-$run-$i-$iv"
  log=$(mktemp)
  start=$(date +%s.%N)
  JOB_NAME=$job INPUT_TOPIC=$input OUTPUT_TOPIC="$job-out" KAFKA_BROKERS=$brokers \
    CHECKPOINT_INTERVAL=$iv ADMIN_LISTEN=127.0.0.1:0 LOG_LEVEL=info \
    bin/pipeline run -c examples/parity-sum/config.yaml >"$log" 2>&1 &
  pid=$!
  # Done when every input record has been read (pipeline_records_in_total).
  addr=
  until [ -n "$addr" ]; do addr=$(grep -o 'metrics=http://[0-9.:]*' "$log" | head -1 | cut -d/ -f3 || true); sleep 0.05; done
  while :; do
    all_in=$(curl -s "http://$addr/metrics" | awk -v t="$input" -v n="$n" '$1 ~ "^pipeline_records_in_total" && index($1, t) && $2+0 >= n {print "yes"}')
    if [ "$all_in" = yes ]; then
      # Every record is read: with bounded channels the sources can only
      # run as far ahead of the sink as a few batches, so the read rate is
      # the job's rate, stalls at checkpoints included. (Waiting for the
      # final checkpoint would add up to one interval and favour short
      # intervals.)
      break
    fi
    sleep 0.02
  done
  end=$(date +%s.%N)
  kill -TERM "$pid"; wait "$pid" || true
  rm -f "$log"
  secs=$(echo "$end - $start" | bc -l)
  rate=$(echo "$n / $secs" | bc -l)
  [ -z "$base" ] && base=$rate
  printf '%-10s %12.0f %10.2f %10.2f\n' "$iv" "$rate" "$secs" "$(echo "$rate / $base" | bc -l)"
done
