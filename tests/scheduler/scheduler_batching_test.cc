// How the Scheduler forms batches: which jobs share one (compatibility, byte
// caps), when an open batch starts (delays, idle or busy devices), and cheap
// jobs run and fused on the submitting thread, their answers delivered after.

#include <cstdint>
#include <memory>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/core/operation.h"
#include "scheduler/scheduler.h"
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
using ::testing::UnorderedElementsAre;

constexpr DataType kF32 = DataType::kFloat32;

TEST_F(SchedulerTest, BatchesJobsThatQueueBehindABusyDevice) {
  Start(Options(/*max_batch_size=*/4));
  auto blocker = OccupyDevice();
  std::vector<std::shared_ptr<Submitted>> jobs;
  for (int i = 0; i < 10; ++i) jobs.push_back(Submit(ScanOf(kF32, {3}, 10.0f * i)));
  devices_[0]->Release();

  ASSERT_TRUE(blocker->Await());
  for (auto& job : jobs) {
    ASSERT_TRUE(job->Await());
    ExpectCorrectScan(*job);
  }
  // The blocker alone, then the ten queued jobs in submission order, in
  // batches of at most four.
  const auto tags = Tags(devices_[0]->executed());
  ASSERT_EQ(tags.size(), 4u);
  EXPECT_THAT(tags[1], ElementsAre(0, 10, 20, 30));
  EXPECT_THAT(tags[2], ElementsAre(40, 50, 60, 70));
  EXPECT_THAT(tags[3], ElementsAre(80, 90));
  EXPECT_EQ(jobs[0]->result.info.batch_size, 4u);
  EXPECT_EQ(jobs[9]->result.info.batch_size, 2u);
  EXPECT_EQ(jobs[9]->result.info.device, "test:0");
}

TEST_F(SchedulerTest, ScansOfDifferentShapesAndAxesShareABatch) {
  Start(Options());
  auto blocker = OccupyDevice();
  std::vector<std::shared_ptr<Submitted>> jobs = {
      Submit(ScanOf(kF32, {2, 3}, 1, /*axis=*/0)),
      Submit(ScanOf(kF32, {2, 3}, 2, /*axis=*/1)),
      Submit(ScanOf(kF32, {4, 1, 5}, 3, /*axis=*/2)),
      Submit(ScanOf(kF32, {7}, 4, /*axis=*/0)),
  };
  devices_[0]->Release();
  for (auto& job : jobs) {
    ASSERT_TRUE(job->Await());
    ExpectCorrectScan(*job);
    EXPECT_EQ(job->result.info.batch_size, 4u);
  }
  EXPECT_THAT(Tags(devices_[0]->executed()), ElementsAre(ElementsAre(-1), ElementsAre(1, 2, 3, 4)));
}

TEST_F(SchedulerTest, IncompatibleScansNeverShareABatch) {
  Start(Options());
  auto blocker = OccupyDevice();
  std::vector<std::shared_ptr<Submitted>> jobs = {
      Submit(ScanOf(kF32, {4}, 1)),
      Submit(ScanOf(DataType::kInt32, {4}, 2)),
      Submit(ScanOf(kF32, {4}, 3, 0, OperatorKind::kCumulativeProduct)),
      Submit(
          ScanOf(kF32, {4}, 4, 0, OperatorKind::kCumulativeSummation, AxisDirection::kDecreasing)),
      Submit(ScanOf(kF32, {4}, 5, 0, OperatorKind::kCumulativeSummation, AxisDirection::kIncreasing,
                    /*exclusive=*/true)),
      Submit(ScanOf(kF32, {4}, 6)),  // joins the first
  };
  devices_[0]->Release();
  for (auto& job : jobs) {
    ASSERT_TRUE(job->Await());
    ExpectCorrectScan(*job);
  }
  auto tags = Tags(devices_[0]->executed());
  tags.erase(tags.begin());  // the blocker
  EXPECT_THAT(tags, UnorderedElementsAre(ElementsAre(1, 6), ElementsAre(2), ElementsAre(3),
                                         ElementsAre(4), ElementsAre(5)));
}

TEST_F(SchedulerTest, MatMulsShareABatchOnlyWithTheSameB) {
  Start(Options());
  auto blocker = OccupyDevice();
  std::vector<std::shared_ptr<Submitted>> jobs = {
      Submit(MatMulOf(WeightB(1, "w1"), Scale(1), Tensor(), /*m=*/1)),
      Submit(MatMulOf(WeightB(1, "w2"), Scale(1), Tensor(), /*m=*/2)),
      Submit(MatMulOf(WeightB(1, "w1"), Scale(1), Tensor(), /*m=*/3)),
      Submit(MatMulOf(WeightB(1), Scale(1), Tensor(), /*m=*/4)),
      Submit(MatMulOf(WeightB(2), Scale(1), Tensor(), /*m=*/5)),
      Submit(MatMulOf(WeightB(1), Scale(1), Tensor(), /*m=*/6)),
      Submit(MatMulOf(WeightB(1, "w1"), Scale(2), Tensor(), /*m=*/7)),
  };
  devices_[0]->Release();
  for (auto& job : jobs) {
    ASSERT_TRUE(job->Await());
    ASSERT_TRUE(job->result.status.ok()) << job->result.status;
  }
  // Each batch as the M of its jobs (M tags the job here).
  std::vector<std::vector<uint32_t>> batches;
  for (const auto& batch : devices_[0]->executed()) {
    if (!std::holds_alternative<QuantizedMatMulOperation>(batch[0])) continue;
    batches.emplace_back();
    for (const Operation& operation : batch) {
      batches.back().push_back(std::get<QuantizedMatMulOperation>(operation).m);
    }
  }
  EXPECT_THAT(batches, UnorderedElementsAre(ElementsAre(1, 3), ElementsAre(2), ElementsAre(4, 6),
                                            ElementsAre(5), ElementsAre(7)));
}

TEST_F(SchedulerTest, MaxBatchBytesCapsABatch) {
  const uint64_t job_bytes = OperationBytes(ScanOf(kF32, {8}, 0));
  SchedulerOptions options = Options();
  options.batch.max_batch_bytes = 2 * job_bytes + job_bytes / 2;
  Start(options);
  auto blocker = OccupyDevice();
  std::vector<std::shared_ptr<Submitted>> jobs;
  for (int i = 1; i <= 5; ++i) jobs.push_back(Submit(ScanOf(kF32, {8}, i)));
  devices_[0]->Release();
  for (auto& job : jobs) {
    ASSERT_TRUE(job->Await());
    ExpectCorrectScan(*job);
  }
  EXPECT_THAT(Tags(devices_[0]->executed()),
              ElementsAre(ElementsAre(-1), ElementsAre(1, 2), ElementsAre(3, 4), ElementsAre(5)));
}

TEST_F(SchedulerTest, AJobLargerThanTheByteCapRunsAlone) {
  SchedulerOptions options = Options();
  options.batch.max_batch_bytes = OperationBytes(ScanOf(kF32, {8}, 0)) / 2;
  Start(options);
  auto blocker = OccupyDevice();
  auto first = Submit(ScanOf(kF32, {8}, 1));
  auto second = Submit(ScanOf(kF32, {8}, 2));
  devices_[0]->Release();
  ASSERT_TRUE(first->Await());
  ASSERT_TRUE(second->Await());
  ExpectCorrectScan(*first);
  ExpectCorrectScan(*second);
  EXPECT_THAT(Tags(devices_[0]->executed()),
              ElementsAre(ElementsAre(-1), ElementsAre(1), ElementsAre(2)));
}

TEST_F(SchedulerTest, AnIdleDeviceTakesAnOpenBatchAtOnceWhateverTheDelay) {
  // The delay bounds how long a job waits for company while devices are
  // busy; it is never a toll in front of an idle device.
  Start(Options(64, absl::Hours(1)));
  auto job = Submit(ScanOf(kF32, {5}, 1));
  ASSERT_TRUE(job->Await());
  ExpectCorrectScan(*job);
  EXPECT_EQ(job->result.info.batch_size, 1u);
}

TEST_F(SchedulerTest, ALoneJobRunsAtOnceWithZeroDelay) {
  Start(Options(64, absl::ZeroDuration()));
  auto job = Submit(ScanOf(kF32, {5}, 1));
  ASSERT_TRUE(job->Await());
  ExpectCorrectScan(*job);
}

TEST_F(SchedulerTest, ABusyDeviceWithRoomStartsAnOpenBatchOnceItIsDue) {
  // A device running one batch and able to run two starts the next open batch
  // when its oldest job has waited the delay, without waiting for the first.
  Start(Options(64, absl::Milliseconds(1)), /*device_count=*/1, /*inflight=*/2);
  auto blocker = OccupyDevice();
  auto next = Submit(ScanOf(kF32, {3}, 1));
  devices_[0]->AwaitEntered(2);  // while the blocker is still held
  devices_[0]->Release();
  ASSERT_TRUE(blocker->Await());
  ASSERT_TRUE(next->Await());
  ExpectCorrectScan(*next);
  EXPECT_THAT(Tags(devices_[0]->executed()), UnorderedElementsAre(ElementsAre(-1), ElementsAre(1)));
}

TEST_F(SchedulerTest, ABusyDeviceWithRoomStartsAFullBatchBeforeTheDelay) {
  Start(Options(/*max_batch_size=*/2, absl::Hours(1)), /*device_count=*/1, /*inflight=*/2);
  auto blocker = OccupyDevice();
  auto first = Submit(ScanOf(kF32, {3}, 1));
  auto second = Submit(ScanOf(kF32, {3}, 2));  // closes the batch
  devices_[0]->AwaitEntered(2);
  devices_[0]->Release();
  ASSERT_TRUE(first->Await());
  ASSERT_TRUE(second->Await());
  EXPECT_EQ(second->result.info.batch_size, 2u);
}

TEST_F(SchedulerTest, ASharedWeightDoesNotCountTowardsTheByteCap) {
  // A B larger than the whole cap: the batch holds it once however many jobs
  // use it, so four jobs still fit a cap of four A's and outputs.
  std::vector<int8_t> large(256 * 1024);
  Tensor b = ::dmlserve::testing::MakeTensor(DataType::kInt8, {256, 1024}, large);
  b.set_registered_id("w");
  auto matmul = [&b]() {
    QuantizedMatMulTensors tensors;
    tensors.a =
        ::dmlserve::testing::MakeTensor(DataType::kInt8, {1, 256}, std::vector<int8_t>(256, 1));
    tensors.a_scale = Scale(0.5f);
    tensors.b = b;
    tensors.b_scale = Scale(1.0f);
    tensors.output_scale = Scale(1.0f);
    return Operation(*MakeQuantizedMatMulOperation(std::move(tensors), DataType::kInt8));
  };
  const Operation one = matmul();
  SchedulerOptions options = Options();
  options.batch.max_batch_bytes = 4 * (OperationBytes(one) - SharedOperandBytes(one));
  ASSERT_LT(options.batch.max_batch_bytes, b.byte_size());
  Start(options);
  auto blocker = OccupyDevice();
  std::vector<std::shared_ptr<Submitted>> jobs;
  for (int i = 0; i < 5; ++i) jobs.push_back(Submit(matmul()));
  devices_[0]->Release();
  for (auto& job : jobs) ASSERT_TRUE(job->Await());
  EXPECT_EQ(jobs[0]->result.info.batch_size, 4u);
  EXPECT_EQ(jobs[4]->result.info.batch_size, 1u);
}

TEST_F(SchedulerTest, ACheapJobRunsOnTheSubmittingThreadWhenADeviceIsIdle) {
  Start(Options(64, absl::Hours(1)));
  devices_[0]->RunOnCallerThread(true);
  auto job = Submit(ScanOf(kF32, {5}, 1));
  // Already answered when Submit returns, from this thread.
  EXPECT_TRUE(job->finished.HasBeenNotified());
  ExpectCorrectScan(*job);
  EXPECT_THAT(devices_[0]->threads(), ElementsAre(std::this_thread::get_id()));
  EXPECT_EQ(observer_.jobs_started(), 1);
}

TEST_F(SchedulerTest, ACheapJobQueuesBehindABusyDevice) {
  Start(Options());
  devices_[0]->RunOnCallerThread(true);
  // The blocker runs on its own thread, since it holds the device.
  devices_[0]->Hold();
  std::shared_ptr<Submitted> blocker;
  std::thread submitter([&] { blocker = Submit(ScanOf(DataType::kInt32, {1}, -1)); });
  devices_[0]->AwaitEntered(1);
  auto queued = Submit(ScanOf(kF32, {5}, 1));
  EXPECT_FALSE(queued->finished.HasBeenNotified());
  devices_[0]->Release();
  submitter.join();
  ASSERT_TRUE(queued->Await());
  ExpectCorrectScan(*queued);
  const std::vector<std::thread::id> threads = devices_[0]->threads();
  ASSERT_EQ(threads.size(), 2u);
  EXPECT_NE(threads[1], std::this_thread::get_id());  // a device worker ran it
}

TEST_F(SchedulerTest, JobsQueuedBehindACallerRunFuseOnThatThread) {
  // While a submitting thread runs its cheap job, later ones queue; when it is
  // done it runs them too, as one batch, without handing them to a worker.
  Start(Options());
  devices_[0]->RunOnCallerThread(true);
  devices_[0]->Hold();
  std::shared_ptr<Submitted> first;
  std::thread::id caller;
  std::thread submitter([&] {
    caller = std::this_thread::get_id();
    first = Submit(ScanOf(kF32, {2}, 1));
  });
  devices_[0]->AwaitEntered(1);
  auto second = Submit(ScanOf(kF32, {2}, 2));
  auto third = Submit(ScanOf(kF32, {2}, 3));
  devices_[0]->Release();
  submitter.join();  // returns only after the queued batch ran
  ASSERT_TRUE(second->finished.HasBeenNotified());
  ASSERT_TRUE(third->finished.HasBeenNotified());
  ExpectCorrectScan(*first);
  ExpectCorrectScan(*second);
  ExpectCorrectScan(*third);
  EXPECT_THAT(Tags(devices_[0]->executed()), ElementsAre(ElementsAre(1), ElementsAre(2, 3)));
  EXPECT_THAT(devices_[0]->threads(), ElementsAre(caller, caller));
}

TEST_F(SchedulerTest, AnswersAreDeliveredOnceTheDeviceIsFree) {
  // Sending a batch's responses takes longer than computing it; meanwhile the
  // device takes the next batch, here on the thread of a job that arrives
  // while the first job's answer is being delivered.
  Start(Options());
  devices_[0]->RunOnCallerThread(true);
  std::shared_ptr<Submitted> first = NewJob(ScanOf(kF32, {2}, 1));
  std::shared_ptr<Submitted> second;
  bool second_ran_at_once = false;
  std::thread::id second_thread;
  auto deliver_first = std::move(first->job->done);
  first->job->done = [&, deliver_first = std::move(deliver_first)](JobResult result) mutable {
    std::thread arrival([&] {
      second_thread = std::this_thread::get_id();
      second = Submit(ScanOf(kF32, {2}, 2));
      second_ran_at_once = second->finished.HasBeenNotified();
    });
    arrival.join();
    deliver_first(std::move(result));
  };
  ASSERT_TRUE(scheduler_->Submit(first->job).ok());
  ASSERT_TRUE(first->finished.HasBeenNotified());
  EXPECT_TRUE(second_ran_at_once);
  ExpectCorrectScan(*first);
  ExpectCorrectScan(*second);
  EXPECT_THAT(devices_[0]->threads(), ElementsAre(std::this_thread::get_id(), second_thread));
}

}  // namespace
}  // namespace dmlserve
