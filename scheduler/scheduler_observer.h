#ifndef DMLSERVE_SCHEDULER_SCHEDULER_OBSERVER_H_
#define DMLSERVE_SCHEDULER_SCHEDULER_OBSERVER_H_

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
};

}  // namespace dmlserve

#endif  // DMLSERVE_SCHEDULER_SCHEDULER_OBSERVER_H_
