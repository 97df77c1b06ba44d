#ifndef DMLSERVE_TESTS_SERVER_TENSOR_VALUES_H_
#define DMLSERVE_TESTS_SERVER_TENSOR_VALUES_H_

// Building and reading dmlserve.v1.Tensor messages from plain numbers.

#include <cstdint>
#include <string>
#include <vector>

#include "dmlserve/v1/dmlserve.pb.h"

namespace dmlserve::testing {

// Packs `values` little-endian as `type` (FLOAT32, FLOAT64, 8/16/32/64-bit
// integers; values are converted with a plain cast).
std::string PackValues(v1::DataType type, const std::vector<double>& values);
std::vector<double> UnpackValues(v1::DataType type, const std::string& bytes);

v1::Tensor MakeTensor(v1::DataType type, const std::vector<uint32_t>& sizes,
                      const std::vector<double>& values);
// A tensor by reference to a registered one.
v1::Tensor TensorRef(const std::string& tensor_id);

std::vector<double> TensorValues(const v1::Tensor& tensor);
std::vector<uint32_t> TensorSizes(const v1::Tensor& tensor);

}  // namespace dmlserve::testing

#endif  // DMLSERVE_TESTS_SERVER_TENSOR_VALUES_H_
