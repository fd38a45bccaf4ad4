#!/usr/bin/env bash
# Runs every `go test -fuzz` target of the module for a while each
# (default 30s). New crashers land in the package's testdata/fuzz and then
# run with the normal tests.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${1:-30s}
grep -rl --include='*_test.go' '^func Fuzz' . | while read -r f; do
  pkg=./$(dirname "${f#./}")
  grep -o '^func Fuzz[A-Za-z0-9_]*' "$f" | sed 's/^func //' | while read -r target; do
    echo "== $pkg $target ($fuzztime)"
    go test -run='^$' -fuzz="^${target}\$" -fuzztime="$fuzztime" -fuzzminimizetime=2s "$pkg"
  done
done
