// Typed host vectors <-> API tensors, for every data type, and the float16
// conversion that FLOAT16 tensors rely on.

#include "client/cpp/tensor_codec.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "client/cpp/float16.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dmlserve::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

template <typename T>
class TypedCodecTest : public ::testing::Test {};

using ElementTypes = ::testing::Types<float, double, uint8_t, uint16_t, uint32_t, uint64_t, int8_t,
                                      int16_t, int32_t, int64_t>;
TYPED_TEST_SUITE(TypedCodecTest, ElementTypes);

TYPED_TEST(TypedCodecTest, RoundTripsExtremesThroughTensor) {
  using T = TypeParam;
  const std::vector<T> values = {std::numeric_limits<T>::lowest(), T(0), T(1),
                                 std::numeric_limits<T>::max(), static_cast<T>(42)};
  const v1::Tensor tensor = MakeTensor<T>({1, 5}, values);
  EXPECT_EQ(tensor.data_type(), DataTypeOf<T>::kValue);
  EXPECT_THAT(tensor.sizes(), ElementsAre(1u, 5u));
  EXPECT_EQ(tensor.data().size(), values.size() * sizeof(T));
  EXPECT_EQ(DataTypeByteSize(tensor.data_type()), sizeof(T));
  absl::StatusOr<std::vector<T>> decoded = DecodeTensor<T>(tensor);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, values);
}

TYPED_TEST(TypedCodecTest, PacksLittleEndian) {
  using T = TypeParam;
  // The element 1 has its only non-zero byte first in little-endian order
  // for integers; for floats compare against the host's representation,
  // which is little-endian on every platform dmlserve builds for.
  const v1::Tensor tensor = MakeTensor<T>({1}, std::vector<T>{T(1)});
  if constexpr (std::is_integral_v<T>) {
    std::string expected(sizeof(T), '\0');
    expected[0] = '\x01';
    EXPECT_EQ(tensor.data(), expected);
  } else {
    const std::string expected = sizeof(T) == 4
                                     ? std::string("\x00\x00\x80\x3f", 4)
                                     : std::string("\x00\x00\x00\x00\x00\x00\xf0\x3f", 8);
    EXPECT_EQ(tensor.data(), expected);
  }
}

TYPED_TEST(TypedCodecTest, RejectsWrongTypeAndLength) {
  using T = TypeParam;
  v1::Tensor tensor = MakeTensor<T>({2}, std::vector<T>{T(1), T(2)});
  tensor.add_sizes(2);  // Now claims 4 elements.
  absl::StatusOr<std::vector<T>> decoded = DecodeTensor<T>(tensor);
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(decoded.status().message(), HasSubstr("4 elements"));

  tensor = MakeTensor<T>({2}, std::vector<T>{T(1), T(2)});
  tensor.set_data_type(DataTypeOf<T>::kValue == v1::INT8 ? v1::UINT8 : v1::INT8);
  EXPECT_EQ(DecodeTensor<T>(tensor).status().code(), absl::StatusCode::kInvalidArgument);
}

TYPED_TEST(TypedCodecTest, WidensToDouble) {
  using T = TypeParam;
  const std::vector<T> values = {T(0), T(7), std::numeric_limits<T>::lowest()};
  absl::StatusOr<std::vector<double>> widened = DecodeTensorAsDouble(MakeTensor<T>({3}, values));
  ASSERT_TRUE(widened.ok()) << widened.status();
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ((*widened)[i], static_cast<double>(values[i]));
  }
}

TEST(Float16Test, KnownBitPatterns) {
  EXPECT_EQ(FloatToHalfBits(0.0f), 0x0000);
  EXPECT_EQ(FloatToHalfBits(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalfBits(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalfBits(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalfBits(0.5f), 0x3800);
  EXPECT_EQ(FloatToHalfBits(65504.0f), 0x7bff);               // Largest finite half.
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1.0f, -14)), 0x0400);  // Smallest normal.
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1.0f, -24)), 0x0001);  // Smallest subnormal.
  EXPECT_EQ(FloatToHalfBits(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(FloatToHalfBits(-std::numeric_limits<float>::infinity()), 0xfc00);
  const uint16_t nan = FloatToHalfBits(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
}

TEST(Float16Test, RoundsToNearestEven) {
  // 1 + 2^-11 lies halfway between 1 (even mantissa) and 1 + 2^-10.
  EXPECT_EQ(FloatToHalfBits(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  // 1 + 3 * 2^-11 lies halfway between 1 + 2^-10 (odd) and 1 + 2^-9 (even).
  EXPECT_EQ(FloatToHalfBits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  // Just above the halfway point rounds up.
  EXPECT_EQ(FloatToHalfBits(std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f)), 0x3c01);
  // 65520 is halfway to 2^16 and rounds to infinity; just below stays finite.
  EXPECT_EQ(FloatToHalfBits(65520.0f), 0x7c00);
  EXPECT_EQ(FloatToHalfBits(std::nextafter(65520.0f, 0.0f)), 0x7bff);
  // 2^-25 is halfway between 0 and the smallest subnormal: ties to 0.
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(FloatToHalfBits(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  // 3 * 2^-25 is halfway between subnormals 1 (odd) and 2 (even).
  EXPECT_EQ(FloatToHalfBits(3 * std::ldexp(1.0f, -25)), 0x0002);
}

TEST(Float16Test, EveryHalfRoundTripsThroughFloat) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const float widened = HalfBitsToFloat(static_cast<uint16_t>(bits));
    if (std::isnan(widened)) {
      EXPECT_EQ(bits & 0x7c00, 0x7c00u) << bits;
      EXPECT_TRUE(std::isnan(HalfBitsToFloat(FloatToHalfBits(widened)))) << bits;
      continue;
    }
    EXPECT_EQ(FloatToHalfBits(widened), bits) << "bits " << bits << " value " << widened;
  }
}

TEST(Float16Test, TensorHelpersConvert) {
  const v1::Tensor tensor = MakeFloat16Tensor({3}, {1.0f, -2.5f, 0.1f});
  EXPECT_EQ(tensor.data_type(), v1::FLOAT16);
  EXPECT_EQ(tensor.data(), std::string("\x00\x3c\x00\xc1\x66\x2e", 6));
  absl::StatusOr<std::vector<float>> decoded = DecodeFloat16Tensor(tensor);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_THAT(*decoded, ElementsAre(1.0f, -2.5f, HalfBitsToFloat(0x2e66)));
  absl::StatusOr<std::vector<double>> widened = DecodeTensorAsDouble(tensor);
  ASSERT_TRUE(widened.ok());
  EXPECT_EQ((*widened)[1], -2.5);
}

TEST(DataTypeTest, ParsesNamesAndCountsElements) {
  EXPECT_EQ(*ParseDataType("float16"), v1::FLOAT16);
  EXPECT_EQ(*ParseDataType("INT64"), v1::INT64);
  EXPECT_EQ(ParseDataType("FLOAT8").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DataTypeDisplayName(static_cast<v1::DataType>(42)), "DATA_TYPE_42");
  EXPECT_EQ(DataTypeByteSize(v1::DATA_TYPE_UNKNOWN), 0u);
  EXPECT_EQ(*ElementCount({1, 1, 3, 4}), 12u);
  EXPECT_EQ(*ElementCount({}), 1u);
  EXPECT_EQ(ElementCount({0xffffffffu, 0xffffffffu, 0xffffffffu}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dmlserve::client
