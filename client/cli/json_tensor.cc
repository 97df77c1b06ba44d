#include "client/cli/json_tensor.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <type_traits>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/cpp/float16.h"
#include "client/cpp/tensor_codec.h"
#include "google/protobuf/util/json_util.h"

namespace dmlserve::client::cli {
namespace {

// A JSON element as a double, reading protobuf's names for non-finite values.
absl::StatusOr<double> FloatElement(const Json& element) {
  if (element.is_number()) return element.get<double>();
  if (element.is_string()) {
    const std::string& text = element.get_ref<const std::string&>();
    if (text == "NaN" || text == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (text == "Infinity" || text == "inf") return std::numeric_limits<double>::infinity();
    if (text == "-Infinity" || text == "-inf") return -std::numeric_limits<double>::infinity();
  }
  return absl::InvalidArgumentError(absl::StrCat(element.dump(), " is not a number"));
}

template <typename T>
absl::StatusOr<T> IntegerElement(const Json& element) {
  const std::string type_name = DataTypeDisplayName(DataTypeOf<T>::kValue);
  auto out_of_range = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat(element.dump(), " is out of range for ", type_name));
  };
  if (element.is_number_unsigned()) {
    const uint64_t value = element.get<uint64_t>();
    if (value > static_cast<uint64_t>(std::numeric_limits<T>::max())) return out_of_range();
    return static_cast<T>(value);
  }
  if (element.is_number_integer()) {
    const int64_t value = element.get<int64_t>();
    if constexpr (std::is_unsigned_v<T>) {
      if (value < 0) return out_of_range();
      if (static_cast<uint64_t>(value) > static_cast<uint64_t>(std::numeric_limits<T>::max())) {
        return out_of_range();
      }
    } else {
      if (value < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
          value > static_cast<int64_t>(std::numeric_limits<T>::max())) {
        return out_of_range();
      }
    }
    return static_cast<T>(value);
  }
  if (element.is_number_float()) {
    // 2.0 is fine for an integer tensor; 2.5 is a mistake worth reporting.
    const double value = element.get<double>();
    if (std::trunc(value) != value) {
      return absl::InvalidArgumentError(
          absl::StrCat(element.dump(), " is not a whole number (", type_name, ")"));
    }
    // Both bounds are exact in double: min() is -2^k or 0, and max() + 1 = 2^k.
    const double lower = static_cast<double>(std::numeric_limits<T>::min());
    const double upper_exclusive = std::ldexp(1.0, std::numeric_limits<T>::digits);
    if (value < lower || value >= upper_exclusive) return out_of_range();
    return static_cast<T>(value);
  }
  return absl::InvalidArgumentError(absl::StrCat(element.dump(), " is not a number"));
}

template <typename T>
absl::Status PackIntegers(const Json& values, std::string* data) {
  for (size_t i = 0; i < values.size(); ++i) {
    absl::StatusOr<T> value = IntegerElement<T>(values[i]);
    if (!value.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("[", i, "]: ", value.status().message()));
    }
    internal::AppendLittleEndian(*value, data);
  }
  return absl::OkStatus();
}

absl::Status PackFloats(v1::DataType type, const Json& values, std::string* data) {
  for (size_t i = 0; i < values.size(); ++i) {
    absl::StatusOr<double> value = FloatElement(values[i]);
    if (!value.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("[", i, "]: ", value.status().message()));
    }
    auto overflow = [&] {
      return absl::InvalidArgumentError(absl::StrCat(
          "[", i, "]: ", values[i].dump(), " is out of range for ", DataTypeDisplayName(type)));
    };
    if (type == v1::FLOAT64) {
      internal::AppendLittleEndian(*value, data);
      continue;
    }
    const float narrowed = static_cast<float>(*value);
    if (std::isfinite(*value) && !std::isfinite(narrowed)) return overflow();
    if (type == v1::FLOAT32) {
      internal::AppendLittleEndian(narrowed, data);
      continue;
    }
    const uint16_t bits = FloatToHalfBits(narrowed);
    if (std::isfinite(*value) && (bits & 0x7c00u) == 0x7c00u) return overflow();
    internal::AppendLittleEndian(bits, data);
  }
  return absl::OkStatus();
}

Json DoubleToJson(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  return value;
}

// The shortest "%.*g" text that `reads_back` accepts, as a JSON number.
template <typename Predicate>
Json ShortestNumber(double value, int max_digits, Predicate reads_back) {
  if (!std::isfinite(value)) return DoubleToJson(value);
  char buffer[64];
  for (int digits = 1; digits < max_digits; ++digits) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", digits, value);
    const double parsed = std::strtod(buffer, nullptr);
    // nlohmann prints doubles with their shortest round-trip form, so the
    // parsed double prints as this text.
    if (reads_back(parsed)) return parsed;
  }
  return value;
}

Json FloatToJson(float value) {
  return ShortestNumber(value, 9,
                        [value](double parsed) { return static_cast<float>(parsed) == value; });
}

Json HalfToJson(uint16_t bits) {
  return ShortestNumber(HalfBitsToFloat(bits), 9, [bits](double parsed) {
    return FloatToHalfBits(static_cast<float>(parsed)) == bits;
  });
}

template <typename T>
Json IntegersToJson(const v1::Tensor& tensor) {
  // Callers have checked that the tensor decodes.
  const std::vector<T> values = *DecodeTensor<T>(tensor);
  return Json(values);
}

}  // namespace

absl::StatusOr<std::string> ValuesToData(v1::DataType type, const Json& values) {
  if (!values.is_array()) return absl::InvalidArgumentError("values must be an array");
  std::string data;
  data.reserve(values.size() * DataTypeByteSize(type));
  absl::Status status;
  switch (type) {
    case v1::FLOAT32:
    case v1::FLOAT16:
    case v1::FLOAT64:
      status = PackFloats(type, values, &data);
      break;
    case v1::UINT8:
      status = PackIntegers<uint8_t>(values, &data);
      break;
    case v1::UINT16:
      status = PackIntegers<uint16_t>(values, &data);
      break;
    case v1::UINT32:
      status = PackIntegers<uint32_t>(values, &data);
      break;
    case v1::UINT64:
      status = PackIntegers<uint64_t>(values, &data);
      break;
    case v1::INT8:
      status = PackIntegers<int8_t>(values, &data);
      break;
    case v1::INT16:
      status = PackIntegers<int16_t>(values, &data);
      break;
    case v1::INT32:
      status = PackIntegers<int32_t>(values, &data);
      break;
    case v1::INT64:
      status = PackIntegers<int64_t>(values, &data);
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("cannot pack values as ", DataTypeDisplayName(type)));
  }
  if (!status.ok()) return status;
  return data;
}

absl::StatusOr<Json> DataToValues(const v1::Tensor& tensor) {
  if (DataTypeByteSize(tensor.data_type()) == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot decode data type ", DataTypeDisplayName(tensor.data_type())));
  }
  absl::Status decodable = internal::CheckDecodable(tensor, tensor.data_type());
  if (!decodable.ok()) return decodable;
  switch (tensor.data_type()) {
    case v1::FLOAT32: {
      const std::vector<float> values = *DecodeTensor<float>(tensor);
      Json out = Json::array();
      for (float value : values) out.push_back(FloatToJson(value));
      return out;
    }
    case v1::FLOAT16: {
      Json out = Json::array();
      for (size_t i = 0; i < tensor.data().size(); i += 2) {
        out.push_back(HalfToJson(internal::ReadLittleEndian<uint16_t>(tensor.data().data() + i)));
      }
      return out;
    }
    case v1::FLOAT64: {
      const std::vector<double> values = *DecodeTensor<double>(tensor);
      Json out = Json::array();
      for (double value : values) out.push_back(DoubleToJson(value));
      return out;
    }
    case v1::UINT8:
      return IntegersToJson<uint8_t>(tensor);
    case v1::UINT16:
      return IntegersToJson<uint16_t>(tensor);
    case v1::UINT32:
      return IntegersToJson<uint32_t>(tensor);
    case v1::UINT64:
      return IntegersToJson<uint64_t>(tensor);
    case v1::INT8:
      return IntegersToJson<int8_t>(tensor);
    case v1::INT16:
      return IntegersToJson<int16_t>(tensor);
    case v1::INT32:
      return IntegersToJson<int32_t>(tensor);
    case v1::INT64:
      return IntegersToJson<int64_t>(tensor);
    default:
      break;
  }
  return absl::InvalidArgumentError("unreachable data type");
}

absl::Status ExpandTensorValues(Json* node, const std::string& path) {
  if (node->is_array()) {
    for (size_t i = 0; i < node->size(); ++i) {
      absl::Status status = ExpandTensorValues(&(*node)[i], absl::StrCat(path, "[", i, "]"));
      if (!status.ok()) return status;
    }
    return absl::OkStatus();
  }
  if (!node->is_object()) return absl::OkStatus();
  const std::string prefix = path.empty() ? "" : absl::StrCat(path, ".");
  if (node->contains("values")) {
    if (node->contains("data")) {
      return absl::InvalidArgumentError(
          absl::StrCat(prefix, "values: give either \"values\" or \"data\", not both"));
    }
    auto type_it = node->find("data_type");
    if (type_it == node->end() || !type_it->is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(
          prefix,
          "data_type: a tensor with \"values\" needs a data_type name such as \"FLOAT32\""));
    }
    absl::StatusOr<v1::DataType> type = ParseDataType(type_it->get<std::string>());
    if (!type.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(prefix, "data_type: ", type.status().message()));
    }
    absl::StatusOr<std::string> data = ValuesToData(*type, (*node)["values"]);
    if (!data.ok()) {
      // Element errors start with their index: "values[3]: ...".
      const absl::string_view message = data.status().message();
      const absl::string_view separator = absl::StartsWith(message, "[") ? "" : ": ";
      return absl::InvalidArgumentError(absl::StrCat(prefix, "values", separator, message));
    }
    node->erase("values");
    (*node)["data"] = absl::Base64Escape(*data);
    return absl::OkStatus();
  }
  for (auto& [key, child] : node->items()) {
    absl::Status status = ExpandTensorValues(&child, absl::StrCat(prefix, key));
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::Tensor> TensorFromJson(const Json& json) {
  Json copy = json;
  absl::Status status = ExpandTensorValues(&copy, "");
  if (!status.ok()) return status;
  v1::Tensor tensor;
  google::protobuf::util::JsonParseOptions options;
  auto parsed = google::protobuf::util::JsonStringToMessage(copy.dump(), &tensor, options);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("tensor: ", std::string(parsed.message())));
  }
  return tensor;
}

Json TensorToJson(const v1::Tensor& tensor) {
  Json out = Json::object();
  if (!tensor.tensor_id().empty()) out["tensor_id"] = tensor.tensor_id();
  out["data_type"] = DataTypeDisplayName(tensor.data_type());
  out["sizes"] = Json::array();
  for (uint32_t size : tensor.sizes()) out["sizes"].push_back(size);
  if (!tensor.tensor_id().empty() && tensor.data().empty()) return out;
  absl::StatusOr<Json> values = DataToValues(tensor);
  if (values.ok()) {
    out["values"] = *std::move(values);
  } else {
    out["data"] = absl::Base64Escape(tensor.data());
  }
  return out;
}

}  // namespace dmlserve::client::cli
