#include "server/device_events_log.h"

#include "absl/strings/str_cat.h"
#include "server/platform/log.h"

namespace dmlserve {

void DeviceEventsLog::OnQueueDepth(int depth) {
  if (next_ != nullptr) next_->OnQueueDepth(depth);
}

void DeviceEventsLog::OnJobStarted(OperatorKind kind, absl::Duration queue_duration) {
  if (next_ != nullptr) next_->OnJobStarted(kind, queue_duration);
}

void DeviceEventsLog::OnBatchExecuted(OperatorKind kind, absl::string_view device, int batch_size,
                                      absl::Duration compute_duration) {
  if (next_ != nullptr) next_->OnBatchExecuted(kind, device, batch_size, compute_duration);
}

void DeviceEventsLog::OnDeviceRemoved(absl::string_view device, int devices_left) {
  LogWarning(absl::StrCat("device ", device, " failed and was removed from rotation; ",
                          devices_left, " device(s) still serve"));
  if (next_ != nullptr) next_->OnDeviceRemoved(device, devices_left);
}

void DeviceEventsLog::OnDeviceRecovered(absl::string_view device, int devices_serving) {
  LogInfo(absl::StrCat("device ", device, " recovered; ", devices_serving, " device(s) serve"));
  if (next_ != nullptr) next_->OnDeviceRecovered(device, devices_serving);
}

}  // namespace dmlserve
