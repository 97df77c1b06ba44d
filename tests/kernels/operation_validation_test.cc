#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/core/operation.h"

namespace dmlserve {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr uint64_t kNoLimit = std::numeric_limits<uint64_t>::max();

Tensor Zeros(DataType type, Shape sizes) { return Tensor::Allocate(type, sizes); }

Tensor Floats(Shape sizes, std::vector<float> values) {
  Tensor tensor = Tensor::Allocate(DataType::kFloat32, sizes);
  std::memcpy(tensor.mutable_data(), values.data(), values.size() * sizeof(float));
  return tensor;
}

Tensor Scalar(float value) { return Floats({1, 1, 1, 1}, {value}); }

// Expects an InvalidArgument error whose message starts with `field` + ":".
void ExpectInvalid(const absl::Status& status, const std::string& field,
                   const std::string& detail = "") {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), StartsWith(field + ":"));
  if (!detail.empty()) {
    EXPECT_THAT(std::string(status.message()), HasSubstr(detail));
  }
}

// --- ValidateTensor -----------------------------------------------------------

TEST(ValidateTensorTest, AcceptsConsistentTensor) {
  EXPECT_TRUE(ValidateTensor(Zeros(DataType::kFloat32, {1, 1, 3, 4}), "input", kNoLimit).ok());
}

TEST(ValidateTensorTest, ByteCountMustMatchSizes) {
  Tensor tensor = Zeros(DataType::kFloat32, {1, 1, 3, 4});
  tensor.bytes = Buffer::Copy(tensor.bytes->view().substr(0, 44));
  const absl::Status status = ValidateTensor(tensor, "input", kNoLimit);
  ExpectInvalid(status, "input.data");
  EXPECT_EQ(status.message(), "input.data: 44 bytes, expected 48 for FLOAT32 sizes [1,1,3,4]");
}

TEST(ValidateTensorTest, MissingBytesAreZeroBytes) {
  Tensor tensor = Zeros(DataType::kInt32, {2});
  tensor.bytes.reset();
  ExpectInvalid(ValidateTensor(tensor, "input", kNoLimit), "input.data", "0 bytes, expected 8");
}

TEST(ValidateTensorTest, DataTypeMustBeKnown) {
  Tensor tensor = Zeros(DataType::kFloat32, {2});
  tensor.data_type = DataType::kUnknown;
  ExpectInvalid(ValidateTensor(tensor, "a", kNoLimit), "a.data_type");
  tensor.data_type = static_cast<DataType>(42);
  ExpectInvalid(ValidateTensor(tensor, "a", kNoLimit), "a.data_type", "42");
}

TEST(ValidateTensorTest, RankMustBeOneToEight) {
  Tensor scalar = Zeros(DataType::kFloat32, {});
  EXPECT_EQ(ValidateTensor(scalar, "input", kNoLimit).message(),
            "input.sizes: 0 dimensions, at least 1 required");
  Tensor nine = Zeros(DataType::kFloat32, {1, 1, 1, 1, 1, 1, 1, 1, 1});
  EXPECT_EQ(ValidateTensor(nine, "input", kNoLimit).message(),
            "input.sizes: 9 dimensions, at most 8 allowed");
  EXPECT_TRUE(
      ValidateTensor(Zeros(DataType::kFloat32, {1, 1, 1, 1, 1, 1, 1, 2}), "input", kNoLimit).ok());
}

TEST(ValidateTensorTest, SizesMustBePositive) {
  Tensor tensor;
  tensor.data_type = DataType::kFloat32;
  tensor.sizes = {2, 3, 0};
  tensor.bytes = Buffer::Zeroed(0);
  EXPECT_EQ(ValidateTensor(tensor, "input", kNoLimit).message(),
            "input.sizes[2]: 0, sizes must be positive");
}

TEST(ValidateTensorTest, ElementCountOverflowIsRejected) {
  Tensor tensor;
  tensor.data_type = DataType::kUint8;
  tensor.sizes = {0xffffffffu, 0xffffffffu, 3};
  tensor.bytes = Buffer::Zeroed(16);
  ExpectInvalid(ValidateTensor(tensor, "input", kNoLimit), "input.sizes", "2^64");
}

TEST(ValidateTensorTest, ByteCountOverflowIsRejected) {
  Tensor tensor;
  tensor.data_type = DataType::kInt64;
  tensor.sizes = {0xffffffffu, 0xffffffffu};  // fits as elements, not as bytes
  tensor.bytes = Buffer::Zeroed(16);
  ExpectInvalid(ValidateTensor(tensor, "input", kNoLimit), "input.sizes", "2^64 bytes");
}

TEST(ValidateTensorTest, OverTheCapIsResourceExhausted) {
  const Tensor tensor = Zeros(DataType::kFloat32, {1024});
  EXPECT_TRUE(ValidateTensor(tensor, "tensor", 4096).ok());
  const absl::Status status = ValidateTensor(tensor, "tensor", 4095);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_THAT(std::string(status.message()), StartsWith("tensor.sizes:"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("4095"));
}

// --- MakeScanOperation ---------------------------------------------------------

TEST(MakeScanOperationTest, FillsOuterAxisInner) {
  absl::StatusOr<ScanOperation> op =
      MakeScanOperation(OperatorKind::kCumulativeSummation, Zeros(DataType::kFloat32, {2, 3, 4, 5}),
                        2, AxisDirection::kDecreasing, true);
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_EQ(op->outer, 6u);
  EXPECT_EQ(op->axis_size, 4u);
  EXPECT_EQ(op->inner, 5u);
  EXPECT_EQ(op->direction, AxisDirection::kDecreasing);
  EXPECT_TRUE(op->exclusive);
  EXPECT_EQ(KindOf(*op), OperatorKind::kCumulativeSummation);
  EXPECT_EQ(OperationBytes(*op), 2u * 120 * 4);
}

TEST(MakeScanOperationTest, AxisMustBeInRange) {
  const absl::Status status =
      MakeScanOperation(OperatorKind::kCumulativeProduct, Zeros(DataType::kFloat32, {1, 1, 3, 4}),
                        4, AxisDirection::kIncreasing, false)
          .status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "axis: 4 is out of range for 4 dimensions");
}

TEST(MakeScanOperationTest, SupportedTypesFollowTheSpec) {
  const std::vector<DataType> summation = {DataType::kFloat32, DataType::kFloat16,
                                           DataType::kInt64,   DataType::kInt32,
                                           DataType::kUint64,  DataType::kUint32};
  const std::vector<DataType> product = {DataType::kFloat32, DataType::kFloat16, DataType::kUint32,
                                         DataType::kUint16};
  for (int value = 1; value <= kMaxDataTypeValue; ++value) {
    const auto type = static_cast<DataType>(value);
    for (OperatorKind kind :
         {OperatorKind::kCumulativeSummation, OperatorKind::kCumulativeProduct}) {
      const auto& allowed = kind == OperatorKind::kCumulativeSummation ? summation : product;
      const bool supported = std::find(allowed.begin(), allowed.end(), type) != allowed.end();
      const absl::Status status =
          MakeScanOperation(kind, Zeros(type, {2, 2}), 0, AxisDirection::kIncreasing, false)
              .status();
      EXPECT_EQ(status.ok(), supported) << OperatorName(kind) << " " << DataTypeName(type);
      if (!supported) ExpectInvalid(status, "input.data_type", std::string(OperatorName(kind)));
    }
  }
  EXPECT_EQ(std::vector<DataType>(SupportedDataTypes(OperatorKind::kCumulativeSummation).begin(),
                                  SupportedDataTypes(OperatorKind::kCumulativeSummation).end()),
            summation);
}

TEST(MakeScanOperationTest, UnsupportedTypeMessageListsTheSupportedOnes) {
  const absl::Status status =
      MakeScanOperation(OperatorKind::kCumulativeSummation, Zeros(DataType::kInt8, {4}), 0,
                        AxisDirection::kIncreasing, false)
          .status();
  EXPECT_EQ(status.message(),
            "input.data_type: INT8 is not supported by cumulative_summation (supported: FLOAT32, "
            "FLOAT16, INT64, INT32, UINT64, UINT32)");
}

TEST(MakeScanOperationTest, InputIsValidated) {
  Tensor input = Zeros(DataType::kFloat32, {3});
  input.bytes = Buffer::Copy(input.bytes->view().substr(0, 8));
  ExpectInvalid(MakeScanOperation(OperatorKind::kCumulativeSummation, input, 0,
                                  AxisDirection::kIncreasing, false)
                    .status(),
                "input.data");
  ExpectInvalid(MakeScanOperation(OperatorKind::kCumulativeSummation, Tensor{}, 0,
                                  AxisDirection::kIncreasing, false)
                    .status(),
                "input");
}

TEST(MakeScanOperationTest, DirectionMustBeKnown) {
  ExpectInvalid(
      MakeScanOperation(OperatorKind::kCumulativeSummation, Zeros(DataType::kFloat32, {3}), 0,
                        static_cast<AxisDirection>(5), false)
          .status(),
      "axis_direction");
}

TEST(MakeScanOperationTest, RejectsTheMatMulKind) {
  EXPECT_EQ(MakeScanOperation(OperatorKind::kQuantizedLinearMatrixMultiply,
                              Zeros(DataType::kFloat32, {3}), 0, AxisDirection::kIncreasing, false)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

// --- MakeQuantizedMatMulOperation ---------------------------------------------

// A valid per-tensor operation: A {M,K} uint8, B {K,N} uint8, output uint8.
QuantizedMatMulTensors Valid(uint32_t m = 3, uint32_t k = 4, uint32_t n = 2) {
  QuantizedMatMulTensors t;
  t.a = Zeros(DataType::kUint8, {m, k});
  t.a_scale = Scalar(0.5f);
  t.b = Zeros(DataType::kUint8, {k, n});
  t.b_scale = Scalar(0.25f);
  t.output_scale = Scalar(2.0f);
  t.output_zero_point = Zeros(DataType::kUint8, {1, 1, 1, 1});
  return t;
}

absl::Status Make(QuantizedMatMulTensors t, DataType output_type = DataType::kUnknown) {
  return MakeQuantizedMatMulOperation(std::move(t), output_type).status();
}

TEST(MakeQuantizedMatMulTest, NormalizesTo4DAndKeepsTheCallersRank) {
  absl::StatusOr<QuantizedMatMulOperation> op = MakeQuantizedMatMulOperation(Valid(), {});
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_EQ(op->a.sizes, (Shape{1, 1, 3, 4}));
  EXPECT_EQ(op->b.sizes, (Shape{1, 1, 4, 2}));
  EXPECT_EQ(op->output_sizes, (Shape{3, 2}));
  EXPECT_EQ(op->m, 3u);
  EXPECT_EQ(op->k, 4u);
  EXPECT_EQ(op->n, 2u);
  EXPECT_EQ(op->output_data_type, DataType::kUint8);
  EXPECT_EQ(op->a_quantization, QuantizationAxis::kPerTensor);
  EXPECT_EQ(KindOf(*op), OperatorKind::kQuantizedLinearMatrixMultiply);
  // 12 + 8 bytes of A and B, three 4-byte scales, one zero point, 6 outputs.
  EXPECT_EQ(OperationBytes(*op), 12u + 8 + 12 + 1 + 6);
}

TEST(MakeQuantizedMatMulTest, BroadcastsBatchAndChannel) {
  QuantizedMatMulTensors t = Valid();
  t.a = Zeros(DataType::kInt8, {2, 1, 3, 4});
  t.b = Zeros(DataType::kInt8, {5, 4, 2});
  absl::StatusOr<QuantizedMatMulOperation> op = MakeQuantizedMatMulOperation(std::move(t), {});
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_EQ(op->batch, 2u);
  EXPECT_EQ(op->channel, 5u);
  EXPECT_EQ(op->output_sizes, (Shape{2, 5, 3, 2}));
}

TEST(MakeQuantizedMatMulTest, BatchMismatchIsRejected) {
  QuantizedMatMulTensors t = Valid();
  t.a = Zeros(DataType::kUint8, {2, 1, 3, 4});
  t.b = Zeros(DataType::kUint8, {3, 1, 4, 2});
  ExpectInvalid(Make(std::move(t)), "b.sizes", "batch 3");
  t = Valid();
  t.a = Zeros(DataType::kUint8, {2, 3, 4});
  t.b = Zeros(DataType::kUint8, {4, 4, 2});
  ExpectInvalid(Make(std::move(t)), "b.sizes", "channel 4");
}

TEST(MakeQuantizedMatMulTest, InnerDimensionsMustMatch) {
  QuantizedMatMulTensors t = Valid();
  t.b = Zeros(DataType::kUint8, {5, 2});
  EXPECT_EQ(Make(std::move(t)).message(), "b.sizes: K=5 does not match a.sizes K=4");
}

TEST(MakeQuantizedMatMulTest, KIsBoundedSoInt32AccumulationCannotWrap) {
  // 255 * 255 * 33025 <= INT32_MAX < 255 * 255 * 33026.
  EXPECT_TRUE(Make(Valid(1, 33025, 1)).ok());
  ExpectInvalid(Make(Valid(1, 33026, 1)), "a.sizes", "K=33026");
}

TEST(MakeQuantizedMatMulTest, OperandRankAndTypes) {
  QuantizedMatMulTensors t = Valid();
  t.a = Zeros(DataType::kUint8, {12});
  ExpectInvalid(Make(std::move(t)), "a.sizes", "1 dimensions");
  t = Valid();
  t.b = Zeros(DataType::kUint8, {1, 1, 1, 4, 2});
  ExpectInvalid(Make(std::move(t)), "b.sizes", "5 dimensions");
  t = Valid();
  t.a = Zeros(DataType::kInt32, {3, 4});
  ExpectInvalid(Make(std::move(t)), "a.data_type", "INT32 is not supported");
  t = Valid();
  t.b = Tensor{};
  EXPECT_EQ(Make(std::move(t)).message(), "b: required");
}

TEST(MakeQuantizedMatMulTest, ScalesAreRequired) {
  for (Tensor QuantizedMatMulTensors::*field :
       {&QuantizedMatMulTensors::a_scale, &QuantizedMatMulTensors::b_scale,
        &QuantizedMatMulTensors::output_scale}) {
    QuantizedMatMulTensors t = Valid();
    t.*field = Tensor{};
    const absl::Status status = Make(std::move(t));
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(status.message()), HasSubstr("_scale: required"));
  }
}

TEST(MakeQuantizedMatMulTest, ScaleShapesArePerTensorOrPerRowOrColumn) {
  QuantizedMatMulTensors t = Valid();
  t.a_scale = Floats({1, 1, 2, 1}, {1, 1});
  EXPECT_EQ(Make(std::move(t)).message(),
            "a_scale.sizes: [1,1,2,1], expected [1,1,1,1] (per tensor) or [1,1,3,1] (per row)");
  t = Valid();
  t.b_scale = Floats({1, 1, 2, 1}, {1, 1});  // a row shape where a column one is expected
  ExpectInvalid(Make(std::move(t)), "b_scale.sizes", "[1,1,1,2] (per column)");
  t = Valid();
  t.output_scale = Floats({1, 1, 1, 3}, {1, 1, 1});
  ExpectInvalid(Make(std::move(t)), "output_scale.sizes");

  t = Valid();
  t.a_scale = Floats({1, 1, 3, 1}, {1, 2, 3});
  t.b_scale = Floats({1, 1, 1, 2}, {1, 2});
  t.output_scale = Floats({3, 1}, {1, 2, 3});  // fewer dimensions: leading 1s
  absl::StatusOr<QuantizedMatMulOperation> op = MakeQuantizedMatMulOperation(std::move(t), {});
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_EQ(op->a_quantization, QuantizationAxis::kPerRow);
  EXPECT_EQ(op->b_quantization, QuantizationAxis::kPerColumn);
  EXPECT_EQ(op->output_quantization, QuantizationAxis::kPerRow);
  EXPECT_EQ(op->output_scale.sizes, (Shape{1, 1, 3, 1}));
}

TEST(MakeQuantizedMatMulTest, ScalesMustBeFloat32AndFinite) {
  QuantizedMatMulTensors t = Valid();
  t.a_scale = Zeros(DataType::kFloat16, {1, 1, 1, 1});
  ExpectInvalid(Make(std::move(t)), "a_scale.data_type", "expected FLOAT32");
  t = Valid();
  t.b_scale = Scalar(std::numeric_limits<float>::infinity());
  ExpectInvalid(Make(std::move(t)), "b_scale.data[0]", "finite");
  t = Valid();
  t.output_scale = Scalar(0.0f);
  ExpectInvalid(Make(std::move(t)), "output_scale.data[0]", "non-zero");
  t = Valid();
  t.a_scale = Scalar(0.0f);  // a zero input scale is fine: the result is all zero points
  EXPECT_TRUE(Make(std::move(t)).ok());
  // Subnormal scales: the CPU would use them, GPUs flush them to zero.
  t = Valid();
  t.a_scale = Scalar(1e-40f);
  ExpectInvalid(Make(std::move(t)), "a_scale.data[0]", "is subnormal");
  t = Valid();
  t.b_scale = Scalar(-std::numeric_limits<float>::denorm_min());
  ExpectInvalid(Make(std::move(t)), "b_scale.data[0]", "is subnormal");
  t = Valid();
  t.output_scale = Scalar(std::numeric_limits<float>::min());  // the smallest normal float
  EXPECT_TRUE(Make(std::move(t)).ok());
}

// The scale check reads float bits in a vectorized pass: every class of bad
// value is caught at any position of a long per-column scale (past any vector
// width), and the edges of the good range pass.
TEST(MakeQuantizedMatMulTest, EveryBadScaleValueIsFoundAtAnyPosition) {
  constexpr uint32_t kN = 37;
  auto bits = [](uint32_t value) {
    float f;
    std::memcpy(&f, &value, sizeof(f));
    return f;
  };
  const float good[] = {std::numeric_limits<float>::min(),
                        -std::numeric_limits<float>::min(),
                        std::numeric_limits<float>::max(),
                        -std::numeric_limits<float>::max(),
                        1.0f,
                        -3.5f};
  struct Bad {
    float value;
    bool bad_when_zero_allowed;  // a's and b's scales allow zero; the output's does not
    const char* message;
  };
  const Bad bad[] = {
      {std::numeric_limits<float>::quiet_NaN(), true, "not a valid scale"},
      {bits(0xffc00001u), true, "not a valid scale"},  // a negative NaN
      {std::numeric_limits<float>::infinity(), true, "not a valid scale"},
      {-std::numeric_limits<float>::infinity(), true, "not a valid scale"},
      {bits(0x007fffffu), true, "is subnormal"},  // the largest subnormal
      {bits(0x80000001u), true, "is subnormal"},  // the smallest negative one
      {0.0f, false, "non-zero"},
      {-0.0f, false, "non-zero"},
  };
  for (uint32_t position : {0u, 15u, 16u, kN - 1}) {
    for (float value : good) {
      std::vector<float> scales(kN, 0.5f);
      scales[position] = value;
      QuantizedMatMulTensors t = Valid(3, 4, kN);
      t.b_scale = Floats({1, 1, 1, kN}, scales);
      EXPECT_TRUE(Make(std::move(t)).ok()) << value << " at " << position;
      t = Valid(kN, 4, 2);
      t.output_scale = Floats({1, 1, kN, 1}, scales);
      EXPECT_TRUE(Make(std::move(t)).ok()) << value << " at " << position;
    }
    for (const Bad& b : bad) {
      std::vector<float> scales(kN, 0.5f);
      scales[position] = b.value;
      const std::string field = absl::StrCat("b_scale.data[", position, "]");
      QuantizedMatMulTensors t = Valid(3, 4, kN);
      t.b_scale = Floats({1, 1, 1, kN}, scales);
      if (b.bad_when_zero_allowed) {
        ExpectInvalid(Make(std::move(t)), field, b.message);
      } else {
        EXPECT_TRUE(Make(std::move(t)).ok()) << b.value << " at " << position;
      }
      t = Valid(kN, 4, 2);
      t.output_scale = Floats({1, 1, kN, 1}, scales);
      ExpectInvalid(Make(std::move(t)), absl::StrCat("output_scale.data[", position, "]"),
                    b.message);
    }
  }
}

TEST(MakeQuantizedMatMulTest, ZeroPointsMatchTheirTensorsType) {
  QuantizedMatMulTensors t = Valid();
  t.a_zero_point = Zeros(DataType::kInt8, {1, 1, 1, 1});
  EXPECT_EQ(Make(std::move(t)).message(), "a_zero_point.data_type: must match a (UINT8)");
  t = Valid();
  t.b_zero_point = Zeros(DataType::kInt8, {1, 1, 1, 1});
  ExpectInvalid(Make(std::move(t)), "b_zero_point.data_type", "must match b (UINT8)");
  t = Valid();
  t.b_zero_point = Zeros(DataType::kUint8, {1, 1, 4, 1});
  ExpectInvalid(Make(std::move(t)), "b_zero_point.sizes");
}

// Requests of one model send the same scalar zero point with per-column
// scales: its broadcast is made once per thread and shared (read-only), and
// a different value, type or width gets a broadcast of its own.
TEST(MakeQuantizedMatMulTest, RepeatedZeroPointBroadcastsShareTheirBytes) {
  auto make = [](uint8_t zero_point, uint32_t n) {
    QuantizedMatMulTensors t = Valid(3, 4, n);
    std::vector<float> scales(n, 0.25f);
    t.b_scale = Floats({1, 1, 1, n}, scales);
    t.b_zero_point = Zeros(DataType::kUint8, {1, 1, 1, 1});
    t.b_zero_point.mutable_data()[0] = zero_point;
    absl::StatusOr<QuantizedMatMulOperation> op = MakeQuantizedMatMulOperation(std::move(t), {});
    EXPECT_TRUE(op.ok()) << op.status();
    return *std::move(op);
  };
  const QuantizedMatMulOperation first = make(9, 5);
  const QuantizedMatMulOperation second = make(9, 5);
  EXPECT_EQ(first.b_zero_point.sizes, (Shape{1, 1, 1, 5}));
  EXPECT_EQ(std::string(first.b_zero_point.bytes->data(), 5), std::string(5, '\x09'));
  EXPECT_EQ(first.b_zero_point.bytes, second.b_zero_point.bytes);

  const QuantizedMatMulOperation other_value = make(10, 5);
  EXPECT_NE(other_value.b_zero_point.bytes, first.b_zero_point.bytes);
  EXPECT_EQ(std::string(other_value.b_zero_point.bytes->data(), 5), std::string(5, '\x0a'));
  const QuantizedMatMulOperation other_width = make(10, 6);
  EXPECT_EQ(std::string(other_width.b_zero_point.bytes->data(), 6), std::string(6, '\x0a'));
  // The shared bytes outlive the cache's next entry.
  EXPECT_EQ(std::string(first.b_zero_point.bytes->data(), 5), std::string(5, '\x09'));
}

TEST(MakeQuantizedMatMulTest, MixedScaleAndZeroPointGranularitiesAreUnified) {
  QuantizedMatMulTensors t = Valid();
  t.a_scale = Floats({1, 1, 3, 1}, {1, 2, 3});
  t.a_zero_point = Zeros(DataType::kUint8, {1, 1, 1, 1});
  t.a_zero_point.mutable_data()[0] = 7;
  t.b_zero_point = Zeros(DataType::kUint8, {1, 1, 1, 2});
  absl::StatusOr<QuantizedMatMulOperation> op = MakeQuantizedMatMulOperation(std::move(t), {});
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_EQ(op->a_quantization, QuantizationAxis::kPerRow);
  ASSERT_EQ(op->a_zero_point.sizes, (Shape{1, 1, 3, 1}));
  EXPECT_EQ(std::string(op->a_zero_point.bytes->data(), 3), std::string("\x07\x07\x07"));
  EXPECT_EQ(op->b_quantization, QuantizationAxis::kPerColumn);
  EXPECT_EQ(op->b_scale.sizes, (Shape{1, 1, 1, 2}));
  EXPECT_EQ(op->b_scale.element_count(), 2u);
}

TEST(MakeQuantizedMatMulTest, OutputTypeRules) {
  QuantizedMatMulTensors t = Valid();
  t.output_zero_point = Tensor{};
  EXPECT_EQ(Make(t).message(), "output_data_type: required when output_zero_point is absent");
  EXPECT_TRUE(Make(t, DataType::kInt8).ok());
  ExpectInvalid(Make(t, DataType::kFloat32), "output_data_type", "FLOAT32");

  t = Valid();  // zero point UINT8
  EXPECT_TRUE(Make(t, DataType::kUint8).ok());
  ExpectInvalid(Make(t, DataType::kInt8), "output_data_type",
                "does not match output_zero_point (UINT8)");
  t.output_zero_point = Zeros(DataType::kInt16, {1, 1, 1, 1});
  ExpectInvalid(Make(t), "output_zero_point.data_type");
}

TEST(MakeQuantizedMatMulTest, OutputTypeComesFromTheZeroPoint) {
  QuantizedMatMulTensors t = Valid();
  t.output_zero_point = Zeros(DataType::kInt8, {1, 1, 1, 1});
  absl::StatusOr<QuantizedMatMulOperation> op = MakeQuantizedMatMulOperation(std::move(t), {});
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_EQ(op->output_data_type, DataType::kInt8);
}

TEST(MakeQuantizedMatMulTest, OperandsAreValidatedAsTensors) {
  QuantizedMatMulTensors t = Valid();
  t.a.bytes = Buffer::Copy(t.a.bytes->view().substr(0, 5));
  ExpectInvalid(Make(std::move(t)), "a.data", "5 bytes, expected 12");
  t = Valid();
  t.b_scale.bytes = Buffer::Copy(t.b_scale.bytes->view().substr(0, 2));
  ExpectInvalid(Make(std::move(t)), "b_scale.data");
}

TEST(OperatorNameTest, NamesAreTheApiFieldNames) {
  EXPECT_EQ(OperatorName(OperatorKind::kCumulativeSummation), "cumulative_summation");
  EXPECT_EQ(OperatorName(OperatorKind::kCumulativeProduct), "cumulative_product");
  EXPECT_EQ(OperatorName(OperatorKind::kQuantizedLinearMatrixMultiply),
            "quantized_linear_matrix_multiply");
}

}  // namespace
}  // namespace dmlserve
