// Jobs that end without running or are refused: expired and cancelled jobs, a
// full queue, a job without a callback, shutdown with work admitted, and
// submits racing cancellations from many threads.

#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/core/operation.h"
#include "scheduler/scheduler.h"
#include "tests/scheduler/scheduler_fixture.h"
#include "tests/scheduler/test_jobs.h"

namespace dmlserve {
namespace {

using ::dmlserve::testing::NewJob;
using ::dmlserve::testing::ScanOf;
using ::dmlserve::testing::SchedulerTest;
using ::dmlserve::testing::Submitted;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr DataType kF32 = DataType::kFloat32;

TEST_F(SchedulerTest, ExpiredJobsCompleteWithoutRunning) {
  Start(Options());
  auto blocker = OccupyDevice();
  auto already_expired = Submit(ScanOf(kF32, {2}, 1), absl::Now() - absl::Seconds(1));
  auto soon_expired = Submit(ScanOf(kF32, {2}, 2), absl::Now() + absl::Milliseconds(1));
  auto alive = Submit(ScanOf(kF32, {2}, 3));
  absl::SleepFor(absl::Milliseconds(2));  // only so that soon_expired is expired
  // Deadlines are checked when a batch forms: the expired jobs leave theirs
  // then, complete, and are never computed. (In the server, gRPC cancels a
  // call whose deadline passes, which removes its job at once.)
  devices_[0]->Release();
  ASSERT_TRUE(already_expired->Await());
  ASSERT_TRUE(soon_expired->Await());
  EXPECT_EQ(already_expired->result.status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(soon_expired->result.status.code(), absl::StatusCode::kDeadlineExceeded);
  ASSERT_TRUE(alive->Await());
  ExpectCorrectScan(*alive);
  EXPECT_THAT(Tags(devices_[0]->attempted()), ElementsAre(ElementsAre(-1), ElementsAre(3)));
}

TEST_F(SchedulerTest, AnExpiredJobIsNeverRun) {
  Start(Options(/*max_batch_size=*/2, absl::Hours(1)));
  auto expired = Submit(ScanOf(kF32, {2}, 1), absl::Now() - absl::Seconds(1));
  ASSERT_TRUE(expired->Await());
  EXPECT_EQ(expired->result.status.code(), absl::StatusCode::kDeadlineExceeded);
  auto alive = Submit(ScanOf(kF32, {2}, 2));
  ASSERT_TRUE(alive->Await());
  ExpectCorrectScan(*alive);
  EXPECT_THAT(Tags(devices_[0]->attempted()), ElementsAre(ElementsAre(2)));
}

TEST_F(SchedulerTest, CancelledJobsCompleteAtOnceWithoutRunning) {
  Start(Options());
  auto blocker = OccupyDevice();
  auto cancelled = Submit(ScanOf(kF32, {2}, 1));
  auto kept = Submit(ScanOf(kF32, {2}, 2));
  cancelled->job->Cancel();
  // Completed by Cancel() itself, while the device is still busy.
  EXPECT_TRUE(cancelled->finished.HasBeenNotified());
  EXPECT_EQ(cancelled->result.status.code(), absl::StatusCode::kCancelled);
  devices_[0]->Release();
  ASSERT_TRUE(kept->Await());
  ExpectCorrectScan(*kept);
  EXPECT_THAT(Tags(devices_[0]->attempted()), ElementsAre(ElementsAre(-1), ElementsAre(2)));
}

TEST_F(SchedulerTest, CancellingEveryJobOfABatchDropsTheBatch) {
  Start(Options(/*max_batch_size=*/4));
  auto blocker = OccupyDevice();
  auto a = Submit(ScanOf(kF32, {2}, 1));
  auto b = Submit(ScanOf(kF32, {2}, 2));
  auto other = Submit(ScanOf(DataType::kInt32, {2}, 3));
  a->job->Cancel();
  b->job->Cancel();
  a->job->Cancel();  // twice: still completed once
  EXPECT_EQ(a->result.status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(b->result.status.code(), absl::StatusCode::kCancelled);
  devices_[0]->Release();
  ASSERT_TRUE(other->Await());
  EXPECT_THAT(Tags(devices_[0]->attempted()), ElementsAre(ElementsAre(-1), ElementsAre(3)));
}

TEST_F(SchedulerTest, CancellingARunningJobLetsItFinish) {
  Start(Options());
  auto blocker = OccupyDevice();
  blocker->job->Cancel();  // already on the device: nothing to take back
  EXPECT_FALSE(blocker->finished.HasBeenNotified());
  devices_[0]->Release();
  ASSERT_TRUE(blocker->Await());
  EXPECT_TRUE(blocker->result.status.ok());
}

TEST_F(SchedulerTest, AFullQueueRejectsUntilItDrains) {
  SchedulerOptions options = Options();
  options.max_queue = 3;
  Start(options);
  auto blocker = OccupyDevice();  // started, so not counted
  std::vector<std::shared_ptr<Submitted>> jobs;
  for (int i = 0; i < 3; ++i) jobs.push_back(Submit(ScanOf(kF32, {2}, i)));

  auto rejected = NewJob(ScanOf(kF32, {2}, 9));
  absl::Status status = scheduler_->Submit(rejected->job);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(status.message(), HasSubstr("queue full: 3 jobs waiting (--max_queue)"));
  EXPECT_FALSE(rejected->finished.HasBeenNotified());

  devices_[0]->Release();
  for (auto& job : jobs) ASSERT_TRUE(job->Await());
  auto accepted = Submit(ScanOf(kF32, {2}, 10));
  ASSERT_TRUE(accepted->Await());
  ExpectCorrectScan(*accepted);
}

TEST_F(SchedulerTest, ShutdownRunsEveryAdmittedJob) {
  SchedulerOptions options = Options(/*max_batch_size=*/4, absl::Hours(1));
  options.batch.max_batch_bytes = 4 * OperationBytes(ScanOf(kF32, {3}, 0));
  Start(options);
  auto blocker = OccupyDevice(/*elements=*/64);
  std::vector<std::shared_ptr<Submitted>> jobs;
  for (int i = 0; i < 6; ++i) jobs.push_back(Submit(ScanOf(kF32, {3}, i)));
  jobs.push_back(Submit(ScanOf(DataType::kInt32, {3}, 7)));  // an open batch of its own

  // Shutdown begins while the device is busy and batches are open; it
  // returns only once every admitted job has run.
  std::thread shutdown([this] { scheduler_->Shutdown(); });
  devices_[0]->Release();
  shutdown.join();

  for (auto& job : jobs) {
    ASSERT_TRUE(job->finished.HasBeenNotified());
    ExpectCorrectScan(*job);
  }
  EXPECT_EQ(scheduler_->Submit(NewJob(ScanOf(kF32, {2}, 1))->job).code(),
            absl::StatusCode::kUnavailable);
  scheduler_->Shutdown();  // idempotent
}

TEST_F(SchedulerTest, ConcurrentSubmitsAndCancelsCompleteEveryJobOnce) {
  // Submitters race each other, the devices' workers and cancellations; every
  // job completes exactly once, with its own answer or CANCELLED.
  SchedulerOptions options = Options(/*max_batch_size=*/8, absl::Microseconds(50));
  options.max_queue = 1 << 20;
  Start(options, /*device_count=*/2, /*inflight=*/2);
  devices_[1]->RunOnCallerThread(true);
  constexpr int kThreads = 4;
  constexpr int kJobsPerThread = 300;
  std::vector<std::vector<std::shared_ptr<Submitted>>> jobs(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([this, t, &jobs] {
      for (int i = 0; i < kJobsPerThread; ++i) {
        const DataType type = i % 3 == 0 ? DataType::kInt32 : kF32;
        auto job = Submit(ScanOf(type, {3}, static_cast<float>(t * 1000 + i)));
        if (i % 5 == 0) job->job->Cancel();
        jobs[t].push_back(std::move(job));
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (auto& per_thread : jobs) {
    for (auto& job : per_thread) {
      ASSERT_TRUE(job->Await());
      if (job->result.status.code() == absl::StatusCode::kCancelled) continue;
      ExpectCorrectScan(*job);
    }
  }
  scheduler_->Shutdown();
  const std::vector<int> depths = observer_.depths();
  ASSERT_FALSE(depths.empty());
  EXPECT_EQ(depths.back(), 0);
}

TEST_F(SchedulerTest, RejectsAJobWithoutACallback) {
  Start(Options());
  auto job = std::make_shared<Job>();
  job->operation = ScanOf(kF32, {2}, 1);
  EXPECT_EQ(scheduler_->Submit(job).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(scheduler_->Submit(nullptr).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dmlserve
