// CPU scan benchmarks: each case runs one scan per iteration on a CpuDevice,
// output allocation included (as the server does it), and reports
//   bytes_per_second   input + output bytes per second of wall-clock time;
//   faults/iter        minor page faults per iteration (getrusage): ~0 once
//                      the buffer pool holds a block of the output's size;
//   peak_extra_MiB     the resident memory the calls added to the input, from
//                      before the first (cold) call with the pool emptied:
//                      the output, nothing else;
//   pool_in_use_MiB    pooled bytes handed out after the loop (the last
//                      output, still held).
//
//   dmlserve_bench --benchmark_filter=BM_CpuScan
//   DMLSERVE_CPU_ISA=avx2 dmlserve_bench --benchmark_filter=BM_CpuScan  # another path

#include <vector>

#include "bench/bench_operations.h"
#include "benchmark/benchmark.h"
#include "kernels/core/buffer_pool.h"
#include "kernels/cpu/cpu_device.h"

namespace dmlserve::bench {
namespace {

CpuDevice& Cpu() {
  static CpuDevice* device = new CpuDevice(0);
  return *device;
}

void BM_CpuScan(benchmark::State& state, OperatorKind kind, DataType type, Shape sizes,
                uint32_t axis, AxisDirection direction = AxisDirection::kIncreasing,
                bool exclusive = false) {
  const std::vector<Operation> operations = {
      MakeScan(kind, type, sizes, axis, direction, exclusive)};
  BufferPool::Get().Trim();
  const MemoryProbe probe;
  RunBatches(state, Cpu(), operations);
  probe.Report(state);
  state.counters["pool_in_use_MiB"] =
      static_cast<double>(BufferPool::Get().stats().in_use_bytes) / (1 << 20);
}

// Wall-clock rates: the work runs on the pool's threads, not only the
// benchmark's.
#define DMLSERVE_SCAN_BENCHMARK(...) BENCHMARK_CAPTURE(BM_CpuScan, __VA_ARGS__)->UseRealTime()

constexpr OperatorKind kSum = OperatorKind::kCumulativeSummation;
constexpr OperatorKind kProduct = OperatorKind::kCumulativeProduct;
constexpr DataType kF32 = DataType::kFloat32;
constexpr AxisDirection kDown = AxisDirection::kDecreasing;

// The cases compared side by side with ONNX Runtime (docs/benchmarks.md).
DMLSERVE_SCAN_BENCHMARK(cumsum_f32_1x1x1024x1024_axis3, kSum, kF32, {1, 1, 1024, 1024}, 3);
DMLSERVE_SCAN_BENCHMARK(cumsum_f32_1x1x1024x1024_axis2, kSum, kF32, {1, 1, 1024, 1024}, 2);
DMLSERVE_SCAN_BENCHMARK(cumsum_f32_16M_axis0, kSum, kF32, {16777216}, 0);
// The D3D12 bench's large_* scans (d3d12_kernels_bench.cc).
DMLSERVE_SCAN_BENCHMARK(large_cumsum_f32_16M_axis0, kSum, kF32, {16777216}, 0);
DMLSERVE_SCAN_BENCHMARK(large_cumsum_f32_4096x4096_axis1, kSum, kF32, {4096, 4096}, 1);
DMLSERVE_SCAN_BENCHMARK(large_cumsum_f32_4096x4096_axis0, kSum, kF32, {4096, 4096}, 0);
DMLSERVE_SCAN_BENCHMARK(cumsum_i32_16M_axis0, kSum, DataType::kInt32, {16777216}, 0);
DMLSERVE_SCAN_BENCHMARK(cumsum_f32_64x64x64x64_axis1, kSum, kF32, {64, 64, 64, 64}, 1);
DMLSERVE_SCAN_BENCHMARK(cumprod_f32_64x64x64x64_axis1, kProduct, kF32, {64, 64, 64, 64}, 1);

// Larger than the cache on every axis, other types and directions.
DMLSERVE_SCAN_BENCHMARK(cumsum_f32_64x64x64x64_axis0, kSum, kF32, {64, 64, 64, 64}, 0);
DMLSERVE_SCAN_BENCHMARK(cumsum_f32_64x64x64x64_axis2, kSum, kF32, {64, 64, 64, 64}, 2);
DMLSERVE_SCAN_BENCHMARK(cumsum_f32_64x64x64x64_axis3, kSum, kF32, {64, 64, 64, 64}, 3);
DMLSERVE_SCAN_BENCHMARK(cumsum_f32_64x64x64x64_axis3_exclusive_decreasing, kSum, kF32,
                        {64, 64, 64, 64}, 3, kDown, true);
DMLSERVE_SCAN_BENCHMARK(cumsum_f32_16M_axis0_exclusive_decreasing, kSum, kF32, {16777216}, 0, kDown,
                        true);
DMLSERVE_SCAN_BENCHMARK(cumsum_f32_4096x4096_axis0, kSum, kF32, {4096, 4096}, 0);
DMLSERVE_SCAN_BENCHMARK(cumsum_f32_4194304x4_axis0, kSum, kF32, {4194304, 4}, 0);
DMLSERVE_SCAN_BENCHMARK(cumsum_f16_32M_axis0, kSum, DataType::kFloat16, {33554432}, 0);
DMLSERVE_SCAN_BENCHMARK(cumsum_f16_64x64x64x128_axis1, kSum, DataType::kFloat16, {64, 64, 64, 128},
                        1);
DMLSERVE_SCAN_BENCHMARK(cumsum_i64_8M_axis0, kSum, DataType::kInt64, {8388608}, 0);
DMLSERVE_SCAN_BENCHMARK(cumsum_i64_64x64x64x32_axis2, kSum, DataType::kInt64, {64, 64, 64, 32}, 2);
DMLSERVE_SCAN_BENCHMARK(cumprod_u16_32M_axis0, kProduct, DataType::kUint16, {33554432}, 0);
DMLSERVE_SCAN_BENCHMARK(cumprod_u32_64x64x64x64_axis3, kProduct, DataType::kUint32,
                        {64, 64, 64, 64}, 3);

// Narrow rows (inner extent below a vector, strided axis) and short
// contiguous lines, 64 MiB of input each: several rows or lines per vector.
DMLSERVE_SCAN_BENCHMARK(cumsum_f32_4194304x4_axis0_exclusive_decreasing, kSum, kF32, {4194304, 4},
                        0, kDown, true);
DMLSERVE_SCAN_BENCHMARK(cumsum_i32_2097152x8_axis0, kSum, DataType::kInt32, {2097152, 8}, 0);
DMLSERVE_SCAN_BENCHMARK(cumsum_f32_2396745x7_axis0, kSum, kF32, {2396745, 7}, 0);
DMLSERVE_SCAN_BENCHMARK(cumsum_f32_5592405x3_axis0, kSum, kF32, {5592405, 3}, 0);
DMLSERVE_SCAN_BENCHMARK(cumprod_f32_1398101x12_axis0, kProduct, kF32, {1398101, 12}, 0);
DMLSERVE_SCAN_BENCHMARK(cumsum_f32_16x262144x4_axis1, kSum, kF32, {16, 262144, 4}, 1);
DMLSERVE_SCAN_BENCHMARK(cumsum_f16_16777216x2_axis0, kSum, DataType::kFloat16, {16777216, 2}, 0);
DMLSERVE_SCAN_BENCHMARK(cumsum_i64_4194304x2_axis0, kSum, DataType::kInt64, {4194304, 2}, 0);
DMLSERVE_SCAN_BENCHMARK(cumprod_u16_8388608x4_axis0_exclusive_decreasing, kProduct,
                        DataType::kUint16, {8388608, 4}, 0, kDown, true);
DMLSERVE_SCAN_BENCHMARK(cumsum_f32_2396745x7_axis1, kSum, kF32, {2396745, 7}, 1);
DMLSERVE_SCAN_BENCHMARK(cumsum_f32_987166x17_axis1, kSum, kF32, {987166, 17}, 1);
DMLSERVE_SCAN_BENCHMARK(cumsum_f32_4194304x4_axis1, kSum, kF32, {4194304, 4}, 1);

// Smaller shapes (in cache).
DMLSERVE_SCAN_BENCHMARK(cumsum_f32_64x4096_axis1, kSum, kF32, {64, 4096}, 1);
DMLSERVE_SCAN_BENCHMARK(cumsum_f32_64x4000_axis1, kSum, kF32, {64, 4000}, 1);
DMLSERVE_SCAN_BENCHMARK(cumsum_f32_64x4096_axis0, kSum, kF32, {64, 4096}, 0);
DMLSERVE_SCAN_BENCHMARK(cumsum_f32_4M_axis0, kSum, kF32, {1 << 22}, 0);
DMLSERVE_SCAN_BENCHMARK(cumsum_f32_8x4x16_axis1, kSum, kF32, {8, 4, 16}, 1);
DMLSERVE_SCAN_BENCHMARK(cumsum_f32_4096x7_axis1, kSum, kF32, {4096, 7}, 1);
DMLSERVE_SCAN_BENCHMARK(cumprod_f32_64x4096_axis1, kProduct, kF32, {64, 4096}, 1);
DMLSERVE_SCAN_BENCHMARK(cumprod_f32_64x4096_axis0, kProduct, kF32, {64, 4096}, 0);
DMLSERVE_SCAN_BENCHMARK(cumsum_f16_64x4096_axis1, kSum, DataType::kFloat16, {64, 4096}, 1);
DMLSERVE_SCAN_BENCHMARK(cumsum_f16_64x4096_axis0, kSum, DataType::kFloat16, {64, 4096}, 0);
DMLSERVE_SCAN_BENCHMARK(cumsum_i64_64x4096_axis1, kSum, DataType::kInt64, {64, 4096}, 1);
DMLSERVE_SCAN_BENCHMARK(cumsum_i64_64x4096_axis0, kSum, DataType::kInt64, {64, 4096}, 0);
DMLSERVE_SCAN_BENCHMARK(cumprod_u16_64x4096_axis1, kProduct, DataType::kUint16, {64, 4096}, 1);

// Tiny scans, where a call's fixed costs are the whole of it: the load
// generator's 1x1x3x4 request, and short lines whose lengths share no factor
// with a vector's (their stream repeats only after segment x vector elements).
DMLSERVE_SCAN_BENCHMARK(cumsum_f32_1x1x3x4_axis3, kSum, kF32, {1, 1, 3, 4}, 3);
DMLSERVE_SCAN_BENCHMARK(cumsum_f32_8x12_axis1, kSum, kF32, {8, 12}, 1);
DMLSERVE_SCAN_BENCHMARK(cumsum_f32_64x31_axis1, kSum, kF32, {64, 31}, 1);
DMLSERVE_SCAN_BENCHMARK(cumsum_f32_1024x31_axis1, kSum, kF32, {1024, 31}, 1);
DMLSERVE_SCAN_BENCHMARK(cumsum_i32_64x7_axis1, kSum, DataType::kInt32, {64, 7}, 1);

// Float32 sums along short rows, lines x segment: where the vector paths'
// set-up stops costing more than they save (scan_simd-inl.h, Stream).
void BM_CpuScanShortRows(benchmark::State& state) {
  BM_CpuScan(state, kSum, kF32,
             {static_cast<uint32_t>(state.range(0)), static_cast<uint32_t>(state.range(1))}, 1);
}
BENCHMARK(BM_CpuScanShortRows)
    ->ArgNames({"lines", "segment"})
    ->ArgsProduct({{1, 2, 4, 8, 16, 32, 64, 256}, {4, 7, 12, 31}})
    ->UseRealTime();

}  // namespace
}  // namespace dmlserve::bench
