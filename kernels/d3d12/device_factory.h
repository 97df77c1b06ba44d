#ifndef DMLSERVE_KERNELS_D3D12_DEVICE_FACTORY_H_
#define DMLSERVE_KERNELS_D3D12_DEVICE_FACTORY_H_

// CreateD3D12Devices with the planner and kernels passed in: adapter
// selection, logical devices per adapter, naming. d3d12_backend.cc binds the
// product planner and BuildKernel; tests can bind test kernels.

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/backend/device.h"
#include "kernels/d3d12/d3d12_backend.h"
#include "kernels/d3d12/d3d12_device.h"
#include "kernels/d3d12/kernel_library.h"

namespace dmlserve::d3d12 {

absl::StatusOr<std::vector<std::unique_ptr<Device>>> CreateDevices(
    const D3D12Options& options, BatchPlanner planner, std::shared_ptr<KernelLibrary> kernels);

}  // namespace dmlserve::d3d12

#endif  // DMLSERVE_KERNELS_D3D12_DEVICE_FACTORY_H_
