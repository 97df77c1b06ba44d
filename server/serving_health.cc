#include "server/serving_health.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "server/platform/log.h"

namespace dmlserve {

void ServingHealth::Attach(grpc::HealthCheckServiceInterface* health, int devices_serving) {
  absl::MutexLock lock(&mu_);
  health_ = health;
  if (devices_serving == 0) no_device_ = true;
  // Every service at once (the server's "" and each registered one).
  if (no_device_ && health_ != nullptr) health_->SetServingStatus(false);
}

void ServingHealth::Detach() {
  absl::MutexLock lock(&mu_);
  health_ = nullptr;
}

void ServingHealth::OnDeviceRemoved(absl::string_view device, int devices_left) {
  ForwardingSchedulerObserver::OnDeviceRemoved(device, devices_left);
  if (devices_left > 0) return;
  absl::MutexLock lock(&mu_);
  if (no_device_) return;
  no_device_ = true;
  LogError(absl::StrCat(device, " was the last device that could serve; health NOT_SERVING"));
  if (health_ != nullptr) health_->SetServingStatus(false);
}

void ServingHealth::OnDeviceRecovered(absl::string_view device, int devices_serving) {
  ForwardingSchedulerObserver::OnDeviceRecovered(device, devices_serving);
  if (devices_serving == 0) return;
  absl::MutexLock lock(&mu_);
  if (!no_device_) return;
  no_device_ = false;
  LogInfo(absl::StrCat(device, " recovered; health SERVING"));
  if (health_ != nullptr) health_->SetServingStatus(true);
}

}  // namespace dmlserve
