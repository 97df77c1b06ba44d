#ifndef DMLSERVE_TESTS_SCHEDULER_SCHEDULER_FIXTURE_H_
#define DMLSERVE_TESTS_SCHEDULER_SCHEDULER_FIXTURE_H_

// The fixture of the Scheduler's tests (scheduler_*_test.cc): SchedulerTest
// runs a Scheduler over TestDevices it keeps pointers to, with helpers to
// submit, hold a device busy, fail one and check a scan's answer; and the
// RecordingObserver it reports to. Defined once for all of those files, since
// GoogleTest requires every test of a suite to use the same fixture class.

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "kernels/core/operation.h"
#include "scheduler/scheduler.h"
#include "tests/scheduler/test_device.h"
#include "tests/scheduler/test_jobs.h"

namespace dmlserve::testing {

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
             std::vector<std::vector<OperatorKind>> serve_only = {});

  std::shared_ptr<Submitted> Submit(Operation operation,
                                    absl::Time deadline = absl::InfiniteFuture());

  // Occupies device 0 (held) with a job of its own, so that what is submitted
  // next waits in the queue until Release(). The blocker's batch must close
  // at once: with a queue delay, give it more elements than max_batch_bytes.
  std::shared_ptr<Submitted> OccupyDevice(uint32_t elements = 1);

  // Device 0 of two fails its next batch: two batches of different types are
  // submitted while device 1 is held, so device 1 takes one and device 0
  // gets the other and fails; then device 1 is released. Returns both jobs,
  // finished.
  std::vector<std::shared_ptr<Submitted>> FailDevice0UnderTwoBatches();

  // The tags of every batch a device ran, in order.
  static std::vector<std::vector<float>> Tags(const std::vector<std::vector<Operation>>& batches);

  static void ExpectCorrectScan(Submitted& submitted);

  static SchedulerOptions Options(int max_batch_size = 64,
                                  absl::Duration delay = absl::ZeroDuration());

  RecordingObserver observer_;
  std::vector<TestDevice*> devices_;  // owned by scheduler_
  std::unique_ptr<Scheduler> scheduler_;
};

}  // namespace dmlserve::testing

#endif  // DMLSERVE_TESTS_SCHEDULER_SCHEDULER_FIXTURE_H_
