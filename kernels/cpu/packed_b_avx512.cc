// The AVX-512 packer of B (PackBPanelFn in packed_b.h): 4 rows x 64
// columns per step. Only this file's functions carry the AVX-512 target; they
// run only from the avx512vnni level's table (cpu_kernels.h).

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/isa_portability.h"
#include "kernels/cpu/packed_b.h"

#if DMLSERVE_X86
#include <immintrin.h>

DMLSERVE_ISA_BEGIN("avx512f,avx512bw,avx512vl,avx512vnni")
DMLSERVE_IGNORE_UNINITIALIZED_BEGIN

namespace dmlserve {
namespace {

constexpr size_t kPrefetchRows = kPackBPrefetchRows;

// Four rows x 64 columns per step: byte and word interleaves put each
// column's 4 depth values side by side within 128-bit lanes, and a 4x4
// transpose of 128-bit lanes gathers each strip's 16 columns into one zmm.
// Masked loads zero the columns past N, so edges need no scalar path.

void PackPanel(const BSource& b, size_t quad0, size_t quads, size_t strip0, size_t strips,
               int8_t* out, size_t strip_stride, int32_t* column_sums) {
  const __m512i ones = _mm512_set1_epi8(1);
  const __m512i flip_all = _mm512_set1_epi8(static_cast<char>(FlipOf(b)));
  for (size_t q = 0; q < quads; ++q) {
    const size_t k = 4 * (quad0 + q);
    const size_t valid_rows = k < b.k ? std::min<size_t>(4, b.k - k) : 0;
    for (size_t s = 0; s < strips; s += 4) {
      const size_t column = (strip0 + s) * kQGemmStripColumns;
      const size_t valid_columns = column < b.n ? std::min<size_t>(64, b.n - column) : 0;
      const __mmask64 mask =
          valid_columns == 64 ? ~__mmask64{0} : ((__mmask64{1} << valid_columns) - 1);
      const __m512i flip = _mm512_maskz_mov_epi8(mask, flip_all);
      if (k + kPrefetchRows < b.k && valid_columns > 0) {
        for (size_t r = 0; r < 4; ++r) {
          _mm_prefetch(
              reinterpret_cast<const char*>(b.data + (k + kPrefetchRows + r) * b.n + column),
              _MM_HINT_T0);
        }
      }
      __m512i rows[4];
      for (size_t r = 0; r < 4; ++r) {
        rows[r] = r < valid_rows
                      ? _mm512_xor_si512(
                            _mm512_maskz_loadu_epi8(mask, b.data + (k + r) * b.n + column), flip)
                      : _mm512_setzero_si512();
      }
      const __m512i low01 = _mm512_unpacklo_epi8(rows[0], rows[1]);
      const __m512i high01 = _mm512_unpackhi_epi8(rows[0], rows[1]);
      const __m512i low23 = _mm512_unpacklo_epi8(rows[2], rows[3]);
      const __m512i high23 = _mm512_unpackhi_epi8(rows[2], rows[3]);
      // t[c] holds, in lane L, columns 16L + 4c .. 16L + 4c + 3.
      const __m512i t0 = _mm512_unpacklo_epi16(low01, low23);
      const __m512i t1 = _mm512_unpackhi_epi16(low01, low23);
      const __m512i t2 = _mm512_unpacklo_epi16(high01, high23);
      const __m512i t3 = _mm512_unpackhi_epi16(high01, high23);
      const __m512i u0 = _mm512_shuffle_i32x4(t0, t1, _MM_SHUFFLE(1, 0, 1, 0));
      const __m512i u1 = _mm512_shuffle_i32x4(t2, t3, _MM_SHUFFLE(1, 0, 1, 0));
      const __m512i u2 = _mm512_shuffle_i32x4(t0, t1, _MM_SHUFFLE(3, 2, 3, 2));
      const __m512i u3 = _mm512_shuffle_i32x4(t2, t3, _MM_SHUFFLE(3, 2, 3, 2));
      const __m512i strip_values[4] = {_mm512_shuffle_i32x4(u0, u1, _MM_SHUFFLE(2, 0, 2, 0)),
                                       _mm512_shuffle_i32x4(u0, u1, _MM_SHUFFLE(3, 1, 3, 1)),
                                       _mm512_shuffle_i32x4(u2, u3, _MM_SHUFFLE(2, 0, 2, 0)),
                                       _mm512_shuffle_i32x4(u2, u3, _MM_SHUFFLE(3, 1, 3, 1))};
      const size_t count = std::min<size_t>(4, strips - s);
      for (size_t l = 0; l < count; ++l) {
        _mm512_storeu_si512(out + (s + l) * strip_stride + q * kQGemmQuadBytes, strip_values[l]);
        int32_t* sums = column_sums + (s + l) * kQGemmStripColumns;
        _mm512_storeu_si512(sums,
                            _mm512_dpbusd_epi32(_mm512_loadu_si512(sums), ones, strip_values[l]));
      }
    }
  }
}

}  // namespace

void PackBPanelAvx512(const BPanel& p) {
  PackPanel(p.b, p.quad0, p.quads, p.strip0, p.strips, p.out, p.strip_stride, p.column_sums);
}

}  // namespace dmlserve

DMLSERVE_IGNORE_UNINITIALIZED_END
DMLSERVE_ISA_END
#endif  // DMLSERVE_X86
