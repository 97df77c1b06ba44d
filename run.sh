#!/usr/bin/env bash
# Installs what is missing, builds Release and runs dmlserve in the foreground
# on 127.0.0.1:50051 (metrics on 127.0.0.1:9464/metrics) with the CPU backend.
# Extra arguments go to the server, e.g. ./run.sh --cpu_devices=4
set -euo pipefail
cd "$(dirname "$0")"
DMLSERVE_WINDOWS_CROSS=0 scripts/install-deps.sh
# Only what runs here: the server and the CLI the example below uses (the
# tests and benchmarks are ./test.sh's). Ninja's progress shows as it goes.
echo "run.sh: building dmlserve and dmlserve-cli (Release) in ${DMLSERVE_BUILD_DIR:-build}/"
DMLSERVE_BUILD_TARGETS="dmlserve dmlserve-cli" scripts/build.sh
cat <<'USAGE'
Example call, from another terminal:
  build/client/dmlserve-cli cumsum --sizes 1,1,3,4 --values 2,1,3,5,3,8,7,3,9,6,2,4 --axis 3
USAGE
exec build/server/dmlserve --listen=127.0.0.1:50051 --metrics_listen=127.0.0.1:9464 --backend=cpu "$@"
