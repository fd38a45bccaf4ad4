#!/usr/bin/env bash
# Runs every test with the race detector against one real Kafka broker
# shared by all packages (`make test`). With KAFKA_BOOTSTRAP already set,
# that cluster is used instead and nothing is started. Arguments replace
# the default `./...` (e.g. `-run X -v ./cmd/pipeline`); RACE=0 drops the
# race detector, TEST_TIMEOUT changes the 20m limit.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${KAFKA_BOOTSTRAP:-}" ]; then
  go build -o bin/kafka-local ./cmd/kafka-local
  dir=$(mktemp -d "${TMPDIR:-/tmp}/pipeline-test-kafka.XXXXXX")
  status=1
  cleanup() {
    bin/kafka-local down -dir "$dir" >/dev/null || true
    if [ "$status" -eq 0 ]; then
      rm -rf "$dir"
    else
      echo "test broker logs kept in $dir" >&2
    fi
  }
  trap cleanup EXIT
  bin/kafka-local up -dir "$dir" -port 0 >/dev/null
  KAFKA_BOOTSTRAP=$(cat "$dir/bootstrap")
  export KAFKA_BOOTSTRAP
  echo "shared test broker: $KAFKA_BOOTSTRAP (logs in $dir)"
fi

race=-race
[ "${RACE:-1}" = 0 ] && race=
args=("$@")
skip=()
if [ ${#args[@]} -eq 0 ]; then
  args=(./...)
  # The seeded simulations step every task on one goroutine: the race
  # detector has nothing to find in them and would only slow them down
  # (they were the largest share of engine's race run). They run at full
  # speed below instead.
  [ -n "$race" ] && skip=(-skip '^TestSimulation')
fi
set +e
beside=
if [ $# -eq 0 ] && [ -n "$race" ]; then
  # cmd/pipeline, the longest package (its broker tests mostly wait on
  # the processes they start and on the broker), runs beside everything
  # else, and the simulations below start as soon as the other packages
  # are done instead of after it: one CI run saved about 200 s of its
  # 15-minute budget so. Its output is shown once it ends.
  pipeline_log=$(mktemp "${TMPDIR:-/tmp}/pipeline-test-cmd.XXXXXX")
  go test $race -count=1 -timeout "${TEST_TIMEOUT:-20m}" "${skip[@]}" ./cmd/pipeline/ >"$pipeline_log" 2>&1 &
  beside=$!
  mapfile -t args < <(go list ./... | grep -vx 'github.com/eoflow/pipeline/cmd/pipeline')
fi
go test $race -count=1 -timeout "${TEST_TIMEOUT:-20m}" "${skip[@]}" "${args[@]}"
status=$?
if [ "$status" -eq 0 ] && [ $# -eq 0 ]; then
  # Fault points are compiled in only under this tag (the crash tests
  # build their binary with it); its own tests run here.
  go test $race -count=1 -tags faultpoints ./internal/fault/
  status=$?
fi
if [ "$status" -eq 0 ] && [ $# -eq 0 ] && [ -n "$race" ]; then
  # The broker-free simulations, skipped under the race detector, at full
  # speed: the whole-graph simulation 120 seeds per job and guarantee (500
  # took 190 s of CI's 15-minute budget, which the whole run came within
  # 90 s of; 300 took 275 s once the as-of jobs continued from savepoints
  # and the run went past the budget, 200 with the others beside it 235 s
  # of a CI run of 843 s, 150 beside them 323 s of one of 885 s once event
  # time crossed a join's repartition topic and the others gained its
  # schedules; its full 1000 take about 6 minutes;
  # `go test ./engine -run '^TestSimulation$'` runs them), the other
  # simulations their full counts. (The package comes before -sim.seeds:
  # go test reads the flags it does not know as the test binary's only
  # after the packages.)
  # The two engine runs go side by side: the other simulations run one
  # schedule at a time on one goroutine, which leaves a CPU to the
  # whole-graph one's parallel jobs.
  # Their limit is the others' (TEST_TIMEOUT), not go test's default 10
  # minutes: on a loaded machine the other simulations once ran past it.
  go test -count=1 -timeout "${TEST_TIMEOUT:-20m}" ./twophase/ -run '^TestSimulation'
  status=$?
  if [ "$status" -eq 0 ]; then
    go test -count=1 -timeout "${TEST_TIMEOUT:-20m}" ./engine/ -run '^TestSimulation$' -sim.seeds=120 &
    whole=$!
    go test -count=1 -timeout "${TEST_TIMEOUT:-20m}" ./engine/ -run '^TestSimulation.+'
    others=$?
    wait "$whole"
    status=$?
    [ "$others" -eq 0 ] || status=$others
  fi
fi
if [ -n "$beside" ]; then
  wait "$beside"
  pipeline_status=$?
  cat "$pipeline_log"
  rm -f "$pipeline_log"
  [ "$pipeline_status" -eq 0 ] || status=$pipeline_status
fi
set -e
exit "$status"
