#ifndef DMLSERVE_CLIENT_CPP_FLOAT16_H_
#define DMLSERVE_CLIENT_CPP_FLOAT16_H_

#include <cstdint>

namespace dmlserve::client {

// IEEE 754 binary16 bit patterns, as FLOAT16 tensors carry them. C++17 has no
// half type, so callers work in float and convert at the tensor boundary.

// Rounds to nearest, ties to even; overflow gives infinity, NaN stays NaN.
uint16_t FloatToHalfBits(float value);

// Exact: every half value is representable as a float.
float HalfBitsToFloat(uint16_t bits);

}  // namespace dmlserve::client

#endif  // DMLSERVE_CLIENT_CPP_FLOAT16_H_
