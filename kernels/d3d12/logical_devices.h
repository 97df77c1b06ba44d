#ifndef DMLSERVE_KERNELS_D3D12_LOGICAL_DEVICES_H_
#define DMLSERVE_KERNELS_D3D12_LOGICAL_DEVICES_H_

// CreateD3D12Devices with the planner and kernels passed in: adapter
// selection, logical devices per adapter, naming. d3d12_backend.cc binds the
// product planner and BuildKernel; tests can bind test kernels. (The server's
// choice among backends is server/backend_devices.h.)

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/backend/device.h"
#include "kernels/d3d12/d3d12_backend.h"
#include "kernels/d3d12/d3d12_device.h"
#include "kernels/d3d12/kernel_library.h"

namespace dmlserve::d3d12 {

absl::StatusOr<std::vector<std::unique_ptr<Device>>> CreateLogicalDevices(
    const D3D12Options& options, BatchPlanner planner, std::shared_ptr<KernelLibrary> kernels);

}  // namespace dmlserve::d3d12

#endif  // DMLSERVE_KERNELS_D3D12_LOGICAL_DEVICES_H_
