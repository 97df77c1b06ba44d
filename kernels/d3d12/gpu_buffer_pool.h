#ifndef DMLSERVE_KERNELS_D3D12_GPU_BUFFER_POOL_H_
#define DMLSERVE_KERNELS_D3D12_GPU_BUFFER_POOL_H_

// Buffers of one heap kind, reused by size class so that batches of familiar
// shapes create no resources: default-heap (GPU memory) buffers for a batch's
// tensors, and readback-heap buffers that a batch's outputs are copied into
// and then lent to the caller without a CPU copy (plan_executor.cc). Classes are four per power of
// two (256, 320, 384, 448, 512, 640, ... bytes), so a buffer is at most 25% larger than asked for.
// Thread-safe. (Host memory for tensors is kernels/core/buffer_pool.h's BufferPool, a different
// thing.)

#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/d3d12/buffer_factory.h"
#include "kernels/d3d12/com_ptr.h"
#include "kernels/d3d12/d3d12_api.h"

namespace dmlserve::d3d12 {

// A buffer out of the pool. Root descriptors bind `address` (+ an offset).
struct PooledBuffer {
  ComPtr<ID3D12Resource> resource;
  uint64_t size_bytes = 0;  // the size class, >= what was asked for
  D3D12_GPU_VIRTUAL_ADDRESS address = 0;
  // Readback buffers only: mapped once, when created, for the buffer's life
  // (D3D12 allows a readback resource to stay mapped while the GPU writes
  // it; the CPU reads only after the batch's fence).
  uint8_t* mapped = nullptr;
};

class GpuBufferPool {
 public:
  // Idle buffers beyond `max_idle_bytes` are destroyed when released rather
  // than kept.
  // `kind` is kDefault or kReadback.
  GpuBufferPool(BufferFactory* factory, uint64_t max_idle_bytes, HeapKind kind = HeapKind::kDefault)
      : factory_(factory), max_idle_bytes_(max_idle_bytes), kind_(kind) {}

  // The smallest size class holding `size_bytes`.
  static uint64_t SizeClass(uint64_t size_bytes);

  absl::StatusOr<PooledBuffer> Acquire(uint64_t size_bytes);
  void Release(PooledBuffer buffer);

  // Bytes of every buffer the pool made and still holds or has lent out.
  uint64_t memory_bytes() const;
  uint64_t idle_bytes() const;

 private:
  BufferFactory* const factory_;
  const uint64_t max_idle_bytes_;
  const HeapKind kind_;
  mutable std::mutex mutex_;
  std::map<uint64_t, std::vector<PooledBuffer>> idle_;  // by size class
  uint64_t idle_bytes_ = 0;
  uint64_t total_bytes_ = 0;
};

}  // namespace dmlserve::d3d12

#endif  // DMLSERVE_KERNELS_D3D12_GPU_BUFFER_POOL_H_
