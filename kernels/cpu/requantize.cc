#include "kernels/cpu/requantize.h"

#include <algorithm>

#include "kernels/cpu/isa_portability.h"

#if DMLSERVE_X86
#include <immintrin.h>
#endif

// Built with -ffp-contract=off (/fp:precise on MSVC; see CMakeLists.txt): a
// fused multiply-add would round differently from the reference.

namespace dmlserve {
namespace {

// Adding and subtracting 1.5 * 2^52 rounds a double of magnitude < 2^51 to an
// integer in the current rounding mode (nearest, ties to even) and, unlike
// nearbyint, vectorises.
constexpr double kRounder = 6755399441055744.0;

// Values beyond these bounds saturate anyway; bounding first keeps the
// rounding trick in range.
double LowBound(const RowRequantization& row) {
  return static_cast<double>(row.low - row.output_zero_point) - 1.0;
}
double HighBound(const RowRequantization& row) {
  return static_cast<double>(row.high - row.output_zero_point) + 1.0;
}

int32_t CorrectedDot(int32_t dot, int32_t row_offset, int32_t column_offset) {
  // uint32: the terms may wrap; their sum is the exact (in-range) result.
  return static_cast<int32_t>(static_cast<uint32_t>(dot) - static_cast<uint32_t>(row_offset) -
                              static_cast<uint32_t>(column_offset));
}

void RequantizeRowPortable(const int32_t* dots, int32_t row_offset, const int32_t* column_offsets,
                           const double* multipliers, const RowRequantization& row, size_t count,
                           uint8_t* out) {
  const double low = LowBound(row), high = HighBound(row);
  for (size_t j = 0; j < count; ++j) {
    const int32_t acc = CorrectedDot(dots[j], row_offset, column_offsets[j]);
    double value = static_cast<double>(acc) * multipliers[j];
    value = std::min(std::max(value, low), high);
    const double rounded = (value + kRounder) - kRounder;
    int32_t result = static_cast<int32_t>(rounded) + row.output_zero_point;
    result = std::min(std::max(result, row.low), row.high);
    out[j] = static_cast<uint8_t>(result);
  }
}

#if DMLSERVE_X86
DMLSERVE_ISA_BEGIN("avx2,fma")

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

// Four float64 lanes of the portable loop's arithmetic, as Requantize8 of the
// AVX-512 path below does eight (its comment says why clamping to exactly the
// range less the zero point, then converting with round-to-nearest-even, the
// default MXCSR mode, gives the portable loop's integer).
inline __m128i Requantize4(__m128i acc, const double* multipliers, __m256d low, __m256d high) {
  __m256d value = _mm256_mul_pd(_mm256_cvtepi32_pd(acc), _mm256_loadu_pd(multipliers));
  value = _mm256_min_pd(_mm256_max_pd(value, low), high);
  return _mm256_cvtpd_epi32(value);
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

DMLSERVE_ISA_END

DMLSERVE_ISA_BEGIN("avx512f,avx512bw,avx512vl,avx512dq")
DMLSERVE_IGNORE_UNINITIALIZED_BEGIN

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

DMLSERVE_IGNORE_UNINITIALIZED_END
DMLSERVE_ISA_END
#endif  // DMLSERVE_X86

}  // namespace

void ComputeMultipliers(float a_scale, float output_scale, const float* column_scales, size_t count,
                        double* multipliers, CpuIsa isa) {
#if DMLSERVE_X86
  if (isa == CpuIsa::kAvx512Vnni) {
    return ComputeMultipliersAvx512(a_scale, output_scale, column_scales, count, multipliers);
  }
  if (isa == CpuIsa::kAvx2 || isa == CpuIsa::kAvxVnni) {
    return ComputeMultipliersAvx2(a_scale, output_scale, column_scales, count, multipliers);
  }
#endif
  (void)isa;
  const double a = a_scale, o = output_scale;
  for (size_t j = 0; j < count; ++j) multipliers[j] = a * static_cast<double>(column_scales[j]) / o;
}

void ComputeColumnOffsets(int32_t a_zero_point, const int32_t* corrections,
                          const int32_t* column_zero_points, int32_t row_sum, size_t count,
                          int32_t* column_offsets) {
  const uint32_t za = static_cast<uint32_t>(a_zero_point);
  if (column_zero_points == nullptr) {
    for (size_t j = 0; j < count; ++j) {
      column_offsets[j] = static_cast<int32_t>(za * static_cast<uint32_t>(corrections[j]));
    }
    return;
  }
  const uint32_t sum = static_cast<uint32_t>(row_sum);
  for (size_t j = 0; j < count; ++j) {
    column_offsets[j] = static_cast<int32_t>(za * static_cast<uint32_t>(corrections[j]) +
                                             static_cast<uint32_t>(column_zero_points[j]) * sum);
  }
}

void RequantizeRow(const int32_t* dots, int32_t row_offset, const int32_t* column_offsets,
                   const double* multipliers, const RowRequantization& row, size_t count,
                   uint8_t* out, CpuIsa isa) {
#if DMLSERVE_X86
  if (isa == CpuIsa::kAvx512Vnni) {
    return RequantizeRowAvx512(dots, row_offset, column_offsets, multipliers, row, count, out);
  }
  if (isa == CpuIsa::kAvx2 || isa == CpuIsa::kAvxVnni) {
    return RequantizeRowAvx2(dots, row_offset, column_offsets, multipliers, row, count, out);
  }
#endif
  (void)isa;
  RequantizeRowPortable(dots, row_offset, column_offsets, multipliers, row, count, out);
}

}  // namespace dmlserve
