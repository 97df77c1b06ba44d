// CPU backend benchmarks (matrix multiplies; scans are in cpu_scan_bench.cc):
// each case runs one batch per iteration on a CpuDevice, output allocation
// included.

#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "bench/bench_operations.h"
#include "benchmark/benchmark.h"
#include "kernels/backend/execution_hints.h"
#include "kernels/core/buffer_pool.h"
#include "kernels/cpu/cpu_device.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/packed_b.h"
#include "kernels/cpu/qgemm_ukernel.h"
#include "kernels/cpu/quantized_matmul_kernels.h"

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

// The D3D12 bench's large_* shapes (d3d12_kernels_bench.cc), for a
// side-by-side on one machine.
DMLSERVE_CPU_BENCHMARK(BM_CpuMatMul, large_qlinear_4096x4096x4096_registered_b, 1, 4096, 4096, 4096,
                       true)
    ->Unit(benchmark::kMillisecond);
DMLSERVE_CPU_BENCHMARK(BM_CpuMatMul, large_qlinear_256x4096x4096_registered_b, 1, 256, 4096, 4096,
                       true)
    ->Unit(benchmark::kMillisecond);
DMLSERVE_CPU_BENCHMARK(BM_CpuMatMul, large_qlinear_16x4096x4096_registered_b, 1, 16, 4096, 4096,
                       true)
    ->Unit(benchmark::kMillisecond);
DMLSERVE_CPU_BENCHMARK(BM_CpuMatMul, large_qlinear_1x16384x16384_registered_b, 1, 1, 16384, 16384,
                       true)
    ->Unit(benchmark::kMillisecond);
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

// A batch as the server runs it under load (dmlserve-load --mix=qmatmul=1
// --matmul_shape=1,1024,1024 --register_weights with 64 clients): `requests`
// one-row requests sharing a registered 1024x1024 B, fused, on one thread
// (the scheduler's BusyCoresScope: the other core serves gRPC). Its
// MAC/s against BM_CpuQGemmUkernel/avx512vnni's (one thread, the
// micro-kernel alone) is how much of the core the serving path gets.
//
// `cold`: between batches, 4 MiB of other data pass through the caches, as
// a batch's worth of gRPC traffic does in the server, so B comes from L3.
void BM_CpuServingBatch(benchmark::State& state, int requests, bool cold) {
  const std::vector<Operation> operations =
      MakeMatMulsSharingB(requests, 1, 1024, 1024, "bench-serving-weights");
  const BusyCoresScope busy(true);
  std::vector<WorkItem> items(operations.size());
  std::vector<uint8_t> other(cold ? size_t{4} << 20 : 0);
  for (auto _ : state) {
    if (cold) {
      state.PauseTiming();
      for (size_t i = 0; i < other.size(); i += 64) other[i] += 1;
      benchmark::ClobberMemory();
      state.ResumeTiming();
    }
    for (size_t i = 0; i < operations.size(); ++i) items[i] = WorkItem{&operations[i], {}, {}};
    const absl::Status status = Cpu().Execute(absl::MakeSpan(items));
    if (!status.ok()) {
      state.SkipWithError(std::string(status.message()).c_str());
      break;
    }
  }
  state.counters["MAC/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * requests * 1024 * 1024,
                         benchmark::Counter::kIsRate);
  state.counters["us/row"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * requests,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
DMLSERVE_CPU_BENCHMARK(BM_CpuServingBatch, fused_1_warm, 1, false)->Unit(benchmark::kMicrosecond);
DMLSERVE_CPU_BENCHMARK(BM_CpuServingBatch, fused_1_cold, 1, true)->Unit(benchmark::kMicrosecond);
DMLSERVE_CPU_BENCHMARK(BM_CpuServingBatch, fused_19_warm, 19, false)->Unit(benchmark::kMicrosecond);
DMLSERVE_CPU_BENCHMARK(BM_CpuServingBatch, fused_19_cold, 19, true)->Unit(benchmark::kMicrosecond);
DMLSERVE_CPU_BENCHMARK(BM_CpuServingBatch, fused_32_cold, 32, true)->Unit(benchmark::kMicrosecond);

// The cases compared with ONNX Runtime (bench/compare_onnxruntime.sh) under
// the same names. One request per iteration on a CpuDevice, output allocation
// included; registered B is packed once, before the measured iterations.
//
// peak_extra_MiB is the memory a call needs besides its operands: measured
// from before the first (cold) call, with the buffer pool emptied, so it
// includes the output, the packed B (kept for a registered B, pooled
// otherwise) and scratch; faults/iter 0 shows that later calls reuse it all.
void BM_CpuQGemm(benchmark::State& state, QGemmCase c) {
  const std::vector<Operation> operations = {MakeQGemm(c)};
  Cpu().Evict("bench-weights");
  BufferPool::Get().Trim();
  const MemoryProbe probe;
  std::vector<WorkItem> warmup = {WorkItem{&operations[0], {}, {}}};
  (void)Cpu().Execute(absl::MakeSpan(warmup));
  warmup.clear();
  RunBatches(state, Cpu(), operations);
  probe.Report(state);
  state.counters["GOP/s"] =
      benchmark::Counter(2.0 * c.m * c.k * c.n * static_cast<double>(state.iterations()) * 1e-9,
                         benchmark::Counter::kIsRate);
}

constexpr DataType kU8 = DataType::kUint8;
constexpr DataType kS8 = DataType::kInt8;

// Packing a B sent with a request, alone: PackB for one product of c.m rows
// (what BM_CpuQGemm's B-per-request cases pay each call besides the
// multiplies), on the selected ISA level's packer. GB/s counts B's bytes.
void BM_CpuPackB(benchmark::State& state, QGemmCase c) {
  const Operation operation = MakeQGemm(c);
  const auto& op = std::get<QuantizedMatMulOperation>(operation);
  BufferPool::Get().Trim();
  (void)PackB(op, 0, SelectedCpuKernels(), c.m);  // pool warm, as in later calls
  for (auto _ : state) {
    std::shared_ptr<const PackedB> packed = PackB(op, 0, SelectedCpuKernels(), c.m);
    benchmark::DoNotOptimize(packed.get());
  }
  state.counters["GB/s"] = benchmark::Counter(
      static_cast<double>(c.k) * c.n * static_cast<double>(state.iterations()) * 1e-9,
      benchmark::Counter::kIsRate);
}

QGemmCase Case(DataType a, DataType b, DataType out, uint32_t m, uint32_t k, uint32_t n,
               bool registered_b, bool per_column = false) {
  return QGemmCase{a, b, out, m, k, n, per_column, registered_b};
}

// The case with 7-bit weights (B in [-64, 63]): where AVX2's vpmaddubsw
// kernel is exact.
QGemmCase SevenBitB(QGemmCase c) {
  c.seven_bit_b = true;
  return c;
}

// Times `table` on an m x k x n u8 x s8 product with B registered (packed
// once, before) or sent with each request, labelled with the table's
// micro-kernel, in GOP/s.
void RunU8S8(benchmark::State& state, const CpuKernels& table, uint32_t m, uint32_t k, uint32_t n,
             bool registered_b) {
  const Operation operation = MakeQGemm(Case(kU8, kS8, kS8, m, k, n, registered_b));
  const auto& op = std::get<QuantizedMatMulOperation>(operation);
  PackedBCache cache(uint64_t{1} << 30);
  Tensor output = Tensor::Allocate(op.output_data_type, op.output_sizes);
  const QuantizedMatMulOperation* ops[] = {&op};
  Tensor* outputs[] = {&output};
  ComputeQuantizedMatMuls(ops, outputs, &cache, &table);
  for (auto _ : state)
    benchmark::DoNotOptimize(ComputeQuantizedMatMuls(ops, outputs, &cache, &table));
  state.SetLabel(std::string(table.qgemm->name));
  state.counters["GOP/s"] =
      benchmark::Counter(2.0 * m * k * n * static_cast<double>(state.iterations()) * 1e-9,
                         benchmark::Counter::kIsRate);
}

// Where the tiles start to pay: u8 x s8 rows x 4096 x 4096 against a
// registered B, for rows from a GEMV up, on the AVX-512 VNNI table and on the
// amx table with every row count on the tiles (its kernel's min_rows set to
// 1, so few_rows is never taken). The row count from which the tiles win is
// kQGemmAmxMinRows (qgemm_ukernel.h). Skipped where the CPU lacks the level.
void BM_U8S8RowSweep(benchmark::State& state, CpuIsa isa) {
  if (!CpuRunsIsa(isa) || (isa == CpuIsa::kAmx && AmxQGemmUkernel() == nullptr)) {
    state.SkipWithError("this CPU lacks the level");
    return;
  }
  static const QGemmUkernel* const every_row_on_tiles = [] {
    auto* kernel = new QGemmUkernel(*CpuKernelsFor(CpuIsa::kAmx).qgemm);
    kernel->few_rows = nullptr;
    return kernel;
  }();
  CpuKernels table = CpuKernelsFor(isa);
  if (isa == CpuIsa::kAmx) table.qgemm = every_row_on_tiles;
  RunU8S8(state, table, static_cast<uint32_t>(state.range(0)), 4096, 4096, true);
}
// GEMV to 32 rows.
void RowCounts(benchmark::internal::Benchmark* b) {
  for (int rows : {1, 2, 4, 8, 12, 16, 32}) b->Arg(rows);
}
BENCHMARK_CAPTURE(BM_U8S8RowSweep, avx512vnni, CpuIsa::kAvx512Vnni)
    ->Apply(RowCounts)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_U8S8RowSweep, amx, CpuIsa::kAmx)
    ->Apply(RowCounts)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The amx level's candidates (qgemm_ukernel.h): its kernel and the
// prefetching one, each under the driver's blockings (QGemmBlocking), in
// whole products through the driver, B registered, and 256 x 4096 x 4096
// with B per request. Named BM_AmxCandidate/<kernel>_d<depth block>
// [_t<task rows>][_c<task columns>][_rows_outer][_copy_a]/<m>x<k>x<n>[_per_request]; tasks of
// more than kQGemmRowBlock rows stream a B per request (stream_b).
void BM_AmxCandidate(benchmark::State& state, const QGemmUkernel* kernel, uint32_t m, uint32_t k,
                     uint32_t n, bool registered_b) {
  if (!CpuRunsIsa(CpuIsa::kAmx) || kernel == nullptr) {
    state.SkipWithError("this CPU lacks the level");
    return;
  }
  CpuKernels table = CpuKernelsFor(CpuIsa::kAmx);
  table.qgemm = kernel;
  RunU8S8(state, table, m, k, n, registered_b);
}

bool RegisterAmxCandidates() {
  struct Shape {
    uint32_t m, k, n;
    bool registered_b;
  };
  const Shape shapes[] = {{256, 4096, 4096, true},
                          {1024, 1024, 1024, true},
                          {333, 1000, 777, true},
                          {256, 4096, 4096, false}};
  const std::pair<const char*, const QGemmUkernel*> kernels[] = {
      {"amx", AmxQGemmUkernel()}, {"amx_prefetch", AmxPrefetchQGemmUkernel()}};
  auto add = [&](const char* kernel_name, const QGemmUkernel* kernel, QGemmBlocking blocking) {
    std::string name = std::string(kernel_name) + "_d" + std::to_string(blocking.depth_block);
    if (blocking.task_rows != kQGemmRowBlock) name += "_t" + std::to_string(blocking.task_rows);
    if (blocking.column_block != 0) name += "_c" + std::to_string(blocking.column_block);
    if (blocking.row_blocks_outer) name += "_rows_outer";
    if (blocking.copy_a) name += "_copy_a";
    blocking.stream_b = blocking.task_rows != kQGemmRowBlock;
    const QGemmUkernel* candidate =
        kernel == nullptr ? nullptr : QGemmUkernelWithBlocking(*kernel, blocking, name);
    for (const Shape& shape : shapes) {
      benchmark::RegisterBenchmark(("BM_AmxCandidate/" + name + "/" + std::to_string(shape.m) +
                                    "x" + std::to_string(shape.k) + "x" + std::to_string(shape.n) +
                                    (shape.registered_b ? "" : "_per_request"))
                                       .c_str(),
                                   BM_AmxCandidate, candidate, shape.m, shape.k, shape.n,
                                   shape.registered_b)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
  };
  for (const auto& [kernel_name, kernel] : kernels) {
    for (size_t depth : {512, 1024, 2048}) {
      for (size_t task_rows : {kQGemmRowBlock, 3 * kQGemmRowBlock}) {
        for (bool rows_outer : {false, true}) {
          for (bool copy_a : {false, true}) {
            add(kernel_name, kernel,
                {.depth_block = depth,
                 .task_rows = task_rows,
                 .row_blocks_outer = rows_outer,
                 .copy_a = copy_a});
          }
        }
      }
    }
  }
  // Today's blocking and 288-row tasks with the kernel asking for each
  // step's lines 8 steps ahead (AmxFarPrefetchQGemmUkernel: for lines from L3).
  for (size_t task_rows : {kQGemmRowBlock, 3 * kQGemmRowBlock}) {
    add("amx_prefetch8", AmxFarPrefetchQGemmUkernel(),
        {.depth_block = 2048, .task_rows = task_rows});
  }
  // Wider tasks: A read from beyond L2 once per 512 columns instead of 256
  // (see QGemmBlocking::column_block).
  for (size_t task_rows : {kQGemmRowBlock, 3 * kQGemmRowBlock}) {
    for (bool copy_a : {false, true}) {
      add("amx", AmxQGemmUkernel(),
          {.depth_block = 2048, .task_rows = task_rows, .column_block = 512, .copy_a = copy_a});
    }
  }
  return true;
}
const bool amx_candidates_registered = RegisterAmxCandidates();

#define DMLSERVE_QGEMM_BENCHMARK(name, ...) \
  DMLSERVE_CPU_BENCHMARK(BM_CpuQGemm, name, Case(__VA_ARGS__))->Unit(benchmark::kMillisecond)
#define DMLSERVE_QGEMM_B7_BENCHMARK(name, ...)                            \
  DMLSERVE_CPU_BENCHMARK(BM_CpuQGemm, name, SevenBitB(Case(__VA_ARGS__))) \
      ->Unit(benchmark::kMillisecond)

DMLSERVE_QGEMM_BENCHMARK(u8s8_256x4096x4096_registered_b, kU8, kS8, kS8, 256, 4096, 4096, true);
DMLSERVE_QGEMM_BENCHMARK(u8s8_256x4096x4096, kU8, kS8, kS8, 256, 4096, 4096, false);
DMLSERVE_QGEMM_B7_BENCHMARK(u8s8_b7_256x4096x4096_registered_b, kU8, kS8, kS8, 256, 4096, 4096,
                            true);
DMLSERVE_QGEMM_B7_BENCHMARK(u8s8_b7_256x4096x4096, kU8, kS8, kS8, 256, 4096, 4096, false);
// B sent with the request, multiplied by more rows than a task's 96 and fewer
// than the 384 that still take every row in one task (qgemm_driver.cc), and
// just past them.
DMLSERVE_QGEMM_BENCHMARK(u8s8_128x4096x4096, kU8, kS8, kS8, 128, 4096, 4096, false);
DMLSERVE_QGEMM_BENCHMARK(u8s8_384x4096x4096, kU8, kS8, kS8, 384, 4096, 4096, false);
DMLSERVE_QGEMM_BENCHMARK(u8s8_512x4096x4096, kU8, kS8, kS8, 512, 4096, 4096, false);
DMLSERVE_QGEMM_BENCHMARK(u8s8_odd_333x1000x777, kU8, kS8, kS8, 333, 1000, 777, false);
DMLSERVE_QGEMM_BENCHMARK(u8s8_per_column_256x4096x4096_registered_b, kU8, kS8, kS8, 256, 4096, 4096,
                         true, true);
DMLSERVE_QGEMM_BENCHMARK(u8u8_256x4096x4096_registered_b, kU8, kU8, kS8, 256, 4096, 4096, true);
DMLSERVE_QGEMM_BENCHMARK(s8s8_256x4096x4096_registered_b, kS8, kS8, kS8, 256, 4096, 4096, true);
DMLSERVE_QGEMM_BENCHMARK(s8u8_256x4096x4096_registered_b, kS8, kU8, kS8, 256, 4096, 4096, true);
DMLSERVE_QGEMM_BENCHMARK(u8s8_to_u8_256x4096x4096_registered_b, kU8, kS8, kU8, 256, 4096, 4096,
                         true);
DMLSERVE_QGEMM_BENCHMARK(u8u8_to_u8_256x4096x4096_registered_b, kU8, kU8, kU8, 256, 4096, 4096,
                         true);
DMLSERVE_QGEMM_BENCHMARK(s8s8_to_u8_256x4096x4096_registered_b, kS8, kS8, kU8, 256, 4096, 4096,
                         true);
DMLSERVE_QGEMM_BENCHMARK(s8u8_to_u8_256x4096x4096_registered_b, kS8, kU8, kU8, 256, 4096, 4096,
                         true);
DMLSERVE_QGEMM_BENCHMARK(u8s8_1024x1024x1024_registered_b, kU8, kS8, kS8, 1024, 1024, 1024, true);
DMLSERVE_QGEMM_BENCHMARK(u8s8_16x4096x4096_registered_b, kU8, kS8, kS8, 16, 4096, 4096, true);
DMLSERVE_QGEMM_BENCHMARK(u8s8_12x4096x4096_registered_b, kU8, kS8, kS8, 12, 4096, 4096, true);
DMLSERVE_QGEMM_BENCHMARK(u8s8_16x4096x4096, kU8, kS8, kS8, 16, 4096, 4096, false);
DMLSERVE_QGEMM_BENCHMARK(u8s8_1x4096x4096_registered_b, kU8, kS8, kS8, 1, 4096, 4096, true);
// The GEMV on 7-bit weights: where ONNX Runtime's AVX2 path is exact too.
DMLSERVE_QGEMM_B7_BENCHMARK(u8s8_b7_1x4096x4096_registered_b, kU8, kS8, kS8, 1, 4096, 4096, true);
DMLSERVE_QGEMM_BENCHMARK(u8s8_1x4096x4096, kU8, kS8, kS8, 1, 4096, 4096, false);
DMLSERVE_CPU_BENCHMARK(BM_CpuPackB, u8s8_256x4096x4096, Case(kU8, kS8, kS8, 256, 4096, 4096, false))
    ->Unit(benchmark::kMillisecond);
DMLSERVE_CPU_BENCHMARK(BM_CpuPackB, u8s8_b7_256x4096x4096,
                       SevenBitB(Case(kU8, kS8, kS8, 256, 4096, 4096, false)))
    ->Unit(benchmark::kMillisecond);
// The load generator's serving shape (dmlserve-load --matmul_shape=1,1024,1024):
// one request alone, and 32 fused into one batch (s8 A, u8 B, per-column B).
DMLSERVE_QGEMM_BENCHMARK(s8u8_per_column_1x1024x1024_registered_b, kS8, kU8, kS8, 1, 1024, 1024,
                         true, true);
// Hostile shapes (issue 12): legal requests whose cost is all per-row and
// per-slice overhead. 48M rows of K = 1 (a 48 MiB request; its memory beyond
// the operands must stay near its 48 MiB output), and A {4096,1,1,1} x
// B {1,4096,1,1}: 16M products of one multiply each.
void BM_CpuQGemmHostile(benchmark::State& state, QGemmCase c) {
  const std::vector<Operation> operations = {MakeQGemm(c)};
  BufferPool::Get().Trim();
  const MemoryProbe probe;
  RunBatches(state, Cpu(), operations);
  probe.Report(state);
  state.counters["outputs/s"] = benchmark::Counter(
      static_cast<double>(c.a_batch) * c.b_channel * c.m * c.n * state.iterations(),
      benchmark::Counter::kIsRate);
}
BENCHMARK_CAPTURE(BM_CpuQGemmHostile, u8s8_tall_50331648x1x1,
                  Case(kU8, kS8, kS8, 50331648, 1, 1, false))
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_CpuQGemmHostile, u8s8_broadcast_4096x1x1x1_by_1x4096x1x1,
                  [] {
                    QGemmCase c = Case(kU8, kS8, kS8, 1, 1, 1, false);
                    c.a_batch = c.b_channel = 4096;
                    return c;
                  }())
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

DMLSERVE_QGEMM_BENCHMARK(s8u8_per_column_32x1024x1024_registered_b, kS8, kU8, kS8, 32, 1024, 1024,
                         true, true);
// Odd shapes: tile edges everywhere, K not a multiple of 4, N < 16.
DMLSERVE_QGEMM_BENCHMARK(u8s8_odd_255x4001x4095_registered_b, kU8, kS8, kS8, 255, 4001, 4095, true);
// Odd shapes of real models (LLM projections, awkward tiles), B registered.
DMLSERVE_QGEMM_BENCHMARK(u8s8_odd_7x4096x11008_registered_b, kU8, kS8, kS8, 7, 4096, 11008, true);
DMLSERVE_QGEMM_BENCHMARK(u8s8_odd_333x1000x777_registered_b, kU8, kS8, kS8, 333, 1000, 777, true);
DMLSERVE_QGEMM_BENCHMARK(u8s8_odd_61x2050x3001_registered_b, kU8, kS8, kS8, 61, 2050, 3001, true);
DMLSERVE_QGEMM_BENCHMARK(u8s8_odd_128x11008x4096_registered_b, kU8, kS8, kS8, 128, 11008, 4096,
                         true);
DMLSERVE_QGEMM_BENCHMARK(u8s8_odd_4096x4093x15_registered_b, kU8, kS8, kS8, 4096, 4093, 15, true);
// The same shape with an A that stays in cache from call to call (1 MiB).
DMLSERVE_QGEMM_BENCHMARK(u8s8_odd_256x4093x15_registered_b, kU8, kS8, kS8, 256, 4093, 15, true);
DMLSERVE_QGEMM_BENCHMARK(u8s8_per_column_odd_1x4093x4095_registered_b, kU8, kS8, kS8, 1, 4093, 4095,
                         true, true);

}  // namespace
}  // namespace dmlserve::bench
