// Every constraint violation is INVALID_ARGUMENT naming the field, and the
// server keeps answering good requests after each one.

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/server_fixture.h"
#include "tests/server/tensor_values.h"
#include "tests/server/test_requests.h"

namespace dmlserve::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

struct BadInput {
  std::string name;
  std::function<v1::ExecuteRequest()> request;
  grpc::StatusCode code;
  // The message starts with the field path of the offending field.
  std::string field;
};

// Names the case in test output instead of dumping its bytes.
void PrintTo(const BadInput& bad, std::ostream* os) { *os << bad.name; }

v1::ExecuteRequest Sum(const v1::Tensor& input, uint32_t axis = 0) {
  v1::ExecuteRequest request;
  request.set_request_id("bad");
  *request.mutable_cumulative_summation()->mutable_input() = input;
  request.mutable_cumulative_summation()->set_axis(axis);
  return request;
}

v1::Tensor RawTensor(v1::DataType type, const std::vector<uint32_t>& sizes, size_t bytes) {
  v1::Tensor tensor;
  tensor.set_data_type(type);
  for (uint32_t size : sizes) tensor.add_sizes(size);
  tensor.set_data(std::string(bytes, '\1'));
  return tensor;
}

// A valid 2x3 * 3x2 UINT8 matmul to break one field of.
v1::ExecuteRequest GoodMatMul() {
  QuantizedMatMulCase c;
  c.m = 2;
  c.k = 3;
  c.n = 2;
  c.a = {1, 2, 3, 4, 5, 6};
  c.b = {1, 2, 3, 4, 5, 6};
  return MatMulRequest("bad", c);
}

v1::ExecuteRequest MatMulWith(
    const std::function<void(v1::QuantizedLinearMatrixMultiply*)>& change) {
  v1::ExecuteRequest request = GoodMatMul();
  change(request.mutable_quantized_linear_matrix_multiply());
  return request;
}

std::vector<BadInput> BadInputs() {
  using Op = v1::QuantizedLinearMatrixMultiply;
  const auto invalid = grpc::StatusCode::INVALID_ARGUMENT;
  return {
      {"no_operator", [] { return v1::ExecuteRequest(); }, invalid, "operator: required"},
      {"unknown_data_type",
       [] {
         v1::Tensor t = RawTensor(v1::FLOAT32, {4}, 16);
         t.set_data_type(static_cast<v1::DataType>(99));
         return Sum(t);
       },
       invalid, "cumulative_summation.input.data_type"},
      {"data_type_unknown_value_zero",
       [] { return Sum(RawTensor(v1::DATA_TYPE_UNKNOWN, {4}, 16)); }, invalid,
       "cumulative_summation.input.data_type"},
      {"unsupported_data_type_for_sum", [] { return Sum(RawTensor(v1::INT8, {4}, 4)); }, invalid,
       "cumulative_summation.input.data_type"},
      {"unsupported_data_type_for_product",
       [] {
         return ScanRequest("bad", v1::INT32, {4}, {1, 2, 3, 4}, 0, /*product=*/true);
       },
       invalid, "cumulative_product.input.data_type"},
      {"zero_dimensions", [] { return Sum(RawTensor(v1::FLOAT32, {}, 4)); }, invalid,
       "cumulative_summation.input.sizes"},
      {"nine_dimensions",
       [] {
         return Sum(RawTensor(v1::FLOAT32, {1, 1, 1, 1, 1, 1, 1, 1, 1}, 4));
       },
       invalid, "cumulative_summation.input.sizes"},
      {"zero_sized_dimension",
       [] {
         return Sum(RawTensor(v1::FLOAT32, {2, 0, 3}, 0));
       },
       invalid, "cumulative_summation.input.sizes[1]"},
      {"element_count_overflows",
       [] {
         return Sum(RawTensor(v1::FLOAT32, {4294967295u, 4294967295u, 4294967295u}, 4));
       },
       invalid, "cumulative_summation.input.sizes"},
      {"data_length_mismatch",
       [] {
         return Sum(RawTensor(v1::FLOAT32, {1, 1, 3, 4}, 44), 3);
       },
       invalid, "cumulative_summation.input.data"},
      {"axis_out_of_range",
       [] {
         return Sum(RawTensor(v1::FLOAT32, {1, 1, 3, 4}, 48), 4);
       },
       invalid, "cumulative_summation.axis"},
      {"axis_direction_unknown",
       [] {
         v1::ExecuteRequest request = Sum(RawTensor(v1::FLOAT32, {4}, 16));
         request.mutable_cumulative_summation()->set_axis_direction(
             static_cast<v1::AxisDirection>(7));
         return request;
       },
       invalid, "cumulative_summation.axis_direction"},
      {"missing_scan_input",
       [] {
         v1::ExecuteRequest request;
         request.mutable_cumulative_product()->set_axis(0);
         return request;
       },
       invalid, "cumulative_product.input: required"},
      {"data_and_tensor_id",
       [] {
         v1::Tensor t = RawTensor(v1::FLOAT32, {4}, 16);
         t.set_tensor_id("w1");
         return Sum(t);
       },
       invalid, "cumulative_summation.input: set either data or tensor_id, not both"},
      {"unknown_tensor_id",
       [] { return MatMulWith([](Op* op) { *op->mutable_b() = TensorRef("w1"); }); }, invalid,
       "quantized_linear_matrix_multiply.b.tensor_id: unknown tensor \"w1\""},
      {"missing_a", [] { return MatMulWith([](Op* op) { op->clear_a(); }); }, invalid,
       "quantized_linear_matrix_multiply.a: required"},
      {"missing_b", [] { return MatMulWith([](Op* op) { op->clear_b(); }); }, invalid,
       "quantized_linear_matrix_multiply.b: required"},
      {"missing_a_scale", [] { return MatMulWith([](Op* op) { op->clear_a_scale(); }); }, invalid,
       "quantized_linear_matrix_multiply.a_scale: required"},
      {"missing_b_scale", [] { return MatMulWith([](Op* op) { op->clear_b_scale(); }); }, invalid,
       "quantized_linear_matrix_multiply.b_scale: required"},
      {"missing_output_scale", [] { return MatMulWith([](Op* op) { op->clear_output_scale(); }); },
       invalid, "quantized_linear_matrix_multiply.output_scale: required"},
      {"no_output_type", [] { return MatMulWith([](Op* op) { op->clear_output_zero_point(); }); },
       invalid, "quantized_linear_matrix_multiply.output_data_type"},
      {"a_unsupported_type",
       [] {
         return MatMulWith([](Op* op) {
           *op->mutable_a() = MakeTensor(v1::INT16, {1, 1, 2, 3}, {1, 2, 3, 4, 5, 6});
         });
       },
       invalid, "quantized_linear_matrix_multiply.a.data_type"},
      {"inner_dimensions_mismatch",
       [] {
         return MatMulWith([](Op* op) {
           *op->mutable_b() = MakeTensor(v1::UINT8, {1, 1, 2, 2}, {1, 2, 3, 4});
         });
       },
       invalid, "quantized_linear_matrix_multiply.b.sizes"},
      {"a_scale_wrong_shape",
       [] {
         return MatMulWith([](Op* op) {
           *op->mutable_a_scale() = MakeTensor(v1::FLOAT32, {1, 1, 1, 3}, {1, 1, 1});
         });
       },
       invalid, "quantized_linear_matrix_multiply.a_scale.sizes"},
      {"b_scale_wrong_type",
       [] {
         return MatMulWith([](Op* op) {
           *op->mutable_b_scale() = MakeTensor(v1::UINT8, {1, 1, 1, 1}, {1});
         });
       },
       invalid, "quantized_linear_matrix_multiply.b_scale.data_type"},
      // The CPU backend would use it, a GPU flush it to zero: refused.
      {"b_scale_subnormal",
       [] {
         return MatMulWith([](Op* op) {
           *op->mutable_b_scale() = MakeTensor(v1::FLOAT32, {1, 1, 1, 1}, {1e-40});
         });
       },
       invalid, "quantized_linear_matrix_multiply.b_scale.data[0]: 9.99995e-41 is subnormal"},
      {"a_zero_point_wrong_type",
       [] {
         return MatMulWith([](Op* op) {
           *op->mutable_a_zero_point() = MakeTensor(v1::INT8, {1, 1, 1, 1}, {0});
         });
       },
       invalid, "quantized_linear_matrix_multiply.a_zero_point.data_type"},
      {"b_zero_point_wrong_shape",
       [] {
         return MatMulWith([](Op* op) {
           *op->mutable_b_zero_point() = MakeTensor(v1::UINT8, {1, 1, 3, 1}, {0, 0, 0});
         });
       },
       invalid, "quantized_linear_matrix_multiply.b_zero_point.sizes"},
      {"output_zero_point_per_column",
       [] {
         return MatMulWith([](Op* op) {
           *op->mutable_output_zero_point() = MakeTensor(v1::UINT8, {1, 1, 1, 2}, {0, 0});
         });
       },
       invalid, "quantized_linear_matrix_multiply.output_zero_point.sizes"},
      {"output_type_disagrees_with_zero_point",
       [] { return MatMulWith([](Op* op) { op->set_output_data_type(v1::INT8); }); }, invalid,
       "quantized_linear_matrix_multiply.output_data_type"},
  };
}

// One server for the whole list: each bad request must leave it working.
class BadInputTest : public ::testing::TestWithParam<BadInput> {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(ServerBinary());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
    stub_ = v1::OperatorService::NewStub(MakeChannel(server_->grpc_address())).release();
  }
  static void TearDownTestSuite() {
    delete stub_;
    if (server_ != nullptr) {
      absl::StatusOr<int> exit_code = server_->Stop();
      EXPECT_TRUE(exit_code.ok() && *exit_code == 0) << server_->Output();
    }
    delete server_;
  }

  static ServerProcess* server_;
  static v1::OperatorService::Stub* stub_;
};

ServerProcess* BadInputTest::server_ = nullptr;
v1::OperatorService::Stub* BadInputTest::stub_ = nullptr;

TEST_P(BadInputTest, RejectedWithFieldAndServerStillAnswers) {
  ASSERT_NE(stub_, nullptr);
  const BadInput& bad = GetParam();
  {
    auto context = MakeContext();
    v1::ExecuteResponse response;
    const grpc::Status status = stub_->Execute(context.get(), bad.request(), &response);
    EXPECT_EQ(status.error_code(), bad.code) << status.error_message();
    EXPECT_THAT(status.error_message(), StartsWith(bad.field));
  }
  {
    // The same request on a stream fails alone, with the same status.
    auto context = MakeContext();
    auto stream = stub_->ExecuteStream(context.get());
    ASSERT_TRUE(stream->Write(bad.request()));
    ASSERT_TRUE(stream->WritesDone());
    v1::ExecuteResponse response;
    ASSERT_TRUE(stream->Read(&response));
    EXPECT_EQ(response.status().code(), bad.code) << response.status().message();
    EXPECT_THAT(response.status().message(), StartsWith(bad.field));
    EXPECT_TRUE(stream->Finish().ok());
  }
  auto context = MakeContext();
  v1::ExecuteResponse response;
  const grpc::Status status = stub_->Execute(
      context.get(), ScanRequest("good", v1::FLOAT32, {2, 3}, {1, 2, 3, 4, 5, 6}, 1), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(TensorValues(response.output()), (std::vector<double>{1, 3, 6, 4, 9, 15}));
  EXPECT_TRUE(server_->Alive());
}

INSTANTIATE_TEST_SUITE_P(AllRules, BadInputTest, ::testing::ValuesIn(BadInputs()),
                         [](const ::testing::TestParamInfo<BadInput>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace dmlserve::testing
