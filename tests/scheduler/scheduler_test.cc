#include "scheduler/scheduler.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/core/operation.h"
#include "scheduler/compatibility_key.h"
#include "tests/reference/reference.h"
#include "tests/scheduler/test_device.h"
#include "tests/scheduler/test_jobs.h"

namespace dmlserve {
namespace {

using ::dmlserve::testing::MatMulOf;
using ::dmlserve::testing::NewJob;
using ::dmlserve::testing::Scale;
using ::dmlserve::testing::ScanOf;
using ::dmlserve::testing::Submitted;
using ::dmlserve::testing::TagOf;
using ::dmlserve::testing::TestDevice;
using ::dmlserve::testing::WeightB;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

constexpr DataType kF32 = DataType::kFloat32;

class RecordingObserver : public SchedulerObserver {
 public:
  void OnQueueDepth(int depth) override {
    absl::MutexLock lock(&mu_);
    depths_.push_back(depth);
  }
  void OnJobStarted(OperatorKind, absl::Duration) override {
    absl::MutexLock lock(&mu_);
    ++jobs_started_;
  }
  void OnBatchExecuted(OperatorKind, absl::string_view device, int batch_size,
                       absl::Duration) override {
    absl::MutexLock lock(&mu_);
    batches_.emplace_back(std::string(device), batch_size);
  }
  void OnDeviceRemoved(absl::string_view device, int devices_left) override {
    bool first;
    {
      absl::MutexLock lock(&mu_);
      removed_.emplace_back(device);
      devices_left_.push_back(devices_left);
      // Decided under the lock: two devices may fail at once, on two threads,
      // and a Notification may be notified only once.
      first = removed_.size() == 1;
    }
    if (first) device_removed_.Notify();
  }

  void OnDeviceRecovered(absl::string_view device, int devices_serving) override {
    absl::MutexLock lock(&mu_);
    recovered_.emplace_back(device);
    devices_serving_.push_back(devices_serving);
  }
  std::vector<std::string> recovered() const {
    absl::MutexLock lock(&mu_);
    return recovered_;
  }
  std::vector<int> devices_serving() const {
    absl::MutexLock lock(&mu_);
    return devices_serving_;
  }

  bool AwaitDeviceRemoved() {
    return device_removed_.WaitForNotificationWithTimeout(absl::Seconds(60));
  }
  std::vector<int> depths() const {
    absl::MutexLock lock(&mu_);
    return depths_;
  }
  int jobs_started() const {
    absl::MutexLock lock(&mu_);
    return jobs_started_;
  }
  std::vector<std::pair<std::string, int>> batches() const {
    absl::MutexLock lock(&mu_);
    return batches_;
  }
  std::vector<std::string> removed() const {
    absl::MutexLock lock(&mu_);
    return removed_;
  }
  std::vector<int> devices_left() const {
    absl::MutexLock lock(&mu_);
    return devices_left_;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<int> depths_ ABSL_GUARDED_BY(mu_);
  int jobs_started_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::pair<std::string, int>> batches_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> removed_ ABSL_GUARDED_BY(mu_);
  std::vector<int> devices_left_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> recovered_ ABSL_GUARDED_BY(mu_);
  std::vector<int> devices_serving_ ABSL_GUARDED_BY(mu_);
  absl::Notification device_removed_;
};

// Builds a scheduler over test devices and keeps pointers to them.
class SchedulerTest : public ::testing::Test {
 protected:
  // `serve_only[i]`, when given, is what device i runs (Device::Supports).
  void Start(SchedulerOptions options, int device_count = 1, int inflight = 1,
             std::vector<std::vector<OperatorKind>> serve_only = {}) {
    std::vector<std::unique_ptr<Device>> devices;
    for (int i = 0; i < device_count; ++i) {
      auto device = std::make_unique<TestDevice>(absl::StrCat("test:", i), inflight);
      if (i < static_cast<int>(serve_only.size())) device->ServeOnly(serve_only[i]);
      devices_.push_back(device.get());
      devices.push_back(std::move(device));
    }
    scheduler_ = std::make_unique<Scheduler>(options, std::move(devices), &observer_);
  }

  std::shared_ptr<Submitted> Submit(Operation operation,
                                    absl::Time deadline = absl::InfiniteFuture()) {
    std::shared_ptr<Submitted> submitted = NewJob(std::move(operation), deadline);
    absl::Status status = scheduler_->Submit(submitted->job);
    EXPECT_TRUE(status.ok()) << status;
    return submitted;
  }

  // Occupies device 0 (held) with a job of its own, so that what is submitted
  // next waits in the queue until Release(). The blocker's batch must close
  // at once: with a queue delay, give it more elements than max_batch_bytes.
  std::shared_ptr<Submitted> OccupyDevice(uint32_t elements = 1) {
    devices_[0]->Hold();
    std::shared_ptr<Submitted> blocker = Submit(ScanOf(DataType::kInt32, {elements}, -1));
    devices_[0]->AwaitEntered(1);
    return blocker;
  }

  // Device 0 of two fails its next batch: two batches of different types are
  // submitted while device 1 is held, so device 1 takes one and device 0
  // gets the other and fails; then device 1 is released. Returns both jobs,
  // finished.
  std::vector<std::shared_ptr<Submitted>> FailDevice0UnderTwoBatches() {
    devices_[0]->FailNext(1);
    devices_[1]->Hold();
    std::vector<std::shared_ptr<Submitted>> jobs = {Submit(ScanOf(kF32, {4}, 1)),
                                                    Submit(ScanOf(DataType::kInt32, {4}, 2))};
    EXPECT_TRUE(observer_.AwaitDeviceRemoved());
    devices_[1]->Release();
    for (auto& job : jobs) EXPECT_TRUE(job->Await());
    return jobs;
  }

  // The tags of every batch a device ran, in order.
  static std::vector<std::vector<float>> Tags(const std::vector<std::vector<Operation>>& batches) {
    std::vector<std::vector<float>> tags;
    for (const auto& batch : batches) {
      tags.emplace_back();
      for (const Operation& operation : batch) tags.back().push_back(TagOf(operation));
    }
    return tags;
  }

  static void ExpectCorrectScan(Submitted& submitted) {
    ASSERT_TRUE(submitted.result.status.ok()) << submitted.result.status;
    const Tensor expected = reference::ComputeScan(std::get<ScanOperation>(submitted.operation));
    const Tensor& output = submitted.result.output;
    EXPECT_EQ(output.data_type, expected.data_type);
    EXPECT_EQ(output.sizes, expected.sizes);
    ASSERT_EQ(output.byte_size(), expected.byte_size());
    EXPECT_EQ(std::memcmp(output.data(), expected.data(), expected.byte_size()), 0);
  }

  RecordingObserver observer_;
  std::vector<TestDevice*> devices_;  // owned by scheduler_
  std::unique_ptr<Scheduler> scheduler_;
};

SchedulerOptions Options(int max_batch_size = 64, absl::Duration delay = absl::ZeroDuration()) {
  SchedulerOptions options;
  options.batch.max_batch_size = max_batch_size;
  options.batch.max_queue_delay = delay;
  return options;
}

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

// --- Waiting for company (Device::PreferredCompany) under sustained load ---
// Here through the scheduler's threads, for what happens; when each decision
// falls, to the microsecond, is dispatch_policy_test's, on a fake clock.

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
