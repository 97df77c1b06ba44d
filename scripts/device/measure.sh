#!/usr/bin/env bash
# Runs on a lent device machine, in a copy of this repository with the bundle
# from scripts/device/bundle.sh carried in .device: every measurement issues
# 40 (AMX tiles) and 42 (placement on a GPU host) need from a machine that
# has what this one lacks, in one device call. Each step has its own time
# limit and log, in $OUT/logs.tar.gz (OUT: the device tool's output folder;
# ./device-out elsewhere); the whole run stops starting steps once BUDGET seconds (default
# 560, inside the device call's 10 minutes) are spent, and the tile part
# (`all`) once AMX_BUDGET seconds (default 270) are, so that the GPU part
# keeps its share. A step that hangs costs its own limit and what it leaves
# unrun, never the summary files. Most valuable first within each part.
# docs/benchmarks.md, "Measuring on a lent machine", gives the call.
#
#   scripts/device/measure.sh [amx|gpu|all|exactness|candidates|focus|feed] [--quick]
#
# exactness: the tile path's exactness suite alone (what a run cut short by
# its limit leaves to do). candidates: the tile kernel's candidate kernels and
# blockings against one another (BM_AmxCandidate, bench/cpu_kernels_bench.cc),
# the micro-kernel from L1 and L2, and the limits: what picks the amx level's
# kernel. focus: the leading candidates only (FOCUS, a regex of their names),
# REPS repetitions each in random order on FOCUS_THREADS threads (default 2),
# beside the peers on the main cases (REPORT_FILTER; none: no peers): what
# decides between them, peers in the same run. feed:
# what feeding the tiles from each cache level costs (BM_AmxFeed), 1 thread.
#
# --quick shortens every run (a rehearsal on an ordinary machine).
set -uo pipefail
root=$(pwd)
what=${1:-all}
only_exactness=false
only_candidates=false
if [[ $what == exactness ]]; then
  what=amx
  only_exactness=true
elif [[ $what == candidates ]]; then
  what=amx
  only_candidates=true
fi
only_focus=false
if [[ $what == focus ]]; then
  what=amx
  only_focus=true
fi
only_feed=false
if [[ $what == feed ]]; then
  what=amx
  only_feed=true
fi
quick=false
[[ ${2:-} == --quick ]] && quick=true
# The device tool brings back at most 8 files from $OUT: the logs are written
# elsewhere and $OUT gets them as one archive, renewed after every step (so
# that a run stopped at its limit still returns what it measured), beside
# the summaries.
final=${OUT:-$root/device-out}
mkdir -p "$final"
out=$(mktemp -d)
publish() {
  tar -C "$out" -czf "$final/logs.tar.gz.part" . && mv -f "$final/logs.tar.gz.part" "$final/logs.tar.gz"
  for summary in steps.txt machine.txt loads.txt; do
    [[ -f $out/$summary ]] && cp "$out/$summary" "$final/"
  done
  return 0
}
budget=${BUDGET:-560}
# The end of the part being run (step() starts nothing past it).
section_end=$budget
stage=$(mktemp -d)
trap 'rm -rf "$stage" "$out"' EXIT
tar -C "$stage" -xJf "$root/.device/bundle.tar.xz" || { echo "measure.sh: no .device/bundle.tar.xz" >&2; exit 1; }
# Ahead of the machine's own path, not instead of it: NVIDIA's Vulkan driver
# and the libraries it loads live there (the first device run lost them).
machine_library_path=${LD_LIBRARY_PATH:-}
export LD_LIBRARY_PATH=$stage/lib${machine_library_path:+:$machine_library_path}
bin=$stage/bin
# pick FULL QUICK: the full run's value, or the rehearsal's.
pick() { $quick && echo "$2" || echo "$1"; }

# The tests read the conformance examples from this copy of the repository.
export DMLSERVE_CONFORMANCE_DIR=$root/tests/conformance
# NVIDIA's Vulkan driver, where the machine has one (vkd3d runs on Vulkan).
# Its manifest names libGLX_nvidia.so.0 without a folder: NVIDIA's library
# folders join the path too.
for nvidia_icd in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json \
  /etc/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json; do
  if [[ -f $nvidia_icd ]]; then
    export VK_DRIVER_FILES=$nvidia_icd
    break
  fi
done
nvidia_egl=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
[[ -f $nvidia_egl ]] && export __EGL_VENDOR_LIBRARY_FILENAMES=$nvidia_egl
for folder in /usr/local/nvidia/lib64 /usr/local/nvidia/lib; do
  [[ -d $folder ]] && LD_LIBRARY_PATH+=:$folder
done

# step NAME LIMIT_SECONDS COMMAND...: runs one step, its output in
# $OUT/NAME.log, for at most LIMIT_SECONDS and what is left of the budget. It
# runs in a process group of its own, so that a step stopped at its limit
# takes what it started (a spawned server, a bench) with it.
step() {
  local name=$1 limit=$2
  shift 2
  local left=$((section_end - SECONDS))
  if ((left < 10)); then
    echo "step $name: not run, the budget ($section_end s into the run) is spent" | tee -a "$out/steps.txt"
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
  publish
}

{
  echo "date: $(date -u)"
  lscpu
  grep -m1 -o 'amx[a-z0-9_]*' /proc/cpuinfo | sort -u | tr '\n' ' '
  echo
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv
  echo "machine LD_LIBRARY_PATH=$machine_library_path"
  echo "VK_DRIVER_FILES=${VK_DRIVER_FILES:-}"
  ls /usr/local/nvidia/share/vulkan/icd.d /etc/vulkan/icd.d /usr/share/vulkan/icd.d 2>&1
  [[ -n ${VK_DRIVER_FILES:-} ]] && cat "$VK_DRIVER_FILES"
  ldconfig -p | grep -E 'libGLX_nvidia|libnvidia-glvkspirv|libvulkan'
} >"$out/machine.txt" 2>&1

has_amx=false
grep -qw amx_int8 /proc/cpuinfo && has_amx=true
if [[ $what == amx || $what == all ]]; then
  [[ $what == all ]] && section_end=$((SECONDS + ${AMX_BUDGET:-270}))
  # The leading candidate blockings (from a `candidates` run; FOCUS
  # overrides), REPS (default 4) repetitions in random order, so that the
  # machine's drift falls on all of them alike; the table's kernel
  # (amx_d2048) among them.
  # The limits on N threads (limits_step N): tdpbusd beside vpdpbusd.
  limits_step() {
    local suffix=threads
    (($1 == 1)) && suffix=thread
    step "limits_$1$suffix" 40 env DMLSERVE_CPU_THREADS="$1" "$bin/dmlserve_bench" \
      --benchmark_filter='MachineLimit_(Tdpbusd|Vpdpbusd)' --benchmark_min_time="$(pick 0.3 0.05)"
  }
  focus=${FOCUS:-amx_d2048|amx_d1024_t288|amx_prefetch_d2048_t288|amx_d1024_rows_outer_copy_a|amx_prefetch_d2048_t288_rows_outer_copy_a|amx_d1024_rows_outer}
  focus_step() {
    step amx_candidates_focus "$1" env DMLSERVE_CPU_THREADS="${FOCUS_THREADS:-2}" "$bin/dmlserve_bench" \
      --benchmark_filter="AmxCandidate/($focus)/" --benchmark_min_time="$(pick 0.1 0.01)" \
      --benchmark_repetitions="${REPS:-4}" --benchmark_enable_random_interleaving=true
  }
  peers=()
  [[ -x $bin/dmlserve_onednn_bench ]] && peers+=(--onednn="$bin/dmlserve_onednn_bench")
  python3 -c 'import onnxruntime, onnx, numpy' 2>/dev/null &&
    peers+=(--ort="$root/bench/onnxruntime/ort_qgemm_bench.py")
  # What feeding the tiles costs from L1, L2 and L3 (bench/amx_feed_bench.cc),
  # 1 thread, beside its limit, REPS (default 5) times in random order.
  feed_step() {
    step amx_feed 90 env DMLSERVE_CPU_THREADS=1 "$bin/dmlserve_bench" \
      --benchmark_filter='AmxFeed|MachineLimit_Tdpbusd' --benchmark_min_time="$(pick 0.1 0.01)" \
      --benchmark_repetitions="${REPS:-5}" --benchmark_enable_random_interleaving=true
  }
  if $only_feed; then
    feed_step
  elif $only_focus; then
    limits_step 2
    focus_step 200
    report_filter=${REPORT_FILTER:-u8s8_256x4096x4096_registered_b|u8s8_256x4096x4096/|u8s8_1024x1024x1024_registered_b|u8s8_odd_333x1000x777_registered_b}
    [[ $report_filter == none ]] || step isa_report_amx_focus 200 env DMLSERVE_CPU_THREADS=2 python3 "$bin/cpu_isa_report.py" \
      --isa=amx --bench="$bin/dmlserve_bench" "${peers[@]}" --rounds="$(pick 3 1)" \
      --min_time="$(pick 0.2 0.05)" --filter="$report_filter"
  elif $only_candidates; then
    $has_amx || echo "step candidates: no amx_int8 in /proc/cpuinfo (they skip)" | tee -a "$out/steps.txt"
    limits_step 2
    # Registered B first (the targets' main rows), then B per request.
    step amx_candidates_registered 200 env DMLSERVE_CPU_THREADS=2 "$bin/dmlserve_bench" \
      --benchmark_filter='AmxCandidate/.*/[0-9]+x[0-9]+x[0-9]+/' --benchmark_min_time="$(pick 0.1 0.01)"
    step amx_candidates_per_request 120 env DMLSERVE_CPU_THREADS=2 "$bin/dmlserve_bench" \
      --benchmark_filter='AmxCandidate/.*_per_request' --benchmark_min_time="$(pick 0.1 0.01)"
    step amx_ukernels 40 env DMLSERVE_CPU_THREADS=1 "$bin/dmlserve_bench" \
      --benchmark_filter='QGemmUkernel/(amx|avx512vnni)' --benchmark_min_time="$(pick 0.2 0.01)"
    feed_step
  elif $has_amx || $quick; then
    isa=amx
    $has_amx || isa=avx512vnni  # a rehearsal without tiles
    $only_exactness || limits_step 1
    $only_exactness || limits_step 2
    # Every case against the tile limit, beside oneDNN pinned to the same ISA
    # (when the bundle has its bench) and ONNX Runtime (when the python3 on
    # PATH imports onnxruntime, as the device image's does), 2 threads each,
    # interleaved round by round.
    $only_exactness || step isa_report_$isa 150 env DMLSERVE_CPU_THREADS=2 python3 "$bin/cpu_isa_report.py" \
      --isa=$isa --bench="$bin/dmlserve_bench" "${peers[@]}" --rounds="$(pick 2 1)" \
      --min_time="$(pick 0.3 0.05)"
    $only_exactness || focus_step 120
    # Exactness on the real tile instructions: what kernels.isa.amx runs, and
    # beside it the per-kernel and per-path suites, only for the tile paths
    # (every vector path ran them here already; all of them took over 90 s
    # there).
    step exactness_$isa 120 env DMLSERVE_CPU_ISA=$isa DMLSERVE_CPU_THREADS=4 \
      "$bin/dmlserve_kernels_test" \
      --gtest_filter="RandomOperationsTest.*:ConformanceTest.*:QuantizedMatMul*:ScanKernels*:Amx*:QGemmUkernelTest.*:QGemmPackingTest.*:*/$isa:*/amx_prefetch*:*/amx_model*"
    # What bounds the tiles: the micro-kernel alone (1 thread) from L1, from
    # L2, from L2 with A's rows 4 KiB apart, and the prefetching candidate
    # (the blockings: `candidates`).
    $only_exactness || step amx_ukernels 40 env DMLSERVE_CPU_THREADS=1 "$bin/dmlserve_bench" \
      --benchmark_filter='QGemmUkernel/(amx|avx512vnni)' \
      --benchmark_min_time="$(pick 0.3 0.05)"
    $only_exactness || feed_step
    # Today's path on the same machine: the odd shapes (the tiles' target is
    # 2x) and the GEMV (no regression), forced to AVX-512 VNNI.
    $only_exactness || step isa_report_vnni_path 40 env DMLSERVE_CPU_THREADS=2 python3 "$bin/cpu_isa_report.py" \
      --isa=avx512vnni --bench="$bin/dmlserve_bench" --rounds=1 --min_time="$(pick 0.3 0.05)" \
      --filter='u8s8_odd_[^/]*|u8s8_1x4096x4096_registered_b|u8s8_1x4096x4096/|u8s8_16x4096x4096_registered_b'
    # Where the tiles start to pay (kQGemmAmxMinRows): 1 to 32 rows, both paths.
    $only_exactness || step row_sweep 40 env DMLSERVE_CPU_THREADS=2 "$bin/dmlserve_bench" \
      --benchmark_filter='U8S8RowSweep' --benchmark_min_time="$(pick 0.2 0.05)"
  else
    echo "step amx: skipped, no amx_int8 in /proc/cpuinfo" | tee -a "$out/steps.txt"
  fi
  section_end=$budget
fi

if [[ $what == gpu || $what == all ]]; then
  load=$bin/dmlserve-load
  server=$bin/dmlserve
  d=$(pick 3s 1s)
  big=$(pick 4096,4096,4096 128,512,512)
  rows=$(pick 256,4096,4096 16,512,512)
  # Exactness on the GPU first: a wrong answer makes every number moot.
  # The Vulkan loader says here which driver it found, or why none.
  step d3d12_kernels_test 90 env DMLSERVE_TEST_D3D12_ADAPTER=0 VK_LOADER_DEBUG=error,warn,driver \
    "$bin/d3d12_kernels_test"
  # The loads: each on the CPU-only server, the GPU-only one and the
  # cost-placed one, interleaved, every answer checked against the load
  # generator's own reference (its pool kept small for the large products,
  # whose reference it computes on all cores before the run). The shared-B
  # and 256-row loads also run on the CPU server forced to AVX-512 VNNI
  # (cpu_vnni, where the machine has tiles): the service before and after
  # the tile path.
  loads=(
    "shared_b:--channels=64 --in_flight=1 --mix=qmatmul=1 --matmul_shape=1,1024,1024 --register_weights"
    "big:--channels=2 --in_flight=1 --mix=qmatmul=1 --matmul_shape=$big --register_weights --pool_size=2"
    "mixed:--channels=32 --in_flight=2 --mix=cumsum=3,qmatmul=1 --scan_sizes=1,8 --matmul_shape=$rows --register_weights --pool_size=4"
    "rows256:--channels=4 --in_flight=1 --mix=qmatmul=1 --matmul_shape=$rows --register_weights --pool_size=4"
  )
  servers=(
    "cpu:--backend=cpu"
    "cpu_vnni:--backend=cpu"
    "gpu_first:--backend=d3d12 --placement=gpu_first"
    "cost:--backend=d3d12 --placement=cost"
  )
  # Which servers each load runs on: the CPU alone is no peer for 4096^3
  # products, and the 256-row load measures the tile path in the service.
  runs_on() {
    case $1:$2 in
      big:cpu | big:cpu_vnni | mixed:cpu_vnni | rows256:gpu_first | rows256:cost) return 1 ;;
      *:cpu_vnni) $has_amx || $quick ;;
      *) return 0 ;;
    esac
  }
  for round in 1 2; do
    for entry in "${loads[@]}"; do
      for server_entry in "${servers[@]}"; do
        runs_on "${entry%%:*}" "${server_entry%%:*}" || continue
        isa=()
        [[ ${server_entry%%:*} == cpu_vnni ]] && isa=(DMLSERVE_CPU_ISA=avx512vnni)
        # shellcheck disable=SC2086
        step "load_${entry%%:*}_${server_entry%%:*}_r$round" 45 env "${isa[@]}" "$load" \
          --spawn_server="$server" --server_args="${server_entry#*:}" ${entry#*:} \
          --duration="$d" --warmup=1s --verify_every=1
      done
    done
  done
  # The kernels' own times: the 16 MiB GEMV and the 64 MiB scans against HBM.
  step d3d12_bench 90 "$bin/dmlserve_bench" \
    --benchmark_filter="$(pick 'D3D12.*(large_qlinear_1x4096x4096_reg|large_cumsum)' \
      'D3D12Scan/cumsum_f32_64x4096_axis1')" \
    --benchmark_min_time="$(pick 0.3 0.05)"
fi
grep -h -E '^(throughput|checked|devices|latency):' "$out"/load_*.log >/dev/null 2>&1 &&
  for log in "$out"/load_*.log; do
    echo "$(basename "$log" .log): $(grep -E '^throughput:' "$log" | tr -s ' ')" \
      "| $(grep -E '^checked:' "$log" | tr -s ' ')"
  done | tee "$out/loads.txt"
publish
cat "$out/steps.txt"
