// Exact AVX2 micro-kernel for CPUs without VNNI (Haswell to Ice Lake client,
// Zen 1 to 4 without AVX-512).
//
// Why not vpmaddubsw: it multiplies u8 x s8 directly but saturates its int16
// pair sums (255 * -128 * 2 = -65280 < -32768), so it is wrong on ordinary
// int8 weights. Its exact sibling is vpmaddwd: int16 x int16 pairs summed
// into int32, where |product pair| <= 2 * 255 * 128 = 65280 cannot overflow.
// Both operands must then be int16:
//  - A' is widened once, when packed (a "wide A": 8 bytes per quad, see
//    qgemm_ukernel.h), so a row's quad is one vpbroadcastq from memory, a
//    load with no shuffle;
//  - B stays in the shared int8 layout (a registered B is packed once for
//    every ISA) and is widened here with vpmovsxbw, one load-plus-shuffle per
//    4 columns, shared by all 6 rows.
// The binding limit is then the exact step itself (vpmaddwd + vpaddd, 16
// multiply-adds per pair: see BM_CpuMachineLimit_Avx2ExactPeak); per quad the
// kernel issues 12 such pairs, 2 vpmovsxbw and 6 broadcasts.
//
// Blocking: 6 rows x 8 columns (half a strip) at a time, the strip's halves
// one after the other over all quads. A widened quad of 4 columns leaves 2
// partial sums per column in a ymm (folded with vphaddd once, at the end), so
// 8 columns of 6 rows take 12 accumulators; with 2 widened B vectors and the
// broadcast A quad that is 15 of the 16 ymm registers. (A whole strip would
// need 24 accumulators.) The second half re-reads the rows' A, from L1/L2.
// One or two rows (a GEMV) take the whole strip in one pass instead.
//
// Where B's values fit 7 bits, vpmaddubsw cannot saturate and the faster
// qgemm_ukernel_avx2_b7.cc runs instead (seven_bit_b below); products of one
// strip (N <= 16) take OneStripKernel below, which reads A as bytes and B
// widened; and
// products of many rows qgemm_ukernel_avx2_wide_b.cc, which repacks B.

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/core/check.h"
#include "kernels/cpu/isa_portability.h"
#include "kernels/cpu/qgemm_ukernel.h"

#if DMLSERVE_X86
#include <immintrin.h>

DMLSERVE_ISA_BEGIN("avx2")

namespace dmlserve {
namespace {

constexpr int kMr = 6;
// With few rows B's bytes bound the time, and a registered B comes from L3 or
// memory a cache line per quad: ask for lines this far ahead (a hint), into
// L1, and (for the half-strip passes, whose first pass over a strip is the
// one that misses, and for the whole-strip pass of a GEMV, which misses on
// every line) much further ahead into L2, so that memory reads overlap
// the multiplies: 6 rows spend about 8 cycles on a line, 16 lines ahead is
// shorter than a trip to memory. 128 measured best of 16/48/96/128/256 on
// 7x4096x11008 (B 45 MB: 1.35x over the near hint alone) and 16x4096x4096;
// on the 1 x 4096 x 4096 GEMV the far hint took the median of 10 interleaved
// rounds from 107 to 125 GOP/s (256 lines read no better).
constexpr size_t kPrefetchQuads = 16;
constexpr size_t kFarPrefetchQuads = 128;

// Columns 0..7 of `b` (a strip pointer offset to the half) for kRows rows of
// wide A, into c[i * ldc + 0..7].
template <int kRows>
DMLSERVE_ALWAYS_INLINE void HalfStrip(size_t quads, const uint8_t* a, size_t lda, const int8_t* b,
                                      int32_t* c, size_t ldc, bool accumulate) {
  // acc[2 * i + h]: columns 4h..4h+3 of row i, two partial sums per column.
  // Flat and indexed by constants once unrolled, so it lives in registers.
  __m256i acc[2 * kRows];
#pragma GCC unroll 12
  for (int x = 0; x < 2 * kRows; ++x) acc[x] = _mm256_setzero_si256();
  for (size_t q = 0; q < quads; ++q) {
    const int8_t* quad = b + q * kQGemmQuadBytes;
    _mm_prefetch(reinterpret_cast<const char*>(quad + kPrefetchQuads * kQGemmQuadBytes),
                 _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(quad + kFarPrefetchQuads * kQGemmQuadBytes),
                 _MM_HINT_T1);
    const __m256i low =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(quad)));
    const __m256i high =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(quad + 16)));
#pragma GCC unroll 6
    for (int i = 0; i < kRows; ++i) {
      int64_t value;  // 4 int16 of A'
      std::memcpy(&value, a + i * lda + q * 8, 8);
      const __m256i row = _mm256_set1_epi64x(value);
      acc[2 * i] = _mm256_add_epi32(acc[2 * i], _mm256_madd_epi16(row, low));
      acc[2 * i + 1] = _mm256_add_epi32(acc[2 * i + 1], _mm256_madd_epi16(row, high));
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < kRows; ++i) {
    // [c0 c1 c4 c5 | c2 c3 c6 c7], then into column order.
    const __m256i pairs = _mm256_hadd_epi32(acc[2 * i], acc[2 * i + 1]);
    __m256i value = _mm256_permute4x64_epi64(pairs, _MM_SHUFFLE(3, 1, 2, 0));
    __m256i* out = reinterpret_cast<__m256i*>(c + i * ldc);
    if (accumulate) value = _mm256_add_epi32(value, _mm256_loadu_si256(out));
    _mm256_storeu_si256(out, value);
  }
}

// Folds acc[4 * i + g] (columns 4g..4g+3 of row i, two partial sums each)
// into c[i * ldc + 0..15].
template <int kRows>
DMLSERVE_ALWAYS_INLINE void StoreWholeStrip(const __m256i* acc, int32_t* c, size_t ldc,
                                            bool accumulate) {
#pragma GCC unroll 3
  for (int i = 0; i < kRows; ++i) {
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i pairs = _mm256_hadd_epi32(acc[4 * i + 2 * h], acc[4 * i + 2 * h + 1]);
      __m256i value = _mm256_permute4x64_epi64(pairs, _MM_SHUFFLE(3, 1, 2, 0));
      __m256i* out = reinterpret_cast<__m256i*>(c + i * ldc + 8 * h);
      if (accumulate) value = _mm256_add_epi32(value, _mm256_loadu_si256(out));
      _mm256_storeu_si256(out, value);
    }
  }
}

// The whole strip in one pass, for 1 or 2 rows (16 accumulators would not
// fit beyond that). With so few rows B's bytes bound the time, and two
// half-strip passes would each touch every cache line of the strip: from
// memory for a GEMV, twice the traffic.
template <int kRows>
DMLSERVE_ALWAYS_INLINE void WholeStrip(size_t quads, const uint8_t* a, size_t lda, const int8_t* b,
                                       int32_t* c, size_t ldc, bool accumulate) {
  static_assert(kRows <= 2, "4 accumulators per row");
  __m256i acc[4 * kRows];
#pragma GCC unroll 8
  for (int x = 0; x < 4 * kRows; ++x) acc[x] = _mm256_setzero_si256();
  for (size_t q = 0; q < quads; ++q) {
    const int8_t* quad = b + q * kQGemmQuadBytes;
    _mm_prefetch(reinterpret_cast<const char*>(quad + kPrefetchQuads * kQGemmQuadBytes),
                 _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(quad + kFarPrefetchQuads * kQGemmQuadBytes),
                 _MM_HINT_T1);
    __m256i columns[4];
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
      columns[g] =
          _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(quad + 16 * g)));
    }
#pragma GCC unroll 2
    for (int i = 0; i < kRows; ++i) {
      int64_t value;
      std::memcpy(&value, a + i * lda + q * 8, 8);
      const __m256i row = _mm256_set1_epi64x(value);
#pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) {
        acc[4 * i + g] = _mm256_add_epi32(acc[4 * i + g], _mm256_madd_epi16(row, columns[g]));
      }
    }
  }
  StoreWholeStrip<kRows>(acc, c, ldc, accumulate);
}

template <int kRows>
void Kernel(size_t quads, const uint8_t* a, size_t lda, const int8_t* b, int32_t* c, size_t ldc,
            bool accumulate) {
  if constexpr (kRows <= 2) {
    WholeStrip<kRows>(quads, a, lda, b, c, ldc, accumulate);
  } else {
    HalfStrip<kRows>(quads, a, lda, b, c, ldc, accumulate);
    HalfStrip<kRows>(quads, a, lda, b + 32, c + 8, ldc, accumulate);
  }
}

// The one-strip kernel (N <= 16). A, the large operand here, is read as
// bytes, in place: widening it to int16 first (a copy twice A's size) costs
// more than the multiplies when each A value meets only 16 columns. B, one
// strip of K x 16 bytes, is widened instead, once per task and depth block
// (WidenStrip, the kernel's repack_b): 4 vectors of 4 columns x 4 depth
// values per quad, which vpmaddwd reads straight from L1/L2 as memory
// operands, so no register holds B. That leaves room for 3 rows x 16
// columns: 12 accumulators, the row's quad and a zero. Per quad and row the
// quad is one vpbroadcastd (a load) and one vpunpcklbw against zero (the 4
// bytes as int16, repeated), shared by 4 vpmaddwd + 4 vpaddd: 9 operations
// for the exact step's 8. (The kernel it replaced widened B in the loop, 2
// rows at a time: 24 operations for 16, 50% of the step.)
constexpr int kOneStripRows = 3;
constexpr size_t kWideQuadBytes = 2 * kQGemmQuadBytes;  // a quad of int16

// `quads` quads of one strip (int8 layout) to int16, in the same order.
void WidenStrip(const int8_t* strip, size_t quads, int8_t* out) {
  for (size_t q = 0; q < quads; ++q) {
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + q * kWideQuadBytes + 32 * g),
                          _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(
                              strip + q * kQGemmQuadBytes + 16 * g))));
    }
  }
}

template <int kRows>
void OneStripKernel(size_t quads, const uint8_t* a, size_t lda, const int8_t* b, int32_t* c,
                    size_t ldc, bool accumulate) {
  // acc[4 * i + g]: columns 4g..4g+3 of row i, two partial sums per column.
  __m256i acc[4 * kRows];
#pragma GCC unroll 12
  for (int x = 0; x < 4 * kRows; ++x) acc[x] = _mm256_setzero_si256();
  const __m256i zero = _mm256_setzero_si256();
  for (size_t q = 0; q < quads; ++q) {
    const int8_t* quad = b + q * kWideQuadBytes;
#pragma GCC unroll 3
    for (int i = 0; i < kRows; ++i) {
      int32_t value;  // 4 bytes of A'
      std::memcpy(&value, a + i * lda + q * 4, 4);
      // [a0 a1 a2 a3] as int16 in every 64 bits: the quad's depth order.
      const __m256i row = _mm256_unpacklo_epi8(_mm256_set1_epi32(value), zero);
#pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) {
        acc[4 * i + g] = _mm256_add_epi32(
            acc[4 * i + g],
            _mm256_madd_epi16(row,
                              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(quad + 32 * g))));
      }
    }
  }
  StoreWholeStrip<kRows>(acc, c, ldc, accumulate);
}

void Avx2OneStripKernel(size_t quads, const uint8_t* a, size_t lda, int rows, const int8_t* b,
                        size_t /*b_strip_stride*/, int strips, int32_t* c, size_t ldc,
                        bool accumulate) {
  DMLSERVE_DCHECK(1 <= rows && rows <= kOneStripRows);
  DMLSERVE_DCHECK(strips == 1);
  ForRowCount<kOneStripRows>(
      rows, [&](auto r) { OneStripKernel<r()>(quads, a, lda, b, c, ldc, accumulate); });
}

void Avx2Kernel(size_t quads, const uint8_t* a, size_t lda, int rows, const int8_t* b,
                size_t /*b_strip_stride*/, int strips, int32_t* c, size_t ldc, bool accumulate) {
  DMLSERVE_DCHECK(1 <= rows && rows <= kMr);
  DMLSERVE_DCHECK(strips == 1);
  ForRowCount<kMr>(rows, [&](auto r) { Kernel<r()>(quads, a, lda, b, c, ldc, accumulate); });
}

}  // namespace
}  // namespace dmlserve

DMLSERVE_ISA_END

namespace dmlserve {

const QGemmUkernel* Avx2QGemmUkernel() {
  static const QGemmUkernel one_strip = [] {
    QGemmUkernel k = {"avx2_one_strip", CpuIsa::kAvx2, kOneStripRows, 1, &Avx2OneStripKernel};
    k.repack_b = &WidenStrip;
    k.repacked_quad_bytes = kWideQuadBytes;
    return k;
  }();
  static const QGemmUkernel kernel = [] {
    QGemmUkernel k = {"avx2", CpuIsa::kAvx2, kMr, 1, &Avx2Kernel};
    k.wide_a = true;
    k.seven_bit_b = Avx2SevenBitQGemmUkernel();
    k.one_strip = &one_strip;
    k.many_rows = Avx2WideBQGemmUkernel();
    return k;
  }();
  return &kernel;
}

}  // namespace dmlserve

#else  // !DMLSERVE_X86

namespace dmlserve {
const QGemmUkernel* Avx2QGemmUkernel() { return nullptr; }
}  // namespace dmlserve

#endif  // DMLSERVE_X86
