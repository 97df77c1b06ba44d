#ifndef DMLSERVE_KERNELS_D3D12_DEVICE_HEALTH_H_
#define DMLSERVE_KERNELS_D3D12_DEVICE_HEALTH_H_

// Whether a logical device has been lost (removed, hung, failed submission,
// or the fault-injection switch). Once lost it stays lost: every later batch
// fails at once and the scheduler takes the device out of rotation.

#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "kernels/d3d12/d3d12_api.h"

namespace dmlserve::d3d12 {

class DeviceHealth {
 public:
  explicit DeviceHealth(std::string device_name) : device_name_(std::move(device_name)) {}

  // OK while the device works, else why it was lost (UNAVAILABLE).
  absl::Status status() const;
  bool lost() const { return !status().ok(); }

  // Records the loss (the first cause wins) and returns the status to report.
  absl::Status MarkLost(const absl::Status& cause);

  // After an operation failed: was it because the device went away? Asks the
  // device (GetDeviceRemovedReason) and looks at the failure's own code;
  // either way a loss is recorded and returned. OK if the device is fine.
  absl::Status CheckAfterFailure(ID3D12Device* device, const absl::Status& failure);

 private:
  const std::string device_name_;
  mutable std::mutex mutex_;
  absl::Status lost_;
};

}  // namespace dmlserve::d3d12

#endif  // DMLSERVE_KERNELS_D3D12_DEVICE_HEALTH_H_
