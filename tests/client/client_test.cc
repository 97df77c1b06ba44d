// The C++ client library against the real dmlserve binary.

#include "client/cpp/client.h"

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/cli/json_tensor.h"
#include "client/cpp/float16.h"
#include "client/cpp/tensor_codec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/core/buffer.h"
#include "kernels/core/operation.h"
#include "kernels/core/tensor.h"
#include "tests/client/conformance_file.h"
#include "tests/client/shared_server.h"
#include "tests/reference/reference.h"

namespace dmlserve::client {
namespace {

using ::testing::HasSubstr;
using testing::SharedServer;
using ::testing::UnorderedElementsAre;

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ClientOptions options;
    options.connect_timeout = absl::Seconds(30);
    absl::StatusOr<std::unique_ptr<Client>> client =
        Client::Connect(SharedServer().grpc_address(), options);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }

  std::unique_ptr<Client> client_;
  std::mt19937 random_{20240601};
};

std::vector<uint32_t> RandomSizes(std::mt19937& random) {
  std::uniform_int_distribution<int> rank(1, 5);
  std::uniform_int_distribution<uint32_t> size(1, 6);
  std::vector<uint32_t> sizes(rank(random));
  for (uint32_t& s : sizes) s = size(random);
  return sizes;
}

uint64_t Count(const std::vector<uint32_t>& sizes) {
  uint64_t count = 1;
  for (uint32_t s : sizes) count *= s;
  return count;
}

// The reference's tensor for a message: the same bytes, and a data type
// numbered the same (kernels/core/data_type.h), so this only re-wraps.
::dmlserve::Tensor ReferenceTensor(const v1::Tensor& tensor) {
  ::dmlserve::Tensor out;
  out.data_type = static_cast<::dmlserve::DataType>(tensor.data_type());
  out.sizes.assign(tensor.sizes().begin(), tensor.sizes().end());
  out.bytes = ::dmlserve::Buffer::Copy(tensor.data());
  return out;
}

// Checks a scan's response against the reference under the spec's rules
// (integers exactly, wrapping included; floats within its tolerance).
void ExpectScanMatchesReference(const v1::Tensor& input, const ScanOptions& scan, bool product,
                                const v1::Tensor& output) {
  const absl::StatusOr<ScanOperation> op = MakeScanOperation(
      product ? OperatorKind::kCumulativeProduct : OperatorKind::kCumulativeSummation,
      ReferenceTensor(input), scan.axis,
      scan.reverse ? AxisDirection::kDecreasing : AxisDirection::kIncreasing, scan.exclusive);
  ASSERT_TRUE(op.ok()) << op.status();
  const absl::Status status = reference::CheckOutput(*op, ReferenceTensor(output));
  EXPECT_TRUE(status.ok()) << status << " for " << reference::Describe(*op);
}

TEST_F(ClientTest, ReproducesEveryConformanceCase) {
  const std::vector<cli::FileRequest> cases = testing::LoadConformanceCases();
  ASSERT_GE(cases.size(), 13u);
  for (const cli::FileRequest& test_case : cases) {
    SCOPED_TRACE(test_case.name);
    absl::StatusOr<v1::ExecuteResponse> response = client_->Execute(test_case.request);
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response->request_id(), test_case.name);
    absl::StatusOr<v1::Tensor> expected = cli::TensorFromJson(*test_case.expected);
    ASSERT_TRUE(expected.ok()) << expected.status();
    EXPECT_EQ(response->output().data_type(), expected->data_type());
    EXPECT_EQ(
        std::vector<uint32_t>(response->output().sizes().begin(), response->output().sizes().end()),
        std::vector<uint32_t>(expected->sizes().begin(), expected->sizes().end()));
    EXPECT_EQ(*DecodeTensorAsDouble(response->output()), *DecodeTensorAsDouble(*expected));
    EXPECT_FALSE(response->info().device().empty());
    EXPECT_GE(response->info().batch_size(), 1u);
  }
}

template <typename T>
void CheckIntegerScans(Client& client, std::mt19937& random, bool product) {
  for (int trial = 0; trial < 4; ++trial) {
    const std::vector<uint32_t> sizes = RandomSizes(random);
    std::uniform_int_distribution<int> small(product ? 0 : -50, product ? 7 : 50);
    std::vector<T> values(Count(sizes));
    for (T& value : values) value = static_cast<T>(small(random));
    // Large values make wrapping happen.
    values[0] = std::numeric_limits<T>::max() - 1;
    ScanOptions scan;
    scan.axis = std::uniform_int_distribution<uint32_t>(0, sizes.size() - 1)(random);
    scan.reverse = trial % 2 == 1;
    scan.exclusive = trial / 2 == 1;
    SCOPED_TRACE(absl::StrCat(DataTypeDisplayName(DataTypeOf<T>::kValue), " axis ", scan.axis,
                              " reverse ", scan.reverse, " exclusive ", scan.exclusive));
    const v1::Tensor input = MakeTensor<T>(sizes, values);
    absl::StatusOr<v1::ExecuteResponse> response =
        product ? client.CumulativeProduct(input, scan) : client.CumulativeSummation(input, scan);
    ASSERT_TRUE(response.ok()) << response.status();
    absl::StatusOr<std::vector<T>> output = DecodeTensor<T>(response->output());
    ASSERT_TRUE(output.ok()) << output.status();
    // The decoded values are the bytes the reference checks.
    EXPECT_EQ(MakeTensor<T>(sizes, *output).data(), response->output().data());
    ExpectScanMatchesReference(input, scan, product, response->output());
  }
}

TEST_F(ClientTest, IntegerScansMatchReference) {
  CheckIntegerScans<int32_t>(*client_, random_, /*product=*/false);
  CheckIntegerScans<int64_t>(*client_, random_, /*product=*/false);
  CheckIntegerScans<uint32_t>(*client_, random_, /*product=*/false);
  CheckIntegerScans<uint64_t>(*client_, random_, /*product=*/false);
  CheckIntegerScans<uint32_t>(*client_, random_, /*product=*/true);
  CheckIntegerScans<uint16_t>(*client_, random_, /*product=*/true);
}

TEST_F(ClientTest, FloatScansMatchReference) {
  for (bool half : {false, true}) {
    for (bool product : {false, true}) {
      const std::vector<uint32_t> sizes = RandomSizes(random_);
      std::uniform_real_distribution<float> value(product ? 0.5f : -4.0f, product ? 1.5f : 4.0f);
      std::vector<float> values(Count(sizes));
      for (float& v : values) v = value(random_);
      // What the server sees for FLOAT16 is the rounded input.
      if (half) {
        for (float& v : values) v = HalfBitsToFloat(FloatToHalfBits(v));
      }
      ScanOptions scan;
      scan.axis = static_cast<uint32_t>(sizes.size() - 1);
      scan.reverse = product;
      scan.exclusive = !product;
      const v1::Tensor input =
          half ? MakeFloat16Tensor(sizes, values) : MakeTensor<float>(sizes, values);
      absl::StatusOr<v1::ExecuteResponse> response =
          product ? client_->CumulativeProduct(input, scan)
                  : client_->CumulativeSummation(input, scan);
      ASSERT_TRUE(response.ok()) << response.status();
      absl::StatusOr<std::vector<float>> output =
          half ? DecodeFloat16Tensor(response->output()) : DecodeTensor<float>(response->output());
      ASSERT_TRUE(output.ok()) << output.status();
      // The decoded values are the bytes the reference checks (FLOAT16
      // values convert to float and back exactly).
      EXPECT_EQ(
          (half ? MakeFloat16Tensor(sizes, *output) : MakeTensor<float>(sizes, *output)).data(),
          response->output().data());
      ExpectScanMatchesReference(input, scan, product, response->output());
    }
  }
}

TEST_F(ClientTest, QuantizedMatMulWithTypedHelpers) {
  const uint32_t m = 3, k = 5, n = 4;
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<int8_t> a(m * k);
  std::vector<uint8_t> b(k * n);
  for (int8_t& v : a) v = static_cast<int8_t>(byte(random_) - 128);
  for (uint8_t& v : b) v = static_cast<uint8_t>(byte(random_));
  QuantizedMatMulInputs inputs;
  inputs.a = MakeTensor<int8_t>({1, 1, m, k}, a);
  inputs.a_scale = MakeTensor<float>({1, 1, 1, 1}, std::vector<float>{0.25f});
  inputs.a_zero_point = MakeTensor<int8_t>({1, 1, 1, 1}, std::vector<int8_t>{3});
  inputs.b = MakeTensor<uint8_t>({1, 1, k, n}, b);
  inputs.b_scale = MakeTensor<float>({1, 1, 1, 1}, std::vector<float>{0.5f});
  inputs.b_zero_point = MakeTensor<uint8_t>({1, 1, 1, 1}, std::vector<uint8_t>{128});
  inputs.output_scale = MakeTensor<float>({1, 1, 1, 1}, std::vector<float>{64.0f});
  inputs.output_zero_point = MakeTensor<uint8_t>({1, 1, 1, 1}, std::vector<uint8_t>{100});
  absl::StatusOr<v1::ExecuteResponse> response = client_->QuantizedLinearMatrixMultiply(inputs);
  ASSERT_TRUE(response.ok()) << response.status();
  absl::StatusOr<std::vector<uint8_t>> output = DecodeTensor<uint8_t>(response->output());
  ASSERT_TRUE(output.ok()) << output.status();
  // The decoded values are the bytes the reference checks.
  EXPECT_EQ(MakeTensor<uint8_t>({1, 1, m, n}, *output).data(), response->output().data());
  QuantizedMatMulTensors tensors;
  tensors.a = ReferenceTensor(inputs.a);
  tensors.a_scale = ReferenceTensor(inputs.a_scale);
  tensors.a_zero_point = ReferenceTensor(*inputs.a_zero_point);
  tensors.b = ReferenceTensor(inputs.b);
  tensors.b_scale = ReferenceTensor(inputs.b_scale);
  tensors.b_zero_point = ReferenceTensor(*inputs.b_zero_point);
  tensors.output_scale = ReferenceTensor(inputs.output_scale);
  tensors.output_zero_point = ReferenceTensor(*inputs.output_zero_point);
  const absl::StatusOr<QuantizedMatMulOperation> op =
      MakeQuantizedMatMulOperation(std::move(tensors), ::dmlserve::DataType::kUnknown);
  ASSERT_TRUE(op.ok()) << op.status();
  // Power-of-two scales make the requantization exact in any precision:
  // every element must match, with no tie allowance.
  const absl::Status status = reference::CheckExact(reference::ComputeQuantizedMatMul(*op),
                                                    ReferenceTensor(response->output()));
  EXPECT_TRUE(status.ok()) << status;
}

TEST_F(ClientTest, ErrorsKeepCodeAndServerMessage) {
  const v1::Tensor input = MakeTensor<float>({2, 3}, std::vector<float>(6, 1.0f));
  ScanOptions scan;
  scan.axis = 5;
  absl::StatusOr<v1::ExecuteResponse> response = client_->CumulativeSummation(input, scan);
  EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(response.status().message(), HasSubstr("axis"));

  // Data for 5 elements where sizes say 6.
  response = client_->CumulativeSummation(MakeTensor<float>({2, 3}, std::vector<float>(5)), {});
  EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(response.status().message(), HasSubstr("data"));
}

TEST_F(ClientTest, DeadlineInThePastFails) {
  CallOptions call;
  call.deadline = absl::Now() - absl::Seconds(1);
  absl::StatusOr<v1::ExecuteResponse> response = client_->CumulativeSummation(
      MakeTensor<float>({4}, std::vector<float>{1, 2, 3, 4}), {}, call);
  EXPECT_EQ(response.status().code(), absl::StatusCode::kDeadlineExceeded);
  // A generous deadline works.
  response = client_->CumulativeSummation(MakeTensor<float>({4}, std::vector<float>{1, 2, 3, 4}),
                                          {}, CallOptions::WithTimeout(absl::Seconds(60)));
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(*DecodeTensor<float>(response->output()), (std::vector<float>{1, 3, 6, 10}));
}

TEST_F(ClientTest, StreamSessionMatchesResponsesById) {
  std::unique_ptr<StreamSession> session = client_->OpenStream();
  // Sizes vary a lot so that small requests can overtake large ones.
  std::map<std::string, std::vector<float>> sent;
  const int kRequests = 24;
  std::thread sender([&] {
    for (int i = 0; i < kRequests; ++i) {
      const uint32_t length = (i % 3 == 0) ? 100000 : 3;
      std::vector<float> values(length, static_cast<float>(i % 5));
      v1::ExecuteRequest request =
          CumulativeSummationRequest(MakeTensor<float>({length}, values), {});
      request.set_request_id(absl::StrCat("item-", i));
      if (i == kRequests / 2) {
        request.mutable_cumulative_summation()->set_axis(3);  // Bad: 1-D input.
      }
      ASSERT_TRUE(session->Send(request).ok());
    }
    ASSERT_TRUE(session->CloseSend().ok());
  });
  // The sender owns `sent` until it is joined; the receiver only checks values.
  std::set<std::string> received;
  int failed = 0;
  while (std::optional<v1::ExecuteResponse> response = session->Receive()) {
    EXPECT_TRUE(received.insert(response->request_id()).second) << response->request_id();
    const int index = std::stoi(response->request_id().substr(5));
    if (index == kRequests / 2) {
      ++failed;
      EXPECT_EQ(response->status().code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
      EXPECT_THAT(response->status().message(), HasSubstr("axis"));
      continue;
    }
    EXPECT_EQ(response->status().code(), 0) << response->status().message();
    absl::StatusOr<std::vector<float>> output = DecodeTensor<float>(response->output());
    ASSERT_TRUE(output.ok()) << output.status();
    const float step = static_cast<float>(index % 5);
    EXPECT_EQ(output->front(), step);
    EXPECT_EQ(output->back(), step * output->size());
  }
  sender.join();
  EXPECT_TRUE(session->Finish().ok());
  EXPECT_EQ(received.size(), static_cast<size_t>(kRequests));
  EXPECT_EQ(failed, 1);
}

TEST_F(ClientTest, ExecuteManyReturnsResultsInRequestOrder) {
  std::vector<v1::ExecuteRequest> requests;
  for (int i = 0; i < 10; ++i) {
    requests.push_back(CumulativeProductRequest(
        MakeTensor<uint32_t>({3}, std::vector<uint32_t>{uint32_t(i), 2, 3}), {}));
  }
  requests[4].mutable_cumulative_product()->set_axis(1);  // Out of range for 1-D input.
  absl::StatusOr<std::vector<absl::StatusOr<v1::ExecuteResponse>>> results =
      client_->ExecuteMany(requests);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), 10u);
  for (uint32_t i = 0; i < 10; ++i) {
    if (i == 4) {
      EXPECT_EQ((*results)[i].status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT((*results)[i].status().message(), HasSubstr("axis"));
      continue;
    }
    ASSERT_TRUE((*results)[i].ok()) << (*results)[i].status();
    EXPECT_EQ(*DecodeTensor<uint32_t>((*results)[i]->output()),
              (std::vector<uint32_t>{i, 2 * i, 6 * i}));
  }

  requests[1].set_request_id("same");
  requests[2].set_request_id("same");
  EXPECT_EQ(client_->ExecuteMany(requests).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ClientTest, RegisteredWeightsServeManyRequestsUntilReleased) {
  const std::vector<uint8_t> weights = {1, 2, 3, 4, 5, 6};  // {3, 2}
  absl::StatusOr<v1::RegisterTensorResponse> registered =
      client_->RegisterTensor(MakeTensor<uint8_t>({1, 1, 3, 2}, weights), "client-test-weights");
  ASSERT_TRUE(registered.ok()) << registered.status();
  EXPECT_EQ(registered->tensor_id(), "client-test-weights");
  EXPECT_EQ(registered->byte_size(), weights.size());

  for (uint8_t scale_row = 1; scale_row <= 3; ++scale_row) {
    QuantizedMatMulInputs inputs;
    inputs.a = MakeTensor<uint8_t>({1, 1, 1, 3}, std::vector<uint8_t>{scale_row, 0, 1});
    inputs.a_scale = MakeTensor<float>({1, 1, 1, 1}, std::vector<float>{1});
    inputs.b = MakeTensorReference("client-test-weights");
    inputs.b_scale = MakeTensor<float>({1, 1, 1, 1}, std::vector<float>{1});
    inputs.output_scale = MakeTensor<float>({1, 1, 1, 1}, std::vector<float>{1});
    inputs.output_data_type = v1::UINT8;
    absl::StatusOr<v1::ExecuteResponse> response = client_->QuantizedLinearMatrixMultiply(inputs);
    ASSERT_TRUE(response.ok()) << response.status();
    // [s, 0, 1] x [[1,2],[3,4],[5,6]] = [s + 5, 2s + 6]
    EXPECT_EQ(*DecodeTensor<uint8_t>(response->output()),
              (std::vector<uint8_t>{uint8_t(scale_row + 5), uint8_t(2 * scale_row + 6)}));
  }

  // A server-chosen id also works.
  absl::StatusOr<v1::RegisterTensorResponse> unnamed =
      client_->RegisterTensor(MakeTensor<float>({2}, std::vector<float>{1, 2}));
  ASSERT_TRUE(unnamed.ok()) << unnamed.status();
  EXPECT_FALSE(unnamed->tensor_id().empty());
  EXPECT_TRUE(client_->ReleaseTensor(unnamed->tensor_id()).ok());

  ASSERT_TRUE(client_->ReleaseTensor("client-test-weights").ok());
  absl::StatusOr<v1::ExecuteResponse> after =
      client_->CumulativeSummation(MakeTensorReference("client-test-weights"), {});
  EXPECT_FALSE(after.ok());
  EXPECT_THAT(after.status().message(), HasSubstr("client-test-weights"));
  EXPECT_EQ(client_->ReleaseTensor("client-test-weights").code(), absl::StatusCode::kNotFound);
}

TEST_F(ClientTest, ServerInfoAndHealth) {
  absl::StatusOr<v1::GetServerInfoResponse> info = client_->GetServerInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_FALSE(info->version().empty());
  EXPECT_FALSE(info->devices().empty());
  std::vector<std::string> operators;
  for (const v1::OperatorSupport& op : info->operators()) operators.push_back(op.name());
  EXPECT_THAT(operators, UnorderedElementsAre("cumulative_summation", "cumulative_product",
                                              "quantized_linear_matrix_multiply"));

  absl::StatusOr<HealthStatus> health = client_->CheckHealth();
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(*health, HealthStatus::kServing);
  EXPECT_EQ(HealthStatusName(*health), "SERVING");
  absl::StatusOr<HealthStatus> unknown = client_->CheckHealth("no.such.Service");
  if (unknown.ok()) {
    EXPECT_EQ(*unknown, HealthStatus::kServiceUnknown);
  } else {
    EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  }
}

TEST(ClientConnectTest, UnreachableServerIsUnavailable) {
  ClientOptions options;
  options.connect_timeout = absl::Milliseconds(200);
  // Port 1 on loopback: nothing listens there in a test environment.
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect("127.0.0.1:1", options);
  EXPECT_EQ(client.status().code(), absl::StatusCode::kUnavailable);

  absl::StatusOr<std::unique_ptr<Client>> lazy = Client::Connect("127.0.0.1:1");
  ASSERT_TRUE(lazy.ok());
  EXPECT_EQ((*lazy)->GetServerInfo().status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(Client::Connect("").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dmlserve::client
