#!/usr/bin/env bash
# Configures and builds dmlserve in build/ (Release, Ninja, ccache). Extra
# arguments are CMake options, e.g. scripts/build.sh -DDMLSERVE_WITH_D3D12=OFF
# DMLSERVE_BUILD_TARGETS="dmlserve dmlserve-cli" builds only those (and what
# they need) instead of everything, tests and benchmarks included.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${DMLSERVE_BUILD_DIR:-build}
# ccache sees paths relative to the source tree, so that another copy of it
# (tests/toy_operator's patched tree, a git worktree) hits the same entries.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
# Warnings in the project's own code fail the build (DMLSERVE_WERROR; see
# CMakeLists.txt for which and why).
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDMLSERVE_WERROR=ON "$@" >/dev/null
read -r -a targets <<<"${DMLSERVE_BUILD_TARGETS:-}"
if ((${#targets[@]} > 0)); then
  cmake --build "$build_dir" -j "$(nproc)" --target "${targets[@]}"
else
  cmake --build "$build_dir" -j "$(nproc)"
fi
