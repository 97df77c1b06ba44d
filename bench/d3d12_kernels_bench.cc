// D3D12 backend benchmarks through the real Device interface, on whatever
// adapter vkd3d finds first (lavapipe on machines without a GPU, hence
// allow_software). On lavapipe the absolute throughput means little; the cases
// are chosen to expose fixed costs: one Execute is one command list, one
// submission and one fence wait, whatever the batch holds.
//
//   build/bench/dmlserve_bench --benchmark_filter=D3D12

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/bench_operations.h"
#include "benchmark/benchmark.h"
#include "kernels/d3d12/d3d12_backend.h"
#include "kernels/d3d12/d3d12_device.h"
#include "kernels/d3d12/device_runtime.h"
#include "kernels/d3d12/shaders/batch_planner.h"

namespace dmlserve::bench {
namespace {

// One logical device for the whole process: creating it (and building the
// pipelines on first use) is not what these cases measure. Null when the
// platform has no D3D12 device; the cases then report the reason as an error.
Device* D3D12(std::string* error) {
  static std::string* creation_error = new std::string;
  static Device* device = []() -> Device* {
    D3D12Options options;
    options.allow_software = true;
    absl::StatusOr<std::vector<std::unique_ptr<Device>>> devices = CreateD3D12Devices(options);
    if (!devices.ok()) {
      *creation_error = "no D3D12 device: " + devices.status().ToString();
      return nullptr;
    }
    // Kept for the life of the process, like the server's devices.
    return (*devices)[0].release();
  }();
  if (device == nullptr) *error = *creation_error;
  return device;
}

// Runs `operations` once outside the timing so that the kernels are built,
// pipeline states created, pools, rings and resident tensors filled: the
// measured iterations are the steady state of a serving device.
void RunWarm(benchmark::State& state, const std::vector<Operation>& operations,
             double multiply_adds = 0) {
  std::string error;
  Device* device = D3D12(&error);
  if (device == nullptr) {
    state.SkipWithError(error.c_str());
    return;
  }
  // One batch, its items' statuses folded into the result.
  std::vector<WorkItem> warmup(operations.size());
  auto execute = [&]() {
    for (size_t i = 0; i < operations.size(); ++i) warmup[i] = WorkItem{&operations[i], {}, {}};
    absl::Status status = device->Execute(absl::MakeSpan(warmup));
    for (const WorkItem& item : warmup) {
      if (status.ok()) status = item.status;
    }
    return status;
  };
  absl::Status status = execute();
  // A GPU idles at a low clock (an H100 at 345 MHz, not 1980) and reaches
  // full clock only after a fraction of a second of load: keep it busy for
  // kGpuWarmUp before timing, or a short case is timed at the idle clock.
  constexpr auto kGpuWarmUp = std::chrono::milliseconds(500);
  const auto warm_up_end = std::chrono::steady_clock::now() + kGpuWarmUp;
  while (status.ok() && std::chrono::steady_clock::now() < warm_up_end) status = execute();
  if (!status.ok()) {
    state.SkipWithError(("warm-up batch failed: " + status.ToString()).c_str());
    return;
  }
  // GPU time of the dispatches alone (timestamps around them), beside the
  // wall-clock time of whole batches with their copies and submission.
  d3d12::DeviceRuntime& runtime = static_cast<d3d12::D3D12Device*>(device)->runtime();
  const d3d12::RuntimeStats before = runtime.stats();
  RunBatches(state, *device, operations, multiply_adds);
  const d3d12::RuntimeStats after = runtime.stats();
  // Per-batch figures: with several threads (batches in flight) each
  // thread's window also counts the others' batches, and the threads' values
  // are averaged rather than summed.
  auto per_batch = [](double value) {
    return benchmark::Counter(value, benchmark::Counter::kAvgThreads);
  };
  state.counters["batch_items"] = per_batch(static_cast<double>(operations.size()));
  const uint64_t timed = after.timed_batches - before.timed_batches;
  if (timed > 0) {
    const double gpu_s = static_cast<double>(after.dispatch_ns - before.dispatch_ns) * 1e-9 /
                         static_cast<double>(timed);
    state.counters["gpu_us"] = per_batch(gpu_s * 1e6);
    if (multiply_adds > 0) state.counters["gpu_MAC/s"] = per_batch(multiply_adds / gpu_s);
    uint64_t bytes = 0;
    for (const Operation& operation : operations) bytes += OperationBytes(operation);
    state.counters["gpu_B/s"] = per_batch(static_cast<double>(bytes) / gpu_s);
  }
  // The CPU's share: the copy into the upload ring, per batch (outputs are
  // lent from readback memory, not copied).
  const double batches = static_cast<double>(after.submissions - before.submissions);
  if (batches > 0) {
    auto us_per_batch = [&](uint64_t after_ns, uint64_t before_ns) {
      return per_batch(static_cast<double>(after_ns - before_ns) * 1e-3 / batches);
    };
    state.counters["copy_in_us"] = us_per_batch(after.copy_in_ns, before.copy_in_ns);
    // Where a batch's wall time goes: recording (with the copy in),
    // submission, and the wait for the fence (GPU time plus completion
    // latency).
    state.counters["record_us"] = us_per_batch(after.record_ns, before.record_ns);
    state.counters["submit_us"] = us_per_batch(after.submit_ns, before.submit_ns);
    state.counters["wait_us"] = us_per_batch(after.wait_ns, before.wait_ns);
  }
}

// Each Execute waits for its own fence, so the benchmark thread is idle while
// lavapipe's threads compute: wall-clock rates.
#define DMLSERVE_D3D12_BENCHMARK(...) BENCHMARK_CAPTURE(__VA_ARGS__)->UseRealTime()

constexpr OperatorKind kSum = OperatorKind::kCumulativeSummation;
constexpr OperatorKind kProduct = OperatorKind::kCumulativeProduct;

void BM_D3D12Scan(benchmark::State& state, OperatorKind kind, DataType type, Shape sizes,
                  uint32_t axis) {
  RunWarm(state, {MakeScan(kind, type, sizes, axis)});
}

// `state.range(0)` tiny independent scans in one Execute: the time per batch
// minus the time per item is the fixed cost of a submission.
void BM_D3D12TinyScanBatch(benchmark::State& state) {
  std::vector<Operation> operations;
  for (int64_t i = 0; i < state.range(0); ++i) {
    operations.push_back(MakeScan(kSum, DataType::kFloat32, {8, 16}, 1));
  }
  RunWarm(state, operations);
}

// A batch of 1 tiny scan: the cost of one dispatch round trip.
DMLSERVE_D3D12_BENCHMARK(BM_D3D12Scan, dispatch_overhead_cumsum_f32_8x16, kSum, DataType::kFloat32,
                         {8, 16}, 1);
BENCHMARK(BM_D3D12TinyScanBatch)->ArgName("batch")->Arg(1)->Arg(4)->Arg(16)->Arg(64)->UseRealTime();

DMLSERVE_D3D12_BENCHMARK(BM_D3D12Scan, cumsum_f32_64x4096_axis1, kSum, DataType::kFloat32,
                         {64, 4096}, 1);
DMLSERVE_D3D12_BENCHMARK(BM_D3D12Scan, cumsum_f32_64x4096_axis0, kSum, DataType::kFloat32,
                         {64, 4096}, 0);
// One line of 1M elements: the single-pass look-back (clear, then lookback).
DMLSERVE_D3D12_BENCHMARK(BM_D3D12Scan, cumsum_f32_1M_axis0, kSum, DataType::kFloat32, {1 << 20}, 0)
    ->Unit(benchmark::kMillisecond);
DMLSERVE_D3D12_BENCHMARK(BM_D3D12Scan, cumprod_f32_64x4096_axis1, kProduct, DataType::kFloat32,
                         {64, 4096}, 1);
DMLSERVE_D3D12_BENCHMARK(BM_D3D12Scan, cumsum_f16_64x4096_axis1, kSum, DataType::kFloat16,
                         {64, 4096}, 1);
DMLSERVE_D3D12_BENCHMARK(BM_D3D12Scan, cumsum_i64_64x4096_axis1, kSum, DataType::kInt64, {64, 4096},
                         1);
DMLSERVE_D3D12_BENCHMARK(BM_D3D12Scan, cumsum_i64_1M_axis0, kSum, DataType::kInt64, {1 << 20}, 0)
    ->Unit(benchmark::kMillisecond);

// `requests` matrix multiplies {m,k} x {k,n} sharing B in one batch (fused
// into one product by the planner). A registered B is uploaded by the warm-up
// batch and stays resident; an inline B is uploaded by every batch.
void BM_D3D12MatMul(benchmark::State& state, int requests, uint32_t m, uint32_t k, uint32_t n,
                    bool registered_b) {
  // Each case its own id: the device keys resident tensors by id alone.
  const std::string id = "bench-d3d12-b-" + std::to_string(requests) + "x" + std::to_string(m) +
                         "x" + std::to_string(k) + "x" + std::to_string(n);
  RunWarm(state, MakeMatMulsSharingB(requests, m, k, n, registered_b ? id : ""),
          static_cast<double>(requests) * m * k * n);
}

DMLSERVE_D3D12_BENCHMARK(BM_D3D12MatMul, qlinear_64x256x256_inline_b, 1, 64, 256, 256, false)
    ->Unit(benchmark::kMillisecond);
DMLSERVE_D3D12_BENCHMARK(BM_D3D12MatMul, qlinear_64x256x256_registered_b, 1, 64, 256, 256, true)
    ->Unit(benchmark::kMillisecond);
DMLSERVE_D3D12_BENCHMARK(BM_D3D12MatMul, qlinear_fused_16x4x256x256_registered_b, 16, 4, 256, 256,
                         true)
    ->Unit(benchmark::kMillisecond);
DMLSERVE_D3D12_BENCHMARK(BM_D3D12MatMul, qlinear_fused_16x4x256x256_inline_b, 16, 4, 256, 256,
                         false)
    ->Unit(benchmark::kMillisecond);

// Issue 24's shapes at full size (registered B, resident after the warm-up
// batch), named large_* so that `--benchmark_filter=large` selects them on a
// real GPU (on lavapipe the 4096^3 batch takes about half a minute); the
// CPU bench has the same names for a side-by-side on one machine.
DMLSERVE_D3D12_BENCHMARK(BM_D3D12MatMul, large_qlinear_4096x4096x4096_registered_b, 1, 4096, 4096,
                         4096, true)
    ->Unit(benchmark::kMillisecond);
DMLSERVE_D3D12_BENCHMARK(BM_D3D12MatMul, large_qlinear_256x4096x4096_registered_b, 1, 256, 4096,
                         4096, true)
    ->Unit(benchmark::kMillisecond);
DMLSERVE_D3D12_BENCHMARK(BM_D3D12MatMul, large_qlinear_16x4096x4096_registered_b, 1, 16, 4096, 4096,
                         true)
    ->Unit(benchmark::kMillisecond);
DMLSERVE_D3D12_BENCHMARK(BM_D3D12MatMul, large_qlinear_1x4096x4096_registered_b, 1, 1, 4096, 4096,
                         true)
    ->Unit(benchmark::kMillisecond);
// A GEMV whose B (256 MiB) dwarfs a batch's fixed GPU cost (a few µs of
// dispatch and barrier), so that its GPU time measures how fast the kernel
// streams B; 1 x 4096^2 reads 16 MiB, a few µs at HBM speed.
DMLSERVE_D3D12_BENCHMARK(BM_D3D12MatMul, large_qlinear_1x16384x16384_registered_b, 1, 1, 16384,
                         16384, true)
    ->Unit(benchmark::kMillisecond);
// B in the request (16 MiB each batch: uploaded and packed on the device).
DMLSERVE_D3D12_BENCHMARK(BM_D3D12MatMul, large_qlinear_16x4096x4096_inline_b, 1, 16, 4096, 4096,
                         false)
    ->Unit(benchmark::kMillisecond);
// 64 MiB scans: one line of 16M, 4096 lines of 4096, and a strided axis.
DMLSERVE_D3D12_BENCHMARK(BM_D3D12Scan, large_cumsum_f32_16M_axis0, kSum, DataType::kFloat32,
                         {16777216}, 0)
    ->Unit(benchmark::kMillisecond);
DMLSERVE_D3D12_BENCHMARK(BM_D3D12Scan, large_cumsum_f32_4096x4096_axis1, kSum, DataType::kFloat32,
                         {4096, 4096}, 1)
    ->Unit(benchmark::kMillisecond);
DMLSERVE_D3D12_BENCHMARK(BM_D3D12Scan, large_cumsum_f32_4096x4096_axis0, kSum, DataType::kFloat32,
                         {4096, 4096}, 0)
    ->Unit(benchmark::kMillisecond);
// The same 64 MiB scans with 4 batches in flight, as the server runs them
// (--d3d12_inflight_batches): one batch's copies in, GPU work and copies
// out are serial, but another batch's overlap them (PCIe is full duplex).
// Time per iteration is wall time per batch across the 4 threads, so the
// byte rate is the device's throughput.
DMLSERVE_D3D12_BENCHMARK(BM_D3D12Scan, large_cumsum_f32_16M_axis0, kSum, DataType::kFloat32,
                         {16777216}, 0)
    ->Threads(4)
    ->Unit(benchmark::kMillisecond);
DMLSERVE_D3D12_BENCHMARK(BM_D3D12Scan, large_cumsum_f32_4096x4096_axis1, kSum, DataType::kFloat32,
                         {4096, 4096}, 1)
    ->Threads(4)
    ->Unit(benchmark::kMillisecond);

// The shared-B load's typical batch (docs/benchmarks.md, "dmlserve-load"):
// 16 requests of 1 x 1024 x 1024 against a registered B, fused. One thread,
// then 4 and 8 batches in flight as the server runs them: if the device
// overlapped small batches' fixed costs, the time per batch (wall time
// across the threads) would fall with more in flight.
DMLSERVE_D3D12_BENCHMARK(BM_D3D12MatMul, shared_b_16x1x1024x1024_registered_b, 16, 1, 1024, 1024,
                         true)
    ->Threads(1)
    ->Threads(4)
    ->Threads(8)
    ->Unit(benchmark::kMicrosecond);

// The host's share of a batch before any D3D12 call: planning the shared-B
// load's typical batch (16 requests of 1 x 1024 x 1024, per-column B scales
// and zero points, as a registered B carries them). Needs no device; it lies
// on the batch's critical path in the server.
void BM_D3D12PlanBatch(benchmark::State& state) {
  const std::vector<Operation> operations = MakeMatMulsSharingB(
      16, 1, 1024, 1024, "bench-plan-weights", /*per_column_b_zero_point=*/true);
  for (auto _ : state) {
    std::vector<WorkItem> items(operations.size());
    for (size_t i = 0; i < items.size(); ++i) items[i].operation = &operations[i];
    absl::StatusOr<d3d12::DispatchPlan> plan = d3d12::PlanBatch(absl::MakeSpan(items));
    if (!plan.ok()) {
      state.SkipWithError(plan.status().ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(plan->dispatches.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(operations.size()));
}
BENCHMARK(BM_D3D12PlanBatch)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace dmlserve::bench
