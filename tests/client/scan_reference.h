#ifndef DMLSERVE_TESTS_CLIENT_SCAN_REFERENCE_H_
#define DMLSERVE_TESTS_CLIENT_SCAN_REFERENCE_H_

// Straightforward cumulative sum/product along one axis, the test oracle
// for the client tests (DirectML semantics: direction, exclusive, identity
// 0 or 1, integers wrapping modulo 2^bits).

#include <cstdint>
#include <type_traits>
#include <vector>

namespace dmlserve::client::testing {

struct ScanShape {
  uint64_t outer = 1;   // Product of the sizes before the axis.
  uint64_t length = 1;  // The axis's size.
  uint64_t inner = 1;   // Product of the sizes after the axis.
};

inline ScanShape ShapeAround(const std::vector<uint32_t>& sizes, uint32_t axis) {
  ScanShape shape;
  for (uint32_t i = 0; i < sizes.size(); ++i) {
    if (i < axis) shape.outer *= sizes[i];
    if (i == axis) shape.length = sizes[i];
    if (i > axis) shape.inner *= sizes[i];
  }
  return shape;
}

// `T` is the element type, `Acc` what it accumulates in: uint64_t for
// integers (so wrapping is well defined) or double for floats. For floats,
// `magnitude` receives the running sum/product of absolute values, the scale
// that rounding errors are proportional to.
template <typename Acc, typename T>
std::vector<Acc> ReferenceScan(const std::vector<T>& input, const std::vector<uint32_t>& sizes,
                               uint32_t axis, bool reverse, bool exclusive, bool product,
                               std::vector<double>* magnitude = nullptr) {
  const ScanShape shape = ShapeAround(sizes, axis);
  std::vector<Acc> out(input.size());
  if (magnitude != nullptr) magnitude->assign(input.size(), 0.0);
  for (uint64_t o = 0; o < shape.outer; ++o) {
    for (uint64_t i = 0; i < shape.inner; ++i) {
      Acc acc = product ? Acc(1) : Acc(0);
      double abs_acc = product ? 1.0 : 0.0;
      for (uint64_t step = 0; step < shape.length; ++step) {
        const uint64_t k = reverse ? shape.length - 1 - step : step;
        const uint64_t index = (o * shape.length + k) * shape.inner + i;
        Acc value;
        if constexpr (std::is_integral_v<T>) {
          value = static_cast<Acc>(static_cast<int64_t>(input[index]));
        } else {
          value = static_cast<Acc>(input[index]);
        }
        const double abs_value = static_cast<double>(input[index]) < 0
                                     ? -static_cast<double>(input[index])
                                     : static_cast<double>(input[index]);
        if (exclusive) out[index] = acc;
        acc = product ? acc * value : acc + value;
        abs_acc = product ? abs_acc * abs_value : abs_acc + abs_value;
        if (!exclusive) out[index] = acc;
        if (magnitude != nullptr) (*magnitude)[index] = abs_acc;
      }
    }
  }
  return out;
}

}  // namespace dmlserve::client::testing

#endif  // DMLSERVE_TESTS_CLIENT_SCAN_REFERENCE_H_
