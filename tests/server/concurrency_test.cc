// Many clients at once: scans and matmuls sharing one registered B, every
// response checked against the reference, and the scheduler seen batching.

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/server/metrics_scrape.h"
#include "tests/server/server_fixture.h"
#include "tests/server/tensor_values.h"
#include "tests/server/test_requests.h"

namespace dmlserve::testing {
namespace {

class ConcurrencyTest : public ServerTest {
 protected:
  std::vector<std::string> ServerFlags() const override {
    return {"--cpu_devices=2", "--max_queue_delay_us=2000", "--max_batch_size=32"};
  }
};

TEST_F(ConcurrencyTest, ManyClientsGetCorrectAnswersAndRequestsAreBatched) {
  constexpr int kThreads = 16;
  constexpr int kRequestsPerThread = 40;
  absl::BitGen bitgen;
  QuantizedMatMulCase weights = RandomWeights(bitgen, /*k=*/16, /*n=*/8);
  v1::Tensor b = MatMulB(weights);
  b.set_tensor_id("shared-b");
  ASSERT_TRUE(Register(b, nullptr).ok());

  std::atomic<int> failures{0};
  std::atomic<int> answered{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      absl::BitGen thread_bitgen;
      // One channel per client, as separate processes would have.
      auto stub = v1::OperatorService::NewStub(MakeChannel(server_->grpc_address()));
      for (int i = 0; i < kRequestsPerThread; ++i) {
        const std::string id = absl::StrCat("t", t, "-", i);
        v1::ExecuteRequest request;
        std::vector<double> expected;
        if ((i + t) % 2 == 0) {
          const QuantizedMatMulCase c = RandomMatMulCase(thread_bitgen, weights);
          request = MatMulRequest(id, c, "shared-b");
          expected = QuantizedMatMulReference(c);
        } else {
          ScanCase scan = RandomScanCase(thread_bitgen, id);
          request = std::move(scan.request);
          expected = std::move(scan.expected);
        }
        auto context = MakeContext();
        v1::ExecuteResponse response;
        const grpc::Status status = stub->Execute(context.get(), request, &response);
        if (!status.ok() || response.request_id() != id ||
            TensorValues(response.output()) != expected) {
          ++failures;
          ADD_FAILURE() << id << ": " << status.error_code() << " " << status.error_message()
                        << "\nrequest: " << request.ShortDebugString().substr(0, 400);
        }
        ++answered;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(answered.load(), kThreads * kRequestsPerThread);

  absl::StatusOr<std::string> exposition = HttpGet(server_->metrics_address(), "/metrics");
  ASSERT_TRUE(exposition.ok()) << exposition.status();
  const std::vector<Sample> samples = ParseSamples(*exposition);
  double jobs = 0;
  bool batched = false;
  for (const char* op : {"cumulative_summation", "quantized_linear_matrix_multiply"}) {
    const double sum =
        SumSamples(samples, "dmlserve_batch_size_sum", {{"operator", op}}).value_or(0);
    const double count =
        SumSamples(samples, "dmlserve_batch_size_count", {{"operator", op}}).value_or(0);
    jobs += sum;
    if (sum > count) batched = true;
  }
  EXPECT_EQ(jobs, kThreads * kRequestsPerThread);
  EXPECT_TRUE(batched) << "no batch held more than one request:\n" << *exposition;
  EXPECT_EQ(SumSamples(samples, "dmlserve_requests_total", {{"code", "OK"}}),
            kThreads * kRequestsPerThread);
}

}  // namespace
}  // namespace dmlserve::testing
