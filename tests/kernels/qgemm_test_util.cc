#include "tests/kernels/qgemm_test_util.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "kernels/core/data_type.h"
#include "kernels/core/operation.h"
#include "kernels/core/tensor.h"

namespace dmlserve::testing {

Tensor RandomBytes(DataType type, Shape sizes, std::mt19937_64& rng) {
  Tensor tensor = Tensor::Allocate(type, sizes);
  for (uint64_t i = 0; i < tensor.element_count(); ++i) {
    tensor.mutable_data()[i] = static_cast<uint8_t>(rng());
  }
  return tensor;
}

namespace {

Tensor Scales(Shape sizes, double typical, std::mt19937_64& rng) {
  Tensor tensor = Tensor::Allocate(DataType::kFloat32, sizes);
  std::uniform_real_distribution<double> factor(0.5, 2.0);
  for (uint64_t i = 0; i < tensor.element_count(); ++i) {
    tensor.mutable_data_as<float>()[i] = static_cast<float>(typical * factor(rng));
  }
  return tensor;
}

}  // namespace

QuantizedMatMulOperation RandomProduct(Shape3 s, DataType a_type, DataType b_type,
                                       DataType output_type, bool per_axis, std::mt19937_64& rng) {
  QuantizedMatMulTensors t;
  const Shape rows = per_axis ? Shape{1, 1, s.m, 1} : Shape{1, 1, 1, 1};
  const Shape columns = per_axis ? Shape{1, 1, 1, s.n} : Shape{1, 1, 1, 1};
  t.a = RandomBytes(a_type, {s.m, s.k}, rng);
  t.a_scale = Scales(rows, 0.02, rng);
  t.a_zero_point = RandomBytes(a_type, rows, rng);
  t.b = RandomBytes(b_type, {s.k, s.n}, rng);
  t.b_scale = Scales(columns, 0.01, rng);
  t.b_zero_point = RandomBytes(b_type, columns, rng);
  // |acc| is typically ~ 128 * 128 * sqrt(K / 3) with random zero points:
  // spread it over ~100 output steps.
  t.output_scale = Scales(rows, 0.02 * 0.01 * 16384 * std::sqrt(s.k / 3.0) / 100, rng);
  t.output_zero_point = RandomBytes(output_type, rows, rng);
  absl::StatusOr<QuantizedMatMulOperation> op =
      MakeQuantizedMatMulOperation(std::move(t), output_type);
  EXPECT_TRUE(op.ok()) << op.status();
  return *op;
}

QuantizedMatMulOperation SevenBitProduct(Shape3 s, DataType a_type, DataType b_type,
                                         std::mt19937_64& rng) {
  QuantizedMatMulOperation op = RandomProduct(s, a_type, b_type, DataType::kInt8, true, rng);
  const int shift = b_type == DataType::kUint8 ? 128 : 0;
  std::uniform_int_distribution<int> value(-64, 63);
  uint8_t* b = op.b.mutable_data();
  for (uint64_t i = 0; i < op.b.byte_size(); ++i) {
    const int v = i % 11 == 0 ? -64 : i % 13 == 0 ? 63 : value(rng);
    b[i] = static_cast<uint8_t>(v + shift);
  }
  return op;
}

}  // namespace dmlserve::testing
