#include "kernels/d3d12/root_signature.h"

#include "kernels/d3d12/hresult.h"

namespace dmlserve::d3d12 {

absl::StatusOr<ComPtr<ID3D12RootSignature>> CreateKernelRootSignature(ID3D12Device* device) {
  // Root descriptors, not descriptor tables: tables are dropped under wine +
  // lavapipe (no VK_EXT_descriptor_indexing), root descriptors work
  // everywhere and make sub-ranges of a buffer free to bind.
  D3D12_ROOT_PARAMETER parameters[1 + kSrvCount + kUavCount] = {};
  parameters[kRootConstantsParameter].ParameterType = D3D12_ROOT_PARAMETER_TYPE_32BIT_CONSTANTS;
  parameters[kRootConstantsParameter].Constants.ShaderRegister = 0;
  parameters[kRootConstantsParameter].Constants.RegisterSpace = 0;
  parameters[kRootConstantsParameter].Constants.Num32BitValues = kRootConstantCount;
  parameters[kRootConstantsParameter].ShaderVisibility = D3D12_SHADER_VISIBILITY_ALL;
  for (int slot = 0; slot < kSrvCount; ++slot) {
    D3D12_ROOT_PARAMETER& parameter = parameters[RootSrvParameter(slot)];
    parameter.ParameterType = D3D12_ROOT_PARAMETER_TYPE_SRV;
    parameter.Descriptor.ShaderRegister = static_cast<UINT>(slot);
    parameter.ShaderVisibility = D3D12_SHADER_VISIBILITY_ALL;
  }
  for (int slot = 0; slot < kUavCount; ++slot) {
    D3D12_ROOT_PARAMETER& parameter = parameters[RootUavParameter(slot)];
    parameter.ParameterType = D3D12_ROOT_PARAMETER_TYPE_UAV;
    parameter.Descriptor.ShaderRegister = static_cast<UINT>(slot);
    parameter.ShaderVisibility = D3D12_SHADER_VISIBILITY_ALL;
  }
  D3D12_ROOT_SIGNATURE_DESC desc = {};
  desc.NumParameters = static_cast<UINT>(std::size(parameters));
  desc.pParameters = parameters;
  desc.Flags = D3D12_ROOT_SIGNATURE_FLAG_NONE;

  ComPtr<ID3DBlob> blob;
  ComPtr<ID3DBlob> error;
  HRESULT hr =
      D3D12SerializeRootSignature(&desc, D3D_ROOT_SIGNATURE_VERSION_1_0, blob.put(), error.put());
  if (FAILED(hr)) {
    std::string detail;
    if (error) {
      detail.assign(static_cast<const char*>(error->GetBufferPointer()), error->GetBufferSize());
    }
    return HResultError(hr, absl::StrCat("D3D12SerializeRootSignature (", detail, ")"));
  }
  ComPtr<ID3D12RootSignature> root_signature;
  hr = device->CreateRootSignature(0, blob->GetBufferPointer(), blob->GetBufferSize(),
                                   __uuidof(ID3D12RootSignature), root_signature.put_void());
  if (FAILED(hr)) return HResultError(hr, "CreateRootSignature");
  return root_signature;
}

}  // namespace dmlserve::d3d12
