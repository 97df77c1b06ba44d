// The AVX-512 requantization epilogue (ComputeMultipliersFn,
// RequantizeRowFn in requantize.h): 8 (multipliers) and 16 (columns) float64
// lanes per step. Only this file's functions carry the AVX-512 target; they
// run only from the avx512vnni level's table (cpu_kernels.h). Built with
// -ffp-contract=off like requantize.cc: a fused multiply-add would round
// differently from the reference.

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/isa_portability.h"
#include "kernels/cpu/requantize.h"

#if DMLSERVE_X86
#include <immintrin.h>

DMLSERVE_ISA_BEGIN("avx512f,avx512bw,avx512vl,avx512dq")
DMLSERVE_IGNORE_UNINITIALIZED_BEGIN

namespace dmlserve {
namespace {

// Eight float64 lanes of the portable loop's arithmetic. The product is the
// same IEEE operation, so the same bits. The portable loop then clamps to
// one step beyond the output range, rounds, adds the zero point and clamps to
// the range; clamping to exactly the range (less the zero point) before
// rounding gives the same integer (rounding is monotonic and the bounds are
// integers) without the integer clamp, and converting with
// round-to-nearest-even is the portable loop's rounding trick in one
// instruction.
inline __m256i Requantize8(__m256i acc, __m512d multiplier, __m512d low, __m512d high) {
  __m512d value = _mm512_mul_pd(_mm512_cvtepi32_pd(acc), multiplier);
  value = _mm512_min_pd(_mm512_max_pd(value, low), high);
  return _mm512_cvt_roundpd_epi32(value, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

// 16 columns from j; `mask` selects the columns that exist (all but at the
// end of a row).
inline void Requantize16(const int32_t* dots, __m512i row_term, const int32_t* column_offsets,
                         const double* multipliers, __m512d low, __m512d high,
                         __m512i output_zero_point, __mmask16 mask, uint8_t* out) {
  const __m512i acc =
      _mm512_sub_epi32(_mm512_sub_epi32(_mm512_maskz_loadu_epi32(mask, dots), row_term),
                       _mm512_maskz_loadu_epi32(mask, column_offsets));
  const __m256i first =
      Requantize8(_mm512_castsi512_si256(acc),
                  _mm512_maskz_loadu_pd(static_cast<__mmask8>(mask), multipliers), low, high);
  const __m256i second = Requantize8(
      _mm512_extracti64x4_epi64(acc, 1),
      _mm512_maskz_loadu_pd(static_cast<__mmask8>(mask >> 8), multipliers + 8), low, high);
  const __m512i result = _mm512_add_epi32(
      _mm512_inserti64x4(_mm512_castsi256_si512(first), second, 1), output_zero_point);
  // Narrow in a register, then store: the narrowing store (vpmovdb to
  // memory) is microcoded and several times slower on Zen 4. The empty asm
  // keeps the compiler from fusing the two back into it.
  __m128i bytes = _mm512_cvtepi32_epi8(result);
  __asm__("" : "+v"(bytes));
  if (mask == 0xffff) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), bytes);
  } else {
    _mm_mask_storeu_epi8(out, mask, bytes);
  }
}

}  // namespace

void ComputeMultipliersAvx512(float a_scale, float output_scale, const float* column_scales,
                              size_t count, double* multipliers) {
  const __m512d a = _mm512_set1_pd(a_scale);
  const __m512d o = _mm512_set1_pd(output_scale);
  for (size_t j = 0; j < count; j += 8) {
    const __mmask8 mask = count - j >= 8 ? 0xff : static_cast<__mmask8>((1u << (count - j)) - 1);
    const __m512d scale = _mm512_cvtps_pd(_mm256_maskz_loadu_ps(mask, column_scales + j));
    _mm512_mask_storeu_pd(multipliers + j, mask, _mm512_div_pd(_mm512_mul_pd(a, scale), o));
  }
}

void RequantizeRowAvx512(const int32_t* dots, int32_t row_offset, const int32_t* column_offsets,
                         const double* multipliers, const RowRequantization& row, size_t count,
                         uint8_t* out) {
  const __m512d low = _mm512_set1_pd(static_cast<double>(row.low - row.output_zero_point));
  const __m512d high = _mm512_set1_pd(static_cast<double>(row.high - row.output_zero_point));
  const __m512i row_term = _mm512_set1_epi32(row_offset);
  const __m512i output_zero_point = _mm512_set1_epi32(row.output_zero_point);
  size_t j = 0;
  // Whole vectors with a constant mask (the compiler drops the masking),
  // then the row's tail.
  for (; j + 16 <= count; j += 16) {
    Requantize16(dots + j, row_term, column_offsets + j, multipliers + j, low, high,
                 output_zero_point, 0xffff, out + j);
  }
  if (j < count) {
    Requantize16(dots + j, row_term, column_offsets + j, multipliers + j, low, high,
                 output_zero_point, static_cast<__mmask16>((1u << (count - j)) - 1), out + j);
  }
}

}  // namespace dmlserve

DMLSERVE_IGNORE_UNINITIALIZED_END
DMLSERVE_ISA_END
#endif  // DMLSERVE_X86
