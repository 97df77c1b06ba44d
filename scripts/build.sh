#!/usr/bin/env bash
# Configures and builds dmlserve in build/ (Release, Ninja, ccache). Extra
# arguments are CMake options, e.g. scripts/build.sh -DDMLSERVE_WITH_D3D12=OFF
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${DMLSERVE_BUILD_DIR:-build}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$build_dir" -j "$(nproc)"
