#ifndef DMLSERVE_TESTS_SERVER_TEST_REQUESTS_H_
#define DMLSERVE_TESTS_SERVER_TEST_REQUESTS_H_

// Execute requests the tests send, with the reference answers to check them
// (tests/reference computes them; this file only converts the plain numbers
// the tests keep to its tensors and back).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/random/random.h"
#include "dmlserve/v1/dmlserve.pb.h"

namespace dmlserve::testing {

// A UINT8 x UINT8 -> UINT8 per-tensor quantized matrix multiply, as plain
// numbers.
struct QuantizedMatMulCase {
  uint32_t m = 0, k = 0, n = 0;
  std::vector<double> a, b;  // {M,K} and {K,N}, row-major
  double a_scale = 1, a_zero_point = 0;
  double b_scale = 1, b_zero_point = 0;
  double output_scale = 1, output_zero_point = 0;
};

// The reference's answer to MatMulRequest(c): {M,N}, row-major.
std::vector<double> QuantizedMatMulReference(const QuantizedMatMulCase& c);

// A cumulative summation (or product) request.
v1::ExecuteRequest ScanRequest(const std::string& request_id, v1::DataType type,
                               const std::vector<uint32_t>& sizes,
                               const std::vector<double>& values, uint32_t axis,
                               bool product = false, bool decreasing = false,
                               bool exclusive = false);

// A UINT8 x UINT8 -> UINT8 per-tensor quantized matmul with 4-D shapes; B is
// sent by value, or by reference when `b_tensor_id` is set.
v1::ExecuteRequest MatMulRequest(const std::string& request_id, const QuantizedMatMulCase& c,
                                 const std::string& b_tensor_id = "");
// B of `c` as a tensor to register: UINT8 {1,1,K,N}.
v1::Tensor MatMulB(const QuantizedMatMulCase& c);

// Random cases whose exact answers the references compute.
struct ScanCase {
  v1::ExecuteRequest request;
  std::vector<double> expected;
  std::vector<uint32_t> sizes;
};
ScanCase RandomScanCase(absl::BitGen& bitgen, const std::string& request_id);
// A random A for a fixed B (K x N, zero point and scale taken from `b`).
QuantizedMatMulCase RandomMatMulCase(absl::BitGen& bitgen, const QuantizedMatMulCase& b);
QuantizedMatMulCase RandomWeights(absl::BitGen& bitgen, uint32_t k, uint32_t n);

}  // namespace dmlserve::testing

#endif  // DMLSERVE_TESTS_SERVER_TEST_REQUESTS_H_
