#ifndef DMLSERVE_KERNELS_D3D12_ROOT_SIGNATURE_H_
#define DMLSERVE_KERNELS_D3D12_ROOT_SIGNATURE_H_

// The root signature every dmlserve kernel is compiled against
// (kernels/d3d12/shaders/kernel_abi.h), one per device, shared by all
// pipeline states.

#include "absl/status/statusor.h"
#include "kernels/d3d12/com_ptr.h"
#include "kernels/d3d12/d3d12_api.h"
#include "kernels/d3d12/shaders/kernel_abi.h"

namespace dmlserve::d3d12 {

// Root parameter indices.
inline constexpr UINT kRootConstantsParameter = 0;
inline constexpr UINT RootSrvParameter(int slot) { return 1 + static_cast<UINT>(slot); }
inline constexpr UINT RootUavParameter(int slot) {
  return 1 + static_cast<UINT>(kSrvCount) + static_cast<UINT>(slot);
}

absl::StatusOr<ComPtr<ID3D12RootSignature>> CreateKernelRootSignature(ID3D12Device* device);

}  // namespace dmlserve::d3d12

#endif  // DMLSERVE_KERNELS_D3D12_ROOT_SIGNATURE_H_
