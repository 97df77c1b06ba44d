// Exact AVX2 micro-kernel on B repacked to int16 pairs, for tasks with many
// rows: Avx2QGemmUkernel()->many_rows (see qgemm_ukernel_avx2.cc for why
// AVX2 multiplies int16 with vpmaddwd, and for the kernel used otherwise).
//
// The shared int8 layout holds a column's 4 depth values of a quad side by
// side, so vpmaddwd on it (after vpmovsxbw) leaves 2 partial sums per column
// and costs a widening shuffle per 4 columns. Repacking one strip of B (one
// depth block, 32 KiB) per task into pairs instead, i.e. for each quad q and
// pair p (depth 4q + 2p, 4q + 2p + 1) 16 columns x 2 int16 (64 bytes, two
// ymm of 8 columns), takes the shuffles out of the loop: one vpbroadcastd of
// a row's int16 pair (a load) and two vpmaddwd give 16 columns' int32 sums
// directly. Per quad, 6 rows x 16 columns issue 24 vpmaddwd + 24 vpaddd, 4 B
// loads and 12 broadcasts, nothing else: the exact step's own mix. The
// repacking (a few instructions per 16 bytes) is paid once per strip and
// depth block and shared by every row of the task, which is why this kernel
// is for many rows only.
//
// Blocking: 6 rows x 1 strip. 12 accumulators, 2 B vectors, the broadcast
// pair and a product fill the 16 ymm registers.

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/core/check.h"
#include "kernels/cpu/isa_portability.h"
#include "kernels/cpu/packed_b.h"
#include "kernels/cpu/qgemm_ukernel.h"

#if DMLSERVE_X86
#include <immintrin.h>

DMLSERVE_ISA_BEGIN("avx2")

namespace dmlserve {
namespace {

constexpr int kMr = 6;
constexpr size_t kPairQuadBytes = 2 * kQGemmQuadBytes;  // a quad as int16 pairs
constexpr size_t kRepackPrefetchQuads = 16;
// A B repacked once for the whole product (a registered B, or one packed per
// request for many rows; see PackB) comes from memory on a task's first row
// block, a cache line per pair, 6 rows spending about 6 cycles on it: ask for
// the line this many pairs (8 KiB) ahead, into L2 (a hint; past the strip it
// is harmless). On 16 x 4096 x 4096 the hint took 305-322 to 328-334 GOP/s;
// 4, 6, 16 and 32 KiB ahead did less. B repacked per task is in L2 already,
// where the hint costs nothing measurable (the micro-kernel bench).
constexpr size_t kPrefetchPairs = 128;

// `quads` quads of one strip (int8 layout) into int16 pairs.
void RepackStrip(const int8_t* strip, size_t quads, int8_t* out) {
  // Within each 128-bit lane (4 columns x 4 depth values): the pairs (d0,
  // d1) of the 4 columns, then the pairs (d2, d3).
  const __m256i gather = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15, 0,
                                          1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
  for (size_t q = 0; q < quads; ++q) {
    const int8_t* quad = strip + q * kQGemmQuadBytes;
    int8_t* pairs = out + q * kPairQuadBytes;
    // The strip usually comes from L3 or memory (the task's first touch of
    // it), a line per quad, with nothing else to overlap the misses with:
    // ask for lines well ahead (a hint; past the strip it is harmless).
    _mm_prefetch(reinterpret_cast<const char*>(quad + kRepackPrefetchQuads * kQGemmQuadBytes),
                 _MM_HINT_T0);
    for (int h = 0; h < 2; ++h) {  // columns 8h..8h+7
      const __m256i bytes = _mm256_shuffle_epi8(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(quad + 32 * h)), gather);
      // [pair 0 of columns 0-3, 4-7 | pair 1 of columns 0-3, 4-7]
      const __m256i ordered = _mm256_permute4x64_epi64(bytes, _MM_SHUFFLE(3, 1, 2, 0));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(pairs + 32 * h),
                          _mm256_cvtepi8_epi16(_mm256_castsi256_si128(ordered)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(pairs + kQGemmQuadBytes + 32 * h),
                          _mm256_cvtepi8_epi16(_mm256_extracti128_si256(ordered, 1)));
    }
  }
}

// QGemmPackRepackedFn for this layout. Two rows of B (a pair of depths) x
// 32 columns per step: vpunpck{l,h}bw put each column's two bytes side by
// side (lane L: columns 16L..16L+7, 16L+8..16L+15), and vpmovsxbw of each
// 128-bit half is then 8 columns' (d, d + 1) int16 pairs, the layout
// itself; vpmaddwd by ones sums each pair for the column sums.
void PackRepacked(const uint8_t* b, size_t ldb, uint8_t flip, size_t quads, size_t strips,
                  int8_t* out, size_t out_strip_stride, int32_t* column_sums, bool stream) {
  DMLSERVE_DCHECK(strips % 2 == 0);
  const __m256i flip_all = _mm256_set1_epi8(static_cast<char>(flip));
  const __m256i ones = _mm256_set1_epi16(1);
  auto store = [stream](int8_t* to, __m256i value) {
    if (stream) {
      _mm256_stream_si256(reinterpret_cast<__m256i*>(to), value);
    } else {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(to), value);
    }
  };
  for (size_t q = 0; q < quads; ++q) {
    for (size_t s = 0; s < strips; s += 2) {
      const uint8_t* column = b + 4 * q * ldb + s * kQGemmStripColumns;
      // The rows of one step are ldb bytes apart, a pattern the hardware
      // prefetchers follow too late (as in the strip packers; a hint, past
      // B's last row it is harmless).
      for (size_t r = 0; r < 4; ++r) {
        _mm_prefetch(reinterpret_cast<const char*>(column + (kPackBPrefetchRows + r) * ldb),
                     _MM_HINT_T0);
      }
      // sums[v]: columns 8v..8v+7 of the 32.
      __m256i sums[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
                         _mm256_setzero_si256()};
      for (size_t pair = 0; pair < 2; ++pair) {
        auto row = [&](size_t r) {
          return _mm256_xor_si256(
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(column + (2 * pair + r) * ldb)),
              flip_all);
        };
        const __m256i r0 = row(0), r1 = row(1);
        const __m256i low = _mm256_unpacklo_epi8(r0, r1);
        const __m256i high = _mm256_unpackhi_epi8(r0, r1);
        const __m256i values[4] = {_mm256_cvtepi8_epi16(_mm256_castsi256_si128(low)),
                                   _mm256_cvtepi8_epi16(_mm256_castsi256_si128(high)),
                                   _mm256_cvtepi8_epi16(_mm256_extracti128_si256(low, 1)),
                                   _mm256_cvtepi8_epi16(_mm256_extracti128_si256(high, 1))};
        for (size_t v = 0; v < 4; ++v) {
          store(out + (s + v / 2) * out_strip_stride + q * kPairQuadBytes + pair * kQGemmQuadBytes +
                    32 * (v % 2),
                values[v]);
          sums[v] = _mm256_add_epi32(sums[v], _mm256_madd_epi16(values[v], ones));
        }
      }
      for (size_t v = 0; v < 4; ++v) {
        __m256i* sum = reinterpret_cast<__m256i*>(column_sums + s * kQGemmStripColumns + 8 * v);
        _mm256_storeu_si256(sum, _mm256_add_epi32(_mm256_loadu_si256(sum), sums[v]));
      }
    }
  }
}

template <int kRows>
void Kernel(size_t quads, const uint8_t* a, size_t lda, const int8_t* b, int32_t* c, size_t ldc,
            bool accumulate) {
  // acc[2 * i + h]: columns 8h..8h+7 of row i. Flat and indexed by
  // constants once unrolled, so it lives in registers.
  __m256i acc[2 * kRows];
#pragma GCC unroll 12
  for (int x = 0; x < 2 * kRows; ++x) acc[x] = _mm256_setzero_si256();
  // One step per pair (two per quad): the pairs of B follow one another, 64
  // bytes each, and so do a row's int16 pairs of A, 4 bytes each.
  for (size_t t = 0; t < 2 * quads; ++t) {
    const int8_t* pair = b + t * kQGemmQuadBytes;
    _mm_prefetch(reinterpret_cast<const char*>(pair + kPrefetchPairs * kQGemmQuadBytes),
                 _MM_HINT_T1);
    const __m256i low = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pair));
    const __m256i high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pair + 32));
#pragma GCC unroll 6
    for (int i = 0; i < kRows; ++i) {
      int32_t value;  // 2 int16 of A'
      std::memcpy(&value, a + i * lda + t * 4, 4);
      const __m256i row = _mm256_set1_epi32(value);
      acc[2 * i] = _mm256_add_epi32(acc[2 * i], _mm256_madd_epi16(row, low));
      acc[2 * i + 1] = _mm256_add_epi32(acc[2 * i + 1], _mm256_madd_epi16(row, high));
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < kRows; ++i) {
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      __m256i* out = reinterpret_cast<__m256i*>(c + i * ldc + 8 * h);
      __m256i value = acc[2 * i + h];
      if (accumulate) value = _mm256_add_epi32(value, _mm256_loadu_si256(out));
      _mm256_storeu_si256(out, value);
    }
  }
}

void Avx2WideBKernel(size_t quads, const uint8_t* a, size_t lda, int rows, const int8_t* b,
                     size_t /*b_strip_stride*/, int strips, int32_t* c, size_t ldc,
                     bool accumulate) {
  DMLSERVE_DCHECK(1 <= rows && rows <= kMr);
  DMLSERVE_DCHECK(strips == 1);
  ForRowCount<kMr>(rows, [&](auto r) { Kernel<r()>(quads, a, lda, b, c, ldc, accumulate); });
}

}  // namespace
}  // namespace dmlserve

DMLSERVE_ISA_END

namespace dmlserve {

const QGemmUkernel* Avx2WideBQGemmUkernel() {
  static const QGemmUkernel kernel = [] {
    QGemmUkernel k = {"avx2_wide_b", CpuIsa::kAvx2, kMr, 1, &Avx2WideBKernel};
    k.wide_a = true;
    k.repack_b = &RepackStrip;
    k.repacked_quad_bytes = kPairQuadBytes;
    k.pack_repacked_b = &PackRepacked;
    return k;
  }();
  return &kernel;
}

}  // namespace dmlserve

#else  // !DMLSERVE_X86

namespace dmlserve {
const QGemmUkernel* Avx2WideBQGemmUkernel() { return nullptr; }
}  // namespace dmlserve

#endif  // DMLSERVE_X86
