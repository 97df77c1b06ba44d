// Waiting for company (Device::PreferredCompany) under sustained load, through
// the scheduler's threads, for what happens; when each decision falls, to the
// microsecond, is dispatch_policy_test's, on a fake clock.

#include <cstddef>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/backend/execution_hints.h"
#include "kernels/core/operation.h"
#include "scheduler/scheduler.h"
#include "tests/scheduler/scheduler_fixture.h"
#include "tests/scheduler/test_jobs.h"

namespace dmlserve {
namespace {

using ::dmlserve::testing::ScanOf;
using ::dmlserve::testing::SchedulerTest;
using ::dmlserve::testing::Submitted;
using ::testing::ElementsAre;

constexpr DataType kF32 = DataType::kFloat32;

class CompanyTest : public SchedulerTest {
 protected:
  // One device whose jobs run on the submitting thread and prefer `company`.
  void StartWithCompany(int company, absl::Duration delay = absl::Hours(1),
                        absl::Duration backstop = SchedulerOptions().hold_backstop) {
    SchedulerOptions options = Options(64, delay);
    options.hold_backstop = backstop;
    Start(options);
    devices_[0]->RunOnCallerThread(true);
    devices_[0]->PreferCompany(company);
  }

  // Sustained load, as the scheduler sees it: most recent arrivals found the
  // device busy. Returns once all of that work is done and the device idle.
  void MakeLoad() {
    devices_[0]->Hold();
    const int entered = devices_[0]->entered();
    std::shared_ptr<Submitted> blocker;
    std::thread submitter([&] { blocker = Submit(ScanOf(DataType::kInt32, {1}, -1)); });
    devices_[0]->AwaitEntered(entered + 1);
    std::vector<std::shared_ptr<Submitted>> queued;
    for (int i = 0; i < 12; ++i) queued.push_back(Submit(ScanOf(DataType::kInt32, {1}, -1)));
    devices_[0]->Release();
    submitter.join();
    for (auto& job : queued) ASSERT_TRUE(job->Await());
    ran_before_ = devices_[0]->executed().size();
  }

  // The batches run since MakeLoad.
  std::vector<std::vector<float>> NewBatches() const {
    std::vector<std::vector<Operation>> executed = devices_[0]->executed();
    executed.erase(executed.begin(), executed.begin() + ran_before_);
    return Tags(executed);
  }

  size_t ran_before_ = 0;
};

TEST_F(CompanyTest, AtLowLoadAJobThatPrefersCompanyRunsAtOnce) {
  StartWithCompany(3);
  auto job = Submit(ScanOf(kF32, {2}, 1));
  // Nothing else arrives at this server: waiting would only add latency.
  EXPECT_TRUE(job->finished.HasBeenNotified());
  ExpectCorrectScan(*job);
  // Idle cores: the device may spread the batch over them.
  EXPECT_FALSE(devices_[0]->busy_cores().back());
}

TEST_F(CompanyTest, UnderLoadAJobArrivingAtAnIdleDeviceWaitsForCompany) {
  StartWithCompany(3);
  MakeLoad();
  auto first = Submit(ScanOf(kF32, {2}, 1));
  auto second = Submit(ScanOf(kF32, {2}, 2));
  EXPECT_FALSE(first->finished.HasBeenNotified());
  EXPECT_FALSE(second->finished.HasBeenNotified());
  // The third completes the company: its thread runs the batch at once.
  auto third = Submit(ScanOf(kF32, {2}, 3));
  EXPECT_TRUE(first->finished.HasBeenNotified());
  EXPECT_TRUE(third->finished.HasBeenNotified());
  ExpectCorrectScan(*first);
  ExpectCorrectScan(*second);
  ExpectCorrectScan(*third);
  EXPECT_THAT(NewBatches(), ElementsAre(ElementsAre(1, 2, 3)));
  EXPECT_EQ(devices_[0]->threads().back(), std::this_thread::get_id());
  EXPECT_EQ(first->result.info.batch_size, 3u);
}

TEST_F(CompanyTest, CallerThreadBatchesAreMarkedBusyOnlyUnderLoad) {
  // A device that splits a batch over its own threads (the CPU backend's
  // kernel pool) keeps it on the gRPC thread when every core serves requests.
  StartWithCompany(3);
  MakeLoad();
  auto first = Submit(ScanOf(kF32, {2}, 2));
  auto second = Submit(ScanOf(kF32, {2}, 3));
  auto third = Submit(ScanOf(kF32, {2}, 4));
  ASSERT_TRUE(third->finished.HasBeenNotified());
  EXPECT_EQ(devices_[0]->threads().back(), std::this_thread::get_id());
  EXPECT_TRUE(devices_[0]->busy_cores().back()) << "under load, on the submitting thread";
  // Nothing leaks past the batch: this thread is outside any scope again.
  EXPECT_FALSE(BusyCoresScope::Active());
}

TEST_F(CompanyTest, AHeldJobRunsWhenMaxQueueDelayPassesWithoutCompany) {
  const absl::Duration delay = absl::Milliseconds(30);
  StartWithCompany(3, delay, /*backstop=*/absl::Milliseconds(10));
  MakeLoad();
  auto job = Submit(ScanOf(kF32, {2}, 1));
  EXPECT_FALSE(job->finished.HasBeenNotified());
  ASSERT_TRUE(job->Await());
  // On the device's worker (the backstop), since no later arrival came to
  // run it. When, exactly: dispatch_policy_test (UnderLoadAJobThatPaysTo...).
  ExpectCorrectScan(*job);
  EXPECT_THAT(NewBatches(), ElementsAre(ElementsAre(1)));
  EXPECT_NE(devices_[0]->threads().back(), std::this_thread::get_id());
  // A device's own worker serves no requests: its batches may use every core.
  EXPECT_FALSE(devices_[0]->busy_cores().back());
}

TEST_F(CompanyTest, WithoutABackstopTheWorkerEndsTheHoldAtItsEnd) {
  // hold_backstop 0: the worker times the hold itself, as a strict bound.
  const absl::Duration delay = absl::Milliseconds(20);
  StartWithCompany(3, delay, /*backstop=*/absl::ZeroDuration());
  MakeLoad();
  auto job = Submit(ScanOf(kF32, {2}, 1));
  ASSERT_TRUE(job->Await());
  ExpectCorrectScan(*job);
  EXPECT_NE(devices_[0]->threads().back(), std::this_thread::get_id());
}

TEST_F(CompanyTest, OtherWorkDoesNotWaitBehindAHeldBatch) {
  StartWithCompany(3);
  MakeLoad();
  auto held = Submit(ScanOf(kF32, {2}, 1));
  EXPECT_FALSE(held->finished.HasBeenNotified());
  // Another key cannot join the held batch: an idle device takes it now.
  auto other = Submit(ScanOf(DataType::kInt32, {2}, 7));
  EXPECT_TRUE(other->finished.HasBeenNotified());
  EXPECT_FALSE(held->finished.HasBeenNotified());
  auto second = Submit(ScanOf(kF32, {2}, 2));
  auto third = Submit(ScanOf(kF32, {2}, 3));
  ASSERT_TRUE(held->Await());
  ASSERT_TRUE(third->Await());
  EXPECT_THAT(NewBatches(), ElementsAre(ElementsAre(7), ElementsAre(1, 2, 3)));
}

TEST_F(CompanyTest, ACancelledHeldJobCompletesAtOnce) {
  StartWithCompany(3);
  MakeLoad();
  auto held = Submit(ScanOf(kF32, {2}, 1));
  held->job->Cancel();
  ASSERT_TRUE(held->Await());
  EXPECT_EQ(held->result.status.code(), absl::StatusCode::kCancelled);
  // Nothing is left waiting: the next job starts a fresh hold.
  auto next = Submit(ScanOf(kF32, {2}, 2));
  auto second = Submit(ScanOf(kF32, {2}, 3));
  auto third = Submit(ScanOf(kF32, {2}, 4));
  EXPECT_TRUE(next->finished.HasBeenNotified());
  EXPECT_THAT(NewBatches(), ElementsAre(ElementsAre(2, 3, 4)));
}

TEST_F(CompanyTest, ShutdownRunsAHeldJob) {
  StartWithCompany(3);
  MakeLoad();
  auto held = Submit(ScanOf(kF32, {2}, 1));
  scheduler_->Shutdown();
  ASSERT_TRUE(held->finished.HasBeenNotified());
  ExpectCorrectScan(*held);
}

}  // namespace
}  // namespace dmlserve
