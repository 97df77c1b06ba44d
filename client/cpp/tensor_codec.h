#ifndef DMLSERVE_CLIENT_CPP_TENSOR_CODEC_H_
#define DMLSERVE_CLIENT_CPP_TENSOR_CODEC_H_

// Building API tensors from typed host vectors and reading them back. Tensor
// data is packed little-endian in row-major order whatever the host order.

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "dmlserve/v1/dmlserve.pb.h"

namespace dmlserve::client {

// The API data type of a C++ element type. FLOAT16 has no C++ type: use
// MakeFloat16Tensor / DecodeFloat16Tensor.
template <typename T>
struct DataTypeOf;
template <>
struct DataTypeOf<float> {
  static constexpr v1::DataType kValue = v1::FLOAT32;
};
template <>
struct DataTypeOf<double> {
  static constexpr v1::DataType kValue = v1::FLOAT64;
};
template <>
struct DataTypeOf<uint8_t> {
  static constexpr v1::DataType kValue = v1::UINT8;
};
template <>
struct DataTypeOf<uint16_t> {
  static constexpr v1::DataType kValue = v1::UINT16;
};
template <>
struct DataTypeOf<uint32_t> {
  static constexpr v1::DataType kValue = v1::UINT32;
};
template <>
struct DataTypeOf<uint64_t> {
  static constexpr v1::DataType kValue = v1::UINT64;
};
template <>
struct DataTypeOf<int8_t> {
  static constexpr v1::DataType kValue = v1::INT8;
};
template <>
struct DataTypeOf<int16_t> {
  static constexpr v1::DataType kValue = v1::INT16;
};
template <>
struct DataTypeOf<int32_t> {
  static constexpr v1::DataType kValue = v1::INT32;
};
template <>
struct DataTypeOf<int64_t> {
  static constexpr v1::DataType kValue = v1::INT64;
};

// Bytes per element; 0 for DATA_TYPE_UNKNOWN and values outside the enum.
size_t DataTypeByteSize(v1::DataType type);

// "FLOAT32", "INT8", ... (the proto enum name), or "DATA_TYPE_<n>" for values
// outside the enum.
std::string DataTypeDisplayName(v1::DataType type);

// Accepts the enum name ("FLOAT32"), case-insensitively.
absl::StatusOr<v1::DataType> ParseDataType(absl::string_view name);

// Product of `sizes`; InvalidArgument when it does not fit in 64 bits.
absl::StatusOr<uint64_t> ElementCount(absl::Span<const uint32_t> sizes);

namespace internal {

// Appends `value`'s bytes least significant first.
template <typename T>
void AppendLittleEndian(T value, std::string* out) {
  static_assert(std::is_trivially_copyable_v<T>);
  using Bits = std::conditional_t<
      sizeof(T) == 1, uint8_t,
      std::conditional_t<sizeof(T) == 2, uint16_t,
                         std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>>;
  Bits bits;
  std::memcpy(&bits, &value, sizeof(bits));
  for (size_t i = 0; i < sizeof(T); ++i) {
    out->push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
  }
}

template <typename T>
T ReadLittleEndian(const char* bytes) {
  using Bits = std::conditional_t<
      sizeof(T) == 1, uint8_t,
      std::conditional_t<sizeof(T) == 2, uint16_t,
                         std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>>;
  Bits bits = 0;
  for (size_t i = 0; i < sizeof(T); ++i) {
    bits |= static_cast<Bits>(static_cast<Bits>(static_cast<uint8_t>(bytes[i])) << (8 * i));
  }
  T value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

// OK when `tensor` holds `type` and exactly product(sizes) elements.
absl::Status CheckDecodable(const v1::Tensor& tensor, v1::DataType type);

}  // namespace internal

// A tensor of `values` with the given sizes. The element count is not checked
// against `sizes` here: the server reports mismatches, and tests rely on
// being able to send them.
template <typename T>
v1::Tensor MakeTensor(absl::Span<const uint32_t> sizes, const std::vector<T>& values) {
  v1::Tensor tensor;
  tensor.set_data_type(DataTypeOf<T>::kValue);
  tensor.mutable_sizes()->Add(sizes.begin(), sizes.end());
  std::string* data = tensor.mutable_data();
  data->reserve(values.size() * sizeof(T));
  for (const T& value : values) internal::AppendLittleEndian(value, data);
  return tensor;
}

// A FLOAT16 tensor; each value is rounded to the nearest half (ties to even).
v1::Tensor MakeFloat16Tensor(absl::Span<const uint32_t> sizes, const std::vector<float>& values);

// A FLOAT16 tensor from raw binary16 bit patterns.
v1::Tensor MakeFloat16TensorFromBits(absl::Span<const uint32_t> sizes,
                                     const std::vector<uint16_t>& bits);

// Refers to a tensor registered on the server with RegisterTensor.
v1::Tensor MakeTensorReference(const std::string& tensor_id);

// The elements of `tensor`, which must hold T's data type and exactly
// product(sizes) elements.
template <typename T>
absl::StatusOr<std::vector<T>> DecodeTensor(const v1::Tensor& tensor) {
  absl::Status status = internal::CheckDecodable(tensor, DataTypeOf<T>::kValue);
  if (!status.ok()) return status;
  const std::string& data = tensor.data();
  std::vector<T> values(data.size() / sizeof(T));
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = internal::ReadLittleEndian<T>(data.data() + i * sizeof(T));
  }
  return values;
}

// A FLOAT16 tensor's elements widened to float (exactly).
absl::StatusOr<std::vector<float>> DecodeFloat16Tensor(const v1::Tensor& tensor);

// Any tensor's elements as double, for display and comparisons. 64-bit
// integers above 2^53 lose precision; use DecodeTensor for exact values.
absl::StatusOr<std::vector<double>> DecodeTensorAsDouble(const v1::Tensor& tensor);

}  // namespace dmlserve::client

#endif  // DMLSERVE_CLIENT_CPP_TENSOR_CODEC_H_
