// JSON "values" <-> packed tensor data for every data type, and the request
// file forms the CLI accepts.

#include "client/cli/json_tensor.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "client/cli/json_pretty_print.h"
#include "client/cli/json_request.h"
#include "client/cli/number_list.h"
#include "client/cpp/float16.h"
#include "client/cpp/tensor_codec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dmlserve::client::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

template <typename T>
class TypedValuesTest : public ::testing::Test {};

using IntegerTypes =
    ::testing::Types<uint8_t, uint16_t, uint32_t, uint64_t, int8_t, int16_t, int32_t, int64_t>;
TYPED_TEST_SUITE(TypedValuesTest, IntegerTypes);

TYPED_TEST(TypedValuesTest, PacksLikeTheTypedEncoderAndReadsBack) {
  using T = TypeParam;
  const v1::DataType type = DataTypeOf<T>::kValue;
  const std::vector<T> values = {std::numeric_limits<T>::min(), T(0), T(1), T(100),
                                 std::numeric_limits<T>::max()};
  Json json = Json::array();
  for (T value : values) json.push_back(value);

  absl::StatusOr<std::string> data = ValuesToData(type, json);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(*data, MakeTensor<T>({5}, values).data());

  v1::Tensor tensor;
  tensor.set_data_type(type);
  tensor.add_sizes(5);
  tensor.set_data(*data);
  absl::StatusOr<Json> back = DataToValues(tensor);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, json);
}

TYPED_TEST(TypedValuesTest, RejectsOutOfRangeAndFractions) {
  using T = TypeParam;
  const v1::DataType type = DataTypeOf<T>::kValue;
  Json above = Json::array({0});
  if constexpr (sizeof(T) < 8) {
    above.push_back(static_cast<int64_t>(std::numeric_limits<T>::max()) + 1);
  } else if constexpr (std::is_signed_v<T>) {
    above.push_back(static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) + 1);
  } else {
    above.push_back(18446744073709551616.0);  // 2^64
  }
  absl::Status status = ValuesToData(type, above).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("[1]"));
  EXPECT_THAT(status.message(), HasSubstr("out of range for " + DataTypeDisplayName(type)));

  const Json below = Json::array({std::is_signed_v<T>
                                      ? Json(static_cast<double>(std::numeric_limits<T>::min()) * 2)
                                      : Json(-1)});
  EXPECT_THAT(ValuesToData(type, below).status().message(), HasSubstr("out of range"));

  EXPECT_THAT(ValuesToData(type, Json::array({2.5})).status().message(),
              HasSubstr("not a whole number"));
  // A whole number written as a float is accepted.
  absl::StatusOr<std::string> two = ValuesToData(type, Json::array({2.0}));
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(*two, MakeTensor<T>({1}, std::vector<T>{T(2)}).data());
  EXPECT_THAT(ValuesToData(type, Json::array({"x"})).status().message(), HasSubstr("not a number"));
}

TEST(ValuesTest, Float32UsesShortestText) {
  const std::vector<float> values = {0.1f,   -2.5f,       3.0f,
                                     1e-30f, 16777216.0f, std::numeric_limits<float>::max()};
  Json json = Json::array();
  for (float value : values) json.push_back(value);
  absl::StatusOr<std::string> data = ValuesToData(v1::FLOAT32, json);
  ASSERT_TRUE(data.ok());
  EXPECT_EQ(*data, MakeTensor<float>({6}, values).data());

  absl::StatusOr<Json> back = DataToValues(MakeTensor<float>({6}, values));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->dump(), "[0.1,-2.5,3.0,1e-30,16777216.0,3.4028235e+38]");
}

TEST(ValuesTest, Float64KeepsEveryBit) {
  const std::vector<double> values = {0.1, 1.0 / 3.0, -1e300, 5e-324};
  Json json = Json::array();
  for (double value : values) json.push_back(value);
  absl::StatusOr<std::string> data = ValuesToData(v1::FLOAT64, json);
  ASSERT_TRUE(data.ok());
  EXPECT_EQ(*data, MakeTensor<double>({4}, values).data());
  absl::StatusOr<Json> back = DataToValues(MakeTensor<double>({4}, values));
  ASSERT_TRUE(back.ok());
  for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ((*back)[i].get<double>(), values[i]);
}

TEST(ValuesTest, Float16RoundsAndPrintsShortest) {
  absl::StatusOr<std::string> data =
      ValuesToData(v1::FLOAT16, Json::array({1, -2.5, 0.1, 65504, "-Infinity"}));
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(*data, MakeFloat16Tensor(
                       {5}, {1.0f, -2.5f, 0.1f, 65504.0f, -std::numeric_limits<float>::infinity()})
                       .data());
  absl::StatusOr<Json> back = DataToValues(MakeFloat16TensorFromBits({2}, {0x2e66, 0x7e00}));
  ASSERT_TRUE(back.ok());
  // 0x2e66 is 0.0999755859375; "0.1" is the shortest text that reads back
  // as the same half.
  EXPECT_EQ(back->dump(), "[0.1,\"NaN\"]");
  EXPECT_THAT(ValuesToData(v1::FLOAT16, Json::array({70000})).status().message(),
              HasSubstr("out of range for FLOAT16"));
}

TEST(ValuesTest, NonFiniteFloatsUseProtobufNames) {
  absl::StatusOr<std::string> data =
      ValuesToData(v1::FLOAT32, Json::array({"NaN", "Infinity", "-Infinity"}));
  ASSERT_TRUE(data.ok());
  v1::Tensor tensor;
  tensor.set_data_type(v1::FLOAT32);
  tensor.add_sizes(3);
  tensor.set_data(*data);
  EXPECT_EQ(DataToValues(tensor)->dump(), R"(["NaN","Infinity","-Infinity"])");
  EXPECT_THAT(ValuesToData(v1::FLOAT32, Json::array({1e39})).status().message(),
              HasSubstr("out of range for FLOAT32"));
}

TEST(ValuesTest, RejectsUnknownTypesAndShortData) {
  EXPECT_EQ(ValuesToData(v1::DATA_TYPE_UNKNOWN, Json::array({1})).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValuesToData(v1::INT8, Json(5)).status().code(), absl::StatusCode::kInvalidArgument);
  v1::Tensor tensor = MakeTensor<int32_t>({3}, std::vector<int32_t>{1, 2});
  EXPECT_THAT(DataToValues(tensor).status().message(), HasSubstr("3 elements"));
  // The friendly form falls back to base64 data when values cannot be shown.
  const Json shown = TensorToJson(tensor);
  EXPECT_FALSE(shown.contains("values"));
  EXPECT_EQ(shown["data"], "AQAAAAIAAAA=");
}

TEST(TensorJsonTest, RoundTripsFriendlyForm) {
  const Json json =
      Json::parse(R"({"data_type": "INT16", "sizes": [2, 2], "values": [1, -2, 3, -4]})");
  absl::StatusOr<v1::Tensor> tensor = TensorFromJson(json);
  ASSERT_TRUE(tensor.ok()) << tensor.status();
  EXPECT_EQ(tensor->data_type(), v1::INT16);
  EXPECT_THAT(tensor->sizes(), ElementsAre(2u, 2u));
  EXPECT_EQ(*DecodeTensor<int16_t>(*tensor), (std::vector<int16_t>{1, -2, 3, -4}));
  EXPECT_EQ(TensorToJson(*tensor), json);

  EXPECT_THAT(TensorFromJson(Json::parse(R"({"sizes": [1], "values": [1]})")).status().message(),
              HasSubstr("data_type"));
  EXPECT_THAT(
      TensorFromJson(Json::parse(R"({"data_type": "FLOAT99", "values": [1]})")).status().message(),
      HasSubstr("unknown data type"));
}

TEST(RequestFileTest, ReadsProtoJsonWithFriendlyTensors) {
  absl::StatusOr<RequestFile> file = ParseRequestFile(R"({
    "request_id": "r1",
    "cumulative_product": {
      "input": {"data_type": "UINT16", "sizes": [3], "values": [1, 2, 3]},
      "axis": 0, "axis_direction": "AXIS_DIRECTION_DECREASING", "has_exclusive_product": true
    }})");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_FALSE(file->is_list);
  ASSERT_EQ(file->requests.size(), 1u);
  const v1::ExecuteRequest& request = file->requests[0].request;
  EXPECT_EQ(request.request_id(), "r1");
  ASSERT_TRUE(request.has_cumulative_product());
  EXPECT_EQ(request.cumulative_product().axis_direction(), v1::AXIS_DIRECTION_DECREASING);
  EXPECT_TRUE(request.cumulative_product().has_exclusive_product());
  EXPECT_EQ(*DecodeTensor<uint16_t>(request.cumulative_product().input()),
            (std::vector<uint16_t>{1, 2, 3}));
}

TEST(RequestFileTest, MapsConformanceCaseIntoTheOneof) {
  absl::StatusOr<RequestFile> file = ParseRequestFile(R"({
    "name": "case_1", "source": "docs", "operator": "quantized_linear_matrix_multiply",
    "a": {"data_type": "INT8", "sizes": [1, 2], "values": [-1, 2]},
    "a_scale": {"data_type": "FLOAT32", "sizes": [1, 1], "values": [0.5]},
    "b": {"data_type": "UINT8", "sizes": [2, 1], "values": [3, 4]},
    "b_scale": {"data_type": "FLOAT32", "sizes": [1, 1], "values": [1]},
    "output_scale": {"data_type": "FLOAT32", "sizes": [1, 1], "values": [1]},
    "output_data_type": "INT8",
    "expected": {"data_type": "INT8", "sizes": [1, 1], "values": [3]}})");
  ASSERT_TRUE(file.ok()) << file.status();
  const FileRequest& parsed = file->requests[0];
  EXPECT_EQ(parsed.name, "case_1");
  EXPECT_EQ(parsed.request.request_id(), "case_1");
  ASSERT_TRUE(parsed.expected.has_value());
  EXPECT_EQ((*parsed.expected)["values"], Json::array({3}));
  const v1::QuantizedLinearMatrixMultiply& op = parsed.request.quantized_linear_matrix_multiply();
  EXPECT_EQ(op.output_data_type(), v1::INT8);
  EXPECT_EQ(*DecodeTensor<int8_t>(op.a()), (std::vector<int8_t>{-1, 2}));
  EXPECT_EQ(*DecodeTensor<float>(op.a_scale()), (std::vector<float>{0.5f}));
  EXPECT_FALSE(op.has_a_zero_point());
}

TEST(RequestFileTest, ListsAndErrorsNameTheField) {
  absl::StatusOr<RequestFile> file = ParseRequestFile(R"({"requests": [
    {"cumulative_summation": {"input": {"data_type": "INT32", "sizes": [1], "values": [1]}}},
    {"cumulative_summation": {"input": {"data_type": "INT32", "sizes": [1], "values": [2]}}}]})");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE(file->is_list);
  EXPECT_EQ(file->requests.size(), 2u);

  absl::Status bad = ParseRequestFile(R"({"requests": [{}, {"cumulative_summation":
      {"input": {"data_type": "UINT8", "sizes": [2], "values": [1, 256]}}}]})")
                         .status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("requests[1].cumulative_summation.input.values[1]"));

  // Unknown keys are typos, not metadata: they are reported.
  EXPECT_THAT(ParseRequestFile(R"({"cumulative_summation": {"axes": 1}})").status().message(),
              HasSubstr("axes"));
  EXPECT_THAT(ParseRequestFile(R"({"operator": "cumulative_max"})").status().message(),
              HasSubstr("operator"));
  EXPECT_EQ(ParseRequestFile("{not json").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(NumberListTest, ParsesSizesAndValues) {
  EXPECT_THAT(*ParseSizes("1, 1,3,4"), ElementsAre(1u, 1u, 3u, 4u));
  EXPECT_EQ(ParseSizes("1,-2").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseSizes("4294967296").status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<Json> values = ParseNumberList("2,-1,0.5,18446744073709551615");
  ASSERT_TRUE(values.ok());
  EXPECT_EQ(values->dump(), "[2,-1,0.5,18446744073709551615]");
  EXPECT_TRUE(ParseNumberList("")->empty());
  EXPECT_THAT(ParseNumberList("1,two").status().message(), HasSubstr("two"));
}

TEST(PrettyPrintTest, KeepsScalarArraysOnOneLine) {
  const Json json = Json::parse(
      R"({"output": {"sizes": [1, 2], "values": [0.5, "NaN"]}, "list": [{"a": []}], "e": {}})");
  EXPECT_EQ(PrettyPrint(json),
            "{\n"
            "  \"output\": {\n"
            "    \"sizes\": [1, 2],\n"
            "    \"values\": [0.5, \"NaN\"]\n"
            "  },\n"
            "  \"list\": [\n"
            "    {\n"
            "      \"a\": []\n"
            "    }\n"
            "  ],\n"
            "  \"e\": {}\n"
            "}");
  // It is still the same JSON.
  EXPECT_EQ(Json::parse(PrettyPrint(json)), json);
}

}  // namespace
}  // namespace dmlserve::client::cli
