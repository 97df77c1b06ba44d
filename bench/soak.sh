#!/usr/bin/env bash
# Runs bench/soak.py (see there) with Debian's Python and the generated stubs
# from build/: a server under mixed load, register/release churn, stream
# cancellations and slow /metrics clients, resources compared start to end.
#   bench/soak.sh [--minutes=10]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export PYTHONPATH="$root/build/proto/python:$root/build/client/python:$root/client/python"
exec /usr/bin/python3 "$root/bench/soak.py" "$@"
