#include "server/platform/server_control.h"

#include <utility>

namespace dmlserve {

std::string ServerControl::WaitForStop() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&stop_requested_));
  return stop_reason_;
}

void ServerControl::OnReload(absl::AnyInvocable<void()> reload) {
  absl::MutexLock lock(&reload_mu_);
  if (!reloads_stopped_) reload_ = std::move(reload);
}

void ServerControl::StopReloads() {
  absl::MutexLock lock(&reload_mu_);
  reloads_stopped_ = true;
  reload_ = nullptr;
}

void ServerControl::ReportServing(std::string endpoints) {
  absl::MutexLock lock(&mu_);
  serving_ = true;
  serving_endpoints_ = std::move(endpoints);
}

std::string ServerControl::serving_endpoints() const {
  absl::MutexLock lock(&mu_);
  return serving_endpoints_;
}

void ServerControl::RequestStop(std::string reason) {
  absl::MutexLock lock(&mu_);
  if (stop_requested_) return;
  stop_requested_ = true;
  stop_reason_ = std::move(reason);
}

void ServerControl::RequestReload() {
  absl::MutexLock lock(&reload_mu_);
  if (reload_) reload_();
}

bool ServerControl::stop_requested() const {
  absl::MutexLock lock(&mu_);
  return stop_requested_;
}

bool ServerControl::WaitUntilServing(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto decided = [this]()
                     ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return serving_ || stop_requested_; };
  mu_.AwaitWithDeadline(absl::Condition(&decided), deadline);
  return serving_ && !stop_requested_;
}

}  // namespace dmlserve
