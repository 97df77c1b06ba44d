#!/usr/bin/env bash
# Builds every libFuzzer target (tests/fuzz/, clang with AddressSanitizer and
# UndefinedBehaviorSanitizer) in build-fuzz/, seeds each from the conformance
# examples, runs them all (side by side, one per core) for SECONDS each, and
# ends with the line
#   fuzz: N targets, S s each, C crashes
# exiting non-zero when C > 0. Crash inputs are kept in build-fuzz/crashes/,
# the grown corpora in build-fuzz/corpus/ (reused by the next run).
#
#   scripts/fuzz.sh 600
set -euo pipefail
seconds=${1:?usage: scripts/fuzz.sh SECONDS}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DMLSERVE_FUZZ_BUILD_DIR:-$root/build-fuzz}
targets=(execute_request_fuzzer cli_request_json_fuzzer)

# Coverage instrumentation everywhere, the fuzzer's main only in the targets.
# clang ignores the kernels' `#pragma GCC target`, so the ISA levels this
# machine has are enabled for every file (the fuzz build is not portable).
sanitize="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fsanitize=fuzzer-no-link"
sanitize+=" -march=native"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_C_FLAGS="$sanitize" -DCMAKE_CXX_FLAGS="$sanitize" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DDMLSERVE_FUZZ=ON -DDMLSERVE_BUILD_TESTS=OFF -DDMLSERVE_BUILD_BENCH=OFF \
  -DDMLSERVE_WITH_D3D12=OFF >/dev/null
ninja -C "$build" "${targets[@]}" make_fuzz_seeds

seeds="$build/seeds"
rm -rf "$seeds"
"$build/tests/fuzz/make_fuzz_seeds" "$root/tests/conformance" "$seeds"
mkdir -p "$build/crashes"

pids=()
for target in "${targets[@]}"; do
  corpus="$build/corpus/$target"
  mkdir -p "$corpus"
  seed_dir="$seeds/${target%_fuzzer}"
  # -timeout: an input running 10 s is a hang, reported as a crash.
  "$build/tests/fuzz/$target" "$corpus" "$seed_dir" -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$build/crashes/$target-" \
    >"$build/$target.log" 2>&1 &
  pids+=($!)
done
crashes=0
for i in "${!targets[@]}"; do
  if ! wait "${pids[$i]}"; then
    crashes=$((crashes + 1))
    echo "fuzz: ${targets[$i]} found a crash; see $build/${targets[$i]}.log and $build/crashes/"
    tail -n 30 "$build/${targets[$i]}.log"
  fi
  grep -E "stat::number_of_executed_units|cov: " "$build/${targets[$i]}.log" | tail -n 2 |
    sed "s/^/${targets[$i]}: /"
done
echo "fuzz: ${#targets[@]} targets, $seconds s each, $crashes crashes"
((crashes == 0))
