#ifndef DMLSERVE_KERNELS_D3D12_STAGING_RINGS_H_
#define DMLSERVE_KERNELS_D3D12_STAGING_RINGS_H_

// The upload ring (CPU -> GPU) and readback ring (GPU -> CPU) of one device:
// one persistently mapped buffer each, shared by the batches in flight.
//
// A batch reserves its upload and readback space together, in one step: if
// it could hold one and wait for the other, two batches could each hold what
// the other waits for. Space is returned when the batch's fence has completed
// (the GPU no longer reads or writes it). A request larger than a ring waits
// until nothing is in flight, then the ring is recreated bigger; so rings only
// grow to the largest batch seen and then stop being created.

#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "absl/status/statusor.h"
#include "kernels/d3d12/buffer_factory.h"
#include "kernels/d3d12/com_ptr.h"
#include "kernels/d3d12/d3d12_api.h"
#include "kernels/d3d12/ring_allocator.h"

namespace dmlserve::d3d12 {

class StagingRings {
 public:
  // Offsets inside the rings are aligned to this.
  static constexpr uint64_t kAlignment = 256;

  class Reservation;

  StagingRings(BufferFactory* factory, uint64_t initial_bytes)
      : factory_(factory), initial_bytes_(initial_bytes) {}
  ~StagingRings();
  StagingRings(const StagingRings&) = delete;
  StagingRings& operator=(const StagingRings&) = delete;

  // Blocks until both fit. Either size may be 0.
  absl::StatusOr<Reservation> Reserve(uint64_t upload_bytes, uint64_t readback_bytes);

  // Bytes of both rings.
  uint64_t memory_bytes() const;

 private:
  struct Ring {
    ComPtr<ID3D12Resource> buffer;
    uint8_t* mapped = nullptr;
    RingAllocator allocator{0};
  };
  absl::Status Recreate(Ring& ring, HeapKind kind, uint64_t capacity);
  void Release(uint64_t upload_offset, bool has_upload, uint64_t readback_offset,
               bool has_readback);

  BufferFactory* const factory_;
  const uint64_t initial_bytes_;
  mutable std::mutex mutex_;
  std::condition_variable space_freed_;
  Ring upload_;
  Ring readback_;
  int outstanding_ = 0;  // reservations not yet released
};

// Space of one batch in both rings; returned when destroyed.
class StagingRings::Reservation {
 public:
  Reservation() = default;
  Reservation(Reservation&& other) noexcept { *this = std::move(other); }
  Reservation& operator=(Reservation&& other) noexcept;
  ~Reservation() { Release(); }

  // Where the batch writes its uploads, and the GPU copies them from.
  uint8_t* upload_data() const { return upload_data_; }
  ID3D12Resource* upload_buffer() const { return upload_buffer_; }
  uint64_t upload_offset() const { return upload_offset_; }

  // Where the GPU copies the batch's outputs, and the batch reads them.
  const uint8_t* readback_data() const { return readback_data_; }
  ID3D12Resource* readback_buffer() const { return readback_buffer_; }
  uint64_t readback_offset() const { return readback_offset_; }

  void Release();

 private:
  friend class StagingRings;
  StagingRings* owner_ = nullptr;
  bool has_upload_ = false, has_readback_ = false;
  uint8_t* upload_data_ = nullptr;
  ID3D12Resource* upload_buffer_ = nullptr;
  uint64_t upload_offset_ = 0;
  const uint8_t* readback_data_ = nullptr;
  ID3D12Resource* readback_buffer_ = nullptr;
  uint64_t readback_offset_ = 0;
};

}  // namespace dmlserve::d3d12

#endif  // DMLSERVE_KERNELS_D3D12_STAGING_RINGS_H_
