// The Scheduler through its threads: spreading batches over devices, in-flight
// limits, resident weights, what it reports to its observer, eviction, and a
// pool placed by cost. Forming batches, jobs that never run, device failures
// and waiting for company have files of their own (scheduler_*_test.cc).

#include "scheduler/scheduler.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/core/operation.h"
#include "tests/scheduler/scheduler_fixture.h"
#include "tests/scheduler/test_jobs.h"

namespace dmlserve {
namespace {

using ::dmlserve::testing::MatMulOf;
using ::dmlserve::testing::NewJob;
using ::dmlserve::testing::Scale;
using ::dmlserve::testing::ScanOf;
using ::dmlserve::testing::SchedulerTest;
using ::dmlserve::testing::Submitted;
using ::dmlserve::testing::WeightB;
using ::testing::ElementsAre;

constexpr DataType kF32 = DataType::kFloat32;

#if defined(__linux__)
TEST_F(SchedulerTest, WorkerThreadsAreNamedAfterTheirDevice) {
  Start(SchedulerOptions{}, /*device_count=*/2, /*inflight=*/2);
  std::map<std::string, int> names;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(entry.path() / "comm");
    std::string name;
    std::getline(comm, name);
    ++names[name];
  }
  EXPECT_EQ(names["test:0 worker"], 2);
  EXPECT_EQ(names["test:1 worker"], 2);
}
#endif

TEST_F(SchedulerTest, BatchesSpreadOverDevices) {
  Start(Options(), /*device_count=*/2);
  devices_[0]->Hold();
  devices_[1]->Hold();
  auto f32 = Submit(ScanOf(kF32, {4}, 1));
  auto i32 = Submit(ScanOf(DataType::kInt32, {4}, 2));
  // Each device holds one batch at the same time.
  devices_[0]->AwaitEntered(1);
  devices_[1]->AwaitEntered(1);
  devices_[0]->Release();
  devices_[1]->Release();
  ASSERT_TRUE(f32->Await());
  ASSERT_TRUE(i32->Await());
  ExpectCorrectScan(*f32);
  ExpectCorrectScan(*i32);
  EXPECT_NE(f32->result.info.device, i32->result.info.device);
}

TEST_F(SchedulerTest, ADeviceRunsUpToItsInflightLimitAtOnce) {
  Start(Options(), /*device_count=*/1, /*inflight=*/2);
  devices_[0]->Hold();
  auto f32 = Submit(ScanOf(kF32, {4}, 1));
  auto i32 = Submit(ScanOf(DataType::kInt32, {4}, 2));
  devices_[0]->AwaitEntered(2);
  devices_[0]->Release();
  ASSERT_TRUE(f32->Await());
  ASSERT_TRUE(i32->Await());
  ExpectCorrectScan(*f32);
  ExpectCorrectScan(*i32);
}

TEST_F(SchedulerTest, ABusyDeviceLeavesTheNextBatchToAnIdleOne) {
  // Two devices that could each run two batches at once: a device already
  // running one must leave the next to the idle device, whichever worker
  // happens to wake first. Repeated on fresh schedulers, since a wrong
  // placement would only show some of the time.
  for (int round = 0; round < 20; ++round) {
    SCOPED_TRACE(round);
    scheduler_.reset();
    devices_.clear();
    Start(Options(), /*device_count=*/2, /*inflight=*/2);
    devices_[0]->Hold();
    devices_[1]->Hold();
    const auto entered = [this] {
      return devices_[0]->attempted().size() + devices_[1]->attempted().size();
    };
    // Distinct data types keep the two jobs in batches of their own.
    auto first = Submit(ScanOf(kF32, {4}, 1));
    while (entered() < 1) absl::SleepFor(absl::Milliseconds(1));
    auto second = Submit(ScanOf(DataType::kInt32, {4}, 2));
    while (entered() < 2) absl::SleepFor(absl::Milliseconds(1));
    EXPECT_EQ(devices_[0]->attempted().size(), 1u);
    EXPECT_EQ(devices_[1]->attempted().size(), 1u);
    devices_[0]->Release();
    devices_[1]->Release();
    ASSERT_TRUE(first->Await());
    ASSERT_TRUE(second->Await());
  }
}

TEST_F(SchedulerTest, PrefersABatchWhoseWeightsAreResident) {
  Start(Options());
  devices_[0]->MakeResident("warm");
  auto blocker = OccupyDevice();
  auto cold = Submit(MatMulOf(WeightB(1, "cold"), Scale(1)));
  auto warm = Submit(MatMulOf(WeightB(1, "warm"), Scale(1)));
  devices_[0]->Release();
  ASSERT_TRUE(cold->Await());
  ASSERT_TRUE(warm->Await());
  std::vector<std::string> order;
  for (const auto& batch : devices_[0]->executed()) {
    if (const auto* matmul = std::get_if<QuantizedMatMulOperation>(&batch[0])) {
      order.push_back(matmul->b.registered_id());
    }
  }
  EXPECT_THAT(order, ElementsAre("warm", "cold"));
}

TEST_F(SchedulerTest, ReportsToTheObserver) {
  Start(Options());
  auto blocker = OccupyDevice();
  std::vector<std::shared_ptr<Submitted>> jobs;
  for (int i = 0; i < 3; ++i) jobs.push_back(Submit(ScanOf(kF32, {3}, i)));
  devices_[0]->Release();
  for (auto& job : jobs) ASSERT_TRUE(job->Await());
  ASSERT_TRUE(blocker->Await());

  const std::vector<int> depths = observer_.depths();
  ASSERT_FALSE(depths.empty());
  EXPECT_EQ(*std::max_element(depths.begin(), depths.end()), 3);
  EXPECT_EQ(depths.back(), 0);
  EXPECT_EQ(observer_.jobs_started(), 4);
  EXPECT_THAT(observer_.batches(), ElementsAre(std::pair<std::string, int>("test:0", 1),
                                               std::pair<std::string, int>("test:0", 3)));
  for (auto& job : jobs) {
    EXPECT_EQ(job->result.info.batch_size, 3u);
    EXPECT_GE(job->result.info.queue_duration, absl::ZeroDuration());
    EXPECT_GE(job->result.info.compute_duration, absl::ZeroDuration());
  }
}

TEST_F(SchedulerTest, DoneMayCallBackIntoTheScheduler) {
  Start(Options());
  // Completion callbacks run outside the scheduler's locks, so they may
  // submit follow-up work.
  auto follow_up = NewJob(ScanOf(kF32, {2}, 5));
  auto first = std::make_shared<Submitted>();
  first->operation = ScanOf(kF32, {2}, 1);
  first->job->operation = first->operation;
  Scheduler* scheduler = scheduler_.get();
  first->job->done = [self = first.get(), next = follow_up->job, scheduler](JobResult result) {
    self->result = std::move(result);
    EXPECT_EQ(scheduler->devices().size(), 1u);
    EXPECT_TRUE(scheduler->Submit(next).ok());
    self->finished.Notify();
  };
  ASSERT_TRUE(scheduler_->Submit(first->job).ok());
  ASSERT_TRUE(first->Await());
  ASSERT_TRUE(follow_up->Await());
  ExpectCorrectScan(*first);
  ExpectCorrectScan(*follow_up);
}

TEST_F(SchedulerTest, EvictsFromEveryDeviceAndReportsDevices) {
  Start(Options(), /*device_count=*/2);
  scheduler_->EvictTensor("w1");
  EXPECT_THAT(devices_[0]->evicted(), ElementsAre("w1"));
  EXPECT_THAT(devices_[1]->evicted(), ElementsAre("w1"));
  const std::vector<DeviceStatus> statuses = scheduler_->devices();
  ASSERT_EQ(statuses.size(), 2u);
  EXPECT_EQ(statuses[0].description.name, "test:0");
  EXPECT_EQ(statuses[1].description.name, "test:1");
  EXPECT_TRUE(statuses[0].healthy);
  EXPECT_EQ(statuses[0].memory_bytes, devices_[0]->memory_bytes());
}

// --- Placement by cost (Placement::kCost), through the scheduler's threads ---
// Where each batch should go, exactly, is placement_test's; here: a pool
// placed by cost calibrates its devices, answers every job correctly from
// many threads at once (also under TSan), and survives losing a device.

TEST_F(SchedulerTest, PlacedByCostEveryJobIsAnsweredFromManyThreadsAndADeviceLossMovesWork) {
  SchedulerOptions options = Options(8, absl::Microseconds(100));
  options.placement = Placement::kCost;
  Start(options, /*device_count=*/2, /*inflight=*/2);
  devices_[0]->RunOnCallerThread(true);
  // Calibration ran a small and a large batch of each operator, three times.
  EXPECT_GE(devices_[0]->executed().size(), 3u * 2 * kOperatorKindCount);
  EXPECT_GE(devices_[1]->executed().size(), 3u * 2 * kOperatorKindCount);
  for (const DeviceStatus& status : scheduler_->devices()) {
    EXPECT_FALSE(status.fallback);
    EXPECT_GT(status.costs[0].Estimate(1e6), 0) << status.description.name;
  }
  const auto load = [this](int thread) {
    std::vector<std::shared_ptr<Submitted>> jobs;
    for (int i = 0; i < 50; ++i) {
      jobs.push_back(
          Submit(ScanOf(i % 2 ? kF32 : DataType::kInt32, {static_cast<uint32_t>(1 + i % 7), 3},
                        static_cast<float>(thread * 100 + i), 1)));
    }
    for (auto& job : jobs) {
      ASSERT_TRUE(job->Await());
      ExpectCorrectScan(*job);
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back(load, t);
  for (auto& thread : threads) thread.join();

  // Whichever device the next batch prefers fails it: its jobs move to the
  // other device (max_attempts 2), which then serves everything.
  devices_[0]->FailNext(1);
  devices_[1]->FailNext(1);
  auto moved = Submit(ScanOf(kF32, {4}, 1000));
  ASSERT_TRUE(moved->Await());
  if (moved->result.status.ok()) ExpectCorrectScan(*moved);
  ASSERT_TRUE(observer_.AwaitDeviceRemoved());
  int healthy = 0;
  for (const DeviceStatus& status : scheduler_->devices()) healthy += status.healthy;
  if (healthy == 0) return;  // both failed it: nothing left to serve (max_attempts)
  devices_[0]->FailNext(0);
  devices_[1]->FailNext(0);
  for (int i = 0; i < 20; ++i) {
    auto job = Submit(ScanOf(kF32, {4}, 2000 + i));
    ASSERT_TRUE(job->Await());
    ExpectCorrectScan(*job);
  }
}

}  // namespace
}  // namespace dmlserve
