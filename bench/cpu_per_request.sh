#!/usr/bin/env bash
# CPU time and context switches per request, for the server and for the load
# generator, from each thread's counters in /proc (no perf needed). On a
# machine whose cores are all busy, throughput follows total CPU per request,
# and context switches (thread wake-ups) are the steadiest figure when the
# machine is noisy.
#
#   bench/cpu_per_request.sh LABEL SERVER_BINARY [SERVER_FLAGS...]
#
# Starts SERVER_BINARY --listen=127.0.0.1:50999 SERVER_FLAGS (dmlserve or
# dmlserve-echo), runs 64 clients x 1 call of a 1x1024x1024 matrix multiply
# against a registered B for 6 s, samples 3 s in the middle, and prints one
# line. LOAD_ARGS replaces the load generator's workload flags.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
label=$1
shift
address=127.0.0.1:50999
load_args=${LOAD_ARGS:---mix=qmatmul=1 --matmul_shape=1,1024,1024 --register_weights \
--channels=64 --in_flight=1 --verify_every=1}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$@" --listen="$address" >"$work/server.log" 2>&1 &
server=$!
sleep 1
# shellcheck disable=SC2086
"$root/build/bench/load_generator/dmlserve-load" --server="$address" $load_args \
  --duration=6s --warmup=1s >"$work/load.log" 2>&1 &
load=$!
sleep 2.5

# One line per thread: voluntary and involuntary switches, user+system ticks.
snapshot() {
  local pid=$1
  for task in /proc/"$pid"/task/*; do
    local switches ticks
    switches=$(awk '/^(voluntary|nonvoluntary)_ctxt_switches/ {s += $2} END {print s}' \
      "$task/status" 2>/dev/null) || continue
    ticks=$(awk '{print $14 + $15}' "$task/stat" 2>/dev/null) || continue
    echo "${task##*/} $switches $ticks"
  done | sort
}
snapshot "$server" >"$work/server0"
snapshot "$load" >"$work/load0"
sleep 3
snapshot "$server" >"$work/server1"
snapshot "$load" >"$work/load1"
wait "$load" || true
kill -9 "$server" 2>/dev/null || true
wait "$server" 2>/dev/null || true

qps=$(awk '/^throughput:/ {print $2}' "$work/load.log")
if [[ -z "$qps" ]]; then
  cat "$work/load.log" >&2
  exit 1
fi
ticks_per_second=$(getconf CLK_TCK)
# Sums over threads alive at both samples: CPU µs and switches per request.
per_request() {
  join "$work/$1"0 "$work/$1"1 | awk -v q="$qps" -v hz="$ticks_per_second" \
    '{s += $4 - $2; t += $5 - $3} END {printf "%5.1f us cs %.3f", t * 1e6 / hz / (q * 3), s / (q * 3)}'
}
printf '%-12s qps %7.0f  server %s  client %s\n' "$label" "$qps" "$(per_request server)" \
  "$(per_request load)"
