#include "tests/server/conformance_cases.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <utility>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/server/tensor_values.h"

namespace dmlserve::testing {
namespace {

using nlohmann::json;

v1::DataType ParseDataType(const json& value) {
  v1::DataType type = v1::DATA_TYPE_UNKNOWN;
  if (!v1::DataType_Parse(value.get<std::string>(), &type)) {
    ADD_FAILURE() << "unknown data type " << value;
  }
  return type;
}

v1::Tensor ParseTensor(const json& value) {
  return MakeTensor(ParseDataType(value.at("data_type")),
                    value.at("sizes").get<std::vector<uint32_t>>(),
                    value.at("values").get<std::vector<double>>());
}

v1::AxisDirection ParseDirection(const json& value) {
  v1::AxisDirection direction = v1::AXIS_DIRECTION_INCREASING;
  if (!v1::AxisDirection_Parse(value.get<std::string>(), &direction)) {
    ADD_FAILURE() << "unknown axis direction " << value;
  }
  return direction;
}

void ParseCase(const json& value, ConformanceCase& result) {
  result.name = value.at("name").get<std::string>();
  result.operator_name = value.at("operator").get<std::string>();
  result.request.set_request_id(result.name);
  result.expected = ParseTensor(value.at("expected"));
  if (result.operator_name == "cumulative_summation") {
    v1::CumulativeSummation* op = result.request.mutable_cumulative_summation();
    *op->mutable_input() = ParseTensor(value.at("input"));
    op->set_axis(value.at("axis").get<uint32_t>());
    op->set_axis_direction(ParseDirection(value.at("axis_direction")));
    op->set_has_exclusive_sum(value.at("has_exclusive_sum").get<bool>());
  } else if (result.operator_name == "cumulative_product") {
    v1::CumulativeProduct* op = result.request.mutable_cumulative_product();
    *op->mutable_input() = ParseTensor(value.at("input"));
    op->set_axis(value.at("axis").get<uint32_t>());
    op->set_axis_direction(ParseDirection(value.at("axis_direction")));
    op->set_has_exclusive_product(value.at("has_exclusive_product").get<bool>());
  } else if (result.operator_name == "quantized_linear_matrix_multiply") {
    v1::QuantizedLinearMatrixMultiply* op =
        result.request.mutable_quantized_linear_matrix_multiply();
    using Matmul = v1::QuantizedLinearMatrixMultiply;
    using MutableField = v1::Tensor* (Matmul::*)();
    const std::pair<const char*, MutableField> fields[] = {
        {"a", &Matmul::mutable_a},
        {"a_scale", &Matmul::mutable_a_scale},
        {"a_zero_point", &Matmul::mutable_a_zero_point},
        {"b", &Matmul::mutable_b},
        {"b_scale", &Matmul::mutable_b_scale},
        {"b_zero_point", &Matmul::mutable_b_zero_point},
        {"output_scale", &Matmul::mutable_output_scale},
        {"output_zero_point", &Matmul::mutable_output_zero_point},
    };
    for (const auto& [name, field] : fields) {
      if (value.contains(name)) *(op->*field)() = ParseTensor(value.at(name));
    }
    if (value.contains("output_data_type")) {
      op->set_output_data_type(ParseDataType(value.at("output_data_type")));
    }
  } else {
    ADD_FAILURE() << "unknown operator " << result.operator_name << " in " << result.name;
  }
}

}  // namespace

std::vector<ConformanceCase> LoadConformanceCases(const std::string& directory) {
  std::vector<ConformanceCase> cases;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(directory, error)) {
    if (entry.path().extension() != ".json") continue;
    std::ifstream file(entry.path());
    const json document = json::parse(file, nullptr, /*allow_exceptions=*/false);
    if (document.is_discarded() || !document.contains("cases")) {
      ADD_FAILURE() << "cannot parse " << entry.path();
      continue;
    }
    for (const json& value : document.at("cases")) {
      ConformanceCase parsed;
      ParseCase(value, parsed);
      cases.push_back(std::move(parsed));
    }
  }
  if (error) ADD_FAILURE() << "cannot list " << directory << ": " << error.message();
  std::sort(cases.begin(), cases.end(),
            [](const ConformanceCase& x, const ConformanceCase& y) { return x.name < y.name; });
  return cases;
}

}  // namespace dmlserve::testing
