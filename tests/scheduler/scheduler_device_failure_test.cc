// Devices that fail or cannot run an operator: a failed device's jobs move on,
// it is reprobed, a batch gets max_attempts devices, the fallback takes over,
// and devices that serve a subset of operators (Device::Supports).

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/backend/device.h"
#include "kernels/core/operation.h"
#include "scheduler/scheduler.h"
#include "tests/scheduler/scheduler_fixture.h"
#include "tests/scheduler/test_device.h"
#include "tests/scheduler/test_jobs.h"

namespace dmlserve {
namespace {

using ::dmlserve::testing::MatMulOf;
using ::dmlserve::testing::NewJob;
using ::dmlserve::testing::Scale;
using ::dmlserve::testing::ScanOf;
using ::dmlserve::testing::SchedulerTest;
using ::dmlserve::testing::Submitted;
using ::dmlserve::testing::TestDevice;
using ::dmlserve::testing::WeightB;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

constexpr DataType kF32 = DataType::kFloat32;

TEST_F(SchedulerTest, AFailedDeviceIsRemovedAndItsJobsRunElsewhere) {
  Start(Options(), /*device_count=*/2);
  for (auto& job : FailDevice0UnderTwoBatches()) {
    ExpectCorrectScan(*job);
    EXPECT_EQ(job->result.info.device, "test:1");
  }
  EXPECT_THAT(observer_.removed(), ElementsAre("test:0"));
  EXPECT_EQ(devices_[0]->attempted().size(), 1u);
  EXPECT_TRUE(devices_[0]->executed().empty());
  // The batch that ran twice reports its jobs' wait once.
  EXPECT_EQ(observer_.jobs_started(), 2);

  // From now on everything runs on the healthy device.
  auto later = Submit(ScanOf(kF32, {4}, 3));
  ASSERT_TRUE(later->Await());
  ExpectCorrectScan(*later);
  EXPECT_EQ(later->result.info.device, "test:1");
  const std::vector<DeviceStatus> statuses = scheduler_->devices();
  ASSERT_EQ(statuses.size(), 2u);
  EXPECT_FALSE(statuses[0].healthy);
  EXPECT_TRUE(statuses[1].healthy);
}

TEST_F(SchedulerTest, WhenTheLastDeviceFailsJobsFailWithUnavailable) {
  Start(Options());
  devices_[0]->FailNext(1);
  auto blocker = OccupyDevice();
  auto queued = Submit(ScanOf(kF32, {4}, 1));
  devices_[0]->Release();
  ASSERT_TRUE(blocker->Await());
  ASSERT_TRUE(queued->Await());
  for (auto* job : {&blocker, &queued}) {
    EXPECT_EQ((*job)->result.status.code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT((*job)->result.status.message(), HasSubstr("test:0: device lost"));
  }
  EXPECT_THAT(observer_.removed(), ElementsAre("test:0"));
  absl::Status status = scheduler_->Submit(NewJob(ScanOf(kF32, {4}, 1))->job);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(status.message(), HasSubstr("device lost"));
}

// A lost device is probed every reprobe_interval once none of its batches
// runs; while Recover fails it stays out, and once it succeeds it is back in
// rotation and takes work again.
TEST_F(SchedulerTest, AFailedDeviceIsReprobedAndServesAgainOnceItRecovers) {
  SchedulerOptions options = Options();
  options.reprobe_interval = absl::Milliseconds(20);
  Start(options, /*device_count=*/1, /*inflight=*/2);
  devices_[0]->RecoverWith(absl::UnavailableError("adapter still gone"));
  devices_[0]->FailNext(1);
  auto lost = Submit(ScanOf(kF32, {4}, 1));
  ASSERT_TRUE(lost->Await());
  EXPECT_EQ(lost->result.status.code(), absl::StatusCode::kUnavailable);

  // Probed, and still out: requests fail at once.
  for (int i = 0; i < 10000 && devices_[0]->recover_calls() < 2; ++i) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_GE(devices_[0]->recover_calls(), 2);
  EXPECT_FALSE(scheduler_->devices()[0].healthy);
  EXPECT_EQ(scheduler_->Submit(NewJob(ScanOf(kF32, {4}, 2))->job).code(),
            absl::StatusCode::kUnavailable);

  devices_[0]->RecoverWith(absl::OkStatus());
  for (int i = 0; i < 10000 && !scheduler_->devices()[0].healthy; ++i) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_TRUE(scheduler_->devices()[0].healthy);
  // Both of its workers take work again: two batches at once.
  devices_[0]->Hold();
  auto first = Submit(ScanOf(kF32, {4}, 3));
  auto second = Submit(ScanOf(DataType::kInt32, {4}, 4));
  devices_[0]->AwaitEntered(3);
  devices_[0]->Release();
  for (auto* job : {&first, &second}) {
    ASSERT_TRUE((*job)->Await());
    ExpectCorrectScan(**job);
  }
  for (int i = 0; i < 10000 && observer_.recovered().empty(); ++i) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_THAT(observer_.recovered(), ElementsAre("test:0"));
  EXPECT_THAT(observer_.devices_serving(), ElementsAre(1));
}

// With probing off (reprobe_interval 0) a failed device stays out.
TEST_F(SchedulerTest, WithoutReprobingAFailedDeviceStaysOut) {
  SchedulerOptions options = Options();
  options.reprobe_interval = absl::ZeroDuration();
  Start(options, /*device_count=*/2);
  devices_[0]->RecoverWith(absl::OkStatus());
  FailDevice0UnderTwoBatches();
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(devices_[0]->recover_calls(), 0);
  EXPECT_FALSE(scheduler_->devices()[0].healthy);
}

// A batch that breaks every device it runs on (a hang, a fence that never
// signals) costs max_attempts devices, not all of them: then its own jobs
// fail, and the rest of the devices go on serving.
TEST_F(SchedulerTest, ABatchFailingOnMaxAttemptsDevicesFailsItsJobsAndSparesTheRest) {
  SchedulerOptions options = Options();
  options.max_attempts = 2;
  Start(options, /*device_count=*/3);
  for (auto& device : devices_) device->FailNext(1);
  auto doomed = Submit(ScanOf(kF32, {4}, 1));
  ASSERT_TRUE(doomed->Await());
  EXPECT_EQ(doomed->result.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(doomed->result.status.message(),
              HasSubstr("its batch failed on 2 devices (--max_batch_attempts), the last: test:"));
  // Each removal is reported by the thread that saw it, after the fact.
  for (int i = 0; i < 10000 && observer_.removed().size() < 2; ++i) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(observer_.removed().size(), 2u);
  EXPECT_THAT(observer_.devices_left(), UnorderedElementsAre(2, 1));

  // The device it never reached serves (its planted failure withdrawn).
  for (auto& device : devices_) device->FailNext(0);
  auto later = Submit(ScanOf(kF32, {4}, 2));
  ASSERT_TRUE(later->Await());
  ExpectCorrectScan(*later);
  int healthy = 0;
  for (const DeviceStatus& status : scheduler_->devices()) healthy += status.healthy ? 1 : 0;
  EXPECT_EQ(healthy, 1);
}

// The attempt limit spares healthy primaries, not the fallback: a batch that
// failed on every primary still runs on the CPU behind them.
TEST_F(SchedulerTest, ABatchPastItsAttemptsStillRunsOnTheFallback) {
  std::vector<std::unique_ptr<Device>> primary;
  for (const char* name : {"gpu:0", "gpu:1"}) {
    auto gpu = std::make_unique<TestDevice>(name);
    gpu->FailNext(1);
    primary.push_back(std::move(gpu));
  }
  std::vector<std::unique_ptr<Device>> fallback;
  fallback.push_back(std::make_unique<TestDevice>("cpu:0"));
  SchedulerOptions options = Options();
  options.max_attempts = 2;
  scheduler_ =
      std::make_unique<Scheduler>(options, std::move(primary), &observer_, std::move(fallback));
  auto job = Submit(ScanOf(kF32, {4}, 1));
  ASSERT_TRUE(job->Await());
  ExpectCorrectScan(*job);
  EXPECT_EQ(job->result.info.device, "cpu:0");
}

TEST_F(SchedulerTest, FallbackDevicesTakeOverOnlyWhenEveryPrimaryFailed) {
  std::vector<std::unique_ptr<Device>> primary;
  auto gpu = std::make_unique<TestDevice>("gpu:0");
  TestDevice* gpu_ptr = gpu.get();
  primary.push_back(std::move(gpu));
  std::vector<std::unique_ptr<Device>> fallback;
  auto cpu = std::make_unique<TestDevice>("cpu:0");
  TestDevice* cpu_ptr = cpu.get();
  fallback.push_back(std::move(cpu));
  scheduler_ =
      std::make_unique<Scheduler>(Options(), std::move(primary), &observer_, std::move(fallback));

  // While the primary is healthy, even a busy one, the fallback stays idle.
  gpu_ptr->Hold();
  auto first = Submit(ScanOf(kF32, {4}, 1));
  gpu_ptr->AwaitEntered(1);
  auto second = Submit(ScanOf(DataType::kInt32, {4}, 2));
  gpu_ptr->Release();
  ASSERT_TRUE(first->Await());
  ASSERT_TRUE(second->Await());
  EXPECT_EQ(first->result.info.device, "gpu:0");
  EXPECT_EQ(second->result.info.device, "gpu:0");
  EXPECT_TRUE(cpu_ptr->attempted().empty());

  // The primary fails: its batch and everything after runs on the fallback.
  gpu_ptr->FailNext(1);
  auto lost = Submit(ScanOf(kF32, {4}, 3));
  ASSERT_TRUE(lost->Await());
  ExpectCorrectScan(*lost);
  EXPECT_EQ(lost->result.info.device, "cpu:0");
  // The removal is reported outside the scheduler's lock, possibly after the
  // fallback already answered.
  ASSERT_TRUE(observer_.AwaitDeviceRemoved());
  EXPECT_THAT(observer_.removed(), ElementsAre("gpu:0"));
  auto later = Submit(ScanOf(kF32, {4}, 4));
  ASSERT_TRUE(later->Await());
  ExpectCorrectScan(*later);
  EXPECT_EQ(later->result.info.device, "cpu:0");
  const std::vector<DeviceStatus> statuses = scheduler_->devices();
  ASSERT_EQ(statuses.size(), 2u);
  EXPECT_FALSE(statuses[0].healthy);
  EXPECT_FALSE(statuses[0].fallback);
  EXPECT_TRUE(statuses[1].healthy);
  EXPECT_TRUE(statuses[1].fallback);
}

// A pool where devices run different operators (Device::Supports).
constexpr OperatorKind kSum = OperatorKind::kCumulativeSummation;
constexpr OperatorKind kProduct = OperatorKind::kCumulativeProduct;
constexpr OperatorKind kMatMul = OperatorKind::kQuantizedLinearMatrixMultiply;

std::vector<std::string> KindsRun(const TestDevice& device) {
  std::vector<std::string> kinds;
  for (const auto& batch : device.executed()) {
    for (const Operation& operation : batch) {
      kinds.emplace_back(OperatorName(KindOf(operation)));
    }
  }
  std::sort(kinds.begin(), kinds.end());
  kinds.erase(std::unique(kinds.begin(), kinds.end()), kinds.end());
  return kinds;
}

TEST_F(SchedulerTest, DevicesThatServeASubsetRunOnlyTheirOperators) {
  Start(Options(/*max_batch_size=*/4, absl::Microseconds(100)), 2, 1,
        {{kSum, kProduct}, {kMatMul}});
  // Device 0 busy: matrix multiplies still run on device 1 meanwhile, and
  // scans wait for device 0 rather than going where they cannot run.
  auto blocker = OccupyDevice();
  std::vector<std::shared_ptr<Submitted>> matmuls, scans;
  for (int i = 0; i < 12; ++i) {
    matmuls.push_back(Submit(MatMulOf(WeightB(static_cast<int8_t>(i % 3)), Scale(1))));
    scans.push_back(Submit(ScanOf(kF32, {3}, i, 0, i % 2 ? kSum : kProduct)));
  }
  for (auto& job : matmuls) {
    ASSERT_TRUE(job->Await());
    EXPECT_TRUE(job->result.status.ok()) << job->result.status;
    EXPECT_EQ(job->result.info.device, "test:1");
  }
  devices_[0]->Release();
  ASSERT_TRUE(blocker->Await());
  for (auto& job : scans) {
    ASSERT_TRUE(job->Await());
    ExpectCorrectScan(*job);
    EXPECT_EQ(job->result.info.device, "test:0");
  }
  EXPECT_THAT(KindsRun(*devices_[0]), ElementsAre("cumulative_product", "cumulative_summation"));
  EXPECT_THAT(KindsRun(*devices_[1]), ElementsAre("quantized_linear_matrix_multiply"));
}

TEST_F(SchedulerTest, AFallbackRunsTheOperatorsThePrimaryDoesNot) {
  // A GPU that runs only matrix multiplies, and the CPU behind it.
  std::vector<std::unique_ptr<Device>> primary, fallback;
  auto gpu = std::make_unique<TestDevice>("gpu");
  gpu->ServeOnly({kMatMul});
  auto cpu = std::make_unique<TestDevice>("cpu");
  devices_ = {gpu.get(), cpu.get()};
  primary.push_back(std::move(gpu));
  fallback.push_back(std::move(cpu));
  scheduler_ =
      std::make_unique<Scheduler>(Options(), std::move(primary), &observer_, std::move(fallback));
  auto matmul = Submit(MatMulOf(WeightB(1), Scale(1)));
  auto scan = Submit(ScanOf(kF32, {3}, 1));
  ASSERT_TRUE(matmul->Await());
  ASSERT_TRUE(scan->Await());
  EXPECT_TRUE(matmul->result.status.ok()) << matmul->result.status;
  EXPECT_EQ(matmul->result.info.device, "gpu");
  ExpectCorrectScan(*scan);
  EXPECT_EQ(scan->result.info.device, "cpu");
}

TEST_F(SchedulerTest, AnOperatorNoDeviceRunsIsRefusedAsUnimplemented) {
  Start(Options(), 2, 1, {{kSum}, {kSum, kProduct}});
  std::shared_ptr<Submitted> submitted = NewJob(MatMulOf(WeightB(1), Scale(1)));
  const absl::Status status = scheduler_->Submit(submitted->job);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(status.message(), HasSubstr("quantized_linear_matrix_multiply"));
  auto scan = Submit(ScanOf(kF32, {3}, 1, 0, kProduct));
  ASSERT_TRUE(scan->Await());
  ExpectCorrectScan(*scan);
}

TEST_F(SchedulerTest, JobsOfAnOperatorWhoseLastDeviceFailedFailUnavailable) {
  SchedulerOptions options = Options(/*max_batch_size=*/1);
  options.reprobe_interval = absl::ZeroDuration();
  Start(options, 2, 1, {{kSum}, {kMatMul}});
  devices_[1]->Hold();
  auto running = Submit(MatMulOf(WeightB(1), Scale(1)));
  devices_[1]->AwaitEntered(1);
  std::vector<std::shared_ptr<Submitted>> queued;
  for (int i = 0; i < 3; ++i) queued.push_back(Submit(MatMulOf(WeightB(2), Scale(1))));
  devices_[1]->FailNext(1);
  devices_[1]->Release();
  ASSERT_TRUE(observer_.AwaitDeviceRemoved());
  queued.push_back(running);
  for (auto& job : queued) {
    ASSERT_TRUE(job->Await());
    EXPECT_EQ(job->result.status.code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(job->result.status.message(),
                HasSubstr("no healthy device left that runs quantized_linear_matrix_multiply"));
  }
  // The other operator still runs; a new multiply is refused at once.
  auto scan = Submit(ScanOf(kF32, {3}, 1));
  ASSERT_TRUE(scan->Await());
  ExpectCorrectScan(*scan);
  std::shared_ptr<Submitted> late = NewJob(MatMulOf(WeightB(1), Scale(1)));
  EXPECT_EQ(scheduler_->Submit(late->job).code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace dmlserve
