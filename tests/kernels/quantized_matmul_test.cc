#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "kernels/cpu/quantized_matmul_kernels.h"
#include "tests/reference/reference.h"

namespace dmlserve {
namespace {

Tensor Floats(Shape sizes, const std::vector<float>& values) {
  Tensor tensor = Tensor::Allocate(DataType::kFloat32, sizes);
  std::memcpy(tensor.mutable_data(), values.data(), values.size() * sizeof(float));
  return tensor;
}

Tensor RandomBytes(DataType type, Shape sizes, std::mt19937_64& rng) {
  Tensor tensor = Tensor::Allocate(type, sizes);
  for (uint64_t i = 0; i < tensor.element_count(); ++i) {
    tensor.mutable_data()[i] = static_cast<uint8_t>(rng());
  }
  return tensor;
}

Tensor Filled(DataType type, Shape sizes, uint8_t byte) {
  Tensor tensor = Tensor::Allocate(type, sizes);
  std::memset(tensor.mutable_data(), byte, tensor.byte_size());
  return tensor;
}

QuantizedMatMulOperation Make(QuantizedMatMulTensors t, DataType output_type = DataType::kUnknown) {
  absl::StatusOr<QuantizedMatMulOperation> op =
      MakeQuantizedMatMulOperation(std::move(t), output_type);
  EXPECT_TRUE(op.ok()) << op.status();
  return *op;
}

Tensor RunKernel(const QuantizedMatMulOperation& op) {
  Tensor output = Tensor::Allocate(op.output_data_type, op.output_sizes);
  ComputeQuantizedMatMul(op, output);
  return output;
}

std::vector<float> RandomScales(size_t count, double typical, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> factor(0.5, 2.0);
  std::vector<float> scales(count);
  for (float& s : scales) s = static_cast<float>(typical * factor(rng));
  return scales;
}

// Requests sharing one B, each with its own A shape, types, scales and zero
// points (per tensor and per row), as the batcher would group them.
std::vector<QuantizedMatMulOperation> RequestsSharingB(int count, uint32_t k, uint32_t n,
                                                       std::mt19937_64& rng) {
  const Tensor b = RandomBytes(DataType::kInt8, {k, n}, rng);
  const Tensor b_scale = Floats({1, 1, 1, n}, RandomScales(n, 0.01, rng));
  const Tensor b_zero_point = RandomBytes(DataType::kInt8, {1, 1, 1, 1}, rng);
  std::vector<QuantizedMatMulOperation> ops;
  for (int i = 0; i < count; ++i) {
    const uint32_t m = 1 + static_cast<uint32_t>(rng() % 9);
    const DataType a_type = (i % 2) ? DataType::kInt8 : DataType::kUint8;
    QuantizedMatMulTensors t;
    t.a = RandomBytes(a_type, (i % 3 == 0) ? Shape{2, m, k} : Shape{m, k}, rng);
    const bool per_row = i % 4 < 2;
    t.a_scale = per_row ? Floats({1, 1, m, 1}, RandomScales(m, 0.02, rng))
                        : Floats({1, 1, 1, 1}, RandomScales(1, 0.02, rng));
    if (i % 5 != 0) {
      t.a_zero_point = RandomBytes(a_type, per_row ? Shape{1, 1, m, 1} : Shape{1, 1, 1, 1}, rng);
    }
    // A copy of B's bytes in some requests: fusion compares contents.
    t.b = b;
    if (i % 2) t.b.bytes = Buffer::Copy(b.bytes->view());
    t.b_scale = b_scale;
    t.b_zero_point = b_zero_point;
    const double typical_acc = 5500.0 * std::sqrt(static_cast<double>(k));
    t.output_scale = Floats({1, 1, 1, 1}, RandomScales(1, 0.02 * 0.01 * typical_acc / 64, rng));
    DataType output_type = (i % 3 == 1) ? DataType::kUint8 : DataType::kInt8;
    if (i % 2) t.output_zero_point = RandomBytes(output_type, {1, 1, 1, 1}, rng);
    ops.push_back(Make(std::move(t), output_type));
  }
  return ops;
}

TEST(QuantizedMatMulTest, FusedBatchEqualsOperationsRunAlone) {
  std::mt19937_64 rng(1);
  for (uint32_t k : {1u, 37u, 256u}) {
    const std::vector<QuantizedMatMulOperation> ops = RequestsSharingB(16, k, 45, rng);
    std::vector<const QuantizedMatMulOperation*> pointers;
    std::vector<Tensor> fused;
    for (const auto& op : ops) {
      pointers.push_back(&op);
      fused.push_back(Tensor::Allocate(op.output_data_type, op.output_sizes));
    }
    std::vector<Tensor*> outputs;
    for (Tensor& t : fused) outputs.push_back(&t);
    ComputeQuantizedMatMuls(pointers, outputs);
    for (size_t i = 0; i < ops.size(); ++i) {
      SCOPED_TRACE(reference::Describe(ops[i]));
      const Tensor alone = RunKernel(ops[i]);
      EXPECT_TRUE(reference::CheckExact(alone, fused[i]).ok())
          << reference::CheckExact(alone, fused[i]);
      EXPECT_TRUE(reference::CheckOutput(ops[i], fused[i]).ok())
          << reference::CheckOutput(ops[i], fused[i]);
    }
  }
}

TEST(QuantizedMatMulTest, BatchWithDifferentBsComputesEachCorrectly) {
  std::mt19937_64 rng(2);
  std::vector<QuantizedMatMulOperation> ops = RequestsSharingB(3, 20, 7, rng);
  for (const auto& op : RequestsSharingB(3, 20, 7, rng)) ops.push_back(op);  // another B
  for (const auto& op : RequestsSharingB(2, 9, 4, rng)) ops.push_back(op);   // other K, N
  std::vector<const QuantizedMatMulOperation*> pointers;
  std::vector<Tensor> results;
  for (const auto& op : ops) {
    pointers.push_back(&op);
    results.push_back(Tensor::Allocate(op.output_data_type, op.output_sizes));
  }
  std::vector<Tensor*> outputs;
  for (Tensor& t : results) outputs.push_back(&t);
  ComputeQuantizedMatMuls(pointers, outputs);
  for (size_t i = 0; i < ops.size(); ++i) {
    EXPECT_TRUE(reference::CheckExact(reference::Compute(ops[i]), results[i]).ok())
        << reference::Describe(ops[i]) << ": "
        << reference::CheckExact(reference::Compute(ops[i]), results[i]);
  }
}

// The largest K allowed, with operands that maximise |acc|: the int32
// accumulator is within 33022 of overflowing and must not wrap.
TEST(QuantizedMatMulTest, LargestKWithExtremeValuesIsExact) {
  constexpr uint32_t kK = 33025;
  for (bool negative : {false, true}) {
    QuantizedMatMulTensors t;
    t.a = Filled(DataType::kInt8, {2, kK}, negative ? 0x80 : 0x7f);  // -128 or 127
    t.a_scale = Floats({1, 1, 1, 1}, {1.0f});
    t.a_zero_point = Filled(DataType::kInt8, {1, 1, 1, 1}, negative ? 0x7f : 0x80);
    t.b = Filled(DataType::kUint8, {kK, 3}, 0xff);
    t.b_scale = Floats({1, 1, 1, 1}, {1.0f});
    t.b_zero_point = Filled(DataType::kUint8, {1, 1, 1, 1}, 0);
    t.output_scale = Floats({1, 1, 1, 1}, {33554432.0f});  // 2^25
    const QuantizedMatMulOperation op = Make(std::move(t), DataType::kInt8);
    const Tensor out = RunKernel(op);
    // acc = +-33025 * 255 * 255 = +-2147450625; / 2^25 = +-63.999 -> +-64.
    const int8_t want = negative ? -64 : 64;
    for (uint64_t i = 0; i < out.element_count(); ++i) {
      EXPECT_EQ(out.data_as<int8_t>()[i], want) << i;
    }
    EXPECT_TRUE(reference::CheckExact(reference::Compute(op), out).ok());
  }
}

TEST(QuantizedMatMulTest, BatchedBAndBroadcastA) {
  std::mt19937_64 rng(3);
  QuantizedMatMulTensors t;
  t.a = RandomBytes(DataType::kUint8, {1, 3, 5, 19}, rng);  // broadcast over batch
  t.a_scale = Floats({1, 1, 5, 1}, RandomScales(5, 0.05, rng));
  t.a_zero_point = RandomBytes(DataType::kUint8, {1, 1, 5, 1}, rng);
  t.b = RandomBytes(DataType::kInt8, {2, 1, 19, 6}, rng);  // broadcast over channel
  t.b_scale = Floats({1, 1, 1, 6}, RandomScales(6, 0.05, rng));
  t.output_scale = Floats({1, 1, 1, 1}, {3.0f});
  const QuantizedMatMulOperation op = Make(std::move(t), DataType::kUint8);
  ASSERT_EQ(op.output_sizes, (Shape{2, 3, 5, 6}));
  const Tensor out = RunKernel(op);
  EXPECT_TRUE(reference::CheckExact(reference::Compute(op), out).ok())
      << reference::CheckExact(reference::Compute(op), out);
}

// Big enough to be split into many tiles across the pool.
TEST(QuantizedMatMulTest, LargeProductTakesTheMultiThreadedPath) {
  std::mt19937_64 rng(4);
  const uint32_t m = 150, k = 700, n = 333;
  QuantizedMatMulTensors t;
  t.a = RandomBytes(DataType::kInt8, {m, k}, rng);
  t.a_scale = Floats({1, 1, m, 1}, RandomScales(m, 0.02, rng));
  t.a_zero_point = RandomBytes(DataType::kInt8, {1, 1, m, 1}, rng);
  t.b = RandomBytes(DataType::kUint8, {k, n}, rng);
  t.b_scale = Floats({1, 1, 1, n}, RandomScales(n, 0.01, rng));
  t.b_zero_point = RandomBytes(DataType::kUint8, {1, 1, 1, n}, rng);
  t.output_scale = Floats({1, 1, m, 1}, RandomScales(m, 0.02 * 0.01 * 5500 * 26 / 64, rng));
  t.output_zero_point = RandomBytes(DataType::kInt8, {1, 1, m, 1}, rng);
  const QuantizedMatMulOperation op = Make(std::move(t));
  const Tensor out = RunKernel(op);
  EXPECT_TRUE(reference::CheckExact(reference::Compute(op), out).ok())
      << reference::CheckExact(reference::Compute(op), out);
  // Not degenerate: the outputs spread over the range.
  std::set<int8_t> distinct(out.data_as<int8_t>(), out.data_as<int8_t>() + out.element_count());
  EXPECT_GE(distinct.size(), 32u);
}

}  // namespace
}  // namespace dmlserve
