// The batching policy on its own, on one thread: BatchQueue is plain data
// behind the scheduler's mutex, so every rule of batch_queue.h can be checked
// with explicit times, no workers and no waiting.

#include "scheduler/batch_queue.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "kernels/core/operation.h"
#include "scheduler/compatibility_key.h"
#include "tests/scheduler/test_device.h"
#include "tests/scheduler/test_jobs.h"

namespace dmlserve {
namespace {

// The scheduler tests' jobs and device (tests/scheduler/test_jobs.h, test_device.h).
namespace t = ::dmlserve::testing;

constexpr DataType kF32 = DataType::kFloat32;
constexpr absl::Duration kDelay = absl::Microseconds(200);
const absl::Time kT0 = absl::FromUnixSeconds(1000);

class BatchQueueTest : public ::testing::Test {
 protected:
  explicit BatchQueueTest(BatchLimits limits = {4, 1ull << 30, kDelay}) : queue_(limits) {}

  // Adds a job for `operation` that arrived at `when`; returns it.
  std::shared_ptr<Job> Add(Operation operation, absl::Time when, int company = 0) {
    std::shared_ptr<Job> job = t::NewJob(std::move(operation))->job;
    job->enqueue_time = when;
    CompatibilityKey key = CompatibilityKey::For(job->operation);
    const uint64_t own = OperationBytes(job->operation) - SharedOperandBytes(job->operation);
    queue_.Add(job, std::move(key), own, company);
    return job;
  }

  std::unique_ptr<Batch> Take(absl::Time now, bool idle) {
    return queue_.Take(now, idle, device_, [](const Batch&) { return true; });
  }

  static std::vector<float> Tags(const Batch& batch) {
    std::vector<float> tags;
    for (const auto& job : batch.jobs) tags.push_back(t::TagOf(job->operation));
    return tags;
  }

  BatchQueue queue_;
  t::TestDevice device_{"test:0"};
};

TEST_F(BatchQueueTest, AnIdleDeviceTakesAnOpenBatchAtOnceABusyOneOnlyWhenDue) {
  Add(t::ScanOf(kF32, {3}, 1), kT0);
  EXPECT_TRUE(queue_.HasRunnable(kT0, /*idle=*/true));
  EXPECT_FALSE(queue_.HasRunnable(kT0, /*idle=*/false));
  EXPECT_EQ(queue_.NextDueTime(), kT0 + kDelay);
  EXPECT_EQ(Take(kT0, /*idle=*/false), nullptr);
  EXPECT_TRUE(queue_.HasRunnable(kT0 + kDelay, /*idle=*/false));

  std::unique_ptr<Batch> batch = Take(kT0, /*idle=*/true);
  ASSERT_NE(batch, nullptr);
  EXPECT_EQ(Tags(*batch), std::vector<float>({1}));
  EXPECT_EQ(batch->jobs[0]->waiting_in, nullptr);
  EXPECT_TRUE(queue_.empty());
  EXPECT_EQ(queue_.NextDueTime(), absl::InfiniteFuture());
}

TEST_F(BatchQueueTest, ABatchClosesAtMaxBatchSizeAndABusyDeviceTakesIt) {
  for (int i = 0; i < 6; ++i) Add(t::ScanOf(kF32, {3}, i), kT0);
  EXPECT_EQ(queue_.job_count(), 6u);
  // The first four closed the batch; the other two opened the next.
  EXPECT_TRUE(queue_.HasRunnable(kT0, /*idle=*/false));
  std::unique_ptr<Batch> first = Take(kT0, /*idle=*/false);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(Tags(*first), std::vector<float>({0, 1, 2, 3}));
  EXPECT_FALSE(queue_.HasRunnable(kT0, /*idle=*/false));
  std::unique_ptr<Batch> second = Take(kT0, /*idle=*/true);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(Tags(*second), std::vector<float>({4, 5}));
}

TEST(BatchQueueBytesTest, AJobThatWouldPassMaxBatchBytesStartsTheNextBatch) {
  const Operation one = t::ScanOf(kF32, {8}, 0);
  const uint64_t job_bytes = OperationBytes(one);
  BatchQueue queue(BatchLimits{64, 2 * job_bytes + job_bytes / 2, kDelay});
  t::TestDevice device("test:0");
  for (int i = 0; i < 3; ++i) {
    std::shared_ptr<Job> job = t::NewJob(t::ScanOf(kF32, {8}, i))->job;
    job->enqueue_time = kT0;
    queue.Add(job, CompatibilityKey::For(job->operation), job_bytes);
  }
  std::unique_ptr<Batch> batch =
      queue.Take(kT0, /*idle=*/false, device, [](const Batch&) { return true; });
  ASSERT_NE(batch, nullptr);
  EXPECT_EQ(batch->jobs.size(), 2u);
  EXPECT_EQ(batch->bytes, 2 * job_bytes);
  EXPECT_EQ(queue.job_count(), 1u);
}

TEST_F(BatchQueueTest, OperationsThatCannotFuseMakeSeparateBatchesOldestFirst) {
  Add(t::ScanOf(kF32, {3}, 1), kT0);
  Add(t::ScanOf(DataType::kInt32, {3}, 2), kT0 + absl::Microseconds(1));
  Add(t::ScanOf(kF32, {3}, 3), kT0 + absl::Microseconds(2));
  std::unique_ptr<Batch> first = Take(kT0, /*idle=*/true);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(Tags(*first), std::vector<float>({1, 3}));
  std::unique_ptr<Batch> second = Take(kT0, /*idle=*/true);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(Tags(*second), std::vector<float>({2}));
}

TEST_F(BatchQueueTest, AHeldBatchWaitsForItsCompanyEvenForAnIdleDevice) {
  Add(t::ScanOf(kF32, {3}, 1), kT0, /*company=*/3);
  EXPECT_TRUE(queue_.holding(kT0));
  EXPECT_EQ(queue_.hold_end(), kT0 + kDelay);
  EXPECT_FALSE(queue_.HasRunnable(kT0, /*idle=*/true));
  EXPECT_EQ(Take(kT0, /*idle=*/true), nullptr);
  Add(t::ScanOf(kF32, {3}, 2), kT0);
  EXPECT_FALSE(queue_.HasRunnable(kT0, /*idle=*/true));
  Add(t::ScanOf(kF32, {3}, 3), kT0);  // company found
  EXPECT_FALSE(queue_.holding(kT0));
  std::unique_ptr<Batch> batch = Take(kT0, /*idle=*/true);
  ASSERT_NE(batch, nullptr);
  EXPECT_EQ(Tags(*batch), std::vector<float>({1, 2, 3}));
}

TEST_F(BatchQueueTest, AHoldEndsAtMaxQueueDelayWithoutCompany) {
  Add(t::ScanOf(kF32, {3}, 1), kT0, /*company=*/3);
  EXPECT_FALSE(queue_.HasRunnable(kT0 + kDelay - absl::Nanoseconds(1), /*idle=*/true));
  EXPECT_TRUE(queue_.HasRunnable(kT0 + kDelay, /*idle=*/true));
  EXPECT_FALSE(queue_.holding(kT0 + kDelay));
}

TEST_F(BatchQueueTest, OnlyABatchOpenedInAnEmptyQueueIsHeld) {
  Add(t::ScanOf(kF32, {3}, 1), kT0);
  Add(t::ScanOf(DataType::kInt32, {3}, 2), kT0, /*company=*/3);
  EXPECT_FALSE(queue_.holding(kT0));
}

TEST_F(BatchQueueTest, ARequeuedBatchRunsBeforeOlderOnes) {
  Add(t::ScanOf(kF32, {3}, 1), kT0);
  std::unique_ptr<Batch> failed = Take(kT0, /*idle=*/true);
  ASSERT_NE(failed, nullptr);
  Add(t::ScanOf(DataType::kInt32, {3}, 2), kT0 - absl::Seconds(1));
  queue_.Requeue(std::move(failed));
  EXPECT_EQ(queue_.job_count(), 2u);
  // Runnable even for a busy device: a requeued batch is closed.
  std::unique_ptr<Batch> batch = Take(kT0, /*idle=*/false);
  ASSERT_NE(batch, nullptr);
  EXPECT_TRUE(batch->requeued);
  EXPECT_EQ(Tags(*batch), std::vector<float>({1}));
}

TEST_F(BatchQueueTest, UpcomingBatchesAreTheFirstAnIdleDeviceWouldTakeInRunOrder) {
  auto first_tag = [this](absl::Time now) {
    BatchQueue::Upcoming upcoming = queue_.UpcomingBatches(now);
    return upcoming.empty() ? -1.0f : Tags(*upcoming.front()).front();
  };
  EXPECT_TRUE(queue_.UpcomingBatches(kT0).empty());
  // A held batch is not upcoming until its hold ends.
  Add(t::ScanOf(kF32, {3}, 1), kT0, /*company=*/3);
  EXPECT_TRUE(queue_.UpcomingBatches(kT0).empty());
  EXPECT_EQ(first_tag(kT0 + kDelay), 1);
  // An open batch behind it is (the held one skipped).
  Add(t::ScanOf(DataType::kInt32, {3}, 2), kT0);
  EXPECT_EQ(first_tag(kT0), 2);
  // A requeued batch runs before everything.
  std::unique_ptr<Batch> failed = Take(kT0, /*idle=*/true);
  ASSERT_NE(failed, nullptr);
  queue_.Requeue(std::move(failed));
  ASSERT_FALSE(queue_.UpcomingBatches(kT0).empty());
  EXPECT_TRUE(queue_.UpcomingBatches(kT0).front()->requeued);
  // The upcoming order is Take's order.
  for (const Batch* upcoming : queue_.UpcomingBatches(kT0 + kDelay)) {
    EXPECT_EQ(Take(kT0 + kDelay, /*idle=*/true).get(), upcoming);
  }
}

TEST_F(BatchQueueTest, ABatchThatFilledFirstDoesNotRunBeforeAnOlderOne) {
  // Batches close as they fill (4 jobs here), not in age order: the younger
  // int32 batch fills first, yet the older float one is upcoming first.
  Add(t::ScanOf(kF32, {3}, 1), kT0);
  for (int i = 0; i < 4; ++i) Add(t::ScanOf(DataType::kInt32, {3}, 10 + i), kT0 + kDelay / 2);
  for (int i = 0; i < 3; ++i) Add(t::ScanOf(kF32, {3}, 2 + i), kT0 + kDelay / 2);
  BatchQueue::Upcoming upcoming = queue_.UpcomingBatches(kT0 + kDelay / 2);
  ASSERT_EQ(upcoming.size(), 2u);
  EXPECT_EQ(Tags(*upcoming[0]), std::vector<float>({1, 2, 3, 4}));
  EXPECT_EQ(Tags(*upcoming[1]), std::vector<float>({10, 11, 12, 13}));
  EXPECT_EQ(Take(kT0 + kDelay / 2, /*idle=*/false).get(), upcoming[0]);
}

TEST_F(BatchQueueTest, ADevicePrefersABatchWhoseRegisteredTensorsAreResident) {
  Add(t::MatMulOf(t::WeightB(1, "w1"), t::Scale(1)), kT0);
  Add(t::MatMulOf(t::WeightB(2, "w2"), t::Scale(1)), kT0 + absl::Microseconds(1));
  device_.MakeResident("w2");
  std::unique_ptr<Batch> batch = Take(kT0, /*idle=*/true);
  ASSERT_NE(batch, nullptr);
  EXPECT_EQ(batch->key.registered_ids(), std::vector<std::string>({"w2"}));
}

TEST_F(BatchQueueTest, RemovingACancelledJobLeavesTheRestAndDropsAnEmptyBatch) {
  std::shared_ptr<Job> a = Add(t::ScanOf(kF32, {3}, 1), kT0);
  std::shared_ptr<Job> b = Add(t::ScanOf(kF32, {3}, 2), kT0);
  EXPECT_EQ(queue_.Remove(a.get()), a);
  EXPECT_EQ(queue_.Remove(a.get()), nullptr);  // no longer waiting
  EXPECT_EQ(queue_.job_count(), 1u);
  EXPECT_EQ(queue_.Remove(b.get()), b);
  EXPECT_TRUE(queue_.empty());
  EXPECT_FALSE(queue_.HasRunnable(kT0, /*idle=*/true));
}

TEST_F(BatchQueueTest, CloseAllLetsABusyDeviceTakeEverythingAtOnce) {
  Add(t::ScanOf(kF32, {3}, 1), kT0, /*company=*/3);
  queue_.CloseAll();
  EXPECT_FALSE(queue_.holding(kT0));
  EXPECT_TRUE(queue_.HasRunnable(kT0, /*idle=*/false));
  Add(t::ScanOf(DataType::kInt32, {3}, 2), kT0);  // closed as it arrives
  EXPECT_NE(Take(kT0, /*idle=*/false), nullptr);
  EXPECT_NE(Take(kT0, /*idle=*/false), nullptr);
  EXPECT_TRUE(queue_.empty());
}

TEST_F(BatchQueueTest, ADeviceThatServesASubsetSeesOnlyItsOperators) {
  Add(t::ScanOf(kF32, {3}, 1), kT0);
  Add(t::MatMulOf(t::WeightB(1), t::Scale(1)), kT0 + absl::Microseconds(50));
  const OperatorSet matmuls =
      OperatorSet().set(static_cast<size_t>(OperatorKind::kQuantizedLinearMatrixMultiply));
  const OperatorSet products =
      OperatorSet().set(static_cast<size_t>(OperatorKind::kCumulativeProduct));

  EXPECT_TRUE(queue_.HasRunnable(kT0, /*idle=*/true, matmuls));
  EXPECT_FALSE(queue_.HasRunnable(kT0, /*idle=*/true, products));
  EXPECT_EQ(queue_.NextDueTime(matmuls), kT0 + absl::Microseconds(50) + kDelay);
  EXPECT_EQ(queue_.NextDueTime(products), absl::InfiniteFuture());
  // Due for a busy device only when its own batch is.
  EXPECT_FALSE(queue_.HasRunnable(kT0 + kDelay, /*idle=*/false, matmuls));
  EXPECT_TRUE(queue_.HasRunnable(kT0 + kDelay + absl::Microseconds(50), false, matmuls));

  std::vector<std::shared_ptr<Job>> removed =
      queue_.RemoveAll(OperatorKind::kQuantizedLinearMatrixMultiply);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(KindOf(removed[0]->operation), OperatorKind::kQuantizedLinearMatrixMultiply);
  EXPECT_EQ(removed[0]->waiting_in, nullptr);
  EXPECT_EQ(queue_.job_count(), 1u);
  EXPECT_FALSE(queue_.HasRunnable(kT0, /*idle=*/true, matmuls));
}

TEST(BatchQueueLimitsTest, LimitsBelowTheirMinimumAreRaisedToIt) {
  BatchQueue queue(BatchLimits{0, 0, -absl::Seconds(1)});
  t::TestDevice device("test:0");
  std::shared_ptr<Job> job = t::NewJob(t::ScanOf(kF32, {3}, 1))->job;
  job->enqueue_time = kT0;
  queue.Add(job, CompatibilityKey::For(job->operation), 12);
  // One job fills a batch of at most one, which a busy device may take.
  EXPECT_TRUE(queue.HasRunnable(kT0, /*idle=*/false));
}

#if DMLSERVE_CHECK_CONTRACTS
// The test build checks the written contracts (kernels/core/check.h).
TEST(BatchQueueContractsTest, RequeueingAnEmptyBatchStopsTheProcess) {
  BatchQueue queue(BatchLimits{});
  std::shared_ptr<Job> job = t::NewJob(t::ScanOf(kF32, {3}, 1))->job;
  EXPECT_DEATH(queue.Requeue(std::make_unique<Batch>(CompatibilityKey::For(job->operation))),
               "DMLSERVE_DCHECK failed: batch != nullptr && !batch->jobs.empty\\(\\)");
}
#endif

}  // namespace
}  // namespace dmlserve
