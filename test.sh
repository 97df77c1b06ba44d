#!/usr/bin/env bash
# Installs what is missing, builds everything (Release) and runs every test,
# then the sanitizer builds' tests (docs/sanitizers.md): ASan + UBSan of the
# unit and integration tests, TSan of the scheduler and the request path.
# Arguments go to the Release build's ctest.
#
# The Windows product (dmlserve.exe and its zip, docs/windows.md) is
# cross-built by scripts/build-windows.sh into build/windows and tested under
# wine (ctest -L windows); its dependencies are built from Debian's sources
# once per machine and cached. DMLSERVE_WINDOWS_CROSS=0 leaves it out, and
# DMLSERVE_SANITIZERS=0 the sanitizer builds (for quick local runs; CI runs
# everything).
set -euo pipefail
cd "$(dirname "$0")"
start=$SECONDS
stage() { echo "test.sh: $1 ($((SECONDS - start)) s)"; }
scripts/install-deps.sh
stage "dependencies installed"
windows=${DMLSERVE_WINDOWS_CROSS:-1}
if [[ $windows != 0 ]]; then
  scripts/build.sh -DDMLSERVE_TEST_WINE=ON
  stage "Linux build done"
  scripts/build-windows.sh build/windows
  stage "Windows build done"
else
  scripts/build.sh -DDMLSERVE_TEST_WINE=OFF
  stage "Linux build done"
fi
(cd build && ctest --output-on-failure --timeout 600 -j "$(nproc)" "$@")
stage "tests passed"
if [[ "${DMLSERVE_SANITIZERS:-1}" != 0 ]]; then
  scripts/sanitize.sh address
  scripts/sanitize.sh thread
  stage "sanitizer tests passed"
fi
