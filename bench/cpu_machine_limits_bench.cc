// What the machine can do at most, measured in the same run as the kernels
// so that each kernel's rate can be read as a fraction of the limit that
// binds it. One limit per x86 ISA path, since each path is bound by its own
// instruction's rate, not by the machine's best:
//   TdpbusdPeak           AMX: tdpbusd on 16 x 64-byte tiles, 16 Ki
//                         multiply-adds each (the amx kernel; skipped on
//                         CPUs without tiles or whose OS refuses them).
//   VpdpbusdPeak          AVX-512 VNNI: vpdpbusd zmm, 64 multiply-adds each
//                         (the avx512vnni kernels).
//   AvxVnniPeak           AVX-VNNI: VEX vpdpbusd ymm, 32 each (the avxvnni
//                         kernels; skipped on CPUs without it, AVX-512 ones
//                         such as Zen 4 included).
//   Avx2ExactPeak         AVX2 with exact int32 sums: vpmaddwd on int16 pairs
//                         then vpaddd, 16 multiply-adds per step (the avx2
//                         kernels, which widen int8 to int16 so that no sum
//                         saturates).
//   Avx2ExactWideningPeak The exact AVX2 step when each int8 value of B is
//                         used by one row only (a GEMV): vpmovsxbw to widen
//                         it, then vpmaddwd and vpaddd, 16 multiply-adds per
//                         step (the avx2 kernel's one-row pass).
//   Avx2SaturatingPeak    AVX2 as ONNX Runtime and oneDNN do it: vpmaddubsw
//                         (u8 x s8, 32 multiply-adds, int16 sums that can
//                         saturate), vpmaddwd by ones, vpaddd: the rate a
//                         kernel gives up by being exact.
// All with no memory traffic, on every pool thread (what a parallel GEMM gets).
// Then the read bandwidth of the last-level cache and of memory (what bounds
// a GEMV or an N < 16 product, which do too few multiplies per byte to reach
// the multiply peak), with the widest loads the selected ISA has, so AVX2-only
// machines get it too; and each micro-kernel alone on L1-resident operands.
//
// GOP/s counts a multiply-add as 2 operations. Every operand of a multiply is
// made opaque to the compiler in every step (an empty asm that "changes" it),
// not only the accumulators: otherwise a product of loop-invariant operands
// is computed once, and the loop is left with only the adds.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "benchmark/benchmark.h"
#include "kernels/core/parallel_for.h"
#include "kernels/cpu/amx_tiles.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/isa_portability.h"
#include "kernels/cpu/qgemm_ukernel.h"

#if DMLSERVE_X86
#include <immintrin.h>
#endif

namespace dmlserve::bench {
namespace {

#if DMLSERVE_X86
DMLSERVE_ISA_BEGIN("avx512f,avx512bw,avx512vnni")
DMLSERVE_IGNORE_UNINITIALIZED_BEGIN
// 24 independent vpdpbusd chains (more than latency x throughput), no loads:
// 24 * 64 multiply-adds per iteration. vpdpbusd adds into its accumulator
// itself, so an opaque accumulator is enough to keep every product in the loop.
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
__attribute__((noinline)) int64_t ReadAll512(const uint8_t* data, size_t bytes) {
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
DMLSERVE_IGNORE_UNINITIALIZED_END
DMLSERVE_ISA_END

// AVX2 only (VEX encoding, 16 ymm registers): what the avx2 kernels get, even
// when compiled here on a CPU that has more.
DMLSERVE_ISA_BEGIN("avx2")
// The sum of the eight int32 lanes of v.
int64_t SumEpi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}
// The sum of the four int64 lanes of v.
int64_t SumEpi64(__m256i v) {
  const __m128i s = _mm_add_epi64(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  return _mm_cvtsi128_si64(_mm_add_epi64(s, _mm_unpackhi_epi64(s, s)));
}

// Runs 12 independent chains acc = step(acc) for `iterations` rounds and
// returns the sum of their lanes: 12 accumulators leave 4 of the 16 ymm
// registers to a step's operands and temporaries. Only the accumulators are
// chained, so latency does not bind; each step must make its own operands
// opaque (see the file comment).
template <typename Step>
DMLSERVE_ALWAYS_INLINE int64_t Avx2Chains(int64_t iterations, Step& step) {
  __m256i acc[12];
#pragma GCC unroll 12
  for (int x = 0; x < 12; ++x) acc[x] = _mm256_setzero_si256();
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 12
    for (int x = 0; x < 12; ++x) acc[x] = step(acc[x]);
#pragma GCC unroll 12
    for (int x = 0; x < 12; ++x) __asm__ volatile("" : "+x"(acc[x]));
  }
  __m256i sum = acc[0];
#pragma GCC unroll 12
  for (int x = 1; x < 12; ++x) sum = _mm256_add_epi32(sum, acc[x]);
  return SumEpi32(sum);
}

// acc += vpmaddwd(a, b): 16 multiply-adds a step. What the core sustains of
// the pair binds (on Zen 4 about 1.5 vpmaddwd a cycle, the adds sharing its
// vector pipes). a and b are made opaque before every step, so that the 12
// products of a round are not one product shared (or hoisted out of the
// loop), and each step costs a vpmaddwd and a vpaddd.
struct Avx2ExactStep {
  __m256i a, b;
  DMLSERVE_ALWAYS_INLINE __m256i operator()(__m256i acc) {
    __asm__ volatile("" : "+x"(a), "+x"(b));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
  }
};
__attribute__((noinline)) int64_t Avx2ExactChains(int64_t iterations) {
  Avx2ExactStep step{_mm256_set1_epi16(3), _mm256_set1_epi16(-5)};
  return Avx2Chains(iterations, step);
}

// The exact step with B widened from int8 in every step, as a one-row
// product must (each byte of B meets one value of A, so nothing shares the
// widening): acc += vpmaddwd(a, vpmovsxbw(b)), 16 multiply-adds a step.
struct Avx2ExactWideningStep {
  __m256i a;
  __m128i b;
  DMLSERVE_ALWAYS_INLINE __m256i operator()(__m256i acc) {
    __asm__ volatile("" : "+x"(a), "+x"(b));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(a, _mm256_cvtepi8_epi16(b)));
  }
};
__attribute__((noinline)) int64_t Avx2ExactWideningChains(int64_t iterations) {
  Avx2ExactWideningStep step{_mm256_set1_epi16(3), _mm_set1_epi8(-5)};
  return Avx2Chains(iterations, step);
}

// acc += vpmaddwd(vpmaddubsw(a_u8, b_s8), ones): 32 multiply-adds a step,
// as ONNX Runtime's and oneDNN's AVX2 kernels do it.
struct Avx2SaturatingStep {
  __m256i a, b, ones;
  DMLSERVE_ALWAYS_INLINE __m256i operator()(__m256i acc) {
    __asm__ volatile("" : "+x"(a), "+x"(b));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), ones));
  }
};
__attribute__((noinline)) int64_t Avx2SaturatingChains(int64_t iterations) {
  Avx2SaturatingStep step{_mm256_set1_epi8(3), _mm256_set1_epi8(-5), _mm256_set1_epi16(1)};
  return Avx2Chains(iterations, step);
}

// ReadAll512 with 32-byte loads (bytes a multiple of 256): eight independent
// sums, 2 loads a cycle at most, so nothing but the loads limits it.
__attribute__((noinline)) int64_t ReadAll256(const uint8_t* data, size_t bytes) {
  __m256i acc[8];
#pragma GCC unroll 8
  for (int x = 0; x < 8; ++x) acc[x] = _mm256_setzero_si256();
  for (size_t i = 0; i < bytes; i += 256) {
#pragma GCC unroll 8
    for (int x = 0; x < 8; ++x) {
      acc[x] = _mm256_add_epi64(
          acc[x], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(data + i + 32 * x)));
    }
  }
  __m256i sum = acc[0];
#pragma GCC unroll 8
  for (int x = 1; x < 8; ++x) sum = _mm256_add_epi64(sum, acc[x]);
  return SumEpi64(sum);
}
DMLSERVE_ISA_END

// No guard for the compiler: kernels/cpu/qgemm_ukernel_avxvnni.cc, built into
// the same binary, needs it to know AVX-VNNI already.
DMLSERVE_ISA_BEGIN("avx2,avxvnni")
// 12 independent chains of VEX vpdpbusd ymm (latency 4-5 x 2 per cycle at
// most): 12 * 32 multiply-adds per iteration. As with VnniChains, the
// accumulator is an operand of the multiply; a and b are opaque anyway.
__attribute__((noinline)) int64_t AvxVnniChains(int64_t iterations) {
  __m256i acc[12];
  __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-5);
#pragma GCC unroll 12
  for (int x = 0; x < 12; ++x) acc[x] = _mm256_setzero_si256();
  for (int64_t i = 0; i < iterations; ++i) {
    __asm__ volatile("" : "+x"(a), "+x"(b));
#pragma GCC unroll 12
    for (int x = 0; x < 12; ++x) acc[x] = _mm256_dpbusd_avx_epi32(acc[x], a, b);
#pragma GCC unroll 12
    for (int x = 0; x < 12; ++x) __asm__ volatile("" : "+x"(acc[x]));
  }
  __m256i sum = acc[0];
#pragma GCC unroll 12
  for (int x = 1; x < 12; ++x) sum = _mm256_add_epi32(sum, acc[x]);
  return SumEpi32(sum);
}
DMLSERVE_ISA_END

#if defined(__GNUC__)
// 4 independent tdpbusd chains on register-resident tiles (tmm0-3 += tmm4/5
// x tmm6/7, the amx kernel's 2 x 2 blocking), no loads: 4 * 16 * 16 * 16 * 4
// multiply-adds per iteration. The tiles are configured here, on the thread
// that runs it (the configuration is per thread), and released after.
// Inline assembly, as in qgemm_ukernel_amx.cc.
__attribute__((noinline)) int64_t TileChains(int64_t iterations) {
  const TileConfig config = FullTileConfig();
  __asm__ volatile("ldtilecfg %0" : : "m"(config) : "memory");
  // tilezero leaves every tile 0: the products are 0, and the unit's rate
  // does not depend on the values.
  __asm__ volatile("tilezero %%tmm4\n\ttilezero %%tmm5\n\ttilezero %%tmm6\n\ttilezero %%tmm7" ::);
  for (int64_t i = 0; i < iterations; ++i) {
    __asm__ volatile(
        "tdpbusd %%tmm6, %%tmm4, %%tmm0\n\t"
        "tdpbusd %%tmm7, %%tmm4, %%tmm1\n\t"
        "tdpbusd %%tmm6, %%tmm5, %%tmm2\n\t"
        "tdpbusd %%tmm7, %%tmm5, %%tmm3" ::);
  }
  alignas(64) int32_t out[kAmxMaxRows * kAmxMaxRowBytes / 4];
  __asm__ volatile("tilestored %%tmm0, (%0,%1,1)"
                   :
                   : "r"(out), "r"(int64_t{kAmxMaxRowBytes})
                   : "memory");
  __asm__ volatile("tilerelease" ::: "memory");
  return out[0];
}
#endif

// Runs chains(kChainIterations) on every pool thread once per iteration and
// reports GOP/s, macs_per_iteration multiply-adds per chains iteration.
constexpr int64_t kChainIterations = 1 << 20;
void RunChainsOnEveryThread(benchmark::State& state, int64_t (*chains)(int64_t),
                            int64_t macs_per_iteration) {
  const int threads = ParallelismLevel();
  for (auto _ : state) {
    ParallelFor(threads, 1, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) benchmark::DoNotOptimize(chains(kChainIterations));
    });
  }
  state.counters["GOP/s"] = benchmark::Counter(
      2.0 * macs_per_iteration * kChainIterations * threads * state.iterations() * 1e-9,
      benchmark::Counter::kIsRate);
}

void BM_CpuMachineLimit_TdpbusdPeak(benchmark::State& state) {
#if defined(__GNUC__)
  if (!CpuRunsIsa(CpuIsa::kAmx)) {
    state.SkipWithError(CpuIsaNote().empty() ? "no AMX tiles on this CPU"
                                             : std::string(CpuIsaNote()).c_str());
    return;
  }
  RunChainsOnEveryThread(state, &TileChains, 4 * kAmxMaxRows * kAmxMaxRows * kAmxMaxRowBytes);
#else
  state.SkipWithError("built without the tile instructions");
#endif
}
BENCHMARK(BM_CpuMachineLimit_TdpbusdPeak)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_CpuMachineLimit_VpdpbusdPeak(benchmark::State& state) {
  if (!CpuRunsIsa(CpuIsa::kAvx512Vnni)) {
    state.SkipWithError("unsupported: no AVX-512 VNNI");
    return;
  }
  RunChainsOnEveryThread(state, &VnniChains, 24 * 64);
}
BENCHMARK(BM_CpuMachineLimit_VpdpbusdPeak)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_CpuMachineLimit_AvxVnniPeak(benchmark::State& state) {
  if (!CpuRunsIsa(CpuIsa::kAvxVnni)) {
    state.SkipWithError("unsupported: no AVX-VNNI");
    return;
  }
  RunChainsOnEveryThread(state, &AvxVnniChains, 12 * 32);
}
BENCHMARK(BM_CpuMachineLimit_AvxVnniPeak)->UseRealTime()->Unit(benchmark::kMillisecond);

// The AVX2 probes: skipped on a CPU without AVX2.
void RunAvx2ChainsOnEveryThread(benchmark::State& state, int64_t (*chains)(int64_t),
                                int64_t macs_per_iteration) {
  if (SupportedCpuIsa() < CpuIsa::kAvx2) {
    state.SkipWithError("unsupported: no AVX2");
    return;
  }
  RunChainsOnEveryThread(state, chains, macs_per_iteration);
}

void BM_CpuMachineLimit_Avx2ExactPeak(benchmark::State& state) {
  RunAvx2ChainsOnEveryThread(state, &Avx2ExactChains, 12 * 16);
}
BENCHMARK(BM_CpuMachineLimit_Avx2ExactPeak)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_CpuMachineLimit_Avx2ExactWideningPeak(benchmark::State& state) {
  RunAvx2ChainsOnEveryThread(state, &Avx2ExactWideningChains, 12 * 16);
}
BENCHMARK(BM_CpuMachineLimit_Avx2ExactWideningPeak)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_CpuMachineLimit_Avx2SaturatingPeak(benchmark::State& state) {
  RunAvx2ChainsOnEveryThread(state, &Avx2SaturatingChains, 12 * 32);
}
BENCHMARK(BM_CpuMachineLimit_Avx2SaturatingPeak)->UseRealTime()->Unit(benchmark::kMillisecond);

// Every pool thread reads its share of a buffer of state.range(0) MiB, again
// and again: 16 MiB stays in this machine's 32 MiB L3, 256 MiB comes from
// memory. GB/s of bytes read. With 64-byte loads at the avx512vnni level and
// 32-byte ones below it (the loads the selected kernels use; the label says
// which): a narrower load can reach less of L1 or L2, but the L3 and memory
// rates are the same.
void BM_CpuMachineLimit_ReadBandwidth(benchmark::State& state) {
  const CpuIsa isa = SelectedCpuIsa();
  if (isa < CpuIsa::kAvx2) {
    state.SkipWithError("unsupported: no AVX2");
    return;
  }
  int64_t (*const read_all)(const uint8_t*, size_t) =
      isa >= CpuIsa::kAvx512Vnni ? &ReadAll512 : &ReadAll256;
  state.SetLabel(isa >= CpuIsa::kAvx512Vnni ? "64-byte loads" : "32-byte loads");
  const size_t bytes = static_cast<size_t>(state.range(0)) << 20;
  const std::vector<uint8_t> buffer(bytes, 1);  // written once: every page present
  const int threads = ParallelismLevel();
  const size_t share = bytes / threads / 256 * 256;
  for (auto _ : state) {
    ParallelFor(threads, 1, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        benchmark::DoNotOptimize(read_all(buffer.data() + t * share, share));
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

// One thread, one micro-kernel call per iteration over `quads` quads of mr
// rows x max_strips strips (or `strips`), operands in L1: the kernel's own
// ceiling. With 512 quads (the driver's depth block) the operands come from
// L2 instead, as in a product; `lda` (bytes; default: the rows packed tight)
// places A's rows further apart, as a request's A read in place is (a 4 KiB
// stride puts every row in the same L1 sets).
void BM_CpuQGemmUkernel(benchmark::State& state, const QGemmUkernel* kernel, int strips = 0,
                        size_t quads = 64, size_t lda = 0) {
  if (kernel == nullptr || !CpuRunsIsa(kernel->isa)) {
    state.SkipWithError("unsupported on this CPU");
    return;
  }
  if (lda == 0) lda = quads * QGemmAQuadBytes(*kernel);  // int16 values for a wide-A kernel
  const size_t strip_stride = quads * kQGemmQuadBytes;
  std::vector<uint8_t> a(kernel->mr * lda, 7);
  std::vector<int8_t> b(kernel->max_strips * strip_stride, -3);
  if (strips == 0) strips = kernel->max_strips;
  const size_t ldc = strips * kQGemmStripColumns;
  std::vector<int32_t> c(kernel->mr * ldc);
  if (kernel->repack_b != nullptr) {  // B as the kernel reads it
    std::vector<int8_t> repacked(quads * kernel->repacked_quad_bytes);
    kernel->repack_b(b.data(), quads, repacked.data());
    b = std::move(repacked);
  }
  for (auto _ : state) {
    kernel->fn(quads, a.data(), lda, kernel->mr, b.data(), strip_stride, strips, c.data(), ldc,
               false);
    benchmark::DoNotOptimize(c.data());
  }
  if (kernel->release != nullptr) kernel->release();  // the amx kernel's tiles
  state.counters["GOP/s"] = benchmark::Counter(
      2.0 * kernel->mr * ldc * quads * 4 * state.iterations() * 1e-9, benchmark::Counter::kIsRate);
}
// The narrow path (one strip, B in quad groups: see qgemm_ukernel.h), same
// operands as the one-strip case.
void BM_CpuQGemmUkernelNarrow(benchmark::State& state, const QGemmUkernel* kernel) {
  if (kernel == nullptr || !CpuRunsIsa(kernel->isa) || kernel->narrow == nullptr) {
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
BENCHMARK_CAPTURE(BM_CpuQGemmUkernel, avx2_b7, Avx2SevenBitQGemmUkernel());
BENCHMARK_CAPTURE(BM_CpuQGemmUkernel, avx2_wide_b, Avx2WideBQGemmUkernel());
BENCHMARK_CAPTURE(BM_CpuQGemmUkernel, avxvnni, AvxVnniQGemmUkernel());
BENCHMARK_CAPTURE(BM_CpuQGemmUkernel, avx512vnni, Avx512VnniQGemmUkernel());
BENCHMARK_CAPTURE(BM_CpuQGemmUkernel, amx, AmxQGemmUkernel());
// One strip (N <= 16): a broadcast per multiply.
BENCHMARK_CAPTURE(BM_CpuQGemmUkernel, avx512vnni_one_strip, Avx512VnniQGemmUkernel(), 1);
// What bounds the tiles in a product (docs/benchmarks.md, "AMX on a lent
// Xeon"): the kernel from L1, from L2 (a 2048-deep call: 64 KiB of A, 64 KiB
// of B), from L2 with A's rows 4 KiB apart, each with and without the
// prefetching candidate. The vector kernel from L2 beside them.
BENCHMARK_CAPTURE(BM_CpuQGemmUkernel, amx_prefetch, AmxPrefetchQGemmUkernel());
BENCHMARK_CAPTURE(BM_CpuQGemmUkernel, amx_l2, AmxQGemmUkernel(), 0, 512);
BENCHMARK_CAPTURE(BM_CpuQGemmUkernel, amx_prefetch_l2, AmxPrefetchQGemmUkernel(), 0, 512);
BENCHMARK_CAPTURE(BM_CpuQGemmUkernel, amx_l2_lda4096, AmxQGemmUkernel(), 0, 512, 4096);
BENCHMARK_CAPTURE(BM_CpuQGemmUkernel, amx_prefetch_l2_lda4096, AmxPrefetchQGemmUkernel(), 0, 512,
                  4096);
BENCHMARK_CAPTURE(BM_CpuQGemmUkernel, avx512vnni_l2, Avx512VnniQGemmUkernel(), 0, 512);

}  // namespace
}  // namespace dmlserve::bench
