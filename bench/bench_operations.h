#ifndef DMLSERVE_BENCH_BENCH_OPERATIONS_H_
#define DMLSERVE_BENCH_BENCH_OPERATIONS_H_

// Operations with random contents for the benchmarks, and a loop that runs
// them as one batch on any Device, shared by every backend's benchmark file.

#include <cstdint>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "kernels/backend/device.h"
#include "kernels/core/operation.h"

namespace dmlserve::bench {

// A scan over a tensor of `sizes` filled with values that keep sums and
// products finite.
Operation MakeScan(OperatorKind kind, DataType type, const Shape& sizes, uint32_t axis,
                   AxisDirection direction = AxisDirection::kIncreasing, bool exclusive = false);

// `count` quantized matrix multiplies {m,k} x {k,n} (A int8, B uint8, output
// int8, per-row A scales and zero points, per-column B scales) that all share
// one B tensor, as the batcher groups them. A non-empty `registered_id` marks
// B as a registered tensor (devices may keep it resident).
// `per_column_b_zero_point` adds a per-column B zero point: the same values
// in a buffer of each request's own, as the server holds a per-tensor zero
// point sent beside per-column scales (broadcast per request).
std::vector<Operation> MakeMatMulsSharingB(int count, uint32_t m, uint32_t k, uint32_t n,
                                           const std::string& registered_id = "",
                                           bool per_column_b_zero_point = false);

// One quantized matrix multiply {m,k} x {k,n} as the issue-7 comparison with
// ONNX Runtime defines it: the given A, B and output types, per-tensor scales
// and non-zero zero points (A: 3 for INT8, 128 for UINT8; B: 1), or per-column
// B scales and zero points with `per_column`.
struct QGemmCase {
  DataType a_type = DataType::kUint8;
  DataType b_type = DataType::kInt8;
  DataType output_type = DataType::kInt8;
  uint32_t m = 1, k = 1, n = 1;
  bool per_column = false;
  bool registered_b = false;
  // B's values (less 128 for UINT8) in [-64, 63]: 7-bit weights, as ONNX
  // Runtime's reduce-range quantization makes them.
  bool seven_bit_b = false;
  // Batch dimensions, broadcast against each other: A is {a_batch, 1, m, k}
  // and B {1, b_channel, k, n} when either is not 1.
  uint32_t a_batch = 1, b_channel = 1;
};
// The ids MakeQGemm gives a registered B and, with per-column parameters,
// B's scale and zero point (registered with it, as a user who registers
// weights would): what to evict after a benchmark.
inline constexpr const char* kQGemmRegisteredIds[] = {"bench-weights", "bench-weights-scale",
                                                      "bench-weights-zp"};
Operation MakeQGemm(const QGemmCase& c);

// Page faults and resident memory of the whole process around a benchmark's
// loop: what a request costs in memory, measured rather than assumed.
class MemoryProbe {
 public:
  // Records the resident size and the minor page fault count now, and resets
  // the process's peak resident size (Linux: /proc/self/clear_refs).
  MemoryProbe();

  // Sets the counters "faults/iter" (minor page faults per iteration since
  // construction: 0 when every call reuses memory that is already mapped)
  // and "peak_extra_MiB" (the highest resident size since construction, less
  // the resident size at construction).
  void Report(benchmark::State& state) const;

 private:
  long faults_ = 0;
  double resident_mib_ = 0;
};

// Runs `operations` as one batch per iteration on `device` and reports
// bytes/s (OperationBytes), items/s (operations) and, when `multiply_adds` is
// non-zero, the multiply-add rate as "MAC/s".
void RunBatches(benchmark::State& state, Device& device, const std::vector<Operation>& operations,
                double multiply_adds = 0);

}  // namespace dmlserve::bench

#endif  // DMLSERVE_BENCH_BENCH_OPERATIONS_H_
