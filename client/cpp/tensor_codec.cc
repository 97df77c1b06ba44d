#include "client/cpp/tensor_codec.h"

#include "absl/strings/ascii.h"
#include "client/cpp/float16.h"

namespace dmlserve::client {

size_t DataTypeByteSize(v1::DataType type) {
  switch (type) {
    case v1::UINT8:
    case v1::INT8:
      return 1;
    case v1::FLOAT16:
    case v1::UINT16:
    case v1::INT16:
      return 2;
    case v1::FLOAT32:
    case v1::UINT32:
    case v1::INT32:
      return 4;
    case v1::FLOAT64:
    case v1::UINT64:
    case v1::INT64:
      return 8;
    default:
      return 0;
  }
}

std::string DataTypeDisplayName(v1::DataType type) {
  if (v1::DataType_IsValid(type)) return v1::DataType_Name(type);
  return absl::StrCat("DATA_TYPE_", static_cast<int>(type));
}

absl::StatusOr<v1::DataType> ParseDataType(absl::string_view name) {
  v1::DataType type;
  if (v1::DataType_Parse(absl::AsciiStrToUpper(name), &type)) return type;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown data type \"", name,
                   "\" (expected FLOAT32, FLOAT16, FLOAT64, UINT8, UINT16, UINT32, UINT64, INT8, "
                   "INT16, INT32 or INT64)"));
}

absl::StatusOr<uint64_t> ElementCount(absl::Span<const uint32_t> sizes) {
  uint64_t count = 1;
  for (uint32_t size : sizes) {
    if (size != 0 && count > UINT64_MAX / size) {
      return absl::InvalidArgumentError("element count overflows 64 bits");
    }
    count *= size;
  }
  return count;
}

namespace internal {

absl::Status CheckDecodable(const v1::Tensor& tensor, v1::DataType type) {
  if (tensor.data_type() != type) {
    return absl::InvalidArgumentError(absl::StrCat("tensor holds ",
                                                   DataTypeDisplayName(tensor.data_type()),
                                                   ", not ", DataTypeDisplayName(type)));
  }
  absl::StatusOr<uint64_t> count = ElementCount(tensor.sizes());
  if (!count.ok()) return count.status();
  const size_t element_size = DataTypeByteSize(type);
  if (tensor.data().size() % element_size != 0 || tensor.data().size() / element_size != *count) {
    return absl::InvalidArgumentError(absl::StrCat("tensor data has ", tensor.data().size(),
                                                   " bytes; sizes need ", *count, " elements of ",
                                                   element_size, " bytes"));
  }
  return absl::OkStatus();
}

}  // namespace internal

v1::Tensor MakeFloat16Tensor(absl::Span<const uint32_t> sizes, const std::vector<float>& values) {
  std::vector<uint16_t> bits;
  bits.reserve(values.size());
  for (float value : values) bits.push_back(FloatToHalfBits(value));
  return MakeFloat16TensorFromBits(sizes, bits);
}

v1::Tensor MakeFloat16TensorFromBits(absl::Span<const uint32_t> sizes,
                                     const std::vector<uint16_t>& bits) {
  v1::Tensor tensor = MakeTensor<uint16_t>(sizes, bits);
  tensor.set_data_type(v1::FLOAT16);
  return tensor;
}

v1::Tensor MakeTensorReference(const std::string& tensor_id) {
  v1::Tensor tensor;
  tensor.set_tensor_id(tensor_id);
  return tensor;
}

absl::StatusOr<std::vector<float>> DecodeFloat16Tensor(const v1::Tensor& tensor) {
  absl::Status status = internal::CheckDecodable(tensor, v1::FLOAT16);
  if (!status.ok()) return status;
  std::vector<float> values(tensor.data().size() / 2);
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = HalfBitsToFloat(internal::ReadLittleEndian<uint16_t>(tensor.data().data() + 2 * i));
  }
  return values;
}

namespace {

template <typename T>
absl::StatusOr<std::vector<double>> Widen(const v1::Tensor& tensor) {
  absl::StatusOr<std::vector<T>> values = DecodeTensor<T>(tensor);
  if (!values.ok()) return values.status();
  return std::vector<double>(values->begin(), values->end());
}

}  // namespace

absl::StatusOr<std::vector<double>> DecodeTensorAsDouble(const v1::Tensor& tensor) {
  switch (tensor.data_type()) {
    case v1::FLOAT32:
      return Widen<float>(tensor);
    case v1::FLOAT16: {
      absl::StatusOr<std::vector<float>> values = DecodeFloat16Tensor(tensor);
      if (!values.ok()) return values.status();
      return std::vector<double>(values->begin(), values->end());
    }
    case v1::FLOAT64:
      return Widen<double>(tensor);
    case v1::UINT8:
      return Widen<uint8_t>(tensor);
    case v1::UINT16:
      return Widen<uint16_t>(tensor);
    case v1::UINT32:
      return Widen<uint32_t>(tensor);
    case v1::UINT64:
      return Widen<uint64_t>(tensor);
    case v1::INT8:
      return Widen<int8_t>(tensor);
    case v1::INT16:
      return Widen<int16_t>(tensor);
    case v1::INT32:
      return Widen<int32_t>(tensor);
    case v1::INT64:
      return Widen<int64_t>(tensor);
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("cannot decode data type ", DataTypeDisplayName(tensor.data_type())));
  }
}

}  // namespace dmlserve::client
