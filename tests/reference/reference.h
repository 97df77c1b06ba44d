#ifndef DMLSERVE_TESTS_REFERENCE_REFERENCE_H_
#define DMLSERVE_TESTS_REFERENCE_REFERENCE_H_

// Straightforward reference implementations of the three operators, written
// for obviousness rather than speed, and the spec's rules for comparing a
// backend's output with them. Every test that checks an operator's result
// checks it against these: the kernels' and backends' tests, and the server's
// and clients' tests (which convert their requests' tensors to Tensor).
//
//   Tensor want = reference::Compute(op);             // the reference result
//   absl::Status s = reference::CheckOutput(op, got); // spec tolerance rules
//   absl::Status e = reference::CheckExact(want, got);// bit-for-bit

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "kernels/core/operation.h"
#include "kernels/core/tensor.h"

namespace dmlserve::reference {

// IEEE binary16 conversions, independent of the CPU backend's (float16.h) so
// that one can check the other. DoubleToHalf rounds to nearest, ties to even,
// overflowing to infinity.
double HalfToDouble(uint16_t half);
uint16_t DoubleToHalf(double value);

// Element `index` of a tensor of any numeric type, widened (exact for every
// type but 64-bit integers beyond 2^53).
double ElementAsDouble(const Tensor& tensor, uint64_t index);

// Writes the low bytes of `bits` (little-endian) as element `index`: wraps
// modulo 2^width.
void StoreBits(Tensor& tensor, uint64_t index, uint64_t bits);
// Writes `value` rounded to FLOAT32 or FLOAT16, or as FLOAT64 (the tensor's
// type).
void StoreFloat(Tensor& tensor, uint64_t index, double value);

// A tensor of `type` holding `values` (one per element, row-major): floats
// as StoreFloat writes them, integers converted exactly (they must be whole
// and fit the type). For tests that keep their data as plain numbers.
Tensor TensorFromValues(DataType type, const Shape& sizes, const std::vector<double>& values);
// Every element, as ElementAsDouble reads it.
std::vector<double> TensorToValues(const Tensor& tensor);

// The reference result: scans accumulate in float64 (floats; rounded to the
// type on every write) or in 64-bit integers wrapped to the type's width;
// matrix multiplies accumulate exactly in int64 and requantize as
// round_half_even(acc * (a_scale * b_scale / output_scale)) + zero point,
// saturated, in float64.
Tensor Compute(const Operation& operation);
Tensor ComputeScan(const ScanOperation& op);
Tensor ComputeQuantizedMatMul(const QuantizedMatMulOperation& op);

// Checks `actual` against the reference under the spec's rules; the error
// names the first offending element, the expected value and the tolerance.
//   - integer scans: exact (with wrap-around);
//   - FLOAT32/FLOAT16 sums: within (n + 1) * 2^-24 * (sum of |x| over the
//     prefix) plus one unit in the last place of the type (n = prefix
//     length): the worst case of float32 accumulation in any order, plus the
//     final rounding (one FLOAT16 ulp also covers double rounding); products
//     the same relative to |product|, plus (n + 1) * 2^-149 for underflow;
//     infinity is accepted where the tolerance reaches the overflow point;
//   - matrix multiply: exact, except +-1 where the float64 value lies within
//     1e-5 (relative) of a .5 tie and the requantization is not exact in
//     float32.
absl::Status CheckOutput(const Operation& operation, const Tensor& actual);

// Bit-for-bit equality of type, sizes and bytes.
absl::Status CheckExact(const Tensor& expected, const Tensor& actual);

// A one-line description of an operation (operator, types, shapes,
// attributes) for test failure messages.
std::string Describe(const Operation& operation);
std::string Describe(const ScanOperation& scan);
std::string Describe(const QuantizedMatMulOperation& op);

}  // namespace dmlserve::reference

#endif  // DMLSERVE_TESTS_REFERENCE_REFERENCE_H_
