// The AVX2 requantization epilogue (ComputeMultipliersFn, RequantizeRowFn
// in requantize.h): 4 (multipliers) and 8 (columns) float64 lanes per step.
// Only this file's functions carry the AVX2 target; they run only from the
// tables of levels the CPU runs (cpu_kernels.h). Built with -ffp-contract=off
// like requantize.cc: a fused multiply-add would round differently from the
// reference.

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/isa_portability.h"
#include "kernels/cpu/requantize.h"

#if DMLSERVE_X86
#include <immintrin.h>

DMLSERVE_ISA_BEGIN("avx2,fma")

namespace dmlserve {
namespace {

// Four float64 lanes of the portable loop's arithmetic, as Requantize8 of the
// AVX-512 path (requantize_avx512.cc) does eight (its comment says why
// clamping to exactly the range less the zero point, then converting with
// round-to-nearest-even, the default MXCSR mode, gives the portable loop's
// integer).
inline __m128i Requantize4(__m128i acc, const double* multipliers, __m256d low, __m256d high) {
  __m256d value = _mm256_mul_pd(_mm256_cvtepi32_pd(acc), _mm256_loadu_pd(multipliers));
  value = _mm256_min_pd(_mm256_max_pd(value, low), high);
  return _mm256_cvtpd_epi32(value);
}

}  // namespace

void ComputeMultipliersAvx2(float a_scale, float output_scale, const float* column_scales,
                            size_t count, double* multipliers) {
  // The portable loop's operations in its order: (a * scale) / o.
  const double a = a_scale, o = output_scale;
  const __m256d a4 = _mm256_set1_pd(a), o4 = _mm256_set1_pd(o);
  size_t j = 0;
  for (; j + 4 <= count; j += 4) {
    const __m256d scale = _mm256_cvtps_pd(_mm_loadu_ps(column_scales + j));
    _mm256_storeu_pd(multipliers + j, _mm256_div_pd(_mm256_mul_pd(a4, scale), o4));
  }
  for (; j < count; ++j) multipliers[j] = a * static_cast<double>(column_scales[j]) / o;
}

void RequantizeRowAvx2(const int32_t* dots, int32_t row_offset, const int32_t* column_offsets,
                       const double* multipliers, const RowRequantization& row, size_t count,
                       uint8_t* out) {
  const __m256d low = _mm256_set1_pd(static_cast<double>(row.low - row.output_zero_point));
  const __m256d high = _mm256_set1_pd(static_cast<double>(row.high - row.output_zero_point));
  const __m256i row_term = _mm256_set1_epi32(row_offset);
  const __m128i output_zero_point = _mm_set1_epi32(row.output_zero_point);
  // The low byte of each 16-bit lane: the results lie in [-128, 255], so the
  // low byte is the output for int8 and uint8 alike (a saturating pack would
  // be wrong for one of them).
  const __m128i low_bytes =
      _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, -1, -1, -1, -1, -1, -1, -1, -1);
  size_t j = 0;
  for (; j + 8 <= count; j += 8) {
    const __m256i acc = _mm256_sub_epi32(
        _mm256_sub_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(dots + j)), row_term),
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(column_offsets + j)));
    const __m128i first = _mm_add_epi32(
        Requantize4(_mm256_castsi256_si128(acc), multipliers + j, low, high), output_zero_point);
    const __m128i second =
        _mm_add_epi32(Requantize4(_mm256_extracti128_si256(acc, 1), multipliers + j + 4, low, high),
                      output_zero_point);
    // int32 -> int16 saturates nothing in this range; then keep the low bytes.
    const __m128i bytes = _mm_shuffle_epi8(_mm_packs_epi32(first, second), low_bytes);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + j), bytes);
  }
  // The last count % 8 columns.
  RequantizeRowPortable(dots + j, row_offset, column_offsets + j, multipliers + j, row, count - j,
                        out + j);
}

}  // namespace dmlserve

DMLSERVE_ISA_END
#endif  // DMLSERVE_X86
