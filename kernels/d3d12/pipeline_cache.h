#ifndef DMLSERVE_KERNELS_D3D12_PIPELINE_CACHE_H_
#define DMLSERVE_KERNELS_D3D12_PIPELINE_CACHE_H_

// Compute pipeline states by KernelKey, created on first use with the
// device's one root signature and kept for the device's life. Thread-safe.

#include <map>
#include <memory>
#include <mutex>

#include "absl/status/statusor.h"
#include "kernels/d3d12/com_ptr.h"
#include "kernels/d3d12/d3d12_api.h"
#include "kernels/d3d12/kernel_library.h"
#include "kernels/d3d12/shaders/kernel_abi.h"

namespace dmlserve::d3d12 {

class PipelineCache {
 public:
  PipelineCache(ComPtr<ID3D12Device> device, ComPtr<ID3D12RootSignature> root_signature,
                std::shared_ptr<KernelLibrary> kernels)
      : device_(std::move(device)),
        root_signature_(std::move(root_signature)),
        kernels_(std::move(kernels)) {}

  // The pipeline state for `key`; valid as long as this cache. A kernel that
  // does not build or that the device rejects is an INTERNAL error.
  absl::StatusOr<ID3D12PipelineState*> Get(const KernelKey& key);

  ID3D12RootSignature* root_signature() const { return root_signature_.get(); }
  size_t size() const;

 private:
  ComPtr<ID3D12Device> device_;
  ComPtr<ID3D12RootSignature> root_signature_;
  std::shared_ptr<KernelLibrary> kernels_;
  mutable std::mutex mutex_;
  std::map<KernelKey, ComPtr<ID3D12PipelineState>> pipelines_;
};

}  // namespace dmlserve::d3d12

#endif  // DMLSERVE_KERNELS_D3D12_PIPELINE_CACHE_H_
