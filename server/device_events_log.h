#ifndef DMLSERVE_SERVER_DEVICE_EVENTS_LOG_H_
#define DMLSERVE_SERVER_DEVICE_EVENTS_LOG_H_

// Writes devices leaving and rejoining rotation to the server log (and so to
// the Windows event log when it runs as a service): an operator must see a
// GPU removed even when others still serve. Forwards every event to `next`.

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "scheduler/scheduler_observer.h"

namespace dmlserve {

class DeviceEventsLog final : public SchedulerObserver {
 public:
  // `next` may be null; it must outlive this.
  explicit DeviceEventsLog(SchedulerObserver* next) : next_(next) {}

  void OnQueueDepth(int depth) override;
  void OnJobStarted(OperatorKind kind, absl::Duration queue_duration) override;
  void OnBatchExecuted(OperatorKind kind, absl::string_view device, int batch_size,
                       absl::Duration compute_duration) override;
  void OnDeviceRemoved(absl::string_view device, int devices_left) override;
  void OnDeviceRecovered(absl::string_view device, int devices_serving) override;

 private:
  SchedulerObserver* const next_;
};

}  // namespace dmlserve

#endif  // DMLSERVE_SERVER_DEVICE_EVENTS_LOG_H_
