#ifndef DMLSERVE_KERNELS_CORE_DATA_TYPE_H_
#define DMLSERVE_KERNELS_CORE_DATA_TYPE_H_

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace dmlserve {

// Element types, numbered as DML_TENSOR_DATA_TYPE (and dmlserve.v1.DataType),
// so conversions at the API edge are plain casts.
enum class DataType : uint8_t {
  kUnknown = 0,
  kFloat32 = 1,
  kFloat16 = 2,
  kUint32 = 3,
  kUint16 = 4,
  kUint8 = 5,
  kInt32 = 6,
  kInt16 = 7,
  kInt8 = 8,
  kFloat64 = 9,
  kUint64 = 10,
  kInt64 = 11,
};

inline constexpr int kMaxDataTypeValue = 11;

// Bytes per element; 0 for kUnknown or out-of-range values.
size_t DataTypeSize(DataType type);

// The API name ("FLOAT32", "INT8", ...), or "DATA_TYPE_UNKNOWN".
absl::string_view DataTypeName(DataType type);

}  // namespace dmlserve

#endif  // DMLSERVE_KERNELS_CORE_DATA_TYPE_H_
