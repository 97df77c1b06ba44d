// CPU backend benchmarks (matrix multiplies; scans are in cpu_scan_bench.cc):
// each case runs one batch per iteration on a CpuDevice, output allocation
// included.

#include <memory>
#include <vector>

#include "bench/bench_operations.h"
#include "benchmark/benchmark.h"
#include "kernels/cpu/cpu_device.h"

namespace dmlserve::bench {
namespace {

CpuDevice& Cpu() {
  static CpuDevice* device = new CpuDevice(0);
  return *device;
}

// Wall-clock rates: the work runs on the pool's threads, not only the
// benchmark's.
#define DMLSERVE_CPU_BENCHMARK(...) BENCHMARK_CAPTURE(__VA_ARGS__)->UseRealTime()

// One batch of `requests` matrix multiplies {m,k} x {k,n} sharing B (fused
// into one product by the device).
void BM_CpuMatMul(benchmark::State& state, int requests, uint32_t m, uint32_t k, uint32_t n,
                  bool registered_b = false) {
  const std::vector<Operation> operations =
      MakeMatMulsSharingB(requests, m, k, n, registered_b ? "bench-weights" : "");
  RunBatches(state, Cpu(), operations, static_cast<double>(requests) * m * k * n);
}

// The same requests, each run as its own batch (what fusion saves).
void BM_CpuMatMulUnfused(benchmark::State& state, int requests, uint32_t m, uint32_t k,
                         uint32_t n) {
  const std::vector<Operation> operations = MakeMatMulsSharingB(requests, m, k, n);
  std::vector<WorkItem> items(1);
  for (auto _ : state) {
    for (const Operation& operation : operations) {
      items[0] = WorkItem{&operation, {}, {}};
      benchmark::DoNotOptimize(Cpu().Execute(absl::MakeSpan(items)));
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * operations.size()));
  state.counters["MAC/s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * requests * m * k * n, benchmark::Counter::kIsRate);
}

DMLSERVE_CPU_BENCHMARK(BM_CpuMatMul, qlinear_1x4096x4096, 1, 1, 4096, 4096)
    ->Unit(benchmark::kMillisecond);
// Registered weights stay packed on the device: the steady state of serving.
DMLSERVE_CPU_BENCHMARK(BM_CpuMatMul, qlinear_1x4096x4096_registered_b, 1, 1, 4096, 4096, true)
    ->Unit(benchmark::kMillisecond);
DMLSERVE_CPU_BENCHMARK(BM_CpuMatMul, qlinear_64x1024x1024_registered_b, 1, 64, 1024, 1024, true)
    ->Unit(benchmark::kMillisecond);
DMLSERVE_CPU_BENCHMARK(BM_CpuMatMul, qlinear_64x1024x1024, 1, 64, 1024, 1024)
    ->Unit(benchmark::kMillisecond);
DMLSERVE_CPU_BENCHMARK(BM_CpuMatMul, qlinear_256x1024x1024, 1, 256, 1024, 1024)
    ->Unit(benchmark::kMillisecond);
DMLSERVE_CPU_BENCHMARK(BM_CpuMatMul, qlinear_fused_16x4x1024x1024, 16, 4, 1024, 1024)
    ->Unit(benchmark::kMillisecond);
DMLSERVE_CPU_BENCHMARK(BM_CpuMatMulUnfused, qlinear_unfused_16x4x1024x1024, 16, 4, 1024, 1024)
    ->Unit(benchmark::kMillisecond);
DMLSERVE_CPU_BENCHMARK(BM_CpuMatMul, qlinear_small_8x64x64, 1, 8, 64, 64);

}  // namespace
}  // namespace dmlserve::bench
