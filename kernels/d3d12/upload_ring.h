#ifndef DMLSERVE_KERNELS_D3D12_UPLOAD_RING_H_
#define DMLSERVE_KERNELS_D3D12_UPLOAD_RING_H_

// The upload ring of one device (CPU -> GPU): one persistently mapped
// upload-heap buffer, shared by the batches in flight. A batch writes its
// host bytes there and copies them into GPU memory in its command list.
//
// Space is returned when the batch's fence has completed (the GPU no longer
// reads it). A request larger than the ring waits until nothing is in flight,
// then the ring is recreated bigger; so the ring only grows to the largest
// batch seen and then stops being created. (Outputs take another way: the
// GPU copies them into pooled readback buffers that are lent to the caller,
// so that nothing ties readback space to the order batches finish in.)

#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "absl/status/statusor.h"
#include "kernels/d3d12/buffer_factory.h"
#include "kernels/d3d12/com_ptr.h"
#include "kernels/d3d12/d3d12_api.h"
#include "kernels/d3d12/ring_allocator.h"

namespace dmlserve::d3d12 {

class UploadRing {
 public:
  // Offsets inside the ring are aligned to this.
  static constexpr uint64_t kAlignment = 256;

  class Reservation;

  UploadRing(BufferFactory* factory, uint64_t initial_bytes)
      : factory_(factory), initial_bytes_(initial_bytes) {}
  ~UploadRing();
  UploadRing(const UploadRing&) = delete;
  UploadRing& operator=(const UploadRing&) = delete;

  // Blocks until `bytes` fit. `bytes` may be 0 (an empty reservation).
  absl::StatusOr<Reservation> Reserve(uint64_t bytes);

  // Bytes of the ring.
  uint64_t memory_bytes() const;

 private:
  absl::Status Recreate(uint64_t capacity);
  void Release(uint64_t offset);

  BufferFactory* const factory_;
  const uint64_t initial_bytes_;
  mutable std::mutex mutex_;
  std::condition_variable space_freed_;
  ComPtr<ID3D12Resource> buffer_;
  uint8_t* mapped_ = nullptr;
  RingAllocator allocator_{0};
  int outstanding_ = 0;  // non-empty reservations not yet released
};

// A batch's space in the ring; returned when destroyed.
class UploadRing::Reservation {
 public:
  Reservation() = default;
  Reservation(Reservation&& other) noexcept { *this = std::move(other); }
  Reservation& operator=(Reservation&& other) noexcept;
  ~Reservation() { Release(); }

  // Where the batch writes its uploads, and the GPU copies them from.
  uint8_t* data() const { return data_; }
  ID3D12Resource* buffer() const { return buffer_; }
  uint64_t offset() const { return offset_; }

  void Release();

 private:
  friend class UploadRing;
  UploadRing* owner_ = nullptr;
  uint8_t* data_ = nullptr;
  ID3D12Resource* buffer_ = nullptr;
  uint64_t offset_ = 0;
};

}  // namespace dmlserve::d3d12

#endif  // DMLSERVE_KERNELS_D3D12_UPLOAD_RING_H_
