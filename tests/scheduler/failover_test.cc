// Where the jobs of a failed batch go (scheduler/failover.h), on one thread:
// FailOver works on a DevicePool and a BatchQueue as the scheduler holds
// them under its mutex, after it marked the batch's device failed.

#include "scheduler/failover.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/scheduler/test_device.h"
#include "tests/scheduler/test_jobs.h"

namespace dmlserve {
namespace {

using ::dmlserve::testing::NewJob;
using ::dmlserve::testing::ScanOf;
using ::dmlserve::testing::TestDevicePool;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

constexpr OperatorKind kSum = OperatorKind::kCumulativeSummation;
constexpr OperatorKind kProduct = OperatorKind::kCumulativeProduct;

class Listener : public JobCancellationListener {
 public:
  void OnJobCancelled(Job&) override {}
};

// A batch of scans of `kind`, with the failed attempts each job has behind it.
std::unique_ptr<Batch> BatchOf(OperatorKind kind, std::vector<int> failed_attempts) {
  std::unique_ptr<Batch> batch;
  for (int attempts : failed_attempts) {
    auto submitted = NewJob(ScanOf(DataType::kFloat32, {4}, 1.0f, 0, kind));
    submitted->job->failed_attempts = attempts;
    if (batch == nullptr)
      batch = std::make_unique<Batch>(CompatibilityKey::For(submitted->operation));
    batch->Add(submitted->job, 16);
  }
  return batch;
}

void Enqueue(BatchQueue& queue, OperatorKind kind) {
  auto submitted = NewJob(ScanOf(DataType::kFloat32, {8}, 2.0f, 0, kind));
  submitted->job->enqueue_time = absl::UnixEpoch();
  queue.Add(submitted->job, CompatibilityKey::For(submitted->operation), 32);
}

const absl::Status kFailure = absl::InternalError("fence lost");

TEST(FailOverTest, ABatchMovesToTheHeadOfTheQueueCountingAnAttempt) {
  TestDevicePool devices(2, 0);
  DevicePool* pool = devices.pool.get();
  ASSERT_TRUE(pool->MarkFailed(pool->at(0), kFailure));
  BatchQueue queue(BatchLimits{});
  Enqueue(queue, kProduct);
  Listener listener;
  std::vector<UnrunJob> unrun;
  std::unique_ptr<Batch> batch = BatchOf(kSum, {0, 0});
  std::vector<Job*> jobs = {batch->jobs[0].get(), batch->jobs[1].get()};
  FailOver(std::move(batch), kFailure, /*max_attempts=*/2, &listener, *pool, queue, unrun);

  EXPECT_THAT(unrun, IsEmpty());
  EXPECT_EQ(queue.job_count(), 3u);
  for (Job* job : jobs) {
    EXPECT_EQ(job->failed_attempts, 1);
    EXPECT_EQ(job->cancellation_listener.load(), &listener);  // cancellable again
  }
  // Requeued ahead of the older waiting batch.
  std::unique_ptr<Batch> next = queue.Take(absl::UnixEpoch() + absl::Hours(1), /*idle=*/true,
                                           *pool->at(1).device, [](const Batch&) { return true; });
  ASSERT_NE(next, nullptr);
  EXPECT_EQ(next->key.kind(), kSum);
  EXPECT_TRUE(next->requeued);
  EXPECT_THAT(next->jobs, SizeIs(2));
}

TEST(FailOverTest, AJobWhoseBatchFailedOnMaxAttemptsDevicesFailsAndTheRestMoveOn) {
  TestDevicePool devices(3, 0);
  DevicePool* pool = devices.pool.get();
  ASSERT_TRUE(pool->MarkFailed(pool->at(0), kFailure));
  BatchQueue queue(BatchLimits{});
  Listener listener;
  std::vector<UnrunJob> unrun;
  FailOver(BatchOf(kSum, {1, 0}), kFailure, /*max_attempts=*/2, &listener, *pool, queue, unrun);

  ASSERT_THAT(unrun, SizeIs(1));
  EXPECT_EQ(unrun[0].job->failed_attempts, 1);
  EXPECT_EQ(unrun[0].status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(unrun[0].status.message(),
              HasSubstr("its batch failed on 2 devices (--max_batch_attempts), the last: "
                        "fence lost"));
  EXPECT_EQ(queue.job_count(), 1u);
}

TEST(FailOverTest, FallbacksTakeABatchWhateverItCostOnceEveryPrimaryIsGone) {
  TestDevicePool devices(1, 1);
  DevicePool* pool = devices.pool.get();
  ASSERT_TRUE(pool->MarkFailed(pool->at(0), kFailure));
  ASSERT_TRUE(pool->FallbacksServe(kSum));
  BatchQueue queue(BatchLimits{});
  Listener listener;
  std::vector<UnrunJob> unrun;
  FailOver(BatchOf(kSum, {5}), kFailure, /*max_attempts=*/2, &listener, *pool, queue, unrun);

  EXPECT_THAT(unrun, IsEmpty());
  EXPECT_EQ(queue.job_count(), 1u);
}

TEST(FailOverTest, WithNoDeviceLeftTheBatchAndEveryWaitingJobFail) {
  TestDevicePool devices(1, 0);
  DevicePool* pool = devices.pool.get();
  ASSERT_TRUE(pool->MarkFailed(pool->at(0), kFailure));
  BatchQueue queue(BatchLimits{});
  Enqueue(queue, kSum);
  Enqueue(queue, kProduct);
  Listener listener;
  std::vector<UnrunJob> unrun;
  FailOver(BatchOf(kSum, {0, 0}), kFailure, /*max_attempts=*/2, &listener, *pool, queue, unrun);

  ASSERT_THAT(unrun, SizeIs(4));
  for (const UnrunJob& job : unrun) {
    EXPECT_EQ(job.status.code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(job.status.message(), HasSubstr("no healthy device left: p0 failed: INTERNAL: "
                                                "fence lost"));
  }
  EXPECT_TRUE(queue.empty());
}

TEST(FailOverTest, InAMixedPoolWaitingJobsOfAnOperatorNoDeviceRunsAnyMoreFail) {
  // p0 runs sums, p1 products; p1 fails.
  TestDevicePool devices(2, 0, 1, {{kSum}, {kProduct}});
  DevicePool* pool = devices.pool.get();
  ASSERT_TRUE(pool->MarkFailed(pool->at(1), kFailure));
  BatchQueue queue(BatchLimits{});
  Enqueue(queue, kSum);
  Enqueue(queue, kProduct);
  Listener listener;
  std::vector<UnrunJob> unrun;
  FailOver(BatchOf(kProduct, {0}), kFailure, /*max_attempts=*/2, &listener, *pool, queue, unrun);

  // The failed batch and the waiting product fail; the sum still waits.
  ASSERT_THAT(unrun, SizeIs(2));
  for (const UnrunJob& job : unrun) {
    EXPECT_THAT(job.status.message(),
                HasSubstr("no healthy device left that runs cumulative_product: p1 failed"));
  }
  EXPECT_EQ(queue.job_count(), 1u);
}

}  // namespace
}  // namespace dmlserve
