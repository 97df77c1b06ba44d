#ifndef DMLSERVE_KERNELS_CPU_FLOAT16_H_
#define DMLSERVE_KERNELS_CPU_FLOAT16_H_

// IEEE 754 binary16 <-> binary32 conversions without branches on the value
// path that matters for speed, so loops over them still vectorise.
// Float-to-half rounds to nearest, ties to even, like the hardware does.

#include <cstdint>
#include <cstring>

namespace dmlserve {

inline float HalfToFloat(uint16_t half) {
  // Shifts the half's exponent and mantissa into place, rebiases, and fixes up
  // infinities/NaNs and subnormals (after F. Giesen's half_to_float).
  constexpr uint32_t kShiftedExponent = 0x7c00u << 13;
  uint32_t bits = (half & 0x7fffu) << 13;
  const uint32_t exponent = bits & kShiftedExponent;
  bits += (127u - 15u) << 23;
  float value;
  if (exponent == kShiftedExponent) {
    bits += (128u - 16u) << 23;  // Inf/NaN
    std::memcpy(&value, &bits, sizeof(value));
  } else if (exponent == 0) {
    // Subnormal: renormalise through a float subtraction, which is exact.
    bits += 1u << 23;
    std::memcpy(&value, &bits, sizeof(value));
    constexpr uint32_t kMagicBits = 113u << 23;
    float magic;
    std::memcpy(&magic, &kMagicBits, sizeof(magic));
    value -= magic;
  } else {
    std::memcpy(&value, &bits, sizeof(value));
  }
  uint32_t result;
  std::memcpy(&result, &value, sizeof(result));
  result |= static_cast<uint32_t>(half & 0x8000u) << 16;
  std::memcpy(&value, &result, sizeof(value));
  return value;
}

inline uint16_t FloatToHalf(float value) {
  // After F. Giesen's float_to_half_fast3_rtne.
  constexpr uint32_t kFloatInfinity = 255u << 23;
  constexpr uint32_t kHalfOverflow = (127u + 16u) << 23;  // 65536.0f: rounds to infinity
  constexpr uint32_t kDenormMagicBits = ((127u - 15u) + (23u - 10u) + 1u) << 23;
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  const uint32_t sign = bits & 0x80000000u;
  bits ^= sign;
  uint16_t half;
  if (bits >= kHalfOverflow) {
    // 65536 and up (and Inf/NaN); 65520..65535 round up to Inf below.
    half = bits > kFloatInfinity ? 0x7e00 : 0x7c00;
  } else if (bits < (113u << 23)) {
    // Result is subnormal or zero: let the FPU's round-to-nearest-even align
    // the mantissa by adding a magic number.
    float magic;
    std::memcpy(&magic, &kDenormMagicBits, sizeof(magic));
    float shifted;
    std::memcpy(&shifted, &bits, sizeof(shifted));
    shifted += magic;
    uint32_t shifted_bits;
    std::memcpy(&shifted_bits, &shifted, sizeof(shifted_bits));
    half = static_cast<uint16_t>(shifted_bits - kDenormMagicBits);
  } else {
    const uint32_t mantissa_odd = (bits >> 13) & 1u;
    bits += ((15u - 127u) << 23) + 0xfffu;  // rebias and round
    bits += mantissa_odd;                   // ties to even
    half = static_cast<uint16_t>(bits >> 13);
  }
  return static_cast<uint16_t>(half | (sign >> 16));
}

}  // namespace dmlserve

#endif  // DMLSERVE_KERNELS_CPU_FLOAT16_H_
