#!/usr/bin/env bash
# What a savepoint costs with a large state: the bench keyed-sum job
# (exactly_once) drains SP_N records over SP_KEYS keys, then
#   1. `pipeline savepoint create` while it runs: wall time and size;
#   2. a new job (another name) starts from the savepoint: time to import it
#      (read, restore, one transaction into the state topic) and to restore;
# and a restart of that new job from its own checkpoints, for comparison.
#
# Usage: bench/savepoint-cost.sh            (KAFKA_BOOTSTRAP, or a broker is started)
#        SP_N=2000000 SP_KEYS=1000000 bench/savepoint-cost.sh
# Writes bench/results/<date>-savepoint-cost.md (SP_OUT overrides).
set -euo pipefail
cd "$(dirname "$0")/.."

N=${SP_N:-2000000}
KEYS=${SP_KEYS:-1000000}
OUT=${SP_OUT:-bench/results/$(date -u +%F)-savepoint-cost.md}
work=$(mktemp -d)
. bench/broker.sh
trap 'kill $(jobs -p) 2>/dev/null || true; stop_broker; rm -rf "$work"' EXIT

mkdir -p bin
go build -o bin/pipeline ./cmd/pipeline
go build -o bin/bench-workload ./bench/cmd/workload

start_broker
export KAFKA_BROKERS=$KAFKA_BOOTSTRAP

run_id=$(date +%s)
export INPUT_TOPIC=sp-in-$run_id OUTPUT_TOPIC=sp-out-$run_id ADMIN_TOKEN=bench LOG_LEVEL=info
bin/bench-workload -brokers "$KAFKA_BOOTSTRAP" -topic "$INPUT_TOPIC" -n "$N" -keys "$KEYS" >/dev/null

# The bench job, with a token for the savepoint endpoint, and $work as the
# directory the endpoint may write savepoints below.
cfg=$work/keyed-sum.yaml
sed 's|^  listen: \(.*\)$|  listen: \1\n  token: ${ADMIN_TOKEN}\n  savepoint_dir: '"$work"'|' bench/jobs/keyed-sum.yaml >"$cfg"
grep -q 'token:' "$cfg"

ms() { date +%s%3N; }
# wait_log FILE PATTERN: until a line of FILE matches.
wait_log() { until grep -q "$2" "$1"; do sleep 0.05; done; }
# records_in URL: pipeline_records_in_total of the job.
records_in() { curl -sf "$1/metrics" | awk '/^pipeline_records_in_total\{/ {s+=$2} END {printf "%d", s}'; }

# 1. Drain, then a savepoint of the running job.
export JOB_NAME=sp-a-$run_id
bin/pipeline run -c "$cfg" >"$work/a.log" 2>&1 &
a=$!
wait_log "$work/a.log" 'admin listening'
url=$(grep -o 'metrics=http://[0-9.:]*' "$work/a.log" | head -1 | sed 's/metrics=//')
until [ "$(records_in "$url")" -ge "$N" ]; do sleep 0.2; done
sp=$work/sp
t0=$(ms)
bin/pipeline savepoint create -admin "$url" -token bench "$sp" >"$work/create.out"
t1=$(ms)
create_ms=$((t1 - t0))
kill -TERM $a; wait $a || true
sp_bytes=$(du -sb "$sp" | cut -f1)
sp_keys=$(bin/pipeline savepoint inspect "$sp" | awk '/aggregate\)/ {print $3}')

# 2. A new job from the savepoint: start to "imported savepoint" and to
# "restored" (the import is one transaction of every key).
export JOB_NAME=sp-b-$run_id OUTPUT_TOPIC=sp-out-b-$run_id
t0=$(ms)
bin/pipeline run -c "$cfg" --from-savepoint "$sp" >"$work/b.log" 2>&1 &
b=$!
wait_log "$work/b.log" 'msg="imported savepoint"'
t1=$(ms)
wait_log "$work/b.log" 'msg=restored'
t2=$(ms)
import_ms=$((t1 - t0)); import_restored_ms=$((t2 - t0))
kill -TERM $b; wait $b || true

# 3. The same job restarted from its own checkpoints (reads the state topic).
t0=$(ms)
bin/pipeline run -c "$cfg" --from-savepoint "$sp" >"$work/c.log" 2>&1 &
c=$!
wait_log "$work/c.log" 'msg=restored'
t1=$(ms)
restart_ms=$((t1 - t0))
kill -TERM $c; wait $c || true
grep -q 'the savepoint was imported before' "$work/c.log"

restore_took=$(grep -o 'msg=restored.*took=[^ ]*' "$work/c.log" | grep -o 'took=[^ ]*')
mkdir -p "$(dirname "$OUT")"
cat >"$OUT" <<EOF
# Savepoint cost, $(date -u +%F)

\`bench/savepoint-cost.sh\`: the bench keyed-sum job (\`bench/jobs/keyed-sum.yaml\`,
exactly_once, 1 s checkpoints) drained $N records over $KEYS keys on a
single local Kafka 4.1.1 broker; then a savepoint of the running job, a new
job started from it, and that job restarted. Machine: $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), shared with the broker.
One run; wall times include process start.

| step | result |
|---|---|
| savepoint of the running job (\`pipeline savepoint create\`, request to complete directory) | $create_ms ms |
| savepoint size | $sp_keys keys, $((sp_bytes / 1024)) KiB on disk |
| new job from the savepoint: start to import committed | $import_ms ms |
| new job from the savepoint: start to running | $import_restored_ms ms |
| the same job restarted from its own checkpoints: start to running (restore $restore_took) | $restart_ms ms |
EOF
cat "$OUT"
