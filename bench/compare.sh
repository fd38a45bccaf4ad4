#!/usr/bin/env bash
# Two pipeline builds side by side in one session: the working tree's and a
# baseline commit's (built in a temporary git worktree), on one workload,
# against one broker, in alternating rounds so that the machine's load
# drifts over both alike. Writes <out>-new.jsonl, <out>-base.jsonl (runner
# results, one line per contender and round) and <out>-load.txt (the load
# average before each run).
#
#   BENCH_BASE=a1bd5ef BENCH_N=1000000 bench/compare.sh
#
# Settings (environment): BENCH_BASE (commit, required), BENCH_N (1000000),
# BENCH_KEYS (100000), BENCH_PARTITIONS (8), BENCH_ROUNDS (2),
# BENCH_CONTENDERS (plain-copy,pipeline-keyed-sum-exactly_once-1s,
# pipeline-keyed-sum-exactly_once-100ms), BENCH_OUT
# (bench/results/<date>-compare), KAFKA_BOOTSTRAP (a running broker; else one
# is started as in run.sh), BENCH_STEADY (a window such as 10s: measure each
# contender at steady state over it, after BENCH_WARMUP (3s) of running,
# instead of over the drain; BENCH_N must then outlast warmup + window at
# the fastest contender's rate, e.g. 30000000 for the plain copy and 10s),
# BENCH_PAIRED (with BENCH_STEADY: run the two builds at the same time,
# each pipeline contender beside its base twin, and print the rounds'
# ratios of CPU per record; the same binary on both sides gives ratios
# within ±3% where rounds one after the other moved by ±15%).
# No Kafka Streams, so no Maven.
set -euo pipefail
cd "$(dirname "$0")/.."

base=${BENCH_BASE:?set BENCH_BASE to the baseline commit}
n=${BENCH_N:-1000000}
keys=${BENCH_KEYS:-100000}
parts=${BENCH_PARTITIONS:-8}
rounds=${BENCH_ROUNDS:-2}
contenders=${BENCH_CONTENDERS:-plain-copy,pipeline-keyed-sum-exactly_once-1s,pipeline-keyed-sum-exactly_once-100ms}
out=${BENCH_OUT:-bench/results/$(date -u +%Y-%m-%d)-compare}
steady=()
[ -n "${BENCH_STEADY:-}" ] && steady=(-steady-window "$BENCH_STEADY" -steady-warmup "${BENCH_WARMUP:-3s}" -bytes=false)
paired=${BENCH_PAIRED:-}
if [ -n "$paired" ] && [ -z "${BENCH_STEADY:-}" ]; then
  echo "BENCH_PAIRED needs BENCH_STEADY" >&2
  exit 2
fi
run=$(date -u +%Y%m%dT%H%M%S)

echo "== building (working tree, and $base)"
go build -o bin/pipeline ./cmd/pipeline
go build -o bin/bench-workload ./bench/cmd/workload
go build -o bin/bench-plaincopy ./bench/cmd/plaincopy
go build -o bin/bench-runner ./bench/cmd/runner
wt=$(mktemp -d /tmp/eoflow-bench-base.XXXXXX)
git worktree add --detach "$wt" "$base" >/dev/null
(cd "$wt" && go build -o "$OLDPWD/bin/pipeline-base" ./cmd/pipeline)
git worktree remove --force "$wt"

. bench/broker.sh
trap stop_broker EXIT
start_broker

input="bench-$run-in"
bin/bench-workload -brokers "$KAFKA_BOOTSTRAP" -topic "$input" -n "$n" -keys "$keys" -partitions "$parts"
mkdir -p "$(dirname "$out")"
: >"$out-new.jsonl"
: >"$out-base.jsonl"
: >"$out-load.txt"
: >"$out-paired.jsonl"
for r in $(seq "$rounds"); do
  if [ -n "$paired" ]; then
    # Both builds at once, over the same window: each pipeline contender
    # beside its -base twin (runner -pair-with).
    echo "round $r paired: $(cat /proc/loadavg)" | tee -a "$out-load.txt"
    bin/bench-runner -brokers "$KAFKA_BOOTSTRAP" -input "$input" -run "$run-$r" \
      -out "$out-paired.jsonl" -contenders "$contenders" -keys "$keys" -partitions "$parts" \
      -pipeline bin/pipeline -pair-with bin/pipeline-base "${steady[@]}"
    continue
  fi
  for which in new base; do
    bin=bin/pipeline
    [ "$which" = base ] && bin=bin/pipeline-base
    echo "round $r $which: $(cat /proc/loadavg)" | tee -a "$out-load.txt"
    bin/bench-runner -brokers "$KAFKA_BOOTSTRAP" -input "$input" -run "$run-$r-$which" \
      -out "$out-$which.jsonl" -contenders "$contenders" -keys "$keys" -partitions "$parts" \
      -pipeline "$bin" "${steady[@]}"
  done
done
echo "== wrote $out-new.jsonl $out-base.jsonl $out-load.txt"
if [ -n "$paired" ]; then
  # The pairs' ratios of CPU per record, per contender (new / base).
  python3 - "$out-paired.jsonl" <<'PY' || true
import json, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
base = {}
# Each pair is two adjacent lines, the contender and its -base twin, in
# either order (the runner writes the twin first).
for i, r in enumerate(rs):
    if not r["name"].endswith("-base") or r.get("error"):
        continue
    name = r["name"][: -len("-base")]
    for j in (i - 1, i + 1):
        if 0 <= j < len(rs) and rs[j]["name"] == name and not rs[j].get("error"):
            base.setdefault(name, []).append(rs[j]["cpu_sec_per_million"] / r["cpu_sec_per_million"])
            break
for name, ratios in base.items():
    mean = sum(ratios) / len(ratios)
    print(f"{name}: CPU per record new/base {mean:.3f} (rounds: {', '.join(f'{x:.3f}' for x in ratios)})")
PY
  exit 0
fi
# Per contender: the mean over the rounds of each build, and new / base.
python3 - "$out-new.jsonl" "$out-base.jsonl" <<'PY' || true
import json, sys
def load(path):
    by = {}
    for line in open(path):
        r = json.loads(line)
        if not r.get("error"):
            by.setdefault(r["name"], []).append(r)
    return by
new, base = load(sys.argv[1]), load(sys.argv[2])
mean = lambda rs, k: sum(r.get(k, 0) for r in rs) / len(rs)
print(f"{'contender':45} {'records/s new':>14} {'base':>12} {'ratio':>6} {'CPU s/M new':>12} {'base':>6} {'ratio':>6}")
for name in new:
    if name not in base:
        continue
    n, b = new[name], base[name]
    rn, rb = mean(n, "records_per_sec"), mean(b, "records_per_sec")
    cn, cb = mean(n, "cpu_sec_per_million"), mean(b, "cpu_sec_per_million")
    print(f"{name:45} {rn:14.0f} {rb:12.0f} {rn/rb:6.3f} {cn:12.2f} {cb:6.2f} {cn/cb if cb else 0:6.3f}")
PY
