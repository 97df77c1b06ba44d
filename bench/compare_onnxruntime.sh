#!/usr/bin/env bash
# Compares dmlserve's CPU backend with ONNX Runtime (and oneDNN, when its
# benchmark is built) on the same cases, in one run, and prints a markdown
# table. Not run by CI. See docs/benchmarks.md.
#
#   bench/compare_onnxruntime.sh [DMLSERVE_BENCH] [-- compare.mjs options]
#
# DMLSERVE_BENCH (argument or environment variable; default
# build/bench/dmlserve_bench) is the Google Benchmark binary with the
# BM_CpuQGemm/* and BM_CpuScan/* cases. ONEDNN_BENCH (environment; default
# dmlserve_onednn_bench next to it or in build/bench/) adds a oneDNN column
# when it exists.
# ORT_VERSION picks the onnxruntime-node version (default 1.30.0). Options
# after the binary go to compare.mjs: --filter=REGEX (case names),
# --runs=N (timed ONNX Runtime calls, at least 5), --min_time=SECONDS (per
# Google Benchmark repetition and for the ONNX Runtime calls), --rounds=N
# (interleaved rounds per case, default 3; each engine keeps its best).
#
# DMLSERVE_CPU_ISA=avx2|avxvnni|avx512vnni|amx (environment) forces dmlserve's
# path (it reaches dmlserve_bench), ONEDNN_MAX_CPU_ISA=AVX2|...|AVX512_CORE_AMX
# oneDNN's.
# ONNX Runtime has no such switch: ORT_ISA=avx2 runs it under gdb with
# AVX-512, AVX-VNNI and AMX hidden from its library
# (bench/onnxruntime/avx2_only_cpu.py: cpuid and XCR0 as an AVX2-only CPU
# reports them, while ORT initialises), so it takes the AVX2 path it takes
# on such a CPU; this needs gdb and objdump.
#
# onnxruntime-node is installed from npm into a temporary folder, removed at
# the end; nothing is written into the repository.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dmlserve_bench="${DMLSERVE_BENCH:-build/bench/dmlserve_bench}"
if [[ $# -gt 0 && "$1" != --* ]]; then
  dmlserve_bench="$1"
  shift
fi
[[ "${1:-}" == "--" ]] && shift
# The oneDNN benchmark: $ONEDNN_BENCH, else next to the dmlserve binary,
# else in build/. Where none exists but Debian's libdnnl-dev is installed, it
# is built first, in the dmlserve binary's build tree (CMake finds oneDNN
# there on reconfiguring), so that the table has all three in one run; no
# column when oneDNN is not installed.
find_onednn_bench() {
  for candidate in "$(dirname "${dmlserve_bench}")/dmlserve_onednn_bench" "${repo}/build/bench/dmlserve_onednn_bench"; do
    if [[ -x "${candidate}" ]]; then
      onednn_bench="${candidate}"
      return
    fi
  done
}
onednn_bench="${ONEDNN_BENCH:-}"
if [[ -z "${onednn_bench}" ]]; then
  find_onednn_bench
  build_tree="$(cd "$(dirname "${dmlserve_bench}")/.." && pwd)"
  if [[ -z "${onednn_bench}" && -f /usr/include/oneapi/dnnl/dnnl.hpp && -f "${build_tree}/CMakeCache.txt" ]]; then
    echo "libdnnl-dev is installed: building dmlserve_onednn_bench in ${build_tree}" >&2
    cmake -S "${repo}" -B "${build_tree}" >/dev/null
    cmake --build "${build_tree}" --target dmlserve_onednn_bench >&2
    find_onednn_bench
  fi
fi
ort_version="${ORT_VERSION:-1.30.0}"

command -v node >/dev/null || { echo "node (v18 or later) is required" >&2; exit 2; }
command -v npm >/dev/null || { echo "npm is required" >&2; exit 2; }

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT

# The npm package bundles the CPU build for Linux x64; its install script only
# fetches optional CUDA binaries from NuGet, so it is not run.
echo "installing onnxruntime-node@${ort_version} into ${work}" >&2
(cd "${work}" && npm init -y >/dev/null &&
  npm install --ignore-scripts --no-audit --no-fund --loglevel=error "onnxruntime-node@${ort_version}" >&2)

ort_isa="${ORT_ISA:-}"
launcher=()
case "${ort_isa}" in
  "") ;;
  avx2)
    command -v gdb >/dev/null && command -v objdump >/dev/null ||
      { echo "ORT_ISA=avx2 needs gdb and objdump" >&2; exit 2; }
    launcher=(gdb -q -batch -x "${repo}/bench/onnxruntime/avx2_only_cpu.py" --args) ;;
  *) echo "ORT_ISA must be avx2 (or unset), not ${ort_isa}" >&2; exit 2 ;;
esac

echo "dmlserve ISA path: ${DMLSERVE_CPU_ISA:-best the CPU has}; oneDNN: ${ONEDNN_MAX_CPU_ISA:-its own choice}; ONNX Runtime: ${ort_isa:-its own choice}" >&2
"${launcher[@]}" node "${repo}/bench/onnxruntime/compare.mjs" \
  --ort_modules="${work}/node_modules" \
  --dmlserve_bench="${dmlserve_bench}" \
  ${onednn_bench:+--onednn_bench="${onednn_bench}"} \
  "$@"
