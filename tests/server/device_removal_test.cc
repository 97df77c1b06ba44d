// D3D12 device removal, end to end: with fault injection every D3D12 device
// fails after a few batches while many clients are calling. Every request
// must still get its correct answer (re-run on the other device, then on the
// CPU fallback), the removals must be counted, and the server keeps serving.
// Without a fallback, losing the last device turns gRPC health NOT_SERVING.

#include <string>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/server/mixed_load.h"
#include "tests/server/server_fixture.h"
#include "tests/server/tensor_values.h"
#include "tests/server/test_requests.h"

namespace dmlserve::testing {
namespace {

class DeviceRemovalTest : public ServerTest {
 protected:
  std::vector<std::string> ServerFlags() const override {
    // gpu_first: the CPU behind the GPUs as the fallback this test is about.
    return {"--backend=d3d12",      "--d3d12_devices_per_adapter=2", "--d3d12_fail_after_batches=4",
            "--cpu_devices=1",      "--max_queue_delay_us=1000",     "--max_batch_size=8",
            "--placement=gpu_first"};
  }
};

TEST_F(DeviceRemovalTest, EveryRequestIsAnsweredCorrectlyWhileDevicesFail) {
  constexpr int kThreads = 8;
  constexpr int kRequestsPerThread = 30;
  absl::BitGen bitgen;
  QuantizedMatMulCase weights = RandomWeights(bitgen, /*k=*/12, /*n=*/5);
  v1::Tensor b = MatMulB(weights);
  b.set_tensor_id("weights");
  ASSERT_TRUE(Register(b, nullptr).ok());

  EXPECT_EQ(RunMixedLoad(server_->grpc_address(), weights, "weights", kThreads, kRequestsPerThread),
            0);

  // Both D3D12 devices were taken out of rotation, once each, and counted.
  EXPECT_EQ(Metric("dmlserve_device_removals_total", {{"device", "d3d12:0"}}), 1.0);
  EXPECT_EQ(Metric("dmlserve_device_removals_total", {{"device", "d3d12:1"}}), 1.0);
  // And logged (for a Windows service: to the event log, as a warning).
  EXPECT_THAT(server_->Output(),
              ::testing::HasSubstr("device d3d12:0 failed and was removed from rotation"));
  EXPECT_THAT(server_->Output(),
              ::testing::HasSubstr("device d3d12:1 failed and was removed from rotation"));
  auto context = MakeContext();
  v1::GetServerInfoResponse info;
  ASSERT_TRUE(stub_->GetServerInfo(context.get(), {}, &info).ok());
  for (const v1::DeviceInfo& device : info.devices()) {
    EXPECT_EQ(device.healthy(), device.backend() == "cpu") << device.name();
  }

  // The CPU fallback serves from now on.
  ScanCase scan = RandomScanCase(bitgen, "after");
  v1::ExecuteResponse response;
  ASSERT_TRUE(Execute(scan.request, &response).ok());
  EXPECT_EQ(TensorValues(response.output()), scan.expected);
  EXPECT_EQ(response.info().device(), "cpu:0");
}

class LastDeviceRemovalTest : public ServerTest {
 protected:
  // One D3D12 device that fails on its second batch, and no CPU fallback.
  std::vector<std::string> ServerFlags() const override {
    return {"--backend=d3d12", "--d3d12_devices_per_adapter=1", "--d3d12_fail_after_batches=1",
            "--cpu_fallback=false"};
  }

  // Sends scans (answers checked) until one fails, as the device's second
  // batch does; returns that status (OK if none failed in 10).
  grpc::Status ScanUntilTheDeviceFails() {
    absl::BitGen bitgen;
    grpc::Status status;
    for (int i = 0; i < 10 && status.ok(); ++i) {
      ScanCase scan = RandomScanCase(bitgen, absl::StrCat("scan", i));
      v1::ExecuteResponse response;
      status = Execute(scan.request, &response);
      if (status.ok()) {
        EXPECT_EQ(TensorValues(response.output()), scan.expected);
      }
    }
    return status;
  }

  grpc::health::v1::HealthCheckResponse::ServingStatus Health(const std::string& service) {
    auto health = grpc::health::v1::Health::NewStub(channel_);
    auto context = MakeContext();
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(service);
    grpc::health::v1::HealthCheckResponse response;
    const grpc::Status status = health->Check(context.get(), request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.status();
  }
};

TEST_F(LastDeviceRemovalTest, HealthIsNotServingOnceNoDeviceCanServe) {
  EXPECT_EQ(Health(""), grpc::health::v1::HealthCheckResponse::SERVING);
  EXPECT_EQ(Metric("dmlserve_healthy_devices"), 1.0);
  const grpc::Status status = ScanUntilTheDeviceFails();
  ASSERT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
  EXPECT_THAT(status.error_message(), ::testing::HasSubstr("no healthy device left"));

  for (const std::string service : {"", "dmlserve.v1.OperatorService"}) {
    SCOPED_TRACE(service);
    EXPECT_EQ(Health(service), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  }
  EXPECT_EQ(Metric("dmlserve_healthy_devices"), 0.0);
  EXPECT_EQ(Metric("dmlserve_device_removals_total", {{"device", "d3d12:0"}}), 1.0);
}

// The same lost device, re-probed every second: the server builds a new
// D3D12 device on the adapter, checks it with a known answer, and serves on
// it again; health goes back to SERVING.
class DeviceRecoveryTest : public LastDeviceRemovalTest {
 protected:
  std::vector<std::string> ServerFlags() const override {
    std::vector<std::string> flags = LastDeviceRemovalTest::ServerFlags();
    flags.push_back("--device_reprobe_interval=1s");
    return flags;
  }
};

TEST_F(DeviceRecoveryTest, ALostDeviceIsRecreatedAndServesAgain) {
  absl::BitGen bitgen;
  const grpc::Status status = ScanUntilTheDeviceFails();
  ASSERT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
  EXPECT_EQ(Metric("dmlserve_device_removals_total", {{"device", "d3d12:0"}}), 1.0);

  ASSERT_TRUE(WaitForMetric("dmlserve_device_recoveries_total", {{"device", "d3d12:0"}},
                            [](double v) { return v == 1; }));
  EXPECT_EQ(Metric("dmlserve_healthy_devices"), 1.0);
  EXPECT_EQ(Health(""), grpc::health::v1::HealthCheckResponse::SERVING);
  // The recreated device has no injected fault: it keeps serving.
  for (int i = 0; i < 5; ++i) {
    ScanCase scan = RandomScanCase(bitgen, absl::StrCat("again", i));
    v1::ExecuteResponse response;
    ASSERT_TRUE(Execute(scan.request, &response).ok());
    EXPECT_EQ(TensorValues(response.output()), scan.expected);
    EXPECT_EQ(response.info().device(), "d3d12:0");
  }
}

}  // namespace
}  // namespace dmlserve::testing
