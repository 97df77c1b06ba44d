#!/usr/bin/env bash
# Tiny requests on a GPU host: the CPU-only server against the D3D12 server
# with the CPU beside it, placed by cost (the default) and GPU first, in
# interleaved rounds on one machine (docs/benchmarks.md, "Placement").
#
#   bench/placement_load.sh [ROUNDS] [SECONDS]
#
# Each round starts each server fresh (dmlserve-load --spawn_server) and runs
# the same closed-loop load of tiny scans and 1x8x8 products, every answer
# checked; prints each run's rate and, at the end, each server's best rate
# and its ratio to the CPU-only server's, and the cost-placed server's ratio
# to the CPU-only one within each round (the two run back to back, in
# alternating order, so that a machine whose speed drifts favours neither):
# their median, lowest and highest.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
seconds=${2:-5}
load=build/bench/load_generator/dmlserve-load
server=build/server/dmlserve
declare -A configs=(
  [cpu]="--backend=cpu"
  [d3d12_cost]="--backend=d3d12 --placement=cost"
  [d3d12_gpu_first]="--backend=d3d12 --placement=gpu_first"
)
names=(cpu d3d12_cost d3d12_gpu_first)
declare -A best
ratios=()
for ((round = 1; round <= rounds; ++round)); do
  if ((round % 2 == 1)); then order=(cpu d3d12_cost d3d12_gpu_first); else
    order=(d3d12_cost cpu d3d12_gpu_first)
  fi
  declare -A rate_of=()
  for name in "${order[@]}"; do
    out=$("$load" --spawn_server="$server" --server_args="${configs[$name]}" \
      --channels=8 --in_flight=4 --duration="${seconds}s" --warmup=2s \
      --mix=cumsum=1,qmatmul=1 --scan_sizes=1,8 --matmul_shape=1,8,8 --verify_every=1 2>&1) ||
      true
    rate=$(sed -n 's/^throughput: *\([0-9.]*\) req\/s.*/\1/p' <<<"$out")
    checked=$(sed -n 's/^checked: *//p' <<<"$out")
    echo "round $round  $name  ${rate:-?} req/s  (checked ${checked:-nothing: $(tail -2 <<<"$out")})"
    rate_of[$name]=${rate:-0}
    if [[ -n $rate ]] && awk -v a="$rate" -v b="${best[$name]:-0}" 'BEGIN { exit !(a > b) }'; then
      best[$name]=$rate
    fi
  done
  if awk -v c="${rate_of[cpu]}" 'BEGIN { exit !(c > 0) }'; then
    ratios+=("$(awk -v a="${rate_of[d3d12_cost]}" -v c="${rate_of[cpu]}" 'BEGIN { printf "%.3f", a / c }')")
  fi
done
echo
echo "| server | best req/s | / CPU-only |"
echo "|---|---:|---:|"
for name in "${names[@]}"; do
  awk -v n="$name" -v a="${best[$name]:-0}" -v c="${best[cpu]:-0}" \
    'BEGIN { printf "| %s | %.0f | %.2fx |\n", n, a, (c > 0 ? a / c : 0) }'
done
if ((${#ratios[@]} > 0)); then
  echo
  printf '%s\n' "${ratios[@]}" | sort -g | awk '{ v[NR] = $1 } END {
    m = (NR % 2 == 1) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "d3d12_cost / cpu within each round: median %.2fx (%.2f-%.2f) over %d rounds\n", m, v[1], v[NR], NR }'
fi
