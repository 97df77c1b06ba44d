// Many clients at once: scans and matmuls sharing one registered B, every
// response checked against the reference, and the scheduler seen batching.

#include <string>
#include <vector>

#include "absl/random/random.h"
#include "gtest/gtest.h"
#include "tests/server/metrics_scrape.h"
#include "tests/server/mixed_load.h"
#include "tests/server/server_fixture.h"
#include "tests/server/test_requests.h"

namespace dmlserve::testing {
namespace {

class ConcurrencyTest : public ServerTest {
 protected:
  std::vector<std::string> ServerFlags() const override {
    return {"--cpu_devices=2", "--max_queue_delay_us=2000", "--max_batch_size=32"};
  }
  // Devices busy for a while per batch, so that requests arriving meanwhile
  // queue and batch (otherwise small scans run alone on an idle device).
  absl::Duration InjectedBatchDelay() const override { return absl::Milliseconds(5); }
};

TEST_F(ConcurrencyTest, ManyClientsGetCorrectAnswersAndRequestsAreBatched) {
  constexpr int kThreads = 16;
  constexpr int kRequestsPerThread = 40;
  absl::BitGen bitgen;
  QuantizedMatMulCase weights = RandomWeights(bitgen, /*k=*/16, /*n=*/8);
  v1::Tensor b = MatMulB(weights);
  b.set_tensor_id("shared-b");
  ASSERT_TRUE(Register(b, nullptr).ok());

  EXPECT_EQ(
      RunMixedLoad(server_->grpc_address(), weights, "shared-b", kThreads, kRequestsPerThread), 0);

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
