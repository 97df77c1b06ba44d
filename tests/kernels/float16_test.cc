#include "kernels/cpu/float16.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

#include "gtest/gtest.h"
#include "tests/reference/reference.h"

namespace dmlserve {
namespace {

bool SameHalf(uint16_t x, uint16_t y) {
  const bool x_nan = (x & 0x7c00) == 0x7c00 && (x & 0x3ff);
  const bool y_nan = (y & 0x7c00) == 0x7c00 && (y & 0x3ff);
  return x_nan ? y_nan : x == y;
}

TEST(Float16Test, HalfToFloatIsExactForEveryHalf) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const double want = reference::HalfToDouble(static_cast<uint16_t>(bits));
    const float got = HalfToFloat(static_cast<uint16_t>(bits));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << bits;
    } else {
      EXPECT_EQ(static_cast<double>(got), want) << bits;
      EXPECT_EQ(std::signbit(got), std::signbit(want)) << bits;
    }
  }
}

TEST(Float16Test, RoundTripsEveryHalf) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const auto half = static_cast<uint16_t>(bits);
    EXPECT_TRUE(SameHalf(FloatToHalf(HalfToFloat(half)), half)) << bits;
  }
}

// Midpoints between neighbouring halves are exact in float; each must go to
// the neighbour with the even mantissa.
TEST(Float16Test, TiesRoundToEven) {
  for (uint32_t bits = 0; bits < 0x7bff; ++bits) {
    const double low = reference::HalfToDouble(static_cast<uint16_t>(bits));
    const double high = reference::HalfToDouble(static_cast<uint16_t>(bits + 1));
    const float middle = static_cast<float>((low + high) / 2);
    const uint16_t even = (bits & 1) ? bits + 1 : bits;
    EXPECT_EQ(FloatToHalf(middle), even) << bits;
    EXPECT_EQ(FloatToHalf(-middle), even | 0x8000) << bits;
    EXPECT_EQ(reference::DoubleToHalf((low + high) / 2), even) << bits;
    // Just off the tie, the nearer neighbour wins.
    EXPECT_EQ(FloatToHalf(std::nextafter(middle, 0.0f)), bits) << bits;
    EXPECT_EQ(FloatToHalf(std::nextafter(middle, 1e9f)), bits + 1) << bits;
  }
}

TEST(Float16Test, OverflowAndSpecialValues) {
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65519.99f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);  // the tie above the maximum rounds to infinity
  EXPECT_EQ(FloatToHalf(1e30f), 0x7c00);
  EXPECT_EQ(FloatToHalf(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_TRUE(SameHalf(FloatToHalf(std::numeric_limits<float>::quiet_NaN()), 0x7e00));
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);  // tie to even (zero)
  EXPECT_EQ(FloatToHalf(std::ldexp(1.5f, -25)), 0x0001);  // above the tie
  EXPECT_EQ(FloatToHalf(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 ulp: tie to even
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::denorm_min()), 0x0000);
}

TEST(Float16Test, RandomFloatsMatchTheReference) {
  std::mt19937 rng(7);
  for (int i = 0; i < 1000000; ++i) {
    uint32_t bits = rng();
    // Concentrate on the half range: exponents near 0.
    bits = (bits & 0x807fffffu) | ((100 + (rng() % 60)) << 23);
    float value;
    std::memcpy(&value, &bits, sizeof(value));
    ASSERT_EQ(FloatToHalf(value), reference::DoubleToHalf(value)) << value;
  }
}

}  // namespace
}  // namespace dmlserve
