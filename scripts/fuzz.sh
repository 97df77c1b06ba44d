#!/usr/bin/env bash
# Builds every libFuzzer target (tests/fuzz/, clang with AddressSanitizer and
# UndefinedBehaviorSanitizer) in build-fuzz/, seeds each from the conformance
# examples and the D3D12 kernels, runs each for SECONDS (one per core at a
# time), and ends with the line
#   fuzz: N targets, S s each, C crashes
# exiting non-zero when C > 0. Crash inputs are kept in build-fuzz/crashes/,
# the grown corpora in build-fuzz/corpus/ (reused by the next run).
#
#   scripts/fuzz.sh 600
set -euo pipefail
seconds=${1:?usage: scripts/fuzz.sh SECONDS}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DMLSERVE_FUZZ_BUILD_DIR:-$root/build-fuzz}
targets=(execute_request_fuzzer execute_stream_fuzzer cli_request_json_fuzzer dxbc_fuzzer
  kernel_exactness_fuzzer)

# clang alone is not enough: on Debian 12 the libFuzzer and sanitizer runtimes
# are in libclang-rt-14-dev (libclang-rt-dev), which clang's dependencies only
# recommend.
# The rest (cmake, ninja, the libraries) is scripts/install-deps.sh's.
probe=$(mktemp -d)
linked=0
if command -v clang++ >/dev/null 2>&1 &&
   echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' |
     clang++ -x c++ - -fsanitize=fuzzer,address,undefined -o "$probe/probe" >/dev/null 2>&1; then
  linked=1
fi
rm -rf "$probe"
if ((linked == 0)); then
  echo "fuzz: needs clang with its libFuzzer and sanitizer runtimes; on Debian 12:" >&2
  echo "  apt-get install clang libclang-rt-dev" >&2
  exit 1
fi

# Coverage instrumentation everywhere, the fuzzer's main only in the targets.
# The kernels give clang their ISA features through `#pragma clang attribute`
# (clang ignores `#pragma GCC target`), so the build runs on any x86-64 CPU and
# the fuzzers reach the ISA paths this machine has.
sanitize="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fsanitize=fuzzer-no-link"
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

# At most one target per core at a time, so each gets a whole core for its
# SECONDS (the run takes SECONDS x targets / cores).
jobs=$(nproc)
crashes=0
run_target() {
  local target=$1
  local corpus="$build/corpus/$target"
  mkdir -p "$corpus" "$seeds/${target%_fuzzer}"
  # kernel_exactness_fuzzer reads a whole operation from each input: inputs
  # as long as its seeds from the start, and 4 pool threads (as
  # dmlserve_kernels_test) so products are split as on a larger machine.
  local extra=() environment=()
  if [[ $target == kernel_exactness_fuzzer ]]; then
    extra=(-max_len=128 -len_control=0)
    environment=(DMLSERVE_CPU_THREADS=4)
  fi
  # -timeout: an input running 10 s is a hang, reported as a crash.
  env "${environment[@]}" "$build/tests/fuzz/$target" "$corpus" "$seeds/${target%_fuzzer}" \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 "${extra[@]}" \
    -artifact_prefix="$build/crashes/$target-" >"$build/$target.log" 2>&1
}
report() {
  local target=$1 status=$2
  if ((status != 0)); then
    crashes=$((crashes + 1))
    echo "fuzz: $target found a crash; see $build/$target.log and $build/crashes/"
    tail -n 30 "$build/$target.log"
  fi
  grep -E "stat::number_of_executed_units|cov: " "$build/$target.log" | tail -n 2 |
    sed "s/^/$target: /"
}
for ((first = 0; first < ${#targets[@]}; first += jobs)); do
  batch=("${targets[@]:first:jobs}")
  pids=()
  for target in "${batch[@]}"; do
    run_target "$target" &
    pids+=($!)
  done
  for i in "${!batch[@]}"; do
    status=0
    wait "${pids[$i]}" || status=$?
    report "${batch[$i]}" "$status"
  done
done
echo "fuzz: ${#targets[@]} targets, $seconds s each, $crashes crashes"
((crashes == 0))
