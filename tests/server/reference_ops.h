#ifndef DMLSERVE_TESTS_SERVER_REFERENCE_OPS_H_
#define DMLSERVE_TESTS_SERVER_REFERENCE_OPS_H_

// Plain float64 references for the requests the concurrency tests generate:
// scans of integer-valued floats (exact in any summation order) and
// per-tensor quantized matrix multiplies with power-of-two scales (exact
// requantization).

#include <cstdint>
#include <vector>

namespace dmlserve::testing {

// Cumulative sum or product of a row-major tensor along `axis`.
std::vector<double> ScanReference(const std::vector<double>& values,
                                  const std::vector<uint32_t>& sizes, uint32_t axis, bool product,
                                  bool decreasing, bool exclusive);

struct QuantizedMatMulCase {
  uint32_t m = 0, k = 0, n = 0;
  std::vector<double> a, b;  // {M,K} and {K,N}, row-major
  double a_scale = 1, a_zero_point = 0;
  double b_scale = 1, b_zero_point = 0;
  double output_scale = 1, output_zero_point = 0;
  double output_min = 0, output_max = 255;  // the output type's range
};

// clamp(round_half_even((a - za)(b - zb) * sa * sb / so) + zo); {M,N}.
std::vector<double> QuantizedMatMulReference(const QuantizedMatMulCase& c);

}  // namespace dmlserve::testing

#endif  // DMLSERVE_TESTS_SERVER_REFERENCE_OPS_H_
