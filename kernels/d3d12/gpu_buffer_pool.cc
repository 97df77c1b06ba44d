#include "kernels/d3d12/gpu_buffer_pool.h"

#include "kernels/d3d12/hresult.h"

namespace dmlserve::d3d12 {

uint64_t GpuBufferPool::SizeClass(uint64_t size_bytes) {
  constexpr uint64_t kMinimum = 256;
  if (size_bytes <= kMinimum) return kMinimum;
  uint64_t octave = kMinimum;
  while (octave * 2 < size_bytes) octave *= 2;
  // size_bytes is in (octave, 2 * octave]: round up to a quarter of octave.
  uint64_t step = octave / 4;
  return (size_bytes + step - 1) / step * step;
}

absl::StatusOr<PooledBuffer> GpuBufferPool::Acquire(uint64_t size_bytes) {
  const uint64_t size_class = SizeClass(size_bytes);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = idle_.find(size_class);
    if (it != idle_.end() && !it->second.empty()) {
      PooledBuffer buffer = std::move(it->second.back());
      it->second.pop_back();
      idle_bytes_ -= buffer.size_bytes;
      return buffer;
    }
  }
  absl::StatusOr<ComPtr<ID3D12Resource>> resource = factory_->Create(kind_, size_class);
  if (!resource.ok()) return resource.status();
  PooledBuffer buffer;
  if (kind_ == HeapKind::kReadback) {
    void* mapped = nullptr;
    HRESULT hr = (*resource)->Map(0, nullptr, &mapped);  // everything may be read
    if (FAILED(hr)) return HResultError(hr, "ID3D12Resource::Map (readback buffer)");
    buffer.mapped = static_cast<uint8_t*>(mapped);
  }
  buffer.address = (*resource)->GetGPUVirtualAddress();
  buffer.resource = std::move(*resource);
  buffer.size_bytes = size_class;
  std::lock_guard<std::mutex> lock(mutex_);
  total_bytes_ += size_class;
  return buffer;
}

void GpuBufferPool::Release(PooledBuffer buffer) {
  if (!buffer.resource) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (idle_bytes_ + buffer.size_bytes > max_idle_bytes_) {
    total_bytes_ -= buffer.size_bytes;
    return;  // `buffer` is destroyed here
  }
  idle_bytes_ += buffer.size_bytes;
  idle_[buffer.size_bytes].push_back(std::move(buffer));
}

uint64_t GpuBufferPool::memory_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return total_bytes_;
}

uint64_t GpuBufferPool::idle_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return idle_bytes_;
}

}  // namespace dmlserve::d3d12
