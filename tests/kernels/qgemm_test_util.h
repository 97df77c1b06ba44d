#ifndef DMLSERVE_TESTS_KERNELS_QGEMM_TEST_UTIL_H_
#define DMLSERVE_TESTS_KERNELS_QGEMM_TEST_UTIL_H_

// What the int8 GEMM's tests (qgemm_*_test.cc) share besides the tables of
// qgemm_tables.h (included here): random products to multiply.

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/core/data_type.h"
#include "kernels/core/operation.h"
#include "tests/kernels/qgemm_tables.h"

namespace dmlserve::testing {

// A tensor of `sizes` whose bytes are random.
Tensor RandomBytes(DataType type, Shape sizes, std::mt19937_64& rng);

struct Shape3 {
  uint32_t m, k, n;
};

// A random product of the given shape and types; `per_axis` picks per-row A
// and output quantization and per-column B quantization.
QuantizedMatMulOperation RandomProduct(Shape3 s, DataType a_type, DataType b_type,
                                       DataType output_type, bool per_axis, std::mt19937_64& rng);

// A random product whose B' (B, or B - 128 for UINT8) lies in [-64, 63],
// both ends included many times.
QuantizedMatMulOperation SevenBitProduct(Shape3 s, DataType a_type, DataType b_type,
                                         std::mt19937_64& rng);

}  // namespace dmlserve::testing

#endif  // DMLSERVE_TESTS_KERNELS_QGEMM_TEST_UTIL_H_
