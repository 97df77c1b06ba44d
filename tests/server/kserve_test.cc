// The KServe v2 protocol (inference.GRPCInferenceService) against the real
// server, through stubs generated from the protocol's proto: what a client
// that knows nothing of dmlserve sends. Every shared operator example runs
// raw and typed and must match exactly; registered weights are named by
// tensor_id; errors name the protocol's fields.

#include <cstring>
#include <string>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "inference/grpc_predict_v2.grpc.pb.h"
#include "tests/server/conformance_cases.h"
#include "tests/server/server_fixture.h"
#include "tests/server/tensor_values.h"
#include "tests/server/test_requests.h"

namespace dmlserve::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// The protocol's datatype names, written from the protocol's side.
std::string Datatype(v1::DataType type) {
  switch (type) {
    case v1::FLOAT32:
      return "FP32";
    case v1::FLOAT16:
      return "FP16";
    case v1::FLOAT64:
      return "FP64";
    case v1::UINT8:
      return "UINT8";
    case v1::UINT16:
      return "UINT16";
    case v1::UINT32:
      return "UINT32";
    case v1::UINT64:
      return "UINT64";
    case v1::INT8:
      return "INT8";
    case v1::INT16:
      return "INT16";
    case v1::INT32:
      return "INT32";
    case v1::INT64:
      return "INT64";
    default:
      return "";
  }
}

v1::DataType FromDatatype(const std::string& name) {
  for (int t = v1::DataType_MIN; t <= v1::DataType_MAX; ++t) {
    if (v1::DataType_IsValid(t) && Datatype(static_cast<v1::DataType>(t)) == name) {
      return static_cast<v1::DataType>(t);
    }
  }
  return v1::DATA_TYPE_UNKNOWN;
}

template <typename Element, typename Field>
void AddTyped(const std::string& bytes, Field* field) {
  for (size_t i = 0; i + sizeof(Element) <= bytes.size(); i += sizeof(Element)) {
    Element element;
    std::memcpy(&element, bytes.data() + i, sizeof(Element));
    field->Add(element);
  }
}

// Typed contents for a tensor's bytes; false for FP16 (raw only).
bool SetTyped(const v1::Tensor& tensor, inference::InferTensorContents* contents) {
  const std::string& d = tensor.data();
  switch (tensor.data_type()) {
    case v1::FLOAT32:
      AddTyped<float>(d, contents->mutable_fp32_contents());
      return true;
    case v1::FLOAT64:
      AddTyped<double>(d, contents->mutable_fp64_contents());
      return true;
    case v1::UINT8:
      AddTyped<uint8_t>(d, contents->mutable_uint_contents());
      return true;
    case v1::UINT16:
      AddTyped<uint16_t>(d, contents->mutable_uint_contents());
      return true;
    case v1::UINT32:
      AddTyped<uint32_t>(d, contents->mutable_uint_contents());
      return true;
    case v1::UINT64:
      AddTyped<uint64_t>(d, contents->mutable_uint64_contents());
      return true;
    case v1::INT8:
      AddTyped<int8_t>(d, contents->mutable_int_contents());
      return true;
    case v1::INT16:
      AddTyped<int16_t>(d, contents->mutable_int_contents());
      return true;
    case v1::INT32:
      AddTyped<int32_t>(d, contents->mutable_int_contents());
      return true;
    case v1::INT64:
      AddTyped<int64_t>(d, contents->mutable_int64_contents());
      return true;
    default:
      return false;
  }
}

// The KServe request a client would send for a native one; nullopt when it
// cannot be typed (an FP16 input) and `raw` is false.
std::optional<inference::ModelInferRequest> ToKServe(const v1::ExecuteRequest& native, bool raw) {
  inference::ModelInferRequest request;
  request.set_id(native.request_id());
  std::vector<std::pair<std::string, const v1::Tensor*>> inputs;
  auto& parameters = *request.mutable_parameters();
  auto scan = [&](const auto& op, bool exclusive) {
    inputs.push_back({"input", &op.input()});
    parameters["axis"].set_int64_param(op.axis());
    if (op.axis_direction() == v1::AXIS_DIRECTION_DECREASING) {
      parameters["axis_direction"].set_string_param("DECREASING");
    }
    if (exclusive) parameters["exclusive"].set_bool_param(true);
  };
  switch (native.operator_case()) {
    case v1::ExecuteRequest::kCumulativeSummation:
      request.set_model_name("cumulative_summation");
      scan(native.cumulative_summation(), native.cumulative_summation().has_exclusive_sum());
      break;
    case v1::ExecuteRequest::kCumulativeProduct:
      request.set_model_name("cumulative_product");
      scan(native.cumulative_product(), native.cumulative_product().has_exclusive_product());
      break;
    case v1::ExecuteRequest::kQuantizedLinearMatrixMultiply: {
      request.set_model_name("quantized_linear_matrix_multiply");
      const auto& m = native.quantized_linear_matrix_multiply();
      inputs.push_back({"a", &m.a()});
      inputs.push_back({"a_scale", &m.a_scale()});
      if (m.has_a_zero_point()) inputs.push_back({"a_zero_point", &m.a_zero_point()});
      inputs.push_back({"b", &m.b()});
      inputs.push_back({"b_scale", &m.b_scale()});
      if (m.has_b_zero_point()) inputs.push_back({"b_zero_point", &m.b_zero_point()});
      inputs.push_back({"output_scale", &m.output_scale()});
      if (m.has_output_zero_point()) {
        inputs.push_back({"output_zero_point", &m.output_zero_point()});
      }
      if (m.output_data_type() != v1::DATA_TYPE_UNKNOWN) {
        parameters["output_data_type"].set_string_param(Datatype(m.output_data_type()));
      }
      break;
    }
    default:
      return std::nullopt;
  }
  for (const auto& [name, tensor] : inputs) {
    auto* input = request.add_inputs();
    input->set_name(name);
    if (!tensor->tensor_id().empty()) {
      (*input->mutable_parameters())["tensor_id"].set_string_param(tensor->tensor_id());
      if (raw) request.add_raw_input_contents();
      continue;
    }
    input->set_datatype(Datatype(tensor->data_type()));
    for (uint32_t size : tensor->sizes()) input->add_shape(size);
    if (raw) {
      request.add_raw_input_contents(tensor->data());
    } else if (!SetTyped(*tensor, input->mutable_contents())) {
      return std::nullopt;
    }
  }
  return request;
}

// The response's output as a native tensor.
v1::Tensor OutputOf(const inference::ModelInferResponse& response) {
  v1::Tensor tensor;
  if (response.outputs_size() != 1 || response.raw_output_contents_size() != 1) {
    ADD_FAILURE() << "expected one raw output: " << response.ShortDebugString();
    return tensor;
  }
  EXPECT_EQ(response.outputs(0).name(), "output");
  tensor.set_data_type(FromDatatype(response.outputs(0).datatype()));
  for (int64_t size : response.outputs(0).shape()) tensor.add_sizes(static_cast<uint32_t>(size));
  tensor.set_data(response.raw_output_contents(0));
  return tensor;
}

class KServeTest : public ServerTest {
 protected:
  void SetUp() override {
    ServerTest::SetUp();
    kserve_ = inference::GRPCInferenceService::NewStub(channel_);
  }

  grpc::Status Infer(const inference::ModelInferRequest& request,
                     inference::ModelInferResponse* response) {
    auto context = MakeContext();
    return kserve_->ModelInfer(context.get(), request, response);
  }

  std::unique_ptr<inference::GRPCInferenceService::Stub> kserve_;
};

TEST_F(KServeTest, ServerAndModelsReportLiveReadyAndMetadata) {
  auto context = MakeContext();
  inference::ServerLiveResponse live;
  ASSERT_TRUE(kserve_->ServerLive(context.get(), {}, &live).ok());
  EXPECT_TRUE(live.live());
  context = MakeContext();
  inference::ServerReadyResponse ready;
  ASSERT_TRUE(kserve_->ServerReady(context.get(), {}, &ready).ok());
  EXPECT_TRUE(ready.ready());
  context = MakeContext();
  inference::ServerMetadataResponse server;
  ASSERT_TRUE(kserve_->ServerMetadata(context.get(), {}, &server).ok());
  EXPECT_EQ(server.name(), "dmlserve");
  EXPECT_EQ(server.version(), DMLSERVE_EXPECTED_VERSION);

  for (const std::string model :
       {"cumulative_summation", "cumulative_product", "quantized_linear_matrix_multiply"}) {
    SCOPED_TRACE(model);
    inference::ModelReadyRequest ready_request;
    ready_request.set_name(model);
    inference::ModelReadyResponse model_ready;
    context = MakeContext();
    ASSERT_TRUE(kserve_->ModelReady(context.get(), ready_request, &model_ready).ok());
    EXPECT_TRUE(model_ready.ready());
    inference::ModelMetadataRequest metadata_request;
    metadata_request.set_name(model);
    metadata_request.set_version("1");
    inference::ModelMetadataResponse metadata;
    context = MakeContext();
    ASSERT_TRUE(kserve_->ModelMetadata(context.get(), metadata_request, &metadata).ok());
    EXPECT_EQ(metadata.name(), model);
    EXPECT_THAT(metadata.versions(), ElementsAre("1"));
    ASSERT_EQ(metadata.outputs_size(), 1);
    EXPECT_EQ(metadata.outputs(0).name(), "output");
    EXPECT_EQ(metadata.inputs_size(), model == "quantized_linear_matrix_multiply" ? 8 : 1);
  }
}

TEST_F(KServeTest, UnknownModelsAndVersionsAreNotFound) {
  inference::ModelReadyRequest ready;
  ready.set_name("resnet50");
  inference::ModelReadyResponse ready_response;
  auto context = MakeContext();
  grpc::Status status = kserve_->ModelReady(context.get(), ready, &ready_response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(), HasSubstr("cumulative_summation"));

  inference::ModelMetadataRequest metadata;
  metadata.set_name("cumulative_product");
  metadata.set_version("7");
  inference::ModelMetadataResponse metadata_response;
  context = MakeContext();
  status = kserve_->ModelMetadata(context.get(), metadata, &metadata_response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(), HasSubstr("versions: 1"));

  inference::ModelInferRequest infer;
  infer.set_model_name("resnet50");
  inference::ModelInferResponse response;
  EXPECT_EQ(Infer(infer, &response).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(KServeTest, EveryExampleRawAndTypedMatchesExactly) {
  const std::vector<ConformanceCase> cases = LoadConformanceCases(DMLSERVE_CONFORMANCE_DIR);
  ASSERT_FALSE(cases.empty());
  int typed = 0;
  for (const ConformanceCase& c : cases) {
    for (const bool raw : {true, false}) {
      SCOPED_TRACE(c.name + (raw ? " raw" : " typed"));
      std::optional<inference::ModelInferRequest> request = ToKServe(c.request, raw);
      if (!request.has_value()) {
        ASSERT_FALSE(raw);  // FP16 inputs travel raw only
        continue;
      }
      typed += raw ? 0 : 1;
      inference::ModelInferResponse response;
      const grpc::Status status = Infer(*request, &response);
      ASSERT_TRUE(status.ok()) << status.error_message();
      EXPECT_EQ(response.model_name(), request->model_name());
      EXPECT_EQ(response.model_version(), "1");
      EXPECT_EQ(response.id(), c.name);
      const v1::Tensor output = OutputOf(response);
      EXPECT_EQ(v1::DataType_Name(output.data_type()), v1::DataType_Name(c.expected.data_type()));
      EXPECT_EQ(TensorSizes(output), TensorSizes(c.expected));
      EXPECT_EQ(output.data(), c.expected.data());
    }
  }
  EXPECT_GT(typed, static_cast<int>(cases.size()) / 2);
  // Counted in the same request metrics as the native API.
  EXPECT_GE(Metric("dmlserve_requests_total",
                   {{"operator", "quantized_linear_matrix_multiply"}, {"code", "OK"}})
                .value_or(0),
            1.0);
}

TEST_F(KServeTest, RegisteredWeightsAreNamedByTensorId) {
  absl::BitGen bitgen;
  const QuantizedMatMulCase weights = RandomWeights(bitgen, 24, 17);
  std::string b_id;
  ASSERT_TRUE(Register(MatMulB(weights), &b_id).ok());
  for (int i = 0; i < 4; ++i) {
    const QuantizedMatMulCase c = RandomMatMulCase(bitgen, weights);
    for (const bool raw : {true, false}) {
      SCOPED_TRACE(raw ? "raw" : "typed");
      std::optional<inference::ModelInferRequest> request =
          ToKServe(MatMulRequest("registered", c, b_id), raw);
      ASSERT_TRUE(request.has_value());
      inference::ModelInferResponse response;
      const grpc::Status status = Infer(*request, &response);
      ASSERT_TRUE(status.ok()) << status.error_message();
      EXPECT_EQ(TensorValues(OutputOf(response)), QuantizedMatMulReference(c));
    }
  }
  // A tensor id nobody registered: the native API's error.
  std::optional<inference::ModelInferRequest> request = ToKServe(
      MatMulRequest("missing", RandomMatMulCase(bitgen, weights), "never-registered"), true);
  inference::ModelInferResponse response;
  const grpc::Status status = Infer(*request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), StartsWith("quantized_linear_matrix_multiply.b.tensor_id: "));
  EXPECT_THAT(status.error_message(), HasSubstr("never-registered"));
}

TEST_F(KServeTest, BadRequestsNameTheProtocolsField) {
  const v1::ExecuteRequest native =
      ScanRequest("bad", v1::INT32, {2, 3}, {1, 2, 3, 4, 5, 6}, /*axis=*/1);
  inference::ModelInferRequest good = *ToKServe(native, /*raw=*/false);
  auto expect_invalid = [&](const inference::ModelInferRequest& request, const std::string& start,
                            const std::string& detail) {
    inference::ModelInferResponse response;
    const grpc::Status status = Infer(request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    EXPECT_THAT(status.error_message(), StartsWith(start));
    EXPECT_THAT(status.error_message(), HasSubstr(detail));
  };
  inference::ModelInferRequest bad = good;
  bad.mutable_inputs(0)->set_name("x");
  expect_invalid(bad, "inputs[0] (\"x\"): not an input", "its inputs: input");
  bad = good;
  bad.mutable_inputs(0)->set_datatype("BOOL");
  expect_invalid(bad, "inputs[0] (\"input\").datatype: \"BOOL\"", "FP32");
  bad = good;
  bad.mutable_inputs(0)->mutable_contents()->set_int_contents(4, 1 << 30);
  bad.mutable_inputs(0)->set_datatype("INT16");
  expect_invalid(bad, "inputs[0] (\"input\").contents.int_contents[4]", "out of range for INT16");
  bad = good;
  bad.mutable_inputs(0)->mutable_contents()->mutable_int_contents()->RemoveLast();
  expect_invalid(bad, "inputs[0] (\"input\").contents.int_contents", "5 values, expected 6");
  bad = good;
  bad.mutable_inputs(0)->set_shape(0, -1);
  expect_invalid(bad, "inputs[0] (\"input\").shape[0]", "-1 is not a size");
  bad = good;
  (*bad.mutable_parameters())["axis"].set_string_param("1");
  expect_invalid(bad, "parameters[\"axis\"]", "int64_param");
  bad = good;
  (*bad.mutable_parameters())["axes"].set_int64_param(1);
  expect_invalid(bad, "parameters[\"axes\"]", "accepted: axis, axis_direction, exclusive");
  bad = good;
  bad.add_outputs()->set_name("logits");
  expect_invalid(bad, "outputs[0] (\"logits\")", "one output, \"output\"");
  bad = *ToKServe(native, /*raw=*/true);
  bad.add_raw_input_contents("extra");
  expect_invalid(bad, "raw_input_contents: 2 entries for 1 inputs", "");
  bad = *ToKServe(native, /*raw=*/true);
  bad.mutable_raw_input_contents(0)->pop_back();
  // Past the protocol's own rules, the native decoder's errors, as on Execute.
  expect_invalid(bad, "cumulative_summation.input.data", "23 bytes");
  bad = good;
  bad.clear_inputs();
  expect_invalid(bad, "inputs: model cumulative_summation needs an input named \"input\"", "");
  ExpectServerStillAnswers();
}

}  // namespace
}  // namespace dmlserve::testing
