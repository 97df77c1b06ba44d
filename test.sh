#!/usr/bin/env bash
# Installs what is missing, builds everything (Release) and runs every test.
set -euo pipefail
cd "$(dirname "$0")"
scripts/install-deps.sh
scripts/build.sh -DDMLSERVE_TEST_WINE=ON
cd build
ctest --output-on-failure --timeout 600 -j "$(nproc)" "$@"
