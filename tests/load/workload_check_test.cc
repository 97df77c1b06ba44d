// Workload::Check is the load generator's only guard against wrong answers:
// it must reject any output that differs from the reference by more than the
// tolerance, has the wrong element count or the wrong type, on the one-pass
// path for 8-bit outputs and on the general decoding path alike.

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "bench/load_generator/workload.h"
#include "gtest/gtest.h"

namespace dmlserve::load {
namespace {

const PooledRequest& OneOf(const Workload& workload, OperatorChoice op) {
  for (const PooledRequest* request : workload.All()) {
    if (request->op == op) return *request;
  }
  ADD_FAILURE() << "no request of operator " << OperatorChoiceName(op);
  return *workload.All().front();
}

Workload Make(int cumsum, int qmatmul) {
  WorkloadOptions options;
  options.cumsum_weight = cumsum;
  options.cumprod_weight = 0;
  options.qmatmul_weight = qmatmul;
  options.scan_sizes = {3, 5};
  options.m = 2;
  options.k = 16;
  options.n = 24;
  absl::StatusOr<Workload> workload = Workload::Create(options);
  EXPECT_TRUE(workload.ok()) << workload.status();
  return *std::move(workload);
}

// The reference answer of an int8 matrix multiply, as the server sends it.
v1::Tensor Int8Answer(const PooledRequest& request) {
  v1::Tensor tensor;
  tensor.set_data_type(v1::INT8);
  tensor.add_sizes(2);
  tensor.add_sizes(static_cast<uint32_t>(request.expected.size() / 2));
  std::string data;
  for (double value : request.expected)
    data.push_back(static_cast<char>(static_cast<int8_t>(value)));
  tensor.set_data(data);
  return tensor;
}

TEST(WorkloadCheckTest, EightBitOutputsWithinToleranceOnlyPass) {
  const Workload workload = Make(0, 1);
  const PooledRequest& request = OneOf(workload, OperatorChoice::kQMatMul);
  ASSERT_EQ(request.tolerance, 1);
  v1::Tensor answer = Int8Answer(request);
  EXPECT_TRUE(Workload::Check(request, answer).ok());

  // Off by the tolerance (a near-tie rounded the other way): accepted.
  std::string data = answer.data();
  const int8_t first = static_cast<int8_t>(data[0]);
  data[0] = static_cast<char>(first == 127 ? 126 : first + 1);
  answer.set_data(data);
  EXPECT_TRUE(Workload::Check(request, answer).ok());

  // Off by more, at the last element: refused, naming it.
  answer = Int8Answer(request);
  data = answer.data();
  const size_t last = data.size() - 1;
  const int8_t value = static_cast<int8_t>(data[last]);
  data[last] = static_cast<char>(value > 0 ? value - 2 : value + 2);
  answer.set_data(data);
  const absl::Status wrong = Workload::Check(request, answer);
  EXPECT_EQ(wrong.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(wrong.message().find("element " + std::to_string(last)), std::string::npos) << wrong;
}

TEST(WorkloadCheckTest, WrongShapesAndTypesAreRefused) {
  const Workload workload = Make(0, 1);
  const PooledRequest& request = OneOf(workload, OperatorChoice::kQMatMul);
  v1::Tensor answer = Int8Answer(request);
  answer.set_sizes(0, 1);  // the right bytes under sizes that do not hold them
  EXPECT_FALSE(Workload::Check(request, answer).ok());

  answer = Int8Answer(request);
  answer.mutable_data()->pop_back();  // one element short
  answer.set_sizes(1, static_cast<uint32_t>(request.expected.size() / 2 - 1));
  answer.set_sizes(0, 2);
  EXPECT_FALSE(Workload::Check(request, answer).ok());

  // The same bytes read as uint8: every negative reference differs by 256.
  answer = Int8Answer(request);
  answer.set_data_type(v1::UINT8);
  bool any_negative = false;
  for (double value : request.expected) any_negative |= value < 0;
  ASSERT_TRUE(any_negative);
  EXPECT_FALSE(Workload::Check(request, answer).ok());
}

TEST(WorkloadCheckTest, ScansAreCheckedExactlyThroughTheGeneralPath) {
  const Workload workload = Make(1, 0);
  const PooledRequest& request = OneOf(workload, OperatorChoice::kCumsum);
  ASSERT_EQ(request.tolerance, 0);
  v1::Tensor answer;
  answer.set_data_type(v1::UINT32);
  answer.add_sizes(3);
  answer.add_sizes(5);
  std::string data;
  for (double value : request.expected) {
    const uint32_t element = static_cast<uint32_t>(value);
    data.append(reinterpret_cast<const char*>(&element), sizeof(element));
  }
  answer.set_data(data);
  EXPECT_TRUE(Workload::Check(request, answer).ok());
  data[0] = static_cast<char>(data[0] ^ 1);
  answer.set_data(data);
  EXPECT_EQ(Workload::Check(request, answer).code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace dmlserve::load
