#include "kernels/d3d12/pipeline_cache.h"

#include "kernels/d3d12/hresult.h"

namespace dmlserve::d3d12 {

absl::StatusOr<ID3D12PipelineState*> PipelineCache::Get(const KernelKey& key) {
  // Held while creating: batches that need the same new kernel wait for one
  // creation instead of racing to make duplicates.
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = pipelines_.find(key);
  if (it != pipelines_.end()) return it->second.get();
  absl::StatusOr<std::shared_ptr<const std::vector<uint8_t>>> dxbc = kernels_->Get(key);
  if (!dxbc.ok()) return dxbc.status();
  D3D12_COMPUTE_PIPELINE_STATE_DESC desc = {};
  desc.pRootSignature = root_signature_.get();
  desc.CS.pShaderBytecode = (*dxbc)->data();
  desc.CS.BytecodeLength = (*dxbc)->size();
  ComPtr<ID3D12PipelineState> pipeline;
  HRESULT hr = device_->CreateComputePipelineState(&desc, __uuidof(ID3D12PipelineState),
                                                   pipeline.put_void());
  if (FAILED(hr)) {
    absl::Status status = HResultError(hr, absl::StrCat("CreateComputePipelineState('", key, "')"));
    // A rejected shader is a kernel bug, not a lost device.
    if (!IsDeviceLossCode(hr)) return absl::InternalError(status.message());
    return status;
  }
  ID3D12PipelineState* raw = pipeline.get();
  pipelines_.emplace(key, std::move(pipeline));
  return raw;
}

size_t PipelineCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return pipelines_.size();
}

}  // namespace dmlserve::d3d12
