#ifndef DMLSERVE_KERNELS_CORE_OPERATION_H_
#define DMLSERVE_KERNELS_CORE_OPERATION_H_

// Validated operator invocations: what a backend is asked to compute.
//
// Every backend may assume the invariants established here (valid types,
// shapes consistent with byte counts, axis in range, element counts that fit
// in 32 bits per dimension and 64 bits overall, matmul shapes normalized to
// 4-D). The Make* functions are the single place those rules are checked; their
// error messages name the field relative to the operator message
// ("input.data: 44 bytes, expected 48 for FLOAT32 sizes [1,1,3,4]") and the
// server prefixes the operator ("cumulative_summation.").

#include <bitset>
#include <cstdint>
#include <string>
#include <variant>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "kernels/core/data_type.h"
#include "kernels/core/tensor.h"

namespace dmlserve {

enum class OperatorKind : uint8_t {
  kCumulativeSummation = 0,
  kCumulativeProduct = 1,
  kQuantizedLinearMatrixMultiply = 2,
};
inline constexpr int kOperatorKindCount = 3;
// A set of operators, indexed by OperatorKind (e.g. those a device serves).
using OperatorSet = std::bitset<kOperatorKindCount>;

// "cumulative_summation", "cumulative_product",
// "quantized_linear_matrix_multiply" (the API's oneof field names, also used as
// the `operator` metric label).
absl::string_view OperatorName(OperatorKind kind);

// Data types an operator accepts (for its main input), as the spec lists them.
absl::Span<const DataType> SupportedDataTypes(OperatorKind kind);

enum class AxisDirection : uint8_t { kIncreasing = 0, kDecreasing = 1 };

// Cumulative summation or product. The output has the input's type and sizes.
struct ScanOperation {
  OperatorKind kind = OperatorKind::kCumulativeSummation;  // or kCumulativeProduct
  Tensor input;
  uint32_t axis = 0;
  AxisDirection direction = AxisDirection::kIncreasing;
  bool exclusive = false;

  // The input viewed as [outer, axis_size, inner] (row-major): element
  // (o, i, n) is at (o * axis_size + i) * inner + n.
  uint64_t outer = 1;
  uint32_t axis_size = 1;
  uint64_t inner = 1;
};

// Scale and zero-point granularity.
enum class QuantizationAxis : uint8_t {
  kPerTensor = 0,  // {1,1,1,1}
  kPerRow = 1,     // {1,1,M,1}  (A, output)
  kPerColumn = 2,  // {1,1,1,N}  (B)
};

// Quantized linear matrix multiply. All tensors' sizes are normalized to 4-D
// (leading 1s added); `output_sizes` keeps the rank the caller should see.
struct QuantizedMatMulOperation {
  Tensor a;                                        // {a_batch, a_channel, M, K}, INT8 or UINT8
  Tensor a_scale;                                  // FLOAT32
  Tensor a_zero_point;                             // optional, A's type
  Tensor b;                                        // {b_batch, b_channel, K, N}, INT8 or UINT8
  Tensor b_scale;                                  // FLOAT32
  Tensor b_zero_point;                             // optional, B's type
  Tensor output_scale;                             // FLOAT32
  Tensor output_zero_point;                        // optional, output type
  DataType output_data_type = DataType::kUnknown;  // INT8 or UINT8

  uint32_t a_batch = 1, a_channel = 1;
  uint32_t b_batch = 1, b_channel = 1;
  uint32_t batch = 1, channel = 1;  // broadcast result
  uint32_t m = 0, k = 0, n = 0;
  QuantizationAxis a_quantization = QuantizationAxis::kPerTensor;       // scale and zero point
  QuantizationAxis b_quantization = QuantizationAxis::kPerTensor;       // per tensor or column
  QuantizationAxis output_quantization = QuantizationAxis::kPerTensor;  // per tensor or row
  Shape output_sizes;  // {batch, channel, M, N} trimmed to the callers' rank
};

using Operation = std::variant<ScanOperation, QuantizedMatMulOperation>;

OperatorKind KindOf(const Operation& operation);

// Checks a tensor as it arrives: known type, 1..8 dimensions, no zero size,
// element count and byte size that fit (at most `max_bytes`), and a byte count
// matching the sizes. `field` names it in errors ("input").
absl::Status ValidateTensor(const Tensor& tensor, absl::string_view field, uint64_t max_bytes);

absl::StatusOr<ScanOperation> MakeScanOperation(OperatorKind kind, Tensor input, uint32_t axis,
                                                AxisDirection direction, bool exclusive);

struct QuantizedMatMulTensors {
  Tensor a, a_scale, a_zero_point, b, b_scale, b_zero_point, output_scale, output_zero_point;
};

// `output_data_type` may be kUnknown when output_zero_point is present; when
// both are given they must agree.
absl::StatusOr<QuantizedMatMulOperation> MakeQuantizedMatMulOperation(
    QuantizedMatMulTensors tensors, DataType output_data_type);

// Bytes an operation reads and writes (for batch byte limits and metrics).
uint64_t OperationBytes(const Operation& operation);

// Bytes of an operation's output (what a request holds for its answer).
uint64_t OutputBytes(const Operation& operation);
uint64_t OutputBytes(const QuantizedMatMulOperation& matmul);

// Bytes of the operands that every job of a batch shares because its
// compatibility key requires them identical (a matrix multiply's B, B scale
// and B zero point; 0 for scans): a batch holds them once, however many jobs
// it has. Part of OperationBytes.
uint64_t SharedOperandBytes(const Operation& operation);

}  // namespace dmlserve

#endif  // DMLSERVE_KERNELS_CORE_OPERATION_H_
