#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "kernels/cpu/quantized_matmul_kernels.h"
#include "tests/kernels/qgemm_test_util.h"
#include "tests/reference/reference.h"

namespace dmlserve {
namespace {

using ::dmlserve::testing::RandomBytes;

Tensor Floats(Shape sizes, const std::vector<float>& values) {
  Tensor tensor = Tensor::Allocate(DataType::kFloat32, sizes);
  std::memcpy(tensor.mutable_data(), values.data(), values.size() * sizeof(float));
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

// A {B1,1,m,k} x B {1,C,k,n} makes B1 x C output slices, each B slice
// pairing with every A slice (the shape of a hostile 16M-product request,
// small here).
TEST(QuantizedMatMulTest, ABroadcastOverChannelsTimesBBroadcastOverBatches) {
  std::mt19937_64 rng(5);
  QuantizedMatMulTensors t;
  t.a = RandomBytes(DataType::kInt8, {37, 1, 2, 3}, rng);
  t.a_scale = Floats({1, 1, 1, 1}, {0.05f});
  t.b = RandomBytes(DataType::kUint8, {1, 29, 3, 2}, rng);
  t.b_scale = Floats({1, 1, 1, 1}, {0.05f});
  t.b_zero_point = RandomBytes(DataType::kUint8, {1, 1, 1, 1}, rng);
  t.output_scale = Floats({1, 1, 1, 1}, {0.1f});
  const QuantizedMatMulOperation op = Make(std::move(t), DataType::kInt8);
  ASSERT_EQ(op.output_sizes, (Shape{37, 29, 2, 2}));
  const Tensor out = RunKernel(op);
  EXPECT_TRUE(reference::CheckExact(reference::Compute(op), out).ok())
      << reference::CheckExact(reference::Compute(op), out);
}

// More rows than one chunk (rows are described and packed 65536 at a time),
// from several requests fused: chunk edges fall inside requests and slices.
TEST(QuantizedMatMulTest, RowsSpanningChunksAreExact) {
  std::mt19937_64 rng(6);
  const Tensor b = RandomBytes(DataType::kInt8, {5, 3}, rng);
  const Tensor b_scale = Floats({1, 1, 1, 1}, {0.05f});
  std::vector<QuantizedMatMulOperation> ops;
  for (uint32_t m : {70001u, 3u, 65536u}) {
    QuantizedMatMulTensors t;
    t.a = RandomBytes(DataType::kUint8, m == 3 ? Shape{2, m, 5} : Shape{m, 5}, rng);
    t.a_scale = Floats({1, 1, 1, 1}, {0.05f});
    t.a_zero_point = RandomBytes(DataType::kUint8, {1, 1, 1, 1}, rng);
    t.b = b;
    t.b_scale = b_scale;
    t.output_scale = Floats({1, 1, 1, 1}, {0.2f});
    ops.push_back(Make(std::move(t), DataType::kUint8));
  }
  std::vector<const QuantizedMatMulOperation*> pointers;
  std::vector<Tensor> outputs;
  for (const auto& op : ops) {
    pointers.push_back(&op);
    outputs.push_back(Tensor::Allocate(op.output_data_type, op.output_sizes));
  }
  std::vector<Tensor*> output_pointers;
  for (Tensor& out : outputs) output_pointers.push_back(&out);
  for (const absl::Status& status : ComputeQuantizedMatMuls(pointers, output_pointers)) {
    EXPECT_TRUE(status.ok()) << status;
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    EXPECT_TRUE(reference::CheckExact(reference::Compute(ops[i]), outputs[i]).ok()) << i;
  }
}

// Answers OK for its first `allowed` checks, then `status`.
class StopAfter : public WorkStopCheck {
 public:
  StopAfter(int allowed, absl::Status status) : allowed_(allowed), status_(std::move(status)) {}
  absl::Status Check() const override {
    return checks_.fetch_add(1) < allowed_ ? absl::OkStatus() : status_;
  }
  int checks() const { return checks_.load(); }

 private:
  const int allowed_;
  const absl::Status status_;
  mutable std::atomic<int> checks_{0};
};

// Long work is abandoned between chunks (and between slices of a batched B)
// once its stop check says so; a request fused with it that still wants its
// result gets it, exact.
TEST(QuantizedMatMulTest, StopCheckAbandonsLongWorkBetweenBlocks) {
  std::mt19937_64 rng(7);
  const Tensor b = RandomBytes(DataType::kInt8, {1, 1}, rng);
  auto tall = [&](uint32_t m) {
    QuantizedMatMulTensors t;
    t.a = RandomBytes(DataType::kUint8, {m, 1}, rng);
    t.a_scale = Floats({1, 1, 1, 1}, {0.5f});
    t.b = b;
    t.b_scale = Floats({1, 1, 1, 1}, {0.5f});
    t.output_scale = Floats({1, 1, 1, 1}, {1.0f});
    return Make(std::move(t), DataType::kInt8);
  };
  // Alone: stops after the first of its 5 chunks.
  {
    const QuantizedMatMulOperation op = tall(5 * 65536);
    Tensor out = Tensor::Allocate(op.output_data_type, op.output_sizes);
    const QuantizedMatMulOperation* ops[] = {&op};
    Tensor* outs[] = {&out};
    StopAfter stop(1, absl::DeadlineExceededError("deadline passed while it ran"));
    const WorkStopCheck* stops[] = {&stop};
    const std::vector<absl::Status> statuses =
        ComputeQuantizedMatMuls(ops, outs, nullptr, nullptr, stops);
    EXPECT_EQ(statuses[0].code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_EQ(stop.checks(), 2);
  }
  // Fused with a request that still wants its answer: both run to the end.
  {
    const QuantizedMatMulOperation first = tall(3 * 65536), second = tall(1000);
    Tensor out1 = Tensor::Allocate(first.output_data_type, first.output_sizes);
    Tensor out2 = Tensor::Allocate(second.output_data_type, second.output_sizes);
    const QuantizedMatMulOperation* ops[] = {&first, &second};
    Tensor* outs[] = {&out1, &out2};
    StopAfter stop(0, absl::CancelledError("cancelled while it ran"));
    const WorkStopCheck* stops[] = {&stop, nullptr};
    const std::vector<absl::Status> statuses =
        ComputeQuantizedMatMuls(ops, outs, nullptr, nullptr, stops);
    EXPECT_TRUE(statuses[0].ok()) << statuses[0];
    EXPECT_TRUE(statuses[1].ok()) << statuses[1];
    EXPECT_TRUE(reference::CheckExact(reference::Compute(first), out1).ok());
    EXPECT_TRUE(reference::CheckExact(reference::Compute(second), out2).ok());
  }
  // A batched B: stops between its slices.
  {
    QuantizedMatMulTensors t;
    t.a = RandomBytes(DataType::kUint8, {64, 1, 1, 1}, rng);
    t.a_scale = Floats({1, 1, 1, 1}, {0.5f});
    t.b = RandomBytes(DataType::kInt8, {1, 64, 1, 1}, rng);
    t.b_scale = Floats({1, 1, 1, 1}, {0.5f});
    t.output_scale = Floats({1, 1, 1, 1}, {1.0f});
    const QuantizedMatMulOperation op = Make(std::move(t), DataType::kInt8);
    Tensor out = Tensor::Allocate(op.output_data_type, op.output_sizes);
    const QuantizedMatMulOperation* ops[] = {&op};
    Tensor* outs[] = {&out};
    StopAfter stop(10, absl::CancelledError("cancelled while it ran"));
    const WorkStopCheck* stops[] = {&stop};
    const std::vector<absl::Status> statuses =
        ComputeQuantizedMatMuls(ops, outs, nullptr, nullptr, stops);
    EXPECT_EQ(statuses[0].code(), absl::StatusCode::kCancelled);
    EXPECT_EQ(stop.checks(), 11);  // one per B slice started, out of 64
  }
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
