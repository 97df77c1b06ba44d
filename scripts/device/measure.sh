#!/usr/bin/env bash
# Runs on a lent device machine, in a copy of this repository with the bundle
# from scripts/device/bundle.sh carried in .device: every measurement issues
# 40 (AMX tiles) and 42 (placement on a GPU host) need from a machine that
# has what this one lacks, in one device call. Each step has its own time
# limit and log in $OUT (the device tool's output folder; ./device-out
# elsewhere); the whole run stops starting steps once BUDGET seconds (default
# 540, inside the device call's 10 minutes) are spent, so a step that hangs
# costs its own limit and what it leaves unrun, never the summary files.
# docs/benchmarks.md, "Measuring on a lent machine", gives the call.
#
#   scripts/device/measure.sh [amx|gpu|all] [--quick]
#
# --quick shortens every run (a rehearsal on an ordinary machine).
set -uo pipefail
root=$(pwd)
what=${1:-all}
quick=false
[[ ${2:-} == --quick ]] && quick=true
out=${OUT:-$root/device-out}
mkdir -p "$out"
budget=${BUDGET:-540}
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
tar -C "$stage" -xJf "$root/.device/bundle.tar.xz" || { echo "measure.sh: no .device/bundle.tar.xz" >&2; exit 1; }
export LD_LIBRARY_PATH=$stage/lib
bin=$stage/bin
# pick FULL QUICK: the full run's value, or the rehearsal's.
pick() { $quick && echo "$2" || echo "$1"; }

# The tests read the conformance examples from this copy of the repository.
export DMLSERVE_CONFORMANCE_DIR=$root/tests/conformance
# NVIDIA's Vulkan driver, where the machine has one (vkd3d runs on Vulkan).
nvidia_icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[[ -f $nvidia_icd ]] && export VK_DRIVER_FILES=$nvidia_icd

# step NAME LIMIT_SECONDS COMMAND...: runs one step, its output in
# $OUT/NAME.log, for at most LIMIT_SECONDS and what is left of the budget. It
# runs in a process group of its own, so that a step stopped at its limit
# takes what it started (a spawned server, a bench) with it.
step() {
  local name=$1 limit=$2
  shift 2
  local left=$((budget - SECONDS))
  if ((left < 10)); then
    echo "step $name: not run, the budget of $budget s is spent" | tee -a "$out/steps.txt"
    return
  fi
  ((limit > left)) && limit=$left
  local start=$SECONDS
  setsid timeout -k 5 "$limit" "$@" >"$out/$name.log" 2>&1 &
  local group=$!
  wait "$group"
  local code=$?
  kill -KILL -- "-$group" 2>/dev/null
  echo "step $name: exit $code after $((SECONDS - start)) s" | tee -a "$out/steps.txt"
}

{
  echo "date: $(date -u)"
  lscpu
  grep -m1 -o 'amx[a-z0-9_]*' /proc/cpuinfo | sort -u | tr '\n' ' '
  echo
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv
} >"$out/machine.txt" 2>&1

has_amx=false
grep -qw amx_int8 /proc/cpuinfo && has_amx=true
if [[ $what == amx || $what == all ]]; then
  if $has_amx || $quick; then
    isa=amx
    $has_amx || isa=avx512vnni  # a rehearsal without tiles
    # Exactness on the real tile instructions: what kernels.isa.amx runs.
    step exactness_$isa 240 env DMLSERVE_CPU_ISA=$isa DMLSERVE_CPU_THREADS=4 \
      "$bin/dmlserve_kernels_test" \
      --gtest_filter='RandomOperationsTest.*:ConformanceTest.*:QuantizedMatMul*:ScanKernels*:Amx*:*QGemm*'
    # The limits, 1 and 2 threads: tdpbusd beside vpdpbusd.
    step limits_1thread 60 env DMLSERVE_CPU_THREADS=1 "$bin/dmlserve_bench" \
      --benchmark_filter='MachineLimit_(Tdpbusd|Vpdpbusd)' --benchmark_min_time="$(pick 0.3 0.05)"
    step limits_2threads 60 env DMLSERVE_CPU_THREADS=2 "$bin/dmlserve_bench" \
      --benchmark_filter='MachineLimit_(Tdpbusd|Vpdpbusd)' --benchmark_min_time="$(pick 0.3 0.05)"
    # Every case against the tile limit, oneDNN pinned to the same ISA (2 threads).
    onednn=()
    [[ -x $bin/dmlserve_onednn_bench ]] && onednn=(--onednn="$bin/dmlserve_onednn_bench")
    step isa_report_$isa 300 env DMLSERVE_CPU_THREADS=2 python3 "$bin/cpu_isa_report.py" \
      --isa=$isa --bench="$bin/dmlserve_bench" "${onednn[@]}" --rounds="$(pick 2 1)" \
      --min_time="$(pick 0.3 0.05)"
    # Where the tiles start to pay (kQGemmAmxMinRows): 1 to 32 rows, both paths.
    step row_sweep 120 env DMLSERVE_CPU_THREADS=2 "$bin/dmlserve_bench" \
      --benchmark_filter='U8S8RowSweep' --benchmark_min_time="$(pick 0.2 0.05)"
  else
    echo "step amx: skipped, no amx_int8 in /proc/cpuinfo" | tee -a "$out/steps.txt"
  fi
fi

if [[ $what == gpu || $what == all ]]; then
  load=$bin/dmlserve-load
  server=$bin/dmlserve
  d=$(pick 3s 1s)
  big=$(pick 4096,4096,4096 128,512,512)
  rows=$(pick 256,4096,4096 16,512,512)
  # Exactness on the GPU first: a wrong answer makes every number moot.
  step d3d12_kernels_test 180 env DMLSERVE_TEST_D3D12_ADAPTER=0 "$bin/d3d12_kernels_test"
  # The kernels' own times: the 16 MiB GEMV and the 64 MiB scans against HBM.
  step d3d12_bench 180 "$bin/dmlserve_bench" \
    --benchmark_filter="$(pick 'D3D12.*(large_qlinear_1x4096x4096_reg|large_cumsum)' \
      'D3D12Scan/cumsum_f32_64x4096_axis1')" \
    --benchmark_min_time="$(pick 0.3 0.05)"
  # The shared-B load, the 4096^3 products and the mixed load, each on the
  # CPU-only server, the GPU-only one and the cost-placed one, interleaved.
  loads=(
    "shared_b:--channels=64 --in_flight=1 --mix=qmatmul=1 --matmul_shape=1,1024,1024 --register_weights"
    "big:--channels=2 --in_flight=1 --mix=qmatmul=1 --matmul_shape=$big --register_weights"
    "mixed:--channels=32 --in_flight=2 --mix=cumsum=3,qmatmul=1 --scan_sizes=1,8 --matmul_shape=$rows --register_weights"
  )
  servers=(
    "cpu:--backend=cpu"
    "gpu_first:--backend=d3d12 --placement=gpu_first"
    "cost:--backend=d3d12 --placement=cost"
  )
  for round in 1 2; do
    for entry in "${loads[@]}"; do
      for server_entry in "${servers[@]}"; do
        # The CPU alone is no peer for 4096^3 products: skipped there.
        [[ ${entry%%:*} == big && ${server_entry%%:*} == cpu ]] && continue
        # shellcheck disable=SC2086
        step "load_${entry%%:*}_${server_entry%%:*}_r$round" 60 "$load" --spawn_server="$server" \
          --server_args="${server_entry#*:}" ${entry#*:} --duration="$d" --warmup=1s --verify_every=1
      done
    done
  done
fi
grep -h -E '^(throughput|checked|devices|latency):' "$out"/load_*.log >/dev/null 2>&1 &&
  for log in "$out"/load_*.log; do
    echo "$(basename "$log" .log): $(grep -E '^throughput:' "$log" | tr -s ' ')" \
      "| $(grep -E '^checked:' "$log" | tr -s ' ')"
  done | tee "$out/loads.txt"
cat "$out/steps.txt"
