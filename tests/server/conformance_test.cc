// Every shared operator example through the server, unary and streamed.

#include <set>
#include <string>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/conformance_cases.h"
#include "tests/server/server_fixture.h"
#include "tests/server/tensor_values.h"

namespace dmlserve::testing {
namespace {

using ::testing::SizeIs;

class ConformanceTest : public ServerTest {
 protected:
  void SetUp() override {
    ServerTest::SetUp();
    cases_ = LoadConformanceCases(DMLSERVE_CONFORMANCE_DIR);
  }

  // Type, sizes and bytes exactly as in the example.
  static void ExpectExact(const ConformanceCase& c, const v1::Tensor& output) {
    EXPECT_EQ(v1::DataType_Name(output.data_type()), v1::DataType_Name(c.expected.data_type()));
    EXPECT_EQ(TensorSizes(output), TensorSizes(c.expected));
    EXPECT_EQ(TensorValues(output), TensorValues(c.expected));
    EXPECT_EQ(output.data(), c.expected.data());
  }

  std::vector<ConformanceCase> cases_;
};

TEST_F(ConformanceTest, EveryOperatorIsCovered) {
  std::set<std::string> operators;
  for (const ConformanceCase& c : cases_) operators.insert(c.operator_name);
  EXPECT_EQ(operators, (std::set<std::string>{"cumulative_summation", "cumulative_product",
                                              "quantized_linear_matrix_multiply"}));
}

TEST_F(ConformanceTest, EveryExampleOverExecute) {
  ASSERT_FALSE(cases_.empty());
  for (const ConformanceCase& c : cases_) {
    SCOPED_TRACE(c.name);
    v1::ExecuteResponse response;
    const grpc::Status status = Execute(c.request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.request_id(), c.name);
    ExpectExact(c, response.output());
    EXPECT_TRUE(absl::StartsWith(response.info().device(), ServingBackend() + ":"))
        << response.info().device();
    EXPECT_GE(response.info().batch_size(), 1u);
    EXPECT_FALSE(response.has_status() && response.status().code() != 0);
  }
}

TEST_F(ConformanceTest, EveryExampleOverOneStream) {
  ASSERT_FALSE(cases_.empty());
  auto context = MakeContext();
  auto stream = stub_->ExecuteStream(context.get());
  for (const ConformanceCase& c : cases_) ASSERT_TRUE(stream->Write(c.request));
  ASSERT_TRUE(stream->WritesDone());
  std::map<std::string, v1::ExecuteResponse> responses;
  v1::ExecuteResponse response;
  while (stream->Read(&response)) responses[response.request_id()] = response;
  const grpc::Status status = stream->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_THAT(responses, SizeIs(cases_.size()));
  for (const ConformanceCase& c : cases_) {
    SCOPED_TRACE(c.name);
    ASSERT_TRUE(responses.count(c.name));
    const v1::ExecuteResponse& r = responses[c.name];
    EXPECT_EQ(r.status().code(), 0) << r.status().message();
    ExpectExact(c, r.output());
  }
}

}  // namespace
}  // namespace dmlserve::testing
