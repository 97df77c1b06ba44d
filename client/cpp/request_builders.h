#ifndef DMLSERVE_CLIENT_CPP_REQUEST_BUILDERS_H_
#define DMLSERVE_CLIENT_CPP_REQUEST_BUILDERS_H_

#include <optional>

#include "dmlserve/v1/dmlserve.pb.h"

namespace dmlserve::client {

// How a cumulative summation or product scans its axis.
struct ScanOptions {
  uint32_t axis = 0;
  // Scan from the last index down (AXIS_DIRECTION_DECREASING).
  bool reverse = false;
  // Each output excludes its own element (HasExclusiveSum/Product).
  bool exclusive = false;
};

// The tensors of a quantized linear matrix multiply. Missing zero points mean
// 0; `output_data_type` is needed only without `output_zero_point`.
struct QuantizedMatMulInputs {
  v1::Tensor a;
  v1::Tensor a_scale;
  std::optional<v1::Tensor> a_zero_point;
  v1::Tensor b;
  v1::Tensor b_scale;
  std::optional<v1::Tensor> b_zero_point;
  v1::Tensor output_scale;
  std::optional<v1::Tensor> output_zero_point;
  v1::DataType output_data_type = v1::DATA_TYPE_UNKNOWN;
};

v1::ExecuteRequest CumulativeSummationRequest(const v1::Tensor& input, const ScanOptions& options);
v1::ExecuteRequest CumulativeProductRequest(const v1::Tensor& input, const ScanOptions& options);
v1::ExecuteRequest QuantizedLinearMatrixMultiplyRequest(const QuantizedMatMulInputs& inputs);

}  // namespace dmlserve::client

#endif  // DMLSERVE_CLIENT_CPP_REQUEST_BUILDERS_H_
