// ExecuteBatch on a fake clock: every time it reports (each job's wait, the
// batch's compute time, what the cost model learns) is read from the clock
// the jobs' enqueue times came from, so a test can state them exactly.

#include "scheduler/batch_execution.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "scheduler/batch.h"
#include "scheduler/clock.h"
#include "scheduler/compatibility_key.h"
#include "scheduler/cost_model.h"
#include "tests/scheduler/test_device.h"
#include "tests/scheduler/test_jobs.h"

namespace dmlserve {
namespace {

namespace t = ::dmlserve::testing;

// A test device whose every batch takes `compute` on the fake clock.
class TimedDevice : public t::TestDevice {
 public:
  TimedDevice(FakeClock* clock, absl::Duration compute)
      : TestDevice("timed"), clock_(clock), compute_(compute) {}
  absl::Status Execute(absl::Span<WorkItem> items) override {
    clock_->Advance(compute_);
    return TestDevice::Execute(items);
  }

 private:
  FakeClock* clock_;
  absl::Duration compute_;
};

std::unique_ptr<Batch> BatchOf(const std::vector<std::shared_ptr<t::Submitted>>& jobs) {
  auto batch = std::make_unique<Batch>(CompatibilityKey::For(jobs.front()->job->operation));
  for (const auto& submitted : jobs) batch->Add(submitted->job, 64);
  return batch;
}

TEST(BatchExecutionTest, WaitsAndComputeTimeAreTheClocksOwn) {
  FakeClock clock;
  TimedDevice device(&clock, absl::Milliseconds(7));
  auto first = t::NewJob(t::ScanOf(DataType::kFloat32, {4}, 1));
  auto second = t::NewJob(t::ScanOf(DataType::kFloat32, {4}, 10));
  first->job->enqueue_time = clock.Now();
  clock.Advance(absl::Milliseconds(2));
  second->job->enqueue_time = clock.Now();
  clock.Advance(absl::Milliseconds(3));
  const absl::Time start = clock.Now();
  std::unique_ptr<Batch> batch = BatchOf({first, second});
  const double units = BatchWorkUnits(*batch);

  Answers answers;
  BatchTiming timing;
  ASSERT_TRUE(ExecuteBatch(device, *batch, clock, nullptr, answers, timing).ok());
  EXPECT_TRUE(timing.executed);
  EXPECT_EQ(timing.units, units);
  EXPECT_EQ(timing.start, start);
  EXPECT_EQ(timing.end, start + absl::Milliseconds(7));
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_EQ(answers[0].result.info.queue_duration, absl::Milliseconds(5));
  EXPECT_EQ(answers[1].result.info.queue_duration, absl::Milliseconds(3));
  for (const Answer& answer : answers) {
    EXPECT_EQ(answer.result.info.compute_duration, absl::Milliseconds(7));
    EXPECT_EQ(answer.result.info.batch_size, 2u);
    EXPECT_EQ(answer.result.info.device, "timed");
  }
  Deliver(answers);
  EXPECT_TRUE(first->finished.HasBeenNotified());
  EXPECT_TRUE(second->finished.HasBeenNotified());
}

TEST(BatchExecutionTest, ABatchWhoseJobsAllDiedRunsNothingAndTeachesNothing) {
  FakeClock clock;
  TimedDevice device(&clock, absl::Milliseconds(7));
  // Its deadline is the clock's now: judged at the batch's start, it has passed.
  auto expired = t::NewJob(t::ScanOf(DataType::kFloat32, {4}, 1), clock.Now());
  expired->job->enqueue_time = clock.Now();
  std::unique_ptr<Batch> batch = BatchOf({expired});

  Answers answers;
  BatchTiming timing;
  ASSERT_TRUE(ExecuteBatch(device, *batch, clock, nullptr, answers, timing).ok());
  EXPECT_FALSE(timing.executed);
  EXPECT_EQ(timing.end, timing.start);
  EXPECT_TRUE(answers.empty());
  EXPECT_EQ(device.entered(), 0);
  ASSERT_TRUE(expired->Await());
  EXPECT_EQ(expired->result.status.code(), absl::StatusCode::kDeadlineExceeded);
}

}  // namespace
}  // namespace dmlserve
