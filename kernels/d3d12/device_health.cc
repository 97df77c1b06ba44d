#include "kernels/d3d12/device_health.h"

#include "kernels/d3d12/hresult.h"

namespace dmlserve::d3d12 {

absl::Status DeviceHealth::status() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return lost_;
}

absl::Status DeviceHealth::MarkLost(const absl::Status& cause) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (lost_.ok()) {
    lost_ = absl::UnavailableError(
        absl::StrCat("D3D12 device ", device_name_, " lost: ", cause.message()));
  }
  return lost_;
}

absl::Status DeviceHealth::CheckAfterFailure(ID3D12Device* device, const absl::Status& failure) {
  HRESULT reason = device->GetDeviceRemovedReason();
  if (FAILED(reason)) {
    return MarkLost(absl::UnavailableError(
        absl::StrCat(failure.message(), " (device removed: ", HResultToString(reason), ")")));
  }
  // UNAVAILABLE comes from device-loss HRESULTs and failed fence waits,
  // DEADLINE_EXCEEDED from a fence that never completed (a hung device).
  if (absl::IsUnavailable(failure) || absl::IsDeadlineExceeded(failure)) {
    return MarkLost(failure);
  }
  return absl::OkStatus();
}

}  // namespace dmlserve::d3d12
