#!/usr/bin/env bash
# Installs what is missing, builds everything (Release) and runs every test,
# then the sanitizer builds' tests (docs/sanitizers.md): ASan + UBSan of the
# unit and integration tests, TSan of the scheduler and the request path.
# Arguments go to the Release build's ctest. DMLSERVE_SANITIZERS=0 skips the
# sanitizer builds (for quick local runs; CI runs them).
set -euo pipefail
cd "$(dirname "$0")"
scripts/install-deps.sh
scripts/build.sh -DDMLSERVE_TEST_WINE=ON
(cd build && ctest --output-on-failure --timeout 600 -j "$(nproc)" "$@")
if [[ "${DMLSERVE_SANITIZERS:-1}" != 0 ]]; then
  scripts/sanitize.sh address
  scripts/sanitize.sh thread
fi
