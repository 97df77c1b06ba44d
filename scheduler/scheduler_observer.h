#ifndef DMLSERVE_SCHEDULER_SCHEDULER_OBSERVER_H_
#define DMLSERVE_SCHEDULER_SCHEDULER_OBSERVER_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "kernels/core/operation.h"

namespace dmlserve {

// What the scheduler reports as it works; the server turns it into metrics.
// Keeping this an interface keeps the scheduler free of any metrics library.
// Called from scheduler and device threads; implementations must be
// thread-safe and cheap.
class SchedulerObserver {
 public:
  virtual ~SchedulerObserver() = default;
  // Jobs admitted and not yet started on a device.
  virtual void OnQueueDepth(int depth) = 0;
  // A job's batch started: how long the job waited.
  virtual void OnJobStarted(OperatorKind kind, absl::Duration queue_duration) = 0;
  // A batch finished on a device (successfully or not).
  virtual void OnBatchExecuted(OperatorKind kind, absl::string_view device, int batch_size,
                               absl::Duration compute_duration) = 0;
  // A device failed and was taken out of rotation; its jobs were re-queued
  // (or failed, past SchedulerOptions::max_attempts). `devices_left` devices
  // still serve; at 0 every request fails UNAVAILABLE.
  virtual void OnDeviceRemoved(absl::string_view device, int devices_left) = 0;
  // A device taken out of rotation recovered (SchedulerOptions::
  // reprobe_interval) and serves again; `devices_serving` devices now serve.
  virtual void OnDeviceRecovered(absl::string_view device, int devices_serving) {}
  // A device out of rotation was probed and did not recover (`status` says
  // why); it is probed again after the next reprobe_interval.
  virtual void OnDeviceRecoveryFailed(absl::string_view device, const absl::Status& status) {}
};

// A link in a chain of observers: passes every event on to `next` (which
// may be null; it must outlive this). Subclasses override what they act on
// and call the base to keep forwarding.
class ForwardingSchedulerObserver : public SchedulerObserver {
 public:
  explicit ForwardingSchedulerObserver(SchedulerObserver* next) : next_(next) {}

  void OnQueueDepth(int depth) override {
    if (next_ != nullptr) next_->OnQueueDepth(depth);
  }
  void OnJobStarted(OperatorKind kind, absl::Duration queue_duration) override {
    if (next_ != nullptr) next_->OnJobStarted(kind, queue_duration);
  }
  void OnBatchExecuted(OperatorKind kind, absl::string_view device, int batch_size,
                       absl::Duration compute_duration) override {
    if (next_ != nullptr) next_->OnBatchExecuted(kind, device, batch_size, compute_duration);
  }
  void OnDeviceRemoved(absl::string_view device, int devices_left) override {
    if (next_ != nullptr) next_->OnDeviceRemoved(device, devices_left);
  }
  void OnDeviceRecovered(absl::string_view device, int devices_serving) override {
    if (next_ != nullptr) next_->OnDeviceRecovered(device, devices_serving);
  }
  void OnDeviceRecoveryFailed(absl::string_view device, const absl::Status& status) override {
    if (next_ != nullptr) next_->OnDeviceRecoveryFailed(device, status);
  }

 private:
  SchedulerObserver* const next_;
};

}  // namespace dmlserve

#endif  // DMLSERVE_SCHEDULER_SCHEDULER_OBSERVER_H_
