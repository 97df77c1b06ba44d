// The AVX2 packer of B (PackBPanelFn in packed_b.h): 4 rows x 32 columns
// per step. Only this file's functions carry the AVX2 target; they run only
// from the tables of levels the CPU runs (cpu_kernels.h).

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/isa_portability.h"
#include "kernels/cpu/packed_b.h"

#if DMLSERVE_X86
#include <immintrin.h>

DMLSERVE_ISA_BEGIN("avx2")

namespace dmlserve {
namespace {

constexpr size_t kPrefetchRows = kPackBPrefetchRows;

// 32 columns of row `row` of B' from `column`: zeros past the `valid`
// columns (AVX2 has no masked loads: a partial row goes through a zeroed
// copy, so nothing past B is read).
__m256i LoadBRowAvx2(const BSource& b, size_t row, size_t column, size_t valid, uint8_t flip) {
  const uint8_t* p = b.data + row * b.n + column;
  if (valid == 32) {
    return _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)),
                            _mm256_set1_epi8(static_cast<char>(flip)));
  }
  alignas(32) uint8_t copy[32] = {};
  for (size_t x = 0; x < valid; ++x) copy[x] = p[x] ^ flip;
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(copy));
}

// Four rows x 32 columns (two strips) per step: byte and word interleaves
// put each column's 4 depth values side by side within 128-bit lanes (lane L
// holds columns 16L..16L+15, i.e. strip L), and vperm2i128 joins each
// strip's halves. Column sums come from vpmaddubsw (ones x B') and vpmaddwd:
// a quad's 4 values summed exactly, as vpdpbusd would. Writes `count` (1 or
// 2) strips of quad `q`.
DMLSERVE_ALWAYS_INLINE void PackStepAvx2(__m256i row0, __m256i row1, __m256i row2, __m256i row3,
                                         size_t count, int8_t* quad, size_t strip_stride,
                                         int32_t* sums) {
  const __m256i low01 = _mm256_unpacklo_epi8(row0, row1);
  const __m256i high01 = _mm256_unpackhi_epi8(row0, row1);
  const __m256i low23 = _mm256_unpacklo_epi8(row2, row3);
  const __m256i high23 = _mm256_unpackhi_epi8(row2, row3);
  // t[c] holds, in lane L, columns 16L + 4c .. 16L + 4c + 3.
  const __m256i t0 = _mm256_unpacklo_epi16(low01, low23);
  const __m256i t1 = _mm256_unpackhi_epi16(low01, low23);
  const __m256i t2 = _mm256_unpacklo_epi16(high01, high23);
  const __m256i t3 = _mm256_unpackhi_epi16(high01, high23);
  // [strip][half]: columns 8 * half .. 8 * half + 7 of the strip.
  const __m256i strip_values[2][2] = {
      {_mm256_permute2x128_si256(t0, t1, 0x20), _mm256_permute2x128_si256(t2, t3, 0x20)},
      {_mm256_permute2x128_si256(t0, t1, 0x31), _mm256_permute2x128_si256(t2, t3, 0x31)}};
  const __m256i ones8 = _mm256_set1_epi8(1);
  const __m256i ones16 = _mm256_set1_epi16(1);
  for (size_t l = 0; l < count; ++l) {
    for (size_t half = 0; half < 2; ++half) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(quad + l * strip_stride + 32 * half),
                          strip_values[l][half]);
      __m256i* sum = reinterpret_cast<__m256i*>(sums + l * kQGemmStripColumns + 8 * half);
      const __m256i quad_sums =
          _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, strip_values[l][half]), ones16);
      _mm256_storeu_si256(sum, _mm256_add_epi32(_mm256_loadu_si256(sum), quad_sums));
    }
  }
}

// Whole steps (4 rows of B, 32 columns inside N) load straight from B; the
// rest (the last rows and columns) through LoadBRowAvx2's zeroed copies.
void PackPanel(const BSource& b, size_t quad0, size_t quads, size_t strip0, size_t strips,
               int8_t* out, size_t strip_stride, int32_t* column_sums) {
  const uint8_t flip = FlipOf(b);
  const __m256i flip_all = _mm256_set1_epi8(static_cast<char>(flip));
  // Steps from strip0 whose 32 columns all lie inside N.
  const size_t first_column = strip0 * kQGemmStripColumns;
  const size_t whole_steps =
      b.n > first_column ? std::min((b.n - first_column) / 32, strips / 2) : 0;
  for (size_t q = 0; q < quads; ++q) {
    const size_t k = 4 * (quad0 + q);
    const size_t valid_rows = k < b.k ? std::min<size_t>(4, b.k - k) : 0;
    const bool prefetch = k + kPrefetchRows + 4 <= b.k;
    int8_t* quad = out + q * kQGemmQuadBytes;
    size_t s = 0;
    if (valid_rows == 4) {
      const uint8_t* row = b.data + k * b.n + first_column;
      for (size_t step = 0; step < whole_steps; ++step, s += 2) {
        const uint8_t* p = row + 32 * step;
        if (prefetch) {
          for (size_t r = 0; r < 4; ++r) {
            _mm_prefetch(reinterpret_cast<const char*>(p + (kPrefetchRows + r) * b.n), _MM_HINT_T0);
          }
        }
        auto load = [&](size_t r) {
          return _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + r * b.n)),
                                  flip_all);
        };
        PackStepAvx2(load(0), load(1), load(2), load(3), 2, quad + s * strip_stride, strip_stride,
                     column_sums + s * kQGemmStripColumns);
      }
    }
    for (; s < strips; s += 2) {
      const size_t column = (strip0 + s) * kQGemmStripColumns;
      const size_t valid_columns = column < b.n ? std::min<size_t>(32, b.n - column) : 0;
      __m256i rows[4];
      for (size_t r = 0; r < 4; ++r) {
        rows[r] = r < valid_rows ? LoadBRowAvx2(b, k + r, column, valid_columns, flip)
                                 : _mm256_setzero_si256();
      }
      PackStepAvx2(rows[0], rows[1], rows[2], rows[3], std::min<size_t>(2, strips - s),
                   quad + s * strip_stride, strip_stride, column_sums + s * kQGemmStripColumns);
    }
  }
}

}  // namespace

void PackBPanelAvx2(const BPanel& p) {
  PackPanel(p.b, p.quad0, p.quads, p.strip0, p.strips, p.out, p.strip_stride, p.column_sums);
}

}  // namespace dmlserve

DMLSERVE_ISA_END
#endif  // DMLSERVE_X86
