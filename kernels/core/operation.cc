#include "kernels/core/operation.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/core/overloaded.h"

namespace dmlserve {
namespace {

constexpr uint64_t kNoByteLimit = std::numeric_limits<uint64_t>::max();

// |a - za| <= 255 and |b - zb| <= 255 for any mix of INT8/UINT8 values and
// zero points, so each product is at most 65025 in magnitude; this is the
// largest K for which K * 65025 <= INT32_MAX, i.e. for which every backend's
// int32 accumulator provably cannot wrap.
constexpr uint32_t kMaxAccumulationDepth =
    static_cast<uint32_t>(std::numeric_limits<int32_t>::max() / (255 * 255));
static_assert(kMaxAccumulationDepth == 33025);

constexpr DataType kSummationTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kInt64,
                                        DataType::kInt32,   DataType::kUint64,  DataType::kUint32};
constexpr DataType kProductTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kUint32,
                                      DataType::kUint16};
constexpr DataType kMatMulTypes[] = {DataType::kInt8, DataType::kUint8};

std::string DataTypeList(absl::Span<const DataType> types) {
  return absl::StrJoin(types, ", ", [](std::string* out, DataType type) {
    absl::StrAppend(out, DataTypeName(type));
  });
}

bool Contains(absl::Span<const DataType> types, DataType type) {
  for (DataType t : types) {
    if (t == type) return true;
  }
  return false;
}

std::string DataTypeText(DataType type) {
  const auto value = static_cast<int>(type);
  if (value < 0 || value > kMaxDataTypeValue) return absl::StrCat(value);
  return std::string(DataTypeName(type));
}

bool IsQuantizedType(DataType type) { return type == DataType::kInt8 || type == DataType::kUint8; }

// Pads `sizes` (2 to 4 dimensions) to 4-D with leading 1s.
Shape PadTo4D(const Shape& sizes) {
  Shape padded(4 - sizes.size(), 1);
  padded.insert(padded.end(), sizes.begin(), sizes.end());
  return padded;
}

// Scale and zero-point shapes: the tensor, after padding to 4-D, must be
// {1,1,1,1} or the one per-row/per-column shape.
struct QuantizationShape {
  QuantizationAxis axis;  // kPerRow or kPerColumn
  uint32_t count;         // M or N
};

Shape ShapeFor(QuantizationAxis axis, uint32_t count) {
  switch (axis) {
    case QuantizationAxis::kPerTensor:
      return Shape{1, 1, 1, 1};
    case QuantizationAxis::kPerRow:
      return Shape{1, 1, count, 1};
    case QuantizationAxis::kPerColumn:
      return Shape{1, 1, 1, count};
  }
  return Shape{1, 1, 1, 1};
}

absl::StatusOr<QuantizationAxis> ClassifyQuantization(const Tensor& tensor, absl::string_view field,
                                                      QuantizationShape expected) {
  const Shape per_tensor = ShapeFor(QuantizationAxis::kPerTensor, 1);
  const Shape per_slice = ShapeFor(expected.axis, expected.count);
  if (tensor.sizes.size() <= 4) {
    const Shape padded = PadTo4D(tensor.sizes);
    if (padded == per_tensor) return QuantizationAxis::kPerTensor;
    if (padded == per_slice) return expected.axis;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(field, ".sizes: ", ShapeToString(tensor.sizes), ", expected ",
                   ShapeToString(per_tensor), " (per tensor) or ", ShapeToString(per_slice),
                   expected.axis == QuantizationAxis::kPerRow ? " (per row)" : " (per column)"));
}

// The last broadcast made, reused while requests send the same scalar for the
// same shape (clients of one model do): its bytes are never written after
// validation, so jobs share them. That saves an allocation and a fill per
// request, and the batcher's check that fused jobs have the same B zero
// points (SameBytes) then compares pointers. Only small broadcasts are kept
// (at most kMaxCachedBroadcastBytes), in one entry for the process: no
// thread-local object with a destructor, which thread exit under mingw-w64
// (the Windows service test's build) does not survive.
constexpr size_t kMaxCachedBroadcastBytes = size_t{16} << 10;

struct CachedBroadcast {
  DataType type = DataType::kFloat32;
  QuantizationAxis axis = QuantizationAxis::kPerTensor;
  uint32_t count = 0;
  uint32_t value = 0;  // the scalar's bytes (at most 4)
  Tensor tensor;
};

struct BroadcastCache {
  std::mutex mutex;
  CachedBroadcast entry;  // under mutex
};

BroadcastCache& TheBroadcastCache() {
  static BroadcastCache* cache = new BroadcastCache;  // never destroyed
  return *cache;
}

// Replicates a one-element tensor `count` times in the given shape, so that a
// scale and its zero point always share one granularity (the kernels then
// index both the same way).
Tensor Broadcast(const Tensor& scalar, QuantizationAxis axis, uint32_t count) {
  const size_t element = DataTypeSize(scalar.data_type);
  const bool cacheable = element <= sizeof(uint32_t) && element * count <= kMaxCachedBroadcastBytes;
  uint32_t value = 0;
  if (cacheable) {
    std::memcpy(&value, scalar.data(), element);
    BroadcastCache& cache = TheBroadcastCache();
    std::lock_guard<std::mutex> lock(cache.mutex);
    const CachedBroadcast& cached = cache.entry;
    if (cached.tensor.present() && cached.type == scalar.data_type && cached.axis == axis &&
        cached.count == count && cached.value == value) {
      return cached.tensor;
    }
  }
  Tensor expanded = Tensor::Allocate(scalar.data_type, ShapeFor(axis, count));
  uint8_t* out = expanded.mutable_data();
  const size_t total = element * count;
  if (total == 0) return expanded;
  // One element, then doubling copies: a per-column zero point has thousands
  // of elements, and this runs per request.
  std::memcpy(out, scalar.data(), element);
  for (size_t filled = element; filled < total; filled *= 2) {
    std::memcpy(out + filled, out, std::min(filled, total - filled));
  }
  if (cacheable) {
    BroadcastCache& cache = TheBroadcastCache();
    std::lock_guard<std::mutex> lock(cache.mutex);
    cache.entry = CachedBroadcast{scalar.data_type, axis, count, value, expanded};
  }
  return expanded;
}

absl::Status CheckScaleValues(const Tensor& scale, absl::string_view field, bool allow_zero) {
  const float* values = scale.data_as<float>();
  const uint64_t count = scale.element_count();
  // One branch-free pass (it vectorizes: per-column scales come with every
  // request), then a search for the first bad value only when there is one.
  // Subnormal scales are refused too: the CPU backend would use them (in
  // float64) while GPUs flush them to zero, so the backends would disagree.
  auto subnormal = [](float value) {
    return value != 0.0f && std::fabs(value) < std::numeric_limits<float>::min();
  };
  auto bad = [allow_zero, &subnormal](float value) {
    return !std::isfinite(value) || (!allow_zero && value == 0.0f) || subnormal(value);
  };
  // The fast pass reads the bits: with the sign cleared, a float is bad when
  // its exponent is all ones (infinite or NaN) or all zeros with any bit set
  // (subnormal), or it is zero and zero is refused. Integer compares
  // vectorize where float classification does not (no -ffast-math here), and
  // per-column scales of a registered B are checked on every request.
  constexpr uint32_t kAbsMask = 0x7fffffffu;
  constexpr uint32_t kInfinityBits = 0x7f800000u;
  constexpr uint32_t kSmallestNormalBits = 0x00800000u;
  const uint32_t smallest_good = allow_zero ? 1u : 0u;  // 0 is good only when allowed
  uint32_t any_bad = 0;
  for (uint64_t i = 0; i < count; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &values[i], sizeof(bits));
    bits &= kAbsMask;
    // Bad: bits >= infinity, or 0 < bits < smallest normal, or bits == 0 and
    // zero is refused. One unsigned compare covers the last two: bits - s
    // (wrapping) is below smallest_normal - s exactly for those values.
    any_bad |= static_cast<uint32_t>(bits >= kInfinityBits) |
               static_cast<uint32_t>(bits - smallest_good < kSmallestNormalBits - smallest_good);
  }
  if (any_bad == 0) return absl::OkStatus();
  for (uint64_t i = 0; i < count; ++i) {
    if (subnormal(values[i])) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ".data[", i, "]: ", values[i],
          " is subnormal; a non-zero scale must be at least 1.17549e-38 in magnitude (GPUs "
          "flush subnormal floats to zero)"));
    }
    if (bad(values[i])) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".data[", i, "]: ", values[i],
                                                     " is not a valid scale (must be finite",
                                                     allow_zero ? ")" : " and non-zero)"));
    }
  }
  return absl::OkStatus();
}

// Validates one scale and its optional zero point (whose type must be
// `zero_point_type`), and makes their granularities agree.
absl::StatusOr<QuantizationAxis> ValidateQuantization(Tensor& scale, absl::string_view scale_field,
                                                      Tensor& zero_point,
                                                      absl::string_view zero_point_field,
                                                      DataType zero_point_type,
                                                      absl::string_view zero_point_owner,
                                                      QuantizationShape shape, bool allow_zero) {
  if (!scale.present()) return absl::InvalidArgumentError(absl::StrCat(scale_field, ": required"));
  if (absl::Status status = ValidateTensor(scale, scale_field, kNoByteLimit); !status.ok()) {
    return status;
  }
  if (scale.data_type != DataType::kFloat32) {
    return absl::InvalidArgumentError(absl::StrCat(
        scale_field, ".data_type: ", DataTypeText(scale.data_type), ", expected FLOAT32"));
  }
  absl::StatusOr<QuantizationAxis> scale_axis = ClassifyQuantization(scale, scale_field, shape);
  if (!scale_axis.ok()) return scale_axis.status();
  if (absl::Status status = CheckScaleValues(scale, scale_field, allow_zero); !status.ok()) {
    return status;
  }
  QuantizationAxis axis = *scale_axis;
  if (zero_point.present()) {
    if (absl::Status status = ValidateTensor(zero_point, zero_point_field, kNoByteLimit);
        !status.ok()) {
      return status;
    }
    if (zero_point.data_type != zero_point_type) {
      return absl::InvalidArgumentError(absl::StrCat(zero_point_field, ".data_type: must match ",
                                                     zero_point_owner, " (",
                                                     DataTypeText(zero_point_type), ")"));
    }
    absl::StatusOr<QuantizationAxis> zero_point_axis =
        ClassifyQuantization(zero_point, zero_point_field, shape);
    if (!zero_point_axis.ok()) return zero_point_axis.status();
    if (*zero_point_axis != axis) {
      if (axis == QuantizationAxis::kPerTensor) {
        scale = Broadcast(scale, shape.axis, shape.count);
        axis = shape.axis;
      } else {
        zero_point = Broadcast(zero_point, shape.axis, shape.count);
      }
    }
    zero_point.sizes = ShapeFor(axis, shape.count);
  }
  scale.sizes = ShapeFor(axis, shape.count);
  return axis;
}

absl::Status ValidateMatrix(const Tensor& tensor, absl::string_view field) {
  if (!tensor.present()) return absl::InvalidArgumentError(absl::StrCat(field, ": required"));
  if (absl::Status status = ValidateTensor(tensor, field, kNoByteLimit); !status.ok()) {
    return status;
  }
  if (!Contains(kMatMulTypes, tensor.data_type)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".data_type: ", DataTypeText(tensor.data_type),
                     " is not supported by quantized_linear_matrix_multiply (supported: ",
                     DataTypeList(kMatMulTypes), ")"));
  }
  if (tensor.sizes.size() < 2 || tensor.sizes.size() > 4) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".sizes: ", tensor.sizes.size(), " dimensions, expected 2 to 4"));
  }
  return absl::OkStatus();
}

// numpy matmul broadcasting of one leading dimension.
absl::StatusOr<uint32_t> BroadcastDimension(uint32_t a, uint32_t b, absl::string_view name) {
  if (a == b || b == 1) return a;
  if (a == 1) return b;
  return absl::InvalidArgumentError(absl::StrCat("b.sizes: ", name, " ", b,
                                                 " does not broadcast with a.sizes ", name, " ", a,
                                                 " (they must be equal or one of them 1)"));
}

bool MultiplyOverflows(uint64_t a, uint64_t b, uint64_t* product) {
  return __builtin_mul_overflow(a, b, product);
}

}  // namespace

absl::string_view OperatorName(OperatorKind kind) {
  switch (kind) {
    case OperatorKind::kCumulativeSummation:
      return "cumulative_summation";
    case OperatorKind::kCumulativeProduct:
      return "cumulative_product";
    case OperatorKind::kQuantizedLinearMatrixMultiply:
      return "quantized_linear_matrix_multiply";
  }
  return "unknown_operator";
}

absl::Span<const DataType> SupportedDataTypes(OperatorKind kind) {
  switch (kind) {
    case OperatorKind::kCumulativeSummation:
      return kSummationTypes;
    case OperatorKind::kCumulativeProduct:
      return kProductTypes;
    case OperatorKind::kQuantizedLinearMatrixMultiply:
      return kMatMulTypes;
  }
  return {};
}

OperatorKind KindOf(const Operation& operation) {
  return std::visit(Overloaded{
                        [](const ScanOperation& scan) { return scan.kind; },
                        [](const QuantizedMatMulOperation&) {
                          return OperatorKind::kQuantizedLinearMatrixMultiply;
                        },
                    },
                    operation);
}

absl::Status ValidateTensor(const Tensor& tensor, absl::string_view field, uint64_t max_bytes) {
  const size_t element_size = DataTypeSize(tensor.data_type);
  if (element_size == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ".data_type: ", DataTypeText(tensor.data_type),
        tensor.data_type == DataType::kUnknown ? " (missing)" : "", " is not a valid data type"));
  }
  if (tensor.sizes.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".sizes: 0 dimensions, at least 1 required"));
  }
  if (tensor.sizes.size() > kMaxDimensions) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".sizes: ", tensor.sizes.size(),
                                                   " dimensions, at most ", kMaxDimensions,
                                                   " allowed"));
  }
  uint64_t elements = 1;
  for (size_t i = 0; i < tensor.sizes.size(); ++i) {
    if (tensor.sizes[i] == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".sizes[", i, "]: 0, sizes must be positive"));
    }
    if (MultiplyOverflows(elements, tensor.sizes[i], &elements)) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".sizes: ", ShapeToString(tensor.sizes),
                                                     " has more than 2^64 elements"));
    }
  }
  uint64_t bytes;
  if (MultiplyOverflows(elements, element_size, &bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".sizes: ", DataTypeName(tensor.data_type), " sizes ",
                     ShapeToString(tensor.sizes), " need more than 2^64 bytes"));
  }
  if (bytes > max_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        field, ".sizes: ", DataTypeName(tensor.data_type), " sizes ", ShapeToString(tensor.sizes),
        " need ", bytes, " bytes, over the limit of ", max_bytes, " bytes"));
  }
  if (tensor.byte_size() != bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".data: ", tensor.byte_size(), " bytes, expected ", bytes, " for ",
                     DataTypeName(tensor.data_type), " sizes ", ShapeToString(tensor.sizes)));
  }
  return absl::OkStatus();
}

absl::StatusOr<ScanOperation> MakeScanOperation(OperatorKind kind, Tensor input, uint32_t axis,
                                                AxisDirection direction, bool exclusive) {
  if (kind != OperatorKind::kCumulativeSummation && kind != OperatorKind::kCumulativeProduct) {
    return absl::InvalidArgumentError(
        absl::StrCat(OperatorName(kind), " is not a cumulative (scan) operator"));
  }
  if (!input.present()) return absl::InvalidArgumentError("input: required");
  if (absl::Status status = ValidateTensor(input, "input", kNoByteLimit); !status.ok()) {
    return status;
  }
  const absl::Span<const DataType> supported = SupportedDataTypes(kind);
  if (!Contains(supported, input.data_type)) {
    return absl::InvalidArgumentError(
        absl::StrCat("input.data_type: ", DataTypeName(input.data_type), " is not supported by ",
                     OperatorName(kind), " (supported: ", DataTypeList(supported), ")"));
  }
  const size_t rank = input.sizes.size();
  if (axis >= rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("axis: ", axis, " is out of range for ", rank, " dimensions"));
  }
  if (direction != AxisDirection::kIncreasing && direction != AxisDirection::kDecreasing) {
    return absl::InvalidArgumentError(
        absl::StrCat("axis_direction: ", static_cast<int>(direction), " is not a valid direction"));
  }
  ScanOperation op;
  op.kind = kind;
  op.axis = axis;
  op.direction = direction;
  op.exclusive = exclusive;
  op.outer = 1;
  for (size_t i = 0; i < axis; ++i) op.outer *= input.sizes[i];
  op.axis_size = input.sizes[axis];
  op.inner = 1;
  for (size_t i = axis + 1; i < rank; ++i) op.inner *= input.sizes[i];
  op.input = std::move(input);
  return op;
}

absl::StatusOr<QuantizedMatMulOperation> MakeQuantizedMatMulOperation(
    QuantizedMatMulTensors tensors, DataType output_data_type) {
  QuantizedMatMulOperation op;
  if (absl::Status status = ValidateMatrix(tensors.a, "a"); !status.ok()) return status;
  if (absl::Status status = ValidateMatrix(tensors.b, "b"); !status.ok()) return status;

  const size_t rank = std::max(tensors.a.sizes.size(), tensors.b.sizes.size());
  const Shape a_sizes = PadTo4D(tensors.a.sizes);
  const Shape b_sizes = PadTo4D(tensors.b.sizes);
  op.a_batch = a_sizes[0];
  op.a_channel = a_sizes[1];
  op.m = a_sizes[2];
  op.k = a_sizes[3];
  op.b_batch = b_sizes[0];
  op.b_channel = b_sizes[1];
  op.n = b_sizes[3];
  if (b_sizes[2] != op.k) {
    return absl::InvalidArgumentError(
        absl::StrCat("b.sizes: K=", b_sizes[2], " does not match a.sizes K=", op.k));
  }
  if (op.k > kMaxAccumulationDepth) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a.sizes: K=", op.k, " is too large: at most ", kMaxAccumulationDepth,
        " so that the int32 sum of (a - a_zero_point) * (b - b_zero_point) cannot overflow"));
  }
  absl::StatusOr<uint32_t> batch = BroadcastDimension(op.a_batch, op.b_batch, "batch");
  if (!batch.ok()) return batch.status();
  absl::StatusOr<uint32_t> channel = BroadcastDimension(op.a_channel, op.b_channel, "channel");
  if (!channel.ok()) return channel.status();
  op.batch = *batch;
  op.channel = *channel;
  uint64_t output_elements = 1;
  for (uint64_t size : {uint64_t{op.batch}, uint64_t{op.channel}, uint64_t{op.m}, uint64_t{op.n}}) {
    if (MultiplyOverflows(output_elements, size, &output_elements)) {
      return absl::InvalidArgumentError("output: the output would have more than 2^64 elements");
    }
  }

  const DataType a_type = tensors.a.data_type;
  const DataType b_type = tensors.b.data_type;
  absl::StatusOr<QuantizationAxis> a_axis =
      ValidateQuantization(tensors.a_scale, "a_scale", tensors.a_zero_point, "a_zero_point", a_type,
                           "a", {QuantizationAxis::kPerRow, op.m}, /*allow_zero=*/true);
  if (!a_axis.ok()) return a_axis.status();
  absl::StatusOr<QuantizationAxis> b_axis =
      ValidateQuantization(tensors.b_scale, "b_scale", tensors.b_zero_point, "b_zero_point", b_type,
                           "b", {QuantizationAxis::kPerColumn, op.n}, /*allow_zero=*/true);
  if (!b_axis.ok()) return b_axis.status();

  // The output type comes from output_data_type or the output zero point.
  if (output_data_type != DataType::kUnknown && !IsQuantizedType(output_data_type)) {
    return absl::InvalidArgumentError(
        absl::StrCat("output_data_type: ", DataTypeText(output_data_type),
                     " is not supported (supported: ", DataTypeList(kMatMulTypes), ")"));
  }
  DataType output_type = output_data_type;
  if (tensors.output_zero_point.present()) {
    const DataType zero_point_type = tensors.output_zero_point.data_type;
    if (!IsQuantizedType(zero_point_type)) {
      return absl::InvalidArgumentError(
          absl::StrCat("output_zero_point.data_type: ", DataTypeText(zero_point_type),
                       " is not supported (supported: ", DataTypeList(kMatMulTypes), ")"));
    }
    if (output_type == DataType::kUnknown) {
      output_type = zero_point_type;
    } else if (output_type != zero_point_type) {
      return absl::InvalidArgumentError(
          absl::StrCat("output_data_type: ", DataTypeName(output_type),
                       " does not match output_zero_point (", DataTypeName(zero_point_type), ")"));
    }
  } else if (output_type == DataType::kUnknown) {
    return absl::InvalidArgumentError(
        "output_data_type: required when output_zero_point is absent");
  }
  absl::StatusOr<QuantizationAxis> output_axis = ValidateQuantization(
      tensors.output_scale, "output_scale", tensors.output_zero_point, "output_zero_point",
      output_type, "the output type", {QuantizationAxis::kPerRow, op.m}, /*allow_zero=*/false);
  if (!output_axis.ok()) return output_axis.status();

  op.a_quantization = *a_axis;
  op.b_quantization = *b_axis;
  op.output_quantization = *output_axis;
  op.output_data_type = output_type;
  op.a = std::move(tensors.a);
  op.a.sizes = a_sizes;
  op.b = std::move(tensors.b);
  op.b.sizes = b_sizes;
  op.a_scale = std::move(tensors.a_scale);
  op.a_zero_point = std::move(tensors.a_zero_point);
  op.b_scale = std::move(tensors.b_scale);
  op.b_zero_point = std::move(tensors.b_zero_point);
  op.output_scale = std::move(tensors.output_scale);
  op.output_zero_point = std::move(tensors.output_zero_point);
  const Shape full_output{op.batch, op.channel, op.m, op.n};
  op.output_sizes = Shape(full_output.end() - rank, full_output.end());
  return op;
}

uint64_t OperationBytes(const Operation& operation) {
  return std::visit(
      Overloaded{
          [](const ScanOperation& scan) {
            return 2 * static_cast<uint64_t>(scan.input.byte_size());
          },
          [](const QuantizedMatMulOperation& matmul) {
            uint64_t bytes = 0;
            for (const Tensor* tensor :
                 {&matmul.a, &matmul.a_scale, &matmul.a_zero_point, &matmul.b, &matmul.b_scale,
                  &matmul.b_zero_point, &matmul.output_scale, &matmul.output_zero_point}) {
              bytes += tensor->byte_size();
            }
            return bytes + OutputBytes(matmul);
          },
      },
      operation);
}

uint64_t OutputBytes(const Operation& operation) {
  return std::visit(
      Overloaded{
          [](const ScanOperation& scan) { return static_cast<uint64_t>(scan.input.byte_size()); },
          [](const QuantizedMatMulOperation& matmul) { return OutputBytes(matmul); },
      },
      operation);
}

uint64_t OutputBytes(const QuantizedMatMulOperation& matmul) {
  return ElementCount(matmul.output_sizes);  // INT8 or UINT8: a byte per element
}

uint64_t SharedOperandBytes(const Operation& operation) {
  return std::visit(Overloaded{
                        [](const ScanOperation&) { return uint64_t{0}; },
                        [](const QuantizedMatMulOperation& matmul) {
                          return static_cast<uint64_t>(matmul.b.byte_size() +
                                                       matmul.b_scale.byte_size() +
                                                       matmul.b_zero_point.byte_size());
                        },
                    },
                    operation);
}

}  // namespace dmlserve
