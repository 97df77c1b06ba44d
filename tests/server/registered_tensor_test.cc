// RegisterTensor / ReleaseTensor and requests that refer to registered
// tensors by id.

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/server_fixture.h"
#include "tests/server/tensor_values.h"
#include "tests/server/test_requests.h"

namespace dmlserve::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

// A {1,2} x {2,2} product whose B is the tensor registered in these tests.
QuantizedMatMulCase TwoByTwoCase() {
  QuantizedMatMulCase c;
  c.m = 1;
  c.k = 2;
  c.n = 2;
  c.a = {1, 2};
  c.b = {1, 2, 3, 4};
  return c;
}

class RegisteredTensorTest : public ServerTest {
 protected:
  std::vector<std::string> ServerFlags() const override {
    return {"--max_registered_tensor_bytes=4096"};
  }

  uint64_t RegisteredBytes() {
    auto context = MakeContext();
    v1::GetServerInfoResponse info;
    EXPECT_TRUE(stub_->GetServerInfo(context.get(), {}, &info).ok());
    return info.registered_tensor_bytes();
  }
};

TEST_F(RegisteredTensorTest, WeightsUsedByIdUntilReleased) {
  absl::BitGen bitgen;
  const QuantizedMatMulCase weights = RandomWeights(bitgen, /*k=*/16, /*n=*/8);
  v1::Tensor b = MatMulB(weights);
  b.set_tensor_id("w1");
  std::string id;
  ASSERT_TRUE(Register(b, &id).ok());
  EXPECT_EQ(id, "w1");
  EXPECT_EQ(RegisteredBytes(), 16u * 8u);
  EXPECT_EQ(Metric("dmlserve_registered_tensor_bytes"), 16.0 * 8.0);

  for (int i = 0; i < 5; ++i) {
    SCOPED_TRACE(i);
    const QuantizedMatMulCase c = RandomMatMulCase(bitgen, weights);
    v1::ExecuteResponse response;
    const grpc::Status status = Execute(MatMulRequest(absl::StrCat("m", i), c, "w1"), &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(TensorValues(response.output()), QuantizedMatMulReference(c));
    EXPECT_EQ(TensorSizes(response.output()), (std::vector<uint32_t>{1, 1, c.m, c.n}));
  }

  // The type and sizes may be given with the id, and then must match.
  {
    const QuantizedMatMulCase c = RandomMatMulCase(bitgen, weights);
    v1::ExecuteRequest request = MatMulRequest("typed", c, "w1");
    auto* ref = request.mutable_quantized_linear_matrix_multiply()->mutable_b();
    ref->set_data_type(v1::UINT8);
    for (uint32_t size : {1u, 1u, 16u, 8u}) ref->add_sizes(size);
    v1::ExecuteResponse response;
    ASSERT_TRUE(Execute(request, &response).ok());
    EXPECT_EQ(TensorValues(response.output()), QuantizedMatMulReference(c));
  }

  ASSERT_TRUE(Release("w1").ok());
  EXPECT_EQ(RegisteredBytes(), 0u);

  v1::ExecuteResponse response;
  const grpc::Status status =
      Execute(MatMulRequest("after-release", RandomMatMulCase(bitgen, weights), "w1"), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(),
              HasSubstr("quantized_linear_matrix_multiply.b.tensor_id: unknown tensor \"w1\""));

  const grpc::Status again = Release("w1");
  EXPECT_EQ(again.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(again.error_message(), HasSubstr("w1"));
  ExpectServerStillAnswers();
}

TEST_F(RegisteredTensorTest, ReRegisteringAReleasedIdUsesTheNewData) {
  absl::BitGen bitgen;
  const QuantizedMatMulCase first = RandomWeights(bitgen, 4, 4);
  QuantizedMatMulCase second = RandomWeights(bitgen, 4, 4);
  for (double& value : second.b) value = 255 - value;
  v1::Tensor b = MatMulB(first);
  b.set_tensor_id("w");
  ASSERT_TRUE(Register(b, nullptr).ok());
  const QuantizedMatMulCase c1 = RandomMatMulCase(bitgen, first);
  v1::ExecuteResponse response;
  ASSERT_TRUE(Execute(MatMulRequest("1", c1, "w"), &response).ok());
  EXPECT_EQ(TensorValues(response.output()), QuantizedMatMulReference(c1));

  ASSERT_TRUE(Release("w").ok());
  b = MatMulB(second);
  b.set_tensor_id("w");
  ASSERT_TRUE(Register(b, nullptr).ok());
  QuantizedMatMulCase c2 = RandomMatMulCase(bitgen, second);
  ASSERT_TRUE(Execute(MatMulRequest("2", c2, "w"), &response).ok());
  EXPECT_EQ(TensorValues(response.output()), QuantizedMatMulReference(c2));
}

TEST_F(RegisteredTensorTest, GeneratedIdWhenNoneIsGiven) {
  std::string first, second;
  ASSERT_TRUE(Register(MakeTensor(v1::FLOAT32, {2, 2}, {1, 2, 3, 4}), &first).ok());
  ASSERT_TRUE(Register(MakeTensor(v1::FLOAT32, {2, 2}, {1, 2, 3, 4}), &second).ok());
  EXPECT_THAT(first, Not(IsEmpty()));
  EXPECT_NE(first, second);

  // A registered scan input works as well.
  v1::ExecuteRequest request;
  request.set_request_id("scan-by-id");
  request.mutable_cumulative_summation()->mutable_input()->set_tensor_id(first);
  request.mutable_cumulative_summation()->set_axis(1);
  v1::ExecuteResponse response;
  const grpc::Status status = Execute(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(TensorValues(response.output()), (std::vector<double>{1, 3, 3, 7}));
  EXPECT_TRUE(Release(first).ok());
  EXPECT_TRUE(Release(second).ok());
}

TEST_F(RegisteredTensorTest, DuplicateIdIsAlreadyExists) {
  v1::Tensor tensor = MakeTensor(v1::UINT8, {4}, {1, 2, 3, 4});
  tensor.set_tensor_id("dup");
  ASSERT_TRUE(Register(tensor, nullptr).ok());
  const grpc::Status status = Register(tensor, nullptr);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_THAT(status.error_message(), HasSubstr("dup"));
}

TEST_F(RegisteredTensorTest, CapIsResourceExhaustedNamingTheFlag) {
  v1::Tensor big = MakeTensor(v1::UINT8, {3000}, std::vector<double>(3000, 7));
  big.set_tensor_id("big");
  ASSERT_TRUE(Register(big, nullptr).ok());
  v1::Tensor more = MakeTensor(v1::UINT8, {2000}, std::vector<double>(2000, 7));
  more.set_tensor_id("more");
  const grpc::Status status = Register(more, nullptr);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(), HasSubstr("--max_registered_tensor_bytes=4096"));
  // Room comes back with a release.
  ASSERT_TRUE(Release("big").ok());
  EXPECT_TRUE(Register(more, nullptr).ok());
}

TEST_F(RegisteredTensorTest, InvalidTensorsAreRejectedWithTheirField) {
  v1::Tensor short_data = MakeTensor(v1::FLOAT32, {2, 2}, {1, 2, 3});
  const grpc::Status status = Register(short_data, nullptr);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("tensor.data"));

  v1::Tensor unknown_type = MakeTensor(v1::FLOAT32, {1}, {1});
  unknown_type.set_data_type(static_cast<v1::DataType>(42));
  const grpc::Status type_status = Register(unknown_type, nullptr);
  EXPECT_EQ(type_status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(type_status.error_message(), HasSubstr("tensor.data_type"));
  EXPECT_EQ(RegisteredBytes(), 0u);
}

TEST_F(RegisteredTensorTest, MismatchingTypeOrSizesWithAnIdAreInvalid) {
  v1::Tensor weights = MakeTensor(v1::UINT8, {1, 1, 2, 2}, {1, 2, 3, 4});
  weights.set_tensor_id("w2");
  ASSERT_TRUE(Register(weights, nullptr).ok());
  const QuantizedMatMulCase c = TwoByTwoCase();

  v1::ExecuteRequest wrong_type = MatMulRequest("t", c, "w2");
  wrong_type.mutable_quantized_linear_matrix_multiply()->mutable_b()->set_data_type(v1::INT8);
  v1::ExecuteResponse response;
  grpc::Status status = Execute(wrong_type, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(),
              HasSubstr("quantized_linear_matrix_multiply.b.data_type: INT8 does not match"));

  v1::ExecuteRequest wrong_sizes = MatMulRequest("s", c, "w2");
  wrong_sizes.mutable_quantized_linear_matrix_multiply()->mutable_b()->add_sizes(4);
  status = Execute(wrong_sizes, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(),
              HasSubstr("quantized_linear_matrix_multiply.b.sizes: [4] does not match"));

  v1::ExecuteRequest both = MatMulRequest("both", c);
  both.mutable_quantized_linear_matrix_multiply()->mutable_b()->set_tensor_id("w2");
  status = Execute(both, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(),
              HasSubstr("quantized_linear_matrix_multiply.b: set either data or tensor_id"));
  ExpectServerStillAnswers();
}

// A request admitted before its weights were released still runs with them;
// the copy a device makes for it (an upload, a packed form) is dropped once
// it finishes. Before, the copy was made after the release's eviction and
// nothing evicted it again: memory lost for good on every such race.
class ReleaseRaceTest : public ServerTest {
 protected:
  absl::Duration InjectedBatchDelay() const override { return absl::Milliseconds(300); }
};

TEST_F(ReleaseRaceTest, ResidentCopiesMadeAfterAReleaseAreDroppedWhenTheJobEnds) {
  absl::BitGen bitgen;
  const QuantizedMatMulCase weights = RandomWeights(bitgen, /*k=*/64, /*n=*/32);
  v1::Tensor b = MatMulB(weights);
  b.set_tensor_id("w1");
  ASSERT_TRUE(Register(b, nullptr).ok());
  v1::ExecuteResponse warm;
  ASSERT_TRUE(Execute(MatMulRequest("warm", RandomMatMulCase(bitgen, weights), "w1"), &warm).ok());
  ASSERT_TRUE(WaitForMetric("dmlserve_device_resident_bytes", {}, [](double v) { return v > 0; }))
      << "a registered tensor in use is resident somewhere";

  // Admitted now, run 300 ms later: after the release below.
  const QuantizedMatMulCase c = RandomMatMulCase(bitgen, weights);
  const v1::ExecuteRequest request = MatMulRequest("raced", c, "w1");
  v1::ExecuteResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  absl::Notification answered;
  grpc::Status status;
  stub_->async()->Execute(&context, &request, &response, [&](grpc::Status s) {
    status = std::move(s);
    answered.Notify();
  });
  ASSERT_TRUE(WaitForMetric("dmlserve_inflight_requests", {}, [](double v) { return v >= 1; }));
  ASSERT_TRUE(Release("w1").ok());
  answered.WaitForNotification();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(TensorValues(response.output()), QuantizedMatMulReference(c));

  EXPECT_TRUE(WaitForMetric(
      "dmlserve_device_resident_bytes", {}, [](double v) { return v == 0; }, absl::Seconds(10)))
      << "resident bytes left: " << Metric("dmlserve_device_resident_bytes").value_or(-1);
  ExpectServerStillAnswers();
}

// Tensors are capped in number as well as bytes: a million one-byte tensors
// would hold far more than a million bytes of ids and bookkeeping.
class RegisteredTensorCountTest : public ServerTest {
 protected:
  std::vector<std::string> ServerFlags() const override { return {"--max_registered_tensors=3"}; }
};

TEST_F(RegisteredTensorCountTest, CountCapIsResourceExhaustedNamingTheFlag) {
  for (const char* id : {"t1", "t2", "t3"}) {
    v1::Tensor tensor = MakeTensor(v1::UINT8, {1}, {7});
    tensor.set_tensor_id(id);
    ASSERT_TRUE(Register(tensor, nullptr).ok()) << id;
  }
  v1::Tensor fourth = MakeTensor(v1::UINT8, {1}, {7});
  fourth.set_tensor_id("t4");
  grpc::Status status = Register(fourth, nullptr);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(),
              HasSubstr("tensor: 3 tensors are registered, the most --max_registered_tensors=3 "
                        "allows; release some first"));
  // A release makes room again.
  ASSERT_TRUE(Release("t2").ok());
  EXPECT_TRUE(Register(fourth, nullptr).ok());
  ExpectServerStillAnswers();
}

// A hostile client's 1 MB tensor_id or million-entry sizes list is quoted
// short: the client gets the real error (not gRPC's "metadata size exceeds
// limit"), and the server does not build megabyte messages.
TEST_F(RegisteredTensorTest, HugeIdsAndSizeListsAreQuotedShortInErrors) {
  const std::string huge_id(1 << 20, 'x');
  grpc::Status status = Release(huge_id);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("xxx...\" (1048576 bytes)"));
  EXPECT_LT(status.error_message().size(), 400u);

  const QuantizedMatMulCase c = TwoByTwoCase();
  v1::ExecuteResponse response;
  status = Execute(MatMulRequest("unknown", c, huge_id), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(),
              HasSubstr("quantized_linear_matrix_multiply.b.tensor_id: unknown tensor \"xxx"));
  EXPECT_LT(status.error_message().size(), 400u);

  v1::Tensor weights = MakeTensor(v1::UINT8, {1, 1, 2, 2}, {1, 2, 3, 4});
  weights.set_tensor_id("w3");
  ASSERT_TRUE(Register(weights, nullptr).ok());
  v1::ExecuteRequest long_sizes = MatMulRequest("sizes", c, "w3");
  for (int i = 0; i < 1000000; ++i) {
    long_sizes.mutable_quantized_linear_matrix_multiply()->mutable_b()->add_sizes(1);
  }
  status = Execute(long_sizes, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(),
              HasSubstr("quantized_linear_matrix_multiply.b.sizes: [1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,"
                        "1,... (1000000 sizes)] does not match registered tensor \"w3\""));
  EXPECT_LT(status.error_message().size(), 400u);
  ExpectServerStillAnswers();
}

}  // namespace
}  // namespace dmlserve::testing
