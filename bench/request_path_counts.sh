#!/usr/bin/env bash
# Heap allocations and user-space instructions per request of a server, for
# comparing dmlserve with dmlserve-echo (the bare gRPC ceiling) or one build
# with another. Counts, not times: they do not move on a busy machine.
#
#   bench/request_path_counts.sh [--instructions] SERVER_BINARY [SERVER_FLAGS...]
#
# Starts the server on 127.0.0.1:50997, warms it up with 500 requests, then
# counts over REQUESTS (default 20000; 2000 with --instructions) requests of
# LOAD_ARGS (default: one client, one call in flight, a 1x1x3x4 float scan)
# and prints allocations per request (dmlserve also wants
# --metrics_listen=127.0.0.1:0 among SERVER_FLAGS, so that it binds no fixed port). With --instructions the server runs
# under callgrind (valgrind) instead and the line gives user-space
# instructions per request (every thread, the kernel excluded).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
instructions=false
if [[ ${1:-} == --instructions ]]; then
  instructions=true
  shift
fi
binary=$1
address=127.0.0.1:50997
requests=${REQUESTS:-$($instructions && echo 2000 || echo 20000)}
# Answers are not checked (dmlserve-echo's are its inputs): the load generator
# then fails only when the server does not answer.
load_args=${LOAD_ARGS:---channels=1 --in_flight=1 --mix=cumsum=1 --scan_sizes=1,1,3,4 \
--scan_axis=3 --scan_type=FLOAT32}
load_args="$load_args --verify_every=0"
load=$root/build/bench/load_generator/dmlserve-load
work=$(mktemp -d)
server=
trap '[[ -n $server ]] && kill "$server" 2>/dev/null; rm -rf "$work"' EXIT

if $instructions; then
  valgrind --tool=callgrind --callgrind-out-file="$work/callgrind.%p" \
    "$@" --listen="$address" >"$work/server.log" 2>&1 &
else
  cc -O2 -shared -fPIC -o "$work/malloc_count.so" "$root/bench/malloc_count.c"
  MALLOC_COUNT_FILE=$work/count LD_PRELOAD=$work/malloc_count.so \
    "$@" --listen="$address" >"$work/server.log" 2>&1 &
fi
server=$!
# shellcheck disable=SC2086
run_load() { "$load" --server="$address" $load_args --duration=0 --warmup=0s --requests="$1"; }
ready=false
for _ in $(seq 120); do
  if run_load 500 >/dev/null 2>&1; then
    ready=true
    break
  fi
  sleep 0.5
done
if ! $ready; then
  echo "request_path_counts.sh: the server never answered; its output:" >&2
  cat "$work/server.log" >&2
  exit 1
fi

if $instructions; then
  callgrind_control -z "$server" >/dev/null 2>&1
  run_load "$requests" >"$work/load.log"
  callgrind_control -d "$server" >/dev/null 2>&1
  total=$(callgrind_annotate "$(ls "$work"/callgrind.*.1)" 2>/dev/null |
    awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')
  echo "$(basename "$binary"): $(awk -v t="$total" -v n="$requests" \
    'BEGIN { printf "%.1f", t / n / 1000 }') K user-space instructions per request ($requests requests)"
else
  count() { kill -USR2 "$server"; sleep 0.3; cat "$work/count"; }
  before=$(count)
  run_load "$requests" >"$work/load.log"
  after=$(count)
  echo "$(basename "$binary"): $(awk -v a="$before" -v b="$after" -v n="$requests" \
    'BEGIN { printf "%.2f", (b - a) / n }') heap allocations per request ($requests requests)"
fi
grep -E '^requests:' "$work/load.log" | sed 's/^/  /'
