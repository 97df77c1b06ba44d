#ifndef DMLSERVE_KERNELS_CPU_REQUANTIZE_H_
#define DMLSERVE_KERNELS_CPU_REQUANTIZE_H_

// The quantized matrix multiply's epilogue: turns the micro-kernels' u8 x s8
// dot products into sum (A - za)(B - zb) with exact int32 corrections, then
// requantizes to the output type exactly as the float64 reference does.

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/isa_portability.h"

namespace dmlserve {

// One output row's parameters.
struct RowRequantization {
  int32_t output_zero_point;
  int32_t low, high;  // the output type's range
};

// The int32 corrections of one row, split so that the common case (B's zero
// point per tensor, one A zero point for all rows) costs one subtraction per
// element:
//   acc[j] = dots[j] - row_offset - column_offsets[j]
// with row_offset = zb' * rowsum(A')[i] when zb' is the same for every column
// (else 0), and
//   column_offsets[j] = za'[i] * corrections[j] (+ zb'[j] * rowsum(A')[i]
//                       when zb' varies by column),
// all in wrapping int32 arithmetic. `column_zero_points` null means zb' is
// uniform.
void ComputeColumnOffsets(int32_t a_zero_point, const int32_t* corrections,
                          const int32_t* column_zero_points, int32_t row_sum, size_t count,
                          int32_t* column_offsets);

// The epilogue's per-ISA steps, one version per ISA level
// (CpuKernels::compute_multipliers, requantize_row); every version gives the
// same bits.
//
// ComputeMultipliersFn: for j < count, multipliers[j] = (double(a_scale) *
// double(column_scales[j])) / double(output_scale): the float64 reference's
// multiplier, bit for bit.
using ComputeMultipliersFn = void (*)(float a_scale, float output_scale, const float* column_scales,
                                      size_t count, double* multipliers);
// RequantizeRowFn: for j < count,
//   acc = dots[j] - row_offset - column_offsets[j]      (int32, wrapping)
//   out[j] = clamp(round_half_even(acc * multipliers[j]) + output_zero_point,
//                  low, high)
// computed in float64 like the reference. Nothing past out[count - 1] is
// written.
using RequantizeRowFn = void (*)(const int32_t* dots, int32_t row_offset,
                                 const int32_t* column_offsets, const double* multipliers,
                                 const RowRequantization& row, size_t count, uint8_t* out);

void ComputeMultipliersPortable(float a_scale, float output_scale, const float* column_scales,
                                size_t count, double* multipliers);
void RequantizeRowPortable(const int32_t* dots, int32_t row_offset, const int32_t* column_offsets,
                           const double* multipliers, const RowRequantization& row, size_t count,
                           uint8_t* out);
#if DMLSERVE_X86
// requantize_avx2.cc: only on CPUs with AVX2 and FMA.
void ComputeMultipliersAvx2(float a_scale, float output_scale, const float* column_scales,
                            size_t count, double* multipliers);
void RequantizeRowAvx2(const int32_t* dots, int32_t row_offset, const int32_t* column_offsets,
                       const double* multipliers, const RowRequantization& row, size_t count,
                       uint8_t* out);
// requantize_avx512.cc: only on CPUs with AVX-512 F, BW, VL and DQ.
void ComputeMultipliersAvx512(float a_scale, float output_scale, const float* column_scales,
                              size_t count, double* multipliers);
void RequantizeRowAvx512(const int32_t* dots, int32_t row_offset, const int32_t* column_offsets,
                         const double* multipliers, const RowRequantization& row, size_t count,
                         uint8_t* out);
#endif

}  // namespace dmlserve

#endif  // DMLSERVE_KERNELS_CPU_REQUANTIZE_H_
