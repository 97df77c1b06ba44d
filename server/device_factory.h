#ifndef DMLSERVE_SERVER_DEVICE_FACTORY_H_
#define DMLSERVE_SERVER_DEVICE_FACTORY_H_

// The devices a server runs on, chosen by --backend.

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/backend/device.h"

namespace dmlserve {

struct DeviceFactoryOptions {
  int cpu_devices = 2;
};

// `backend`: "cpu" (the embedded CPU backend), "d3d12" (every D3D12 adapter;
// an error when there is none) or "auto" (D3D12 when an adapter is usable, CPU
// otherwise). Never returns an empty list.
absl::StatusOr<std::vector<std::unique_ptr<Device>>> CreateDevices(
    absl::string_view backend, const DeviceFactoryOptions& options);

}  // namespace dmlserve

#endif  // DMLSERVE_SERVER_DEVICE_FACTORY_H_
