#include "tests/reference/conformance.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "tests/reference/reference.h"

namespace dmlserve::reference {
namespace {

using nlohmann::json;

absl::StatusOr<DataType> ParseDataType(const json& value, const std::string& where) {
  if (!value.is_string()) return absl::InvalidArgumentError(where + ": data type must be a string");
  const std::string name = value.get<std::string>();
  for (int i = 1; i <= kMaxDataTypeValue; ++i) {
    if (DataTypeName(static_cast<DataType>(i)) == name) return static_cast<DataType>(i);
  }
  return absl::InvalidArgumentError(absl::StrCat(where, ": unknown data type ", name));
}

// Stores one JSON number into element `index`, rejecting values the type
// cannot hold exactly.
absl::Status StoreValue(const json& value, Tensor& tensor, uint64_t index,
                        const std::string& where) {
  const size_t size = DataTypeSize(tensor.data_type);
  uint8_t* p = tensor.mutable_data() + index * size;
  auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat(where, ".values[", index, "]: ", value.dump(),
                                                   " is not a valid ",
                                                   DataTypeName(tensor.data_type)));
  };
  if (!value.is_number()) return bad();
  switch (tensor.data_type) {
    case DataType::kFloat32: {
      const float f = static_cast<float>(value.get<double>());
      std::memcpy(p, &f, 4);
      return absl::OkStatus();
    }
    case DataType::kFloat64: {
      const double d = value.get<double>();
      std::memcpy(p, &d, 8);
      return absl::OkStatus();
    }
    case DataType::kFloat16: {
      const uint16_t h = DoubleToHalf(value.get<double>());
      std::memcpy(p, &h, 2);
      return absl::OkStatus();
    }
    default:
      break;
  }
  const bool is_signed =
      tensor.data_type == DataType::kInt8 || tensor.data_type == DataType::kInt16 ||
      tensor.data_type == DataType::kInt32 || tensor.data_type == DataType::kInt64;
  uint64_t bits;
  if (value.is_number_float()) {
    const double d = value.get<double>();
    if (d != std::floor(d)) return bad();
    if (is_signed ? (d < -9.3e18 || d > 9.2e18) : (d < 0 || d > 1.8e19)) return bad();
    bits = is_signed ? static_cast<uint64_t>(static_cast<int64_t>(d)) : static_cast<uint64_t>(d);
  } else if (value.is_number_unsigned()) {
    bits = value.get<uint64_t>();
    if (is_signed && bits > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return bad();
    }
  } else {
    const int64_t v = value.get<int64_t>();
    if (!is_signed && v < 0) return bad();
    bits = static_cast<uint64_t>(v);
  }
  // Range check for the narrower types.
  if (size < 8) {
    const int bits_wide = static_cast<int>(size * 8);
    if (is_signed) {
      const int64_t v = static_cast<int64_t>(bits);
      const int64_t limit = int64_t{1} << (bits_wide - 1);
      if (v < -limit || v >= limit) return bad();
    } else if (bits >> bits_wide) {
      return bad();
    }
  }
  for (size_t i = 0; i < size; ++i) p[i] = static_cast<uint8_t>(bits >> (8 * i));
  return absl::OkStatus();
}

absl::StatusOr<Tensor> ParseTensor(const json& value, const std::string& where) {
  if (!value.is_object()) return absl::InvalidArgumentError(where + ": must be an object");
  if (!value.contains("data_type") || !value.contains("sizes") || !value.contains("values")) {
    return absl::InvalidArgumentError(where + ": needs data_type, sizes and values");
  }
  absl::StatusOr<DataType> type = ParseDataType(value["data_type"], where + ".data_type");
  if (!type.ok()) return type.status();
  Shape sizes;
  for (const json& size : value["sizes"]) {
    if (!size.is_number_unsigned() || size.get<uint64_t>() > std::numeric_limits<uint32_t>::max()) {
      return absl::InvalidArgumentError(where + ".sizes: must be non-negative 32-bit integers");
    }
    sizes.push_back(size.get<uint32_t>());
  }
  const json& values = value["values"];
  if (!values.is_array() || values.size() != ElementCount(sizes)) {
    return absl::InvalidArgumentError(absl::StrCat(where, ".values: ", values.size(),
                                                   " values for sizes ", ShapeToString(sizes)));
  }
  Tensor tensor = Tensor::Allocate(*type, sizes);
  for (uint64_t i = 0; i < values.size(); ++i) {
    if (absl::Status status = StoreValue(values[i], tensor, i, where); !status.ok()) return status;
  }
  return tensor;
}

absl::StatusOr<Tensor> OptionalTensor(const json& c, const char* field) {
  if (!c.contains(field) || c[field].is_null()) return Tensor{};
  return ParseTensor(c[field], field);
}

absl::StatusOr<Operation> ParseScan(const json& c, OperatorKind kind) {
  absl::StatusOr<Tensor> input = ParseTensor(c.value("input", json()), "input");
  if (!input.ok()) return input.status();
  const uint32_t axis = c.value("axis", 0u);
  const std::string direction = c.value("axis_direction", "AXIS_DIRECTION_INCREASING");
  if (direction != "AXIS_DIRECTION_INCREASING" && direction != "AXIS_DIRECTION_DECREASING") {
    return absl::InvalidArgumentError("axis_direction: unknown value " + direction);
  }
  const char* exclusive_field =
      kind == OperatorKind::kCumulativeSummation ? "has_exclusive_sum" : "has_exclusive_product";
  absl::StatusOr<ScanOperation> op =
      MakeScanOperation(kind, *std::move(input), axis,
                        direction == "AXIS_DIRECTION_DECREASING" ? AxisDirection::kDecreasing
                                                                 : AxisDirection::kIncreasing,
                        c.value(exclusive_field, false));
  if (!op.ok()) return op.status();
  return Operation(*std::move(op));
}

absl::StatusOr<Operation> ParseMatMul(const json& c) {
  QuantizedMatMulTensors tensors;
  struct Field {
    const char* name;
    Tensor* tensor;
  };
  for (const Field& field :
       {Field{"a", &tensors.a}, Field{"a_scale", &tensors.a_scale},
        Field{"a_zero_point", &tensors.a_zero_point}, Field{"b", &tensors.b},
        Field{"b_scale", &tensors.b_scale}, Field{"b_zero_point", &tensors.b_zero_point},
        Field{"output_scale", &tensors.output_scale},
        Field{"output_zero_point", &tensors.output_zero_point}}) {
    absl::StatusOr<Tensor> tensor = OptionalTensor(c, field.name);
    if (!tensor.ok()) return tensor.status();
    *field.tensor = *std::move(tensor);
  }
  DataType output_type = DataType::kUnknown;
  if (c.contains("output_data_type")) {
    absl::StatusOr<DataType> type = ParseDataType(c["output_data_type"], "output_data_type");
    if (!type.ok()) return type.status();
    output_type = *type;
  }
  absl::StatusOr<QuantizedMatMulOperation> op =
      MakeQuantizedMatMulOperation(std::move(tensors), output_type);
  if (!op.ok()) return op.status();
  return Operation(*std::move(op));
}

absl::StatusOr<ConformanceCase> ParseCase(const json& c, const std::string& file) {
  ConformanceCase result;
  result.file = file;
  result.name = c.value("name", "");
  const std::string op = c.value("operator", "");
  absl::StatusOr<Operation> operation;
  if (op == OperatorName(OperatorKind::kCumulativeSummation)) {
    operation = ParseScan(c, OperatorKind::kCumulativeSummation);
  } else if (op == OperatorName(OperatorKind::kCumulativeProduct)) {
    operation = ParseScan(c, OperatorKind::kCumulativeProduct);
  } else if (op == OperatorName(OperatorKind::kQuantizedLinearMatrixMultiply)) {
    operation = ParseMatMul(c);
  } else {
    operation = absl::InvalidArgumentError("unknown operator \"" + op + "\"");
  }
  if (!operation.ok()) return operation.status();
  result.operation = *std::move(operation);
  absl::StatusOr<Tensor> expected = ParseTensor(c.value("expected", json()), "expected");
  if (!expected.ok()) return expected.status();
  result.expected = *std::move(expected);
  return result;
}

}  // namespace

std::string DefaultConformanceDirectory() {
  // Test binaries carried to another machine (scripts/device) find the
  // examples where the environment says; built here, where CMake put them.
  const char* overridden = std::getenv("DMLSERVE_CONFORMANCE_DIR");
  return overridden != nullptr && *overridden != '\0' ? overridden : DMLSERVE_CONFORMANCE_DIR;
}

absl::StatusOr<std::vector<ConformanceCase>> LoadConformanceFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError("cannot open " + path);
  const json document = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (document.is_discarded() || !document.contains("cases") || !document["cases"].is_array()) {
    return absl::InvalidArgumentError(path + ": not a JSON object with a \"cases\" array");
  }
  const std::string file = std::filesystem::path(path).filename().string();
  std::vector<ConformanceCase> cases;
  for (const json& c : document["cases"]) {
    absl::StatusOr<ConformanceCase> parsed = ParseCase(c, file);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(file, " case \"", c.value("name", ""), "\": ", parsed.status().message()));
    }
    cases.push_back(*std::move(parsed));
  }
  return cases;
}

absl::StatusOr<std::vector<ConformanceCase>> LoadConformanceCases(const std::string& directory) {
  std::vector<std::string> paths;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(directory, error)) {
    if (entry.path().extension() == ".json") paths.push_back(entry.path().string());
  }
  if (error) return absl::NotFoundError("cannot list " + directory + ": " + error.message());
  std::sort(paths.begin(), paths.end());
  std::vector<ConformanceCase> cases;
  for (const std::string& path : paths) {
    absl::StatusOr<std::vector<ConformanceCase>> file_cases = LoadConformanceFile(path);
    if (!file_cases.ok()) return file_cases.status();
    for (ConformanceCase& c : *file_cases) cases.push_back(std::move(c));
  }
  return cases;
}

}  // namespace dmlserve::reference
