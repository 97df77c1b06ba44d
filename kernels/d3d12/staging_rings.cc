#include "kernels/d3d12/staging_rings.h"

#include "kernels/d3d12/hresult.h"

namespace dmlserve::d3d12 {
namespace {

uint64_t GrownCapacity(uint64_t current, uint64_t needed) {
  uint64_t capacity = current == 0 ? StagingRings::kAlignment : current;
  while (capacity < needed) capacity *= 2;
  return capacity;
}

}  // namespace

StagingRings::~StagingRings() {
  if (upload_.buffer) upload_.buffer->Unmap(0, nullptr);
  if (readback_.buffer) {
    D3D12_RANGE nothing_written = {0, 0};
    readback_.buffer->Unmap(0, &nothing_written);
  }
}

absl::Status StagingRings::Recreate(Ring& ring, HeapKind kind, uint64_t capacity) {
  if (ring.buffer) {
    D3D12_RANGE nothing_written = {0, 0};
    ring.buffer->Unmap(0, kind == HeapKind::kReadback ? &nothing_written : nullptr);
    ring.buffer.Reset();
    ring.mapped = nullptr;
    ring.allocator = RingAllocator(0);
  }
  absl::StatusOr<ComPtr<ID3D12Resource>> buffer = factory_->Create(kind, capacity);
  if (!buffer.ok()) return buffer.status();
  // Upload heaps: the CPU reads nothing. Readback heaps: everything may be
  // read. Both stay mapped for the ring's life (allowed for these heaps).
  D3D12_RANGE nothing_read = {0, 0};
  void* mapped = nullptr;
  HRESULT hr = (*buffer)->Map(0, kind == HeapKind::kUpload ? &nothing_read : nullptr, &mapped);
  if (FAILED(hr)) return HResultError(hr, "ID3D12Resource::Map (staging ring)");
  ring.buffer = std::move(*buffer);
  ring.mapped = static_cast<uint8_t*>(mapped);
  ring.allocator = RingAllocator(capacity);
  return absl::OkStatus();
}

absl::StatusOr<StagingRings::Reservation> StagingRings::Reserve(uint64_t upload_bytes,
                                                                uint64_t readback_bytes) {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    bool upload_too_small = upload_bytes > 0 && upload_.allocator.capacity() < upload_bytes;
    bool readback_too_small = readback_bytes > 0 && readback_.allocator.capacity() < readback_bytes;
    if (upload_too_small || readback_too_small) {
      // Recreating a ring would pull it from under batches in flight.
      if (outstanding_ > 0) {
        space_freed_.wait(lock);
        continue;
      }
      if (upload_too_small) {
        absl::Status status = Recreate(
            upload_, HeapKind::kUpload,
            GrownCapacity(std::max(initial_bytes_, upload_.allocator.capacity()), upload_bytes));
        if (!status.ok()) return status;
      }
      if (readback_too_small) {
        absl::Status status =
            Recreate(readback_, HeapKind::kReadback,
                     GrownCapacity(std::max(initial_bytes_, readback_.allocator.capacity()),
                                   readback_bytes));
        if (!status.ok()) return status;
      }
    }
    std::optional<uint64_t> upload_offset;
    if (upload_bytes > 0) {
      upload_offset = upload_.allocator.Allocate(upload_bytes, kAlignment);
      if (!upload_offset) {
        space_freed_.wait(lock);
        continue;
      }
    }
    std::optional<uint64_t> readback_offset;
    if (readback_bytes > 0) {
      readback_offset = readback_.allocator.Allocate(readback_bytes, kAlignment);
      if (!readback_offset) {
        if (upload_offset) upload_.allocator.Free(*upload_offset);
        space_freed_.wait(lock);
        continue;
      }
    }
    Reservation reservation;
    reservation.owner_ = this;
    if (upload_offset) {
      reservation.has_upload_ = true;
      reservation.upload_offset_ = *upload_offset;
      reservation.upload_buffer_ = upload_.buffer.get();
      reservation.upload_data_ = upload_.mapped + *upload_offset;
    }
    if (readback_offset) {
      reservation.has_readback_ = true;
      reservation.readback_offset_ = *readback_offset;
      reservation.readback_buffer_ = readback_.buffer.get();
      reservation.readback_data_ = readback_.mapped + *readback_offset;
    }
    ++outstanding_;
    return reservation;
  }
}

void StagingRings::Release(uint64_t upload_offset, bool has_upload, uint64_t readback_offset,
                           bool has_readback) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (has_upload) upload_.allocator.Free(upload_offset);
    if (has_readback) readback_.allocator.Free(readback_offset);
    --outstanding_;
  }
  space_freed_.notify_all();
}

uint64_t StagingRings::memory_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return upload_.allocator.capacity() + readback_.allocator.capacity();
}

StagingRings::Reservation& StagingRings::Reservation::operator=(Reservation&& other) noexcept {
  if (this != &other) {
    Release();
    owner_ = std::exchange(other.owner_, nullptr);
    has_upload_ = other.has_upload_;
    has_readback_ = other.has_readback_;
    upload_data_ = other.upload_data_;
    upload_buffer_ = other.upload_buffer_;
    upload_offset_ = other.upload_offset_;
    readback_data_ = other.readback_data_;
    readback_buffer_ = other.readback_buffer_;
    readback_offset_ = other.readback_offset_;
  }
  return *this;
}

void StagingRings::Reservation::Release() {
  if (owner_ == nullptr) return;
  std::exchange(owner_, nullptr)
      ->Release(upload_offset_, has_upload_, readback_offset_, has_readback_);
}

}  // namespace dmlserve::d3d12
