#include "tests/server/test_requests.h"

#include <utility>

#include "kernels/core/operation.h"
#include "kernels/core/tensor.h"
#include "tests/reference/reference.h"
#include "tests/server/tensor_values.h"

namespace dmlserve::testing {
namespace {

v1::Tensor Scalar4D(v1::DataType type, double value) {
  return MakeTensor(type, {1, 1, 1, 1}, {value});
}

// The reference's answer to a FLOAT32 cumulative summation.
std::vector<double> SummationReference(const std::vector<double>& values,
                                       const std::vector<uint32_t>& sizes, uint32_t axis,
                                       bool decreasing, bool exclusive) {
  Tensor input =
      reference::TensorFromValues(DataType::kFloat32, Shape(sizes.begin(), sizes.end()), values);
  const ScanOperation op =
      MakeScanOperation(OperatorKind::kCumulativeSummation, std::move(input), axis,
                        decreasing ? AxisDirection::kDecreasing : AxisDirection::kIncreasing,
                        exclusive)
          .value();
  return reference::TensorToValues(reference::ComputeScan(op));
}

}  // namespace

std::vector<double> QuantizedMatMulReference(const QuantizedMatMulCase& c) {
  // The tensors MatMulRequest sends, with the same types and shapes.
  auto scalar = [](DataType type, double value) {
    return reference::TensorFromValues(type, {1, 1, 1, 1}, {value});
  };
  QuantizedMatMulTensors tensors;
  tensors.a = reference::TensorFromValues(DataType::kUint8, {1, 1, c.m, c.k}, c.a);
  tensors.a_scale = scalar(DataType::kFloat32, c.a_scale);
  tensors.a_zero_point = scalar(DataType::kUint8, c.a_zero_point);
  tensors.b = reference::TensorFromValues(DataType::kUint8, {1, 1, c.k, c.n}, c.b);
  tensors.b_scale = scalar(DataType::kFloat32, c.b_scale);
  tensors.b_zero_point = scalar(DataType::kUint8, c.b_zero_point);
  tensors.output_scale = scalar(DataType::kFloat32, c.output_scale);
  tensors.output_zero_point = scalar(DataType::kUint8, c.output_zero_point);
  const QuantizedMatMulOperation op =
      MakeQuantizedMatMulOperation(std::move(tensors), DataType::kUint8).value();
  return reference::TensorToValues(reference::ComputeQuantizedMatMul(op));
}

v1::ExecuteRequest ScanRequest(const std::string& request_id, v1::DataType type,
                               const std::vector<uint32_t>& sizes,
                               const std::vector<double>& values, uint32_t axis, bool product,
                               bool decreasing, bool exclusive) {
  v1::ExecuteRequest request;
  request.set_request_id(request_id);
  const auto direction = decreasing ? v1::AXIS_DIRECTION_DECREASING : v1::AXIS_DIRECTION_INCREASING;
  if (product) {
    v1::CumulativeProduct* op = request.mutable_cumulative_product();
    *op->mutable_input() = MakeTensor(type, sizes, values);
    op->set_axis(axis);
    op->set_axis_direction(direction);
    op->set_has_exclusive_product(exclusive);
  } else {
    v1::CumulativeSummation* op = request.mutable_cumulative_summation();
    *op->mutable_input() = MakeTensor(type, sizes, values);
    op->set_axis(axis);
    op->set_axis_direction(direction);
    op->set_has_exclusive_sum(exclusive);
  }
  return request;
}

v1::Tensor MatMulB(const QuantizedMatMulCase& c) {
  return MakeTensor(v1::UINT8, {1, 1, c.k, c.n}, c.b);
}

v1::ExecuteRequest MatMulRequest(const std::string& request_id, const QuantizedMatMulCase& c,
                                 const std::string& b_tensor_id) {
  v1::ExecuteRequest request;
  request.set_request_id(request_id);
  v1::QuantizedLinearMatrixMultiply* op = request.mutable_quantized_linear_matrix_multiply();
  *op->mutable_a() = MakeTensor(v1::UINT8, {1, 1, c.m, c.k}, c.a);
  *op->mutable_a_scale() = Scalar4D(v1::FLOAT32, c.a_scale);
  *op->mutable_a_zero_point() = Scalar4D(v1::UINT8, c.a_zero_point);
  *op->mutable_b() = b_tensor_id.empty() ? MatMulB(c) : TensorRef(b_tensor_id);
  *op->mutable_b_scale() = Scalar4D(v1::FLOAT32, c.b_scale);
  *op->mutable_b_zero_point() = Scalar4D(v1::UINT8, c.b_zero_point);
  *op->mutable_output_scale() = Scalar4D(v1::FLOAT32, c.output_scale);
  *op->mutable_output_zero_point() = Scalar4D(v1::UINT8, c.output_zero_point);
  return request;
}

ScanCase RandomScanCase(absl::BitGen& bitgen, const std::string& request_id) {
  ScanCase scan;
  const uint32_t rank = absl::Uniform<uint32_t>(absl::IntervalClosed, bitgen, 1, 4);
  uint64_t count = 1;
  for (uint32_t d = 0; d < rank; ++d) {
    scan.sizes.push_back(absl::Uniform<uint32_t>(absl::IntervalClosed, bitgen, 1, 6));
    count *= scan.sizes.back();
  }
  // Small integers: every partial sum is exact in float32 in any order.
  std::vector<double> values(count);
  for (double& value : values) value = absl::Uniform<int>(absl::IntervalClosed, bitgen, -50, 50);
  const uint32_t axis = absl::Uniform<uint32_t>(bitgen, 0, rank);
  const bool decreasing = absl::Bernoulli(bitgen, 0.5);
  const bool exclusive = absl::Bernoulli(bitgen, 0.5);
  scan.request = ScanRequest(request_id, v1::FLOAT32, scan.sizes, values, axis,
                             /*product=*/false, decreasing, exclusive);
  scan.expected = SummationReference(values, scan.sizes, axis, decreasing, exclusive);
  return scan;
}

QuantizedMatMulCase RandomWeights(absl::BitGen& bitgen, uint32_t k, uint32_t n) {
  QuantizedMatMulCase c;
  c.k = k;
  c.n = n;
  c.b.resize(static_cast<size_t>(k) * n);
  for (double& value : c.b) value = absl::Uniform<int>(absl::IntervalClosed, bitgen, 0, 255);
  c.b_scale = 0.0625;
  c.b_zero_point = 128;
  return c;
}

QuantizedMatMulCase RandomMatMulCase(absl::BitGen& bitgen, const QuantizedMatMulCase& b) {
  QuantizedMatMulCase c = b;
  c.m = absl::Uniform<uint32_t>(absl::IntervalClosed, bitgen, 1, 4);
  c.a.resize(static_cast<size_t>(c.m) * c.k);
  for (double& value : c.a) value = absl::Uniform<int>(absl::IntervalClosed, bitgen, 0, 255);
  // Powers of two: the requantization is exact in float32 and float64 alike.
  c.a_scale = 0.5;
  c.a_zero_point = 120;
  c.output_scale = 64;
  c.output_zero_point = 128;
  return c;
}

}  // namespace dmlserve::testing
