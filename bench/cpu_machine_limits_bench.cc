// What the machine can do at most, measured in the same run as the kernels
// so that the kernels' rates can be read as a fraction of it: the int8
// multiply peak (vpdpbusd with no memory traffic, on every pool thread), the
// read bandwidth of the last-level cache and of memory (what bounds a GEMV or
// an N < 16 product, which do too few multiplies per byte to reach the
// multiply peak), and each micro-kernel alone on L1-resident operands.

#include <cstdint>
#include <vector>

#include "benchmark/benchmark.h"
#include "kernels/cpu/parallel_for.h"
#include "kernels/cpu/qgemm_ukernel.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace dmlserve::bench {
namespace {

#if defined(__x86_64__)
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vnni")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// 24 independent vpdpbusd chains (more than latency x throughput), no loads:
// 24 * 64 multiply-adds per iteration.
__attribute__((noinline)) int64_t VnniChains(int64_t iterations) {
  __m512i acc[24];
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-5);
#pragma GCC unroll 24
  for (int x = 0; x < 24; ++x) acc[x] = _mm512_setzero_si512();
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 24
    for (int x = 0; x < 24; ++x) acc[x] = _mm512_dpbusd_epi32(acc[x], a, b);
      // Opaque to the compiler: keeps it from folding the repeated products.
#pragma GCC unroll 24
    for (int x = 0; x < 24; ++x) __asm__ volatile("" : "+v"(acc[x]));
  }
  __m512i sum = acc[0];
#pragma GCC unroll 24
  for (int x = 1; x < 24; ++x) sum = _mm512_add_epi32(sum, acc[x]);
  return _mm512_reduce_add_epi32(sum);
}

// Reads [data, data + bytes) (bytes a multiple of 256) with 64-byte loads
// into four independent sums: nothing but the loads limits it.
__attribute__((noinline)) int64_t ReadAll(const uint8_t* data, size_t bytes) {
  __m512i acc[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(),
                    _mm512_setzero_si512()};
  for (size_t i = 0; i < bytes; i += 256) {
#pragma GCC unroll 4
    for (int x = 0; x < 4; ++x) {
      acc[x] = _mm512_add_epi64(acc[x], _mm512_loadu_si512(data + i + 64 * x));
    }
  }
  return _mm512_reduce_add_epi64(
      _mm512_add_epi64(_mm512_add_epi64(acc[0], acc[1]), _mm512_add_epi64(acc[2], acc[3])));
}
#pragma GCC diagnostic pop
#pragma GCC pop_options

void BM_CpuMachineLimit_VpdpbusdPeak(benchmark::State& state) {
  if (!__builtin_cpu_supports("avx512vnni")) {
    state.SkipWithError("unsupported: no AVX-512 VNNI");
    return;
  }
  constexpr int64_t kIterations = 1 << 20;
  const int threads = ParallelismLevel();
  for (auto _ : state) {
    ParallelFor(threads, 1, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) benchmark::DoNotOptimize(VnniChains(kIterations));
    });
  }
  state.counters["GOP/s"] =
      benchmark::Counter(2.0 * 24 * 64 * kIterations * threads * state.iterations() * 1e-9,
                         benchmark::Counter::kIsRate);
}
BENCHMARK(BM_CpuMachineLimit_VpdpbusdPeak)->UseRealTime()->Unit(benchmark::kMillisecond);

// Every pool thread reads its share of a buffer of state.range(0) MiB, again
// and again: 16 MiB stays in this machine's 32 MiB L3, 256 MiB comes from
// memory. GB/s of bytes read.
void BM_CpuMachineLimit_ReadBandwidth(benchmark::State& state) {
  if (!__builtin_cpu_supports("avx512f")) {
    state.SkipWithError("unsupported: no AVX-512");
    return;
  }
  const size_t bytes = static_cast<size_t>(state.range(0)) << 20;
  const std::vector<uint8_t> buffer(bytes, 1);  // written once: every page present
  const int threads = ParallelismLevel();
  const size_t share = bytes / threads / 256 * 256;
  for (auto _ : state) {
    ParallelFor(threads, 1, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        benchmark::DoNotOptimize(ReadAll(buffer.data() + t * share, share));
      }
    });
  }
  state.counters["GB/s"] =
      benchmark::Counter(static_cast<double>(share) * threads * state.iterations() * 1e-9,
                         benchmark::Counter::kIsRate);
}
BENCHMARK(BM_CpuMachineLimit_ReadBandwidth)
    ->Arg(16)
    ->Arg(256)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
#endif

// One thread, one micro-kernel call per iteration over `quads` quads of
// mr rows x max_strips strips, operands in L1: the kernel's own ceiling.
void BM_CpuQGemmUkernel(benchmark::State& state, const QGemmUkernel* kernel, int strips = 0) {
  if (kernel == nullptr) {
    state.SkipWithError("unsupported on this CPU");
    return;
  }
  constexpr size_t kQuads = 64;
  const size_t lda = kQuads * 4;
  const size_t strip_stride = kQuads * kQGemmQuadBytes;
  std::vector<uint8_t> a(kernel->mr * lda, 7);
  std::vector<int8_t> b(kernel->max_strips * strip_stride, -3);
  if (strips == 0) strips = kernel->max_strips;
  const size_t ldc = strips * kQGemmStripColumns;
  std::vector<int32_t> c(kernel->mr * ldc);
  for (auto _ : state) {
    kernel->fn(kQuads, a.data(), lda, kernel->mr, b.data(), strip_stride, strips, c.data(), ldc,
               false);
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GOP/s"] = benchmark::Counter(
      2.0 * kernel->mr * ldc * kQuads * 4 * state.iterations() * 1e-9, benchmark::Counter::kIsRate);
}
// The narrow path (one strip, B in quad groups: see qgemm_ukernel.h), same
// operands as the one-strip case.
void BM_CpuQGemmUkernelNarrow(benchmark::State& state, const QGemmUkernel* kernel) {
  if (kernel == nullptr || kernel->narrow == nullptr) {
    state.SkipWithError("unsupported on this CPU");
    return;
  }
  constexpr size_t kQuads = 64;
  const size_t lda = kQuads * 4;
  std::vector<uint8_t> a(kernel->mr * lda, 7);
  std::vector<int8_t> strip(kQuads * kQGemmQuadBytes, -3);
  std::vector<int8_t> panel(QGemmNarrowPanelBytes(kQuads));
  kernel->narrow_pack(strip.data(), kQuads, panel.data());
  std::vector<int32_t> c(kernel->mr * kQGemmStripColumns);
  for (auto _ : state) {
    kernel->narrow(kQuads, a.data(), lda, kernel->mr, panel.data(), c.data(), kQGemmStripColumns,
                   false);
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GOP/s"] = benchmark::Counter(
      2.0 * kernel->mr * kQGemmStripColumns * kQuads * 4 * state.iterations() * 1e-9,
      benchmark::Counter::kIsRate);
}
BENCHMARK_CAPTURE(BM_CpuQGemmUkernelNarrow, avx512vnni, Avx512VnniQGemmUkernel());

BENCHMARK_CAPTURE(BM_CpuQGemmUkernel, generic, GenericQGemmUkernel());
BENCHMARK_CAPTURE(BM_CpuQGemmUkernel, avx2, Avx2QGemmUkernel());
BENCHMARK_CAPTURE(BM_CpuQGemmUkernel, avxvnni, AvxVnniQGemmUkernel());
BENCHMARK_CAPTURE(BM_CpuQGemmUkernel, avx512vnni, Avx512VnniQGemmUkernel());
// One strip (N <= 16): a broadcast per multiply.
BENCHMARK_CAPTURE(BM_CpuQGemmUkernel, avx512vnni_one_strip, Avx512VnniQGemmUkernel(), 1);

}  // namespace
}  // namespace dmlserve::bench
