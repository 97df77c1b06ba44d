#ifndef DMLSERVE_SERVER_DEVICE_EVENTS_LOG_H_
#define DMLSERVE_SERVER_DEVICE_EVENTS_LOG_H_

// Writes devices leaving and rejoining rotation to the server log (and so to
// the Windows event log when it runs as a service): an operator must see a
// GPU removed even when others still serve. Forwards every event to `next`.

#include "absl/strings/string_view.h"
#include "scheduler/scheduler_observer.h"

namespace dmlserve {

class DeviceEventsLog final : public ForwardingSchedulerObserver {
 public:
  // `next` may be null; it must outlive this.
  explicit DeviceEventsLog(SchedulerObserver* next) : ForwardingSchedulerObserver(next) {}

  void OnDeviceRemoved(absl::string_view device, int devices_left) override;
  void OnDeviceRecovered(absl::string_view device, int devices_serving) override;
  void OnDeviceRecoveryFailed(absl::string_view device, const absl::Status& status) override;
};

}  // namespace dmlserve

#endif  // DMLSERVE_SERVER_DEVICE_EVENTS_LOG_H_
