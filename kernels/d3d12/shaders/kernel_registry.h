#ifndef DMLSERVE_KERNELS_D3D12_SHADERS_KERNEL_REGISTRY_H_
#define DMLSERVE_KERNELS_D3D12_SHADERS_KERNEL_REGISTRY_H_

// Every kernel key the planners can produce (for dmlserve-dxbc --list, the
// vkd3d-compiler test over all variants, and PSO warm-up). BuildKernel itself
// is declared in kernel_abi.h.

#include <vector>

#include "kernels/d3d12/shaders/kernel_abi.h"

namespace dmlserve::d3d12 {

std::vector<KernelKey> AllKernelKeys();

}  // namespace dmlserve::d3d12

#endif  // DMLSERVE_KERNELS_D3D12_SHADERS_KERNEL_REGISTRY_H_
