#include "kernels/cpu/requantize.h"

#include <algorithm>

// Built with -ffp-contract=off (/fp:precise on MSVC; see CMakeLists.txt), as
// are requantize_<isa>.cc, which hold the SIMD versions: a fused
// multiply-add would round differently from the reference.

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

}  // namespace

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

void ComputeMultipliersPortable(float a_scale, float output_scale, const float* column_scales,
                                size_t count, double* multipliers) {
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

}  // namespace dmlserve
