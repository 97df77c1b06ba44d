#!/usr/bin/env bash
# Builds dmlserve with a sanitizer, in its own build directory (ccache shared
# with the other builds), and runs the tests that build is for:
#
#   scripts/sanitize.sh address   AddressSanitizer + UndefinedBehaviorSanitizer
#                                 (build-asan/): the unit and integration tests
#                                 on the CPU backend (kernels with every ISA
#                                 path, scheduler, server over gRPC, the C++
#                                 and Python clients against it, metrics)
#   scripts/sanitize.sh thread    ThreadSanitizer (build-tsan/): the scheduler
#                                 suite and the in-process request path
#
# Extra arguments go to ctest (address) or to both test executables (thread,
# e.g. --gtest_filter=...). Any sanitizer report fails the test that
# triggered it. docs/sanitizers.md says what each build covers
# and why TSan does not run the gRPC-fronted server.
set -euo pipefail
mode=${1:?usage: scripts/sanitize.sh address|thread [ctest arguments]}
shift
root=$(cd "$(dirname "$0")/.." && pwd)
# As scripts/build.sh: paths relative to the checkout for ccache, so that a
# clone in another folder reuses the entries. These builds have line tables
# (-g1), for which ccache would also hash the build folder's path: it is left
# out, so a report's file names may start with the folder of the clone that
# filled the cache (the file and line are right).
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}

case "$mode" in
  address)
    build=${DMLSERVE_ASAN_BUILD_DIR:-$root/build-asan}
    targets=(dmlserve dmlserve-cli dmlserve_kernels_test scheduler_test request_path_test
      server_integration_test replica_test metrics_test client_unit_test client_integration_test
      dmlserve_proto_python dmlserve_client_python_stubs)
    labels='^(kernels|scheduler|server|client|python|metrics)$'
    # Leaks fail the process at exit; UBSan stops at the first report.
    export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1
    export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    ;;
  thread)
    build=${DMLSERVE_TSAN_BUILD_DIR:-$root/build-tsan}
    targets=(scheduler_test request_path_test)
    labels=''  # the two executables run directly (below)
    export TSAN_OPTIONS="suppressions=$root/tests/sanitizers/tsan.supp halt_on_error=1 second_deadlock_stack=1"
    ;;
  *)
    echo "scripts/sanitize.sh: unknown sanitizer '$mode' (address or thread)" >&2
    exit 2
    ;;
esac

# D3D12 off: lavapipe and vkd3d are not instrumented, and their tests are the
# slowest of the suite; benchmarks off: nothing to check there. -O1 -g1
# (line tables for the reports, asserts on) compiles in half the time of
# -O2 -g, which is what keeps both builds inside CI's budget.
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1" \
  -DDMLSERVE_SANITIZER="$mode" -DDMLSERVE_WITH_D3D12=OFF -DDMLSERVE_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"
cd "$build"
if [[ "$mode" == thread ]]; then
  # Three rounds each: more interleavings for the same build.
  tests/scheduler/scheduler_test --gtest_repeat=3 "$@"
  tests/server/request_path_test --gtest_repeat=3 "$@"
  echo "sanitize.sh thread: scheduler_test and request_path_test passed with no TSan report"
else
  ctest --output-on-failure --timeout 600 -j "$(nproc)" -L "$labels" "$@"
fi
