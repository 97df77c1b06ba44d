#ifndef DMLSERVE_TESTS_REFERENCE_RANDOM_OPERATIONS_H_
#define DMLSERVE_TESTS_REFERENCE_RANDOM_OPERATIONS_H_

// Random valid operations for differential testing of backends against the
// reference: every data type, rank 1-8 scans along every axis in both
// directions, inclusive and exclusive, and matrix multiplies with every
// INT8/UINT8 combination, 2-4-D operands with batch/channel broadcasting and
// every scale/zero-point granularity.

#include <cstdint>
#include <random>

#include "kernels/core/operation.h"
#include "kernels/core/tensor.h"

namespace dmlserve::reference {

class RandomOperationGenerator {
 public:
  explicit RandomOperationGenerator(uint64_t seed) : rng_(seed) {}

  // Upper bound on the elements of any generated input or output.
  void set_max_elements(uint64_t max_elements) { max_elements_ = max_elements; }

  // Any of the three operators.
  Operation Next();

  ScanOperation NextScan();
  ScanOperation NextScan(OperatorKind kind, DataType type);
  QuantizedMatMulOperation NextMatMul();

  // Values drawn the way NextScan draws them: integer values are sometimes
  // full-range (so sums and products wrap), float values stay where sums and
  // products keep a sensible magnitude.
  Tensor RandomTensor(OperatorKind kind, DataType type, const Shape& sizes);

  std::mt19937_64& rng() { return rng_; }

 private:
  uint32_t Uniform(uint32_t low, uint32_t high);  // inclusive
  bool Chance(double p);
  Shape RandomShape(int rank, uint64_t max_elements);

  std::mt19937_64 rng_;
  uint64_t max_elements_ = 4096;
};

}  // namespace dmlserve::reference

#endif  // DMLSERVE_TESTS_REFERENCE_RANDOM_OPERATIONS_H_
