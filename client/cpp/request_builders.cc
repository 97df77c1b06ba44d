#include "client/cpp/request_builders.h"

namespace dmlserve::client {
namespace {

v1::AxisDirection Direction(const ScanOptions& options) {
  return options.reverse ? v1::AXIS_DIRECTION_DECREASING : v1::AXIS_DIRECTION_INCREASING;
}

}  // namespace

v1::ExecuteRequest CumulativeSummationRequest(const v1::Tensor& input, const ScanOptions& options) {
  v1::ExecuteRequest request;
  v1::CumulativeSummation* op = request.mutable_cumulative_summation();
  *op->mutable_input() = input;
  op->set_axis(options.axis);
  op->set_axis_direction(Direction(options));
  op->set_has_exclusive_sum(options.exclusive);
  return request;
}

v1::ExecuteRequest CumulativeProductRequest(const v1::Tensor& input, const ScanOptions& options) {
  v1::ExecuteRequest request;
  v1::CumulativeProduct* op = request.mutable_cumulative_product();
  *op->mutable_input() = input;
  op->set_axis(options.axis);
  op->set_axis_direction(Direction(options));
  op->set_has_exclusive_product(options.exclusive);
  return request;
}

v1::ExecuteRequest QuantizedLinearMatrixMultiplyRequest(const QuantizedMatMulInputs& inputs) {
  v1::ExecuteRequest request;
  v1::QuantizedLinearMatrixMultiply* op = request.mutable_quantized_linear_matrix_multiply();
  *op->mutable_a() = inputs.a;
  *op->mutable_a_scale() = inputs.a_scale;
  if (inputs.a_zero_point) *op->mutable_a_zero_point() = *inputs.a_zero_point;
  *op->mutable_b() = inputs.b;
  *op->mutable_b_scale() = inputs.b_scale;
  if (inputs.b_zero_point) *op->mutable_b_zero_point() = *inputs.b_zero_point;
  *op->mutable_output_scale() = inputs.output_scale;
  if (inputs.output_zero_point) *op->mutable_output_zero_point() = *inputs.output_zero_point;
  op->set_output_data_type(inputs.output_data_type);
  return request;
}

}  // namespace dmlserve::client
