#include "scheduler/compatibility_key.h"

#include <memory>
#include <string>

#include "absl/hash/hash.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/scheduler/test_jobs.h"

namespace dmlserve {
namespace {

using ::dmlserve::testing::MatMulOf;
using ::dmlserve::testing::Scale;
using ::dmlserve::testing::ScanOf;
using ::dmlserve::testing::WeightB;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

CompatibilityKey KeyOf(const Operation& operation) { return CompatibilityKey::For(operation); }

void ExpectSame(const Operation& a, const Operation& b) {
  EXPECT_EQ(KeyOf(a), KeyOf(b));
  EXPECT_EQ(absl::HashOf(KeyOf(a)), absl::HashOf(KeyOf(b)));
}

TEST(CompatibilityKeyTest, ScansOfDifferentShapesAndAxesMatch) {
  ExpectSame(ScanOf(DataType::kFloat32, {2, 3}, 1, /*axis=*/0),
             ScanOf(DataType::kFloat32, {4, 1, 5}, 7, /*axis=*/2));
}

TEST(CompatibilityKeyTest, ScansDifferInKindTypeDirectionAndExclusivity) {
  const Operation base = ScanOf(DataType::kFloat32, {4}, 1);
  EXPECT_NE(KeyOf(base), KeyOf(ScanOf(DataType::kInt32, {4}, 1)));
  EXPECT_NE(KeyOf(base),
            KeyOf(ScanOf(DataType::kFloat32, {4}, 1, 0, OperatorKind::kCumulativeProduct)));
  EXPECT_NE(KeyOf(base),
            KeyOf(ScanOf(DataType::kFloat32, {4}, 1, 0, OperatorKind::kCumulativeSummation,
                         AxisDirection::kDecreasing)));
  EXPECT_NE(KeyOf(base),
            KeyOf(ScanOf(DataType::kFloat32, {4}, 1, 0, OperatorKind::kCumulativeSummation,
                         AxisDirection::kIncreasing, /*exclusive=*/true)));
  EXPECT_NE(KeyOf(base), KeyOf(MatMulOf(WeightB(1), Scale(1))));
}

TEST(CompatibilityKeyTest, MatMulsWithTheSameRegisteredBMatchWhateverA) {
  // Registered tensors are compared by id, not content.
  ExpectSame(MatMulOf(WeightB(1, "w"), Scale(1), Tensor(), /*m=*/2),
             MatMulOf(WeightB(1, "w"), Scale(1), Tensor(), /*m=*/5));
}

TEST(CompatibilityKeyTest, MatMulsWithDifferentRegisteredBDiffer) {
  EXPECT_NE(KeyOf(MatMulOf(WeightB(1, "w1"), Scale(1))),
            KeyOf(MatMulOf(WeightB(1, "w2"), Scale(1))));
}

TEST(CompatibilityKeyTest, InlineBIsComparedByContent) {
  // Equal bytes in separate storage match; one differing byte does not.
  ExpectSame(MatMulOf(WeightB(1), Scale(1)), MatMulOf(WeightB(1), Scale(1)));
  Tensor other = WeightB(1);
  other.mutable_data_as<int8_t>()[5] = 100;
  EXPECT_NE(KeyOf(MatMulOf(WeightB(1), Scale(1))), KeyOf(MatMulOf(other, Scale(1))));
}

TEST(CompatibilityKeyTest, RegisteredAndInlineBNeverMatch) {
  EXPECT_NE(KeyOf(MatMulOf(WeightB(1, "w"), Scale(1))), KeyOf(MatMulOf(WeightB(1), Scale(1))));
}

TEST(CompatibilityKeyTest, BScaleAndZeroPointMustMatch) {
  const Operation base = MatMulOf(WeightB(1, "w"), Scale(1));
  EXPECT_NE(KeyOf(base), KeyOf(MatMulOf(WeightB(1, "w"), Scale(2))));
  const Tensor zero_point = testing::MakeTensor<int8_t>(DataType::kInt8, {1, 1, 1, 1}, {3});
  EXPECT_NE(KeyOf(base), KeyOf(MatMulOf(WeightB(1, "w"), Scale(1), zero_point)));
  const Tensor other_zero_point = testing::MakeTensor<int8_t>(DataType::kInt8, {1, 1, 1, 1}, {4});
  EXPECT_NE(KeyOf(MatMulOf(WeightB(1, "w"), Scale(1), zero_point)),
            KeyOf(MatMulOf(WeightB(1, "w"), Scale(1), other_zero_point)));
  ExpectSame(MatMulOf(WeightB(1, "w"), Scale(1), zero_point),
             MatMulOf(WeightB(1, "w"), Scale(1), zero_point));
}

TEST(CompatibilityKeyTest, BQuantizationAxisMustMatch) {
  // Per-column scales with every column equal are still a different layout.
  const Tensor per_column = testing::Float32({1, 1, 1, 2}, {1, 1});
  EXPECT_NE(KeyOf(MatMulOf(WeightB(1, "w"), Scale(1))),
            KeyOf(MatMulOf(WeightB(1, "w"), per_column)));
}

TEST(CompatibilityKeyTest, ListsRegisteredTensorsForResidency) {
  Tensor b_scale = Scale(1);
  b_scale.set_registered_id("s");
  EXPECT_THAT(KeyOf(MatMulOf(WeightB(1, "w"), b_scale)).registered_ids(), ElementsAre("w", "s"));
  EXPECT_THAT(KeyOf(MatMulOf(WeightB(1), Scale(1))).registered_ids(), IsEmpty());
  EXPECT_THAT(KeyOf(ScanOf(DataType::kFloat32, {4}, 1)).registered_ids(), IsEmpty());
}

}  // namespace
}  // namespace dmlserve
