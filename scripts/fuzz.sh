#!/usr/bin/env bash
# Bounded libFuzzer + ASan/UBSan run over every reply parser (native/fuzz/*.cc).
# Usage: scripts/fuzz.sh [SECONDS per harness, default 20]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-20}
if ! command -v clang++ >/dev/null; then
  echo "fuzz: clang++ missing (scripts/setup.sh installs clang)" >&2
  exit 1
fi
rm -rf build/fuzz/obj && mkdir -p build/fuzz/obj
export FUZZ_CXXFLAGS="-std=c++17 -g -O1 -fsanitize=address,undefined -fno-sanitize-recover=undefined -Inative"
# Every codec source compiled once (coverage-instrumented, no main: fuzzer-no-link), as many at
# a time as there are CPUs, then linked into each harness: not recompiled per harness.
find native -name '*.cc' -not -path 'native/addon/*' -not -path 'native/fuzz/*' | sort |
  xargs -P "$(nproc)" -I{} sh -c 'clang++ $FUZZ_CXXFLAGS -fsanitize=fuzzer-no-link -c "$1" -o "build/fuzz/obj/$(echo "$1" | tr / _).o"' _ {}
objs=$(ls build/fuzz/obj/*.o)
for harness in native/fuzz/*.cc; do
  name=$(basename "$harness" .cc)
  # shellcheck disable=SC2086
  clang++ $FUZZ_CXXFLAGS -fsanitize=fuzzer "$harness" $objs -o "build/fuzz/$name" &
done
wait
# Each harness for its bounded time, as many at once as there are CPUs (the bound is wall time:
# side by side, the run takes the time of a few harnesses, not of all of them).
export secs
one() {
  local name=$1 log="build/fuzz/$1.log"
  mkdir -p "build/fuzz/$name.corpus"
  if ! "build/fuzz/$name" -max_total_time="$secs" -max_len=4096 -print_final_stats=1 \
    "build/fuzz/$name.corpus" >"$log" 2>&1; then
    grep -E -A3 "runtime error|ERROR|SUMMARY" "$log" | head -40 >&2
    echo "fuzz: $name FAILED (full log: $log)" >&2
    return 1
  fi
  echo "fuzz: $name for ${secs}s: $(grep -E "stat::number_of_executed_units" "$log" || true)"
}
export -f one
for harness in native/fuzz/*.cc; do basename "$harness" .cc; done |
  xargs -P "$(nproc)" -I{} bash -c 'one "$1"' _ {} || { echo "fuzz: a harness failed" >&2; exit 1; }
echo "fuzz: no crash"
