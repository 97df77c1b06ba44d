#include "tests/server/reference_ops.h"

#include <algorithm>
#include <cmath>

namespace dmlserve::testing {

std::vector<double> ScanReference(const std::vector<double>& values,
                                  const std::vector<uint32_t>& sizes, uint32_t axis, bool product,
                                  bool decreasing, bool exclusive) {
  uint64_t outer = 1, inner = 1;
  for (uint32_t d = 0; d < axis; ++d) outer *= sizes[d];
  for (size_t d = axis + 1; d < sizes.size(); ++d) inner *= sizes[d];
  const uint64_t length = sizes[axis];
  std::vector<double> result(values.size());
  for (uint64_t o = 0; o < outer; ++o) {
    for (uint64_t i = 0; i < inner; ++i) {
      double running = product ? 1 : 0;
      for (uint64_t step = 0; step < length; ++step) {
        const uint64_t position = decreasing ? length - 1 - step : step;
        const uint64_t index = (o * length + position) * inner + i;
        if (exclusive) result[index] = running;
        running = product ? running * values[index] : running + values[index];
        if (!exclusive) result[index] = running;
      }
    }
  }
  return result;
}

std::vector<double> QuantizedMatMulReference(const QuantizedMatMulCase& c) {
  std::vector<double> result(static_cast<size_t>(c.m) * c.n);
  const double multiplier = c.a_scale * c.b_scale / c.output_scale;
  for (uint32_t row = 0; row < c.m; ++row) {
    for (uint32_t column = 0; column < c.n; ++column) {
      int64_t accumulator = 0;
      for (uint32_t i = 0; i < c.k; ++i) {
        accumulator += static_cast<int64_t>(c.a[row * c.k + i] - c.a_zero_point) *
                       static_cast<int64_t>(c.b[i * c.n + column] - c.b_zero_point);
      }
      // nearbyint rounds half to even in the default rounding mode.
      const double quantized =
          std::nearbyint(static_cast<double>(accumulator) * multiplier) + c.output_zero_point;
      result[row * c.n + column] = std::clamp(quantized, c.output_min, c.output_max);
    }
  }
  return result;
}

}  // namespace dmlserve::testing
