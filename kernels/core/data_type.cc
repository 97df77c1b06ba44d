#include "kernels/core/data_type.h"

namespace dmlserve {

size_t DataTypeSize(DataType type) {
  switch (type) {
    case DataType::kFloat64:
    case DataType::kUint64:
    case DataType::kInt64:
      return 8;
    case DataType::kFloat32:
    case DataType::kUint32:
    case DataType::kInt32:
      return 4;
    case DataType::kFloat16:
    case DataType::kUint16:
    case DataType::kInt16:
      return 2;
    case DataType::kUint8:
    case DataType::kInt8:
      return 1;
    case DataType::kUnknown:
      return 0;
  }
  return 0;
}

absl::string_view DataTypeName(DataType type) {
  switch (type) {
    case DataType::kFloat32:
      return "FLOAT32";
    case DataType::kFloat16:
      return "FLOAT16";
    case DataType::kUint32:
      return "UINT32";
    case DataType::kUint16:
      return "UINT16";
    case DataType::kUint8:
      return "UINT8";
    case DataType::kInt32:
      return "INT32";
    case DataType::kInt16:
      return "INT16";
    case DataType::kInt8:
      return "INT8";
    case DataType::kFloat64:
      return "FLOAT64";
    case DataType::kUint64:
      return "UINT64";
    case DataType::kInt64:
      return "INT64";
    case DataType::kUnknown:
      break;
  }
  return "DATA_TYPE_UNKNOWN";
}

}  // namespace dmlserve
