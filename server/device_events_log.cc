#include "server/device_events_log.h"

#include "absl/strings/str_cat.h"
#include "server/platform/log.h"

namespace dmlserve {

void DeviceEventsLog::OnDeviceRemoved(absl::string_view device, int devices_left) {
  LogWarning(absl::StrCat("device ", device, " failed and was removed from rotation; ",
                          devices_left, " device(s) still serve"));
  ForwardingSchedulerObserver::OnDeviceRemoved(device, devices_left);
}

void DeviceEventsLog::OnDeviceRecovered(absl::string_view device, int devices_serving) {
  LogInfo(absl::StrCat("device ", device, " recovered; ", devices_serving, " device(s) serve"));
  ForwardingSchedulerObserver::OnDeviceRecovered(device, devices_serving);
}

void DeviceEventsLog::OnDeviceRecoveryFailed(absl::string_view device, const absl::Status& status) {
  LogWarning(absl::StrCat("device ", device, " did not recover: ", status.ToString(),
                          "; probed again later"));
  ForwardingSchedulerObserver::OnDeviceRecoveryFailed(device, status);
}

}  // namespace dmlserve
