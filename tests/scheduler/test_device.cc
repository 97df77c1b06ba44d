#include "tests/scheduler/test_device.h"

#include <cstdlib>

namespace dmlserve::testing {
namespace {

template <typename T, typename Accumulator>
void Scan(const ScanOperation& scan, const T* input, T* output) {
  const bool product = scan.kind == OperatorKind::kCumulativeProduct;
  for (uint64_t o = 0; o < scan.outer; ++o) {
    for (uint64_t n = 0; n < scan.inner; ++n) {
      Accumulator total = product ? 1 : 0;
      for (uint32_t step = 0; step < scan.axis_size; ++step) {
        const uint32_t i =
            scan.direction == AxisDirection::kIncreasing ? step : scan.axis_size - 1 - step;
        const uint64_t index = (o * scan.axis_size + i) * scan.inner + n;
        const auto value = static_cast<Accumulator>(input[index]);
        if (scan.exclusive) output[index] = static_cast<T>(total);
        total = product ? total * value : total + value;
        if (!scan.exclusive) output[index] = static_cast<T>(total);
      }
    }
  }
}

}  // namespace

Tensor ReferenceScan(const ScanOperation& scan) {
  Tensor output = Tensor::Allocate(scan.input.data_type, scan.input.sizes);
  switch (scan.input.data_type) {
    case DataType::kFloat32:
      Scan<float, double>(scan, scan.input.data_as<float>(), output.mutable_data_as<float>());
      break;
    case DataType::kInt32:
    case DataType::kUint32:
      // Wrapping arithmetic: the same bits for signed and unsigned.
      Scan<uint32_t, uint32_t>(scan, scan.input.data_as<uint32_t>(),
                               output.mutable_data_as<uint32_t>());
      break;
    default:
      std::abort();  // the tests use no other type
  }
  return output;
}

}  // namespace dmlserve::testing
