#include "kernels/d3d12/upload_ring.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "kernels/d3d12/hresult.h"

namespace dmlserve::d3d12 {

UploadRing::~UploadRing() {
  if (buffer_) buffer_->Unmap(0, nullptr);
}

absl::Status UploadRing::Recreate(uint64_t capacity) {
  if (buffer_) {
    buffer_->Unmap(0, nullptr);
    buffer_.Reset();
    mapped_ = nullptr;
    allocator_ = RingAllocator(0);
  }
  absl::StatusOr<ComPtr<ID3D12Resource>> buffer = factory_->Create(HeapKind::kUpload, capacity);
  if (!buffer.ok()) return buffer.status();
  // The CPU reads nothing; the ring stays mapped for its life (allowed for
  // upload heaps).
  D3D12_RANGE nothing_read = {0, 0};
  void* mapped = nullptr;
  HRESULT hr = (*buffer)->Map(0, &nothing_read, &mapped);
  if (FAILED(hr)) return HResultError(hr, "ID3D12Resource::Map (upload ring)");
  buffer_ = std::move(*buffer);
  mapped_ = static_cast<uint8_t*>(mapped);
  allocator_ = RingAllocator(capacity);
  return absl::OkStatus();
}

absl::StatusOr<UploadRing::Reservation> UploadRing::Reserve(uint64_t bytes) {
  if (bytes == 0) return Reservation();
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (allocator_.capacity() < bytes) {
      // Recreating the ring would pull it from under batches in flight.
      if (outstanding_ > 0) {
        space_freed_.wait(lock);
        continue;
      }
      uint64_t capacity =
          std::max<uint64_t>(kAlignment, std::max(initial_bytes_, allocator_.capacity()));
      while (capacity < bytes) capacity *= 2;
      absl::Status status = Recreate(capacity);
      if (!status.ok()) return status;
    }
    std::optional<uint64_t> offset = allocator_.Allocate(bytes, kAlignment);
    if (!offset) {
      space_freed_.wait(lock);
      continue;
    }
    Reservation reservation;
    reservation.owner_ = this;
    reservation.offset_ = *offset;
    reservation.buffer_ = buffer_.get();
    reservation.data_ = mapped_ + *offset;
    ++outstanding_;
    return reservation;
  }
}

void UploadRing::Release(uint64_t offset) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    allocator_.Free(offset);
    --outstanding_;
  }
  space_freed_.notify_all();
}

uint64_t UploadRing::memory_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return allocator_.capacity();
}

UploadRing::Reservation& UploadRing::Reservation::operator=(Reservation&& other) noexcept {
  if (this != &other) {
    Release();
    owner_ = std::exchange(other.owner_, nullptr);
    data_ = other.data_;
    buffer_ = other.buffer_;
    offset_ = other.offset_;
  }
  return *this;
}

void UploadRing::Reservation::Release() {
  if (owner_ == nullptr) return;
  std::exchange(owner_, nullptr)->Release(offset_);
}

}  // namespace dmlserve::d3d12
