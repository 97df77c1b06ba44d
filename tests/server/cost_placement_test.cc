// Placement by cost on the real thing: the D3D12 backend (lavapipe in CI, a
// GPU where there is one) with the CPU device beside it as a peer
// (--placement=cost, the default). Every answer of a tiny-request load is
// checked, and /metrics shows where the batches went: lavapipe's fixed cost
// per batch (hundreds of microseconds of submission and completion) loses
// every tiny batch to the CPU, which the start-up calibration measured and
// the cost gauges export. (Which batches a fast GPU wins, and how a load is
// split, is tests/scheduler/placement_test's, on simulated devices.)

#include <string>
#include <vector>

#include "absl/random/random.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/mixed_load.h"
#include "tests/server/server_fixture.h"
#include "tests/server/tensor_values.h"
#include "tests/server/test_requests.h"

namespace dmlserve::testing {
namespace {

constexpr const char* kOperators[] = {"cumulative_summation", "cumulative_product",
                                      "quantized_linear_matrix_multiply"};

class CostPlacementTest : public ServerTest {
 protected:
  std::vector<std::string> ServerFlags() const override {
    return {"--backend=d3d12", "--d3d12_devices_per_adapter=1", "--cpu_devices=1",
            "--placement=cost"};
  }

  double Batches(const std::string& device) {
    return Metric("dmlserve_device_batches_total", {{"device", device}}).value_or(0);
  }
};

TEST_F(CostPlacementTest, TinyRequestsGoToTheCpuPeerAndEveryAnswerIsRight) {
  EXPECT_THAT(server_->Output(), ::testing::HasSubstr("placement: cost"));
  EXPECT_THAT(server_->Output(), ::testing::HasSubstr("dmlserve: device cpu:0"));
  // Both are peers in GetServerInfo: none is a fallback.
  auto context = MakeContext();
  v1::GetServerInfoResponse info;
  ASSERT_TRUE(stub_->GetServerInfo(context.get(), {}, &info).ok());
  ASSERT_EQ(info.devices_size(), 2);
  for (const v1::DeviceInfo& device : info.devices()) {
    EXPECT_TRUE(device.healthy()) << device.name();
    EXPECT_FALSE(device.fallback()) << device.name();
  }
  // The calibration's estimates: a batch's fixed cost on lavapipe is far
  // above the CPU's, for every operator.
  for (const char* op : kOperators) {
    const double gpu =
        Metric("dmlserve_device_cost_fixed_seconds", {{"device", "d3d12:0"}, {"operator", op}})
            .value_or(0);
    const double cpu =
        Metric("dmlserve_device_cost_fixed_seconds", {{"device", "cpu:0"}, {"operator", op}})
            .value_or(-1);
    EXPECT_GT(gpu, cpu) << op;
    EXPECT_GE(cpu, 0) << op;
  }

  absl::BitGen bitgen;
  QuantizedMatMulCase weights = RandomWeights(bitgen, /*k=*/12, /*n=*/5);
  v1::Tensor b = MatMulB(weights);
  b.set_tensor_id("weights");
  ASSERT_TRUE(Register(b, nullptr).ok());
  EXPECT_EQ(RunMixedLoad(server_->grpc_address(), weights, "weights", /*threads=*/8,
                         /*requests_per_thread=*/50),
            0);

  const double cpu = Batches("cpu:0");
  const double gpu = Batches("d3d12:0");
  EXPECT_GT(cpu, 0);
  // Whether each estimate was measured lately is there for every device and
  // operator (its value depends on timing: 0 or 1).
  for (const char* device : {"cpu:0", "d3d12:0"}) {
    for (const char* op : kOperators) {
      const double confirmed =
          Metric("dmlserve_device_cost_confirmed", {{"device", device}, {"operator", op}})
              .value_or(-1);
      EXPECT_TRUE(confirmed == 0 || confirmed == 1) << device << " " << op << ": " << confirmed;
    }
  }
  // Tiny batches finish first on the CPU. Not all need to: the estimates
  // are learned from measured times, which a loaded CI machine inflates now
  // and then (a preempted batch), so the margin is wide.
  EXPECT_GE(cpu, 0.8 * (cpu + gpu)) << "cpu:0 " << cpu << " batches, d3d12:0 " << gpu;
}

}  // namespace
}  // namespace dmlserve::testing
