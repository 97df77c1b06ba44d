// GetServerInfo, the standard health service and server reflection.

#include <set>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"
#include "google/protobuf/dynamic_message.h"
#include "google/protobuf/util/json_util.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "tests/server/server_fixture.h"

namespace dmlserve::testing {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAreArray;

class ServerInfoTest : public ServerTest {
 protected:
  std::vector<std::string> ServerFlags() const override {
    return {"--cpu_devices=3",
            "--max_batch_size=16",
            "--max_batch_bytes=123456",
            "--max_queue_delay_us=321",
            "--max_queue=77",
            "--max_request_bytes=1000000",
            "--max_registered_tensor_bytes=2000000",
            "--max_registered_tensors=99"};
  }
};

std::vector<std::string> TypeNames(const v1::OperatorSupport& support) {
  std::vector<std::string> names;
  for (int type : support.data_types()) names.push_back(v1::DataType_Name(type));
  return names;
}

TEST_F(ServerInfoTest, DescribesVersionDevicesLimitsAndOperators) {
  auto context = MakeContext();
  v1::GetServerInfoResponse info;
  ASSERT_TRUE(stub_->GetServerInfo(context.get(), {}, &info).ok());

  EXPECT_EQ(info.version(), DMLSERVE_EXPECTED_VERSION);
  const std::string backend = ServingBackend();
  EXPECT_THAT(info.backends(), Contains(backend));
  std::set<std::string> serving, fallback;
  for (const v1::DeviceInfo& device : info.devices()) {
    EXPECT_TRUE(device.healthy());
    (device.fallback() ? fallback : serving).insert(device.name());
    EXPECT_EQ(device.backend(), device.fallback() ? "cpu" : backend);
  }
  const std::set<std::string> cpus = {"cpu:0", "cpu:1", "cpu:2"};
  if (backend == "cpu") {
    EXPECT_EQ(serving, cpus);
    EXPECT_TRUE(fallback.empty());
  } else {
    // Two logical devices on the one adapter (lavapipe in CI), with the CPU
    // devices behind them.
    EXPECT_EQ(serving, (std::set<std::string>{"d3d12:0", "d3d12:1"}));
    EXPECT_EQ(fallback, cpus);
    ASSERT_GE(info.adapters_size(), 1);
    EXPECT_TRUE(info.adapters(0).used());
    EXPECT_FALSE(info.adapters(0).name().empty());
  }

  EXPECT_EQ(info.limits().max_batch_size(), 16u);
  EXPECT_EQ(info.limits().max_batch_bytes(), 123456u);
  EXPECT_EQ(info.limits().max_queue_delay_us(), 321u);
  EXPECT_EQ(info.limits().max_queue(), 77u);
  EXPECT_EQ(info.limits().max_request_bytes(), 1000000u);
  EXPECT_EQ(info.limits().max_registered_tensor_bytes(), 2000000u);
  EXPECT_EQ(info.limits().max_registered_tensors(), 99u);
  EXPECT_EQ(info.limits().max_dimensions(), 8u);
  EXPECT_EQ(info.registered_tensor_bytes(), 0u);

  // The operators and data types of the specification.
  std::map<std::string, std::vector<std::string>> operators;
  for (const v1::OperatorSupport& support : info.operators()) {
    operators[support.name()] = TypeNames(support);
  }
  ASSERT_EQ(operators.size(), 3u);
  EXPECT_THAT(
      operators["cumulative_summation"],
      UnorderedElementsAreArray({"FLOAT32", "FLOAT16", "INT64", "INT32", "UINT64", "UINT32"}));
  EXPECT_THAT(operators["cumulative_product"],
              UnorderedElementsAreArray({"FLOAT32", "FLOAT16", "UINT32", "UINT16"}));
  EXPECT_THAT(operators["quantized_linear_matrix_multiply"],
              UnorderedElementsAreArray({"INT8", "UINT8"}));
}

TEST_F(ServerInfoTest, HealthCheckReportsServing) {
  auto health = grpc::health::v1::Health::NewStub(channel_);
  for (const std::string service : {"", "dmlserve.v1.OperatorService"}) {
    SCOPED_TRACE(service);
    auto context = MakeContext();
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(service);
    grpc::health::v1::HealthCheckResponse response;
    const grpc::Status status = health->Check(context.get(), request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  }
  auto context = MakeContext();
  grpc::health::v1::HealthCheckRequest request;
  request.set_service("no.such.Service");
  grpc::health::v1::HealthCheckResponse response;
  EXPECT_EQ(health->Check(context.get(), request, &response).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

namespace reflection = grpc::reflection::v1alpha;
using ReflectionStream = grpc::ClientReaderWriter<reflection::ServerReflectionRequest,
                                                  reflection::ServerReflectionResponse>;

// The services the server lists through reflection (empty on a broken stream).
std::vector<std::string> ListedServices(ReflectionStream& stream) {
  reflection::ServerReflectionRequest list;
  list.set_list_services("");
  reflection::ServerReflectionResponse response;
  std::vector<std::string> services;
  if (!stream.Write(list) || !stream.Read(&response)) return services;
  for (const auto& service : response.list_services_response().service()) {
    services.push_back(service.name());
  }
  return services;
}

// The serialized FileDescriptorProtos that define `symbol` and what it
// imports (empty when the server sends none).
std::vector<std::string> FilesContaining(ReflectionStream& stream, const std::string& symbol) {
  reflection::ServerReflectionRequest request;
  request.set_file_containing_symbol(symbol);
  reflection::ServerReflectionResponse response;
  if (!stream.Write(request) || !stream.Read(&response)) return {};
  const auto& files = response.file_descriptor_response().file_descriptor_proto();
  return std::vector<std::string>(files.begin(), files.end());
}

TEST_F(ServerInfoTest, ReflectionListsServicesAndDescribesTheApi) {
  auto stub = reflection::ServerReflection::NewStub(channel_);
  auto context = MakeContext();
  auto stream = stub->ServerReflectionInfo(context.get());

  const std::vector<std::string> services = ListedServices(*stream);
  EXPECT_THAT(services, Contains("dmlserve.v1.OperatorService"));
  EXPECT_THAT(services, Contains("grpc.health.v1.Health"));

  const std::vector<std::string> descriptors =
      FilesContaining(*stream, "dmlserve.v1.OperatorService");
  ASSERT_FALSE(descriptors.empty());
  std::vector<std::string> files;
  for (const std::string& bytes : descriptors) {
    google::protobuf::FileDescriptorProto file;
    ASSERT_TRUE(file.ParseFromString(bytes));
    files.push_back(file.name());
  }
  EXPECT_THAT(files, Contains("dmlserve/v1/dmlserve.proto"));
  ASSERT_TRUE(stream->WritesDone());
  EXPECT_TRUE(stream->Finish().ok());
}

// What grpcurl does with --reflection, in-process: no generated code for the
// KServe protocol; its descriptors come from the server's reflection, the
// request is JSON, the call goes through a generic stub.
TEST_F(ServerInfoTest, AReflectionOnlyClientRunsKServeModelInferFromJson) {
  auto stub = reflection::ServerReflection::NewStub(channel_);
  auto context = MakeContext();
  auto stream = stub->ServerReflectionInfo(context.get());
  ASSERT_THAT(ListedServices(*stream), Contains("inference.GRPCInferenceService"));

  const std::vector<std::string> descriptors =
      FilesContaining(*stream, "inference.GRPCInferenceService");
  ASSERT_FALSE(descriptors.empty());
  google::protobuf::DescriptorPool pool;
  for (const std::string& bytes : descriptors) {
    google::protobuf::FileDescriptorProto file;
    ASSERT_TRUE(file.ParseFromString(bytes));
    ASSERT_NE(pool.BuildFile(file), nullptr) << file.name();
  }
  ASSERT_TRUE(stream->WritesDone());
  EXPECT_TRUE(stream->Finish().ok());

  const google::protobuf::ServiceDescriptor* service =
      pool.FindServiceByName("inference.GRPCInferenceService");
  ASSERT_NE(service, nullptr);
  const google::protobuf::MethodDescriptor* method = service->FindMethodByName("ModelInfer");
  ASSERT_NE(method, nullptr);
  google::protobuf::DynamicMessageFactory factory(&pool);
  std::unique_ptr<google::protobuf::Message> request(
      factory.GetPrototype(method->input_type())->New());
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(
                  R"({"model_name": "cumulative_summation", "id": "from-json",
                      "parameters": {"exclusive": {"bool_param": true}},
                      "inputs": [{"name": "input", "datatype": "INT32", "shape": [4],
                                  "contents": {"int_contents": [1, 2, 3, 4]}}]})",
                  request.get())
                  .ok());
  grpc::GenericStub generic(channel_);
  std::string request_bytes;
  ASSERT_TRUE(request->SerializeToString(&request_bytes));
  grpc::Slice slice(request_bytes);
  grpc::ByteBuffer request_buffer(&slice, 1), response_buffer;
  auto call_context = MakeContext();
  absl::Notification done;
  grpc::Status status;
  generic.UnaryCall(call_context.get(), "/inference.GRPCInferenceService/ModelInfer",
                    grpc::StubOptions(), &request_buffer, &response_buffer, [&](grpc::Status s) {
                      status = std::move(s);
                      done.Notify();
                    });
  done.WaitForNotification();
  ASSERT_TRUE(status.ok()) << status.error_message();
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(response_buffer.Dump(&slices).ok());
  std::string response_bytes;
  for (const grpc::Slice& s : slices) response_bytes.append(s.begin(), s.end());
  std::unique_ptr<google::protobuf::Message> answer(
      factory.GetPrototype(method->output_type())->New());
  ASSERT_TRUE(answer->ParseFromString(response_bytes));
  std::string json;
  ASSERT_TRUE(google::protobuf::util::MessageToJsonString(*answer, &json).ok());
  // The exclusive sum of 1, 2, 3, 4 as raw INT32 (base64 in JSON): 0, 1, 3, 6.
  const std::string expected_bytes("\0\0\0\0\1\0\0\0\3\0\0\0\6\0\0\0", 16);
  std::string expected_base64;
  absl::Base64Escape(expected_bytes, &expected_base64);
  EXPECT_THAT(json, HasSubstr("\"id\":\"from-json\""));
  EXPECT_THAT(json, HasSubstr("\"datatype\":\"INT32\""));
  EXPECT_THAT(json, HasSubstr(absl::StrCat("\"rawOutputContents\":[\"", expected_base64, "\"]")));
}

TEST_F(ServerInfoTest, MetricsEndpointServesTheServiceMetrics) {
  ExpectServerStillAnswers();
  EXPECT_EQ(Metric("dmlserve_build_info", {{"version", DMLSERVE_EXPECTED_VERSION}}), 1.0);
  EXPECT_EQ(
      Metric("dmlserve_requests_total", {{"operator", "cumulative_summation"}, {"code", "OK"}}),
      1.0);
  EXPECT_EQ(
      Metric("dmlserve_request_duration_seconds_count", {{"operator", "cumulative_summation"}}),
      1.0);
  EXPECT_GT(
      Metric("dmlserve_request_bytes_total", {{"operator", "cumulative_summation"}}).value_or(0),
      48.0);
  EXPECT_EQ(Metric("dmlserve_queue_duration_seconds_count", {{"operator", "cumulative_summation"}}),
            1.0);
  EXPECT_EQ(Metric("dmlserve_batch_size_count", {{"operator", "cumulative_summation"}}), 1.0);
  EXPECT_EQ(Metric("dmlserve_compute_duration_seconds_count"), 1.0);
  EXPECT_EQ(Metric("dmlserve_inflight_requests"), 0.0);
  EXPECT_EQ(Metric("dmlserve_queue_depth"), 0.0);
  EXPECT_EQ(Metric("dmlserve_registered_tensor_bytes"), 0.0);
  for (const char* device : {"cpu:0", "cpu:1", "cpu:2"}) {
    EXPECT_TRUE(Metric("dmlserve_device_memory_bytes", {{"device", device}}).has_value()) << device;
  }

  // A request without an operator counts as "unknown".
  v1::ExecuteRequest empty;
  v1::ExecuteResponse response;
  EXPECT_EQ(Execute(empty, &response).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(
      Metric("dmlserve_requests_total", {{"operator", "unknown"}, {"code", "INVALID_ARGUMENT"}}),
      1.0);
}

}  // namespace
}  // namespace dmlserve::testing
