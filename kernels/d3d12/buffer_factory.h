#ifndef DMLSERVE_KERNELS_D3D12_BUFFER_FACTORY_H_
#define DMLSERVE_KERNELS_D3D12_BUFFER_FACTORY_H_

// The single place a device creates buffers, so that creations can be
// counted: in the steady state (same batch shapes again) the count must not
// grow, because pools and rings reuse what they made.

#include <atomic>
#include <cstdint>

#include "absl/status/statusor.h"
#include "kernels/d3d12/com_ptr.h"
#include "kernels/d3d12/d3d12_api.h"

namespace dmlserve::d3d12 {

enum class HeapKind : uint8_t {
  kDefault,   // GPU memory; UAV-capable; created in COMMON
  kUpload,    // CPU-written, GPU-read; always GENERIC_READ
  kReadback,  // GPU-written, CPU-read; always COPY_DEST
};

class BufferFactory {
 public:
  explicit BufferFactory(ComPtr<ID3D12Device> device) : device_(std::move(device)) {}

  absl::StatusOr<ComPtr<ID3D12Resource>> Create(HeapKind kind, uint64_t size_bytes);

  // How many buffers this factory has created.
  uint64_t creations() const { return creations_.load(std::memory_order_relaxed); }

  ID3D12Device* device() const { return device_.get(); }

 private:
  ComPtr<ID3D12Device> device_;
  std::atomic<uint64_t> creations_{0};
};

}  // namespace dmlserve::d3d12

#endif  // DMLSERVE_KERNELS_D3D12_BUFFER_FACTORY_H_
