#include "kernels/d3d12/d3d12_backend.h"

#include <memory>

#include "kernels/d3d12/kernel_library.h"
#include "kernels/d3d12/logical_devices.h"
#include "kernels/d3d12/shaders/batch_planner.h"
#include "kernels/d3d12/shaders/kernel_abi.h"

namespace dmlserve {
namespace {

// Kernels are built once per process, whatever the number of devices.
std::shared_ptr<d3d12::KernelLibrary> ProductKernels() {
  static const auto* const kernels =
      new std::shared_ptr<d3d12::KernelLibrary>(std::make_shared<d3d12::KernelLibrary>(
          [](const d3d12::KernelKey& key) { return d3d12::BuildKernel(key); }));
  return *kernels;
}

d3d12::BatchPlanner ProductPlanner() {
  return [](absl::Span<WorkItem> items) { return d3d12::PlanBatch(items); };
}

}  // namespace

absl::StatusOr<std::vector<std::unique_ptr<Device>>> CreateD3D12Devices(
    const D3D12Options& options) {
  return d3d12::CreateLogicalDevices(options, ProductPlanner(), ProductKernels());
}

}  // namespace dmlserve
