#include "tests/server/tensor_values.h"

#include <cstring>

#include "gtest/gtest.h"

namespace dmlserve::testing {
namespace {

template <typename T>
void Append(std::string& bytes, double value) {
  const T element = static_cast<T>(value);
  bytes.append(reinterpret_cast<const char*>(&element), sizeof(T));
}

template <typename T>
std::vector<double> Read(const std::string& bytes) {
  std::vector<double> values(bytes.size() / sizeof(T));
  for (size_t i = 0; i < values.size(); ++i) {
    T element;
    std::memcpy(&element, bytes.data() + i * sizeof(T), sizeof(T));
    values[i] = static_cast<double>(element);
  }
  return values;
}

}  // namespace

std::string PackValues(v1::DataType type, const std::vector<double>& values) {
  std::string bytes;
  for (double value : values) {
    switch (type) {
      case v1::FLOAT32:
        Append<float>(bytes, value);
        break;
      case v1::FLOAT64:
        Append<double>(bytes, value);
        break;
      case v1::UINT8:
        Append<uint8_t>(bytes, value);
        break;
      case v1::INT8:
        Append<int8_t>(bytes, value);
        break;
      case v1::UINT16:
        Append<uint16_t>(bytes, value);
        break;
      case v1::INT16:
        Append<int16_t>(bytes, value);
        break;
      case v1::UINT32:
        Append<uint32_t>(bytes, value);
        break;
      case v1::INT32:
        Append<int32_t>(bytes, value);
        break;
      case v1::UINT64:
        Append<uint64_t>(bytes, value);
        break;
      case v1::INT64:
        Append<int64_t>(bytes, value);
        break;
      default:
        ADD_FAILURE() << "PackValues: unsupported data type " << v1::DataType_Name(type);
        return bytes;
    }
  }
  return bytes;
}

std::vector<double> UnpackValues(v1::DataType type, const std::string& bytes) {
  switch (type) {
    case v1::FLOAT32:
      return Read<float>(bytes);
    case v1::FLOAT64:
      return Read<double>(bytes);
    case v1::UINT8:
      return Read<uint8_t>(bytes);
    case v1::INT8:
      return Read<int8_t>(bytes);
    case v1::UINT16:
      return Read<uint16_t>(bytes);
    case v1::INT16:
      return Read<int16_t>(bytes);
    case v1::UINT32:
      return Read<uint32_t>(bytes);
    case v1::INT32:
      return Read<int32_t>(bytes);
    case v1::UINT64:
      return Read<uint64_t>(bytes);
    case v1::INT64:
      return Read<int64_t>(bytes);
    default:
      break;
  }
  ADD_FAILURE() << "UnpackValues: unsupported data type " << v1::DataType_Name(type);
  return {};
}

v1::Tensor MakeTensor(v1::DataType type, const std::vector<uint32_t>& sizes,
                      const std::vector<double>& values) {
  v1::Tensor tensor;
  tensor.set_data_type(type);
  for (uint32_t size : sizes) tensor.add_sizes(size);
  tensor.set_data(PackValues(type, values));
  return tensor;
}

v1::Tensor TensorRef(const std::string& tensor_id) {
  v1::Tensor tensor;
  tensor.set_tensor_id(tensor_id);
  return tensor;
}

std::vector<double> TensorValues(const v1::Tensor& tensor) {
  return UnpackValues(tensor.data_type(), tensor.data());
}

std::vector<uint32_t> TensorSizes(const v1::Tensor& tensor) {
  return std::vector<uint32_t>(tensor.sizes().begin(), tensor.sizes().end());
}

}  // namespace dmlserve::testing
