#ifndef DMLSERVE_KERNELS_D3D12_RING_ALLOCATOR_H_
#define DMLSERVE_KERNELS_D3D12_RING_ALLOCATOR_H_

// Offsets in a fixed-size ring: allocations are carved at the head and
// reclaimed at the tail. Batches finish out of order (several are in flight
// on one queue), so a block may be freed before older ones; its space comes
// back once every older block is free too. Not thread-safe.

#include <cstdint>
#include <deque>
#include <optional>

namespace dmlserve::d3d12 {

class RingAllocator {
 public:
  explicit RingAllocator(uint64_t capacity) : capacity_(capacity) {}

  // The offset of `size` contiguous bytes aligned to `alignment` (a power of
  // two), or nullopt when they do not fit until more blocks are freed.
  std::optional<uint64_t> Allocate(uint64_t size, uint64_t alignment);

  // Frees the block Allocate() returned at `offset`. False if there is none.
  bool Free(uint64_t offset);

  uint64_t capacity() const { return capacity_; }
  bool empty() const { return blocks_.empty(); }
  size_t live_blocks() const;

 private:
  struct Block {
    uint64_t begin;
    uint64_t end;
    bool freed;
  };
  uint64_t capacity_;
  // In allocation order: front is the tail (oldest), back the head.
  std::deque<Block> blocks_;
};

}  // namespace dmlserve::d3d12

#endif  // DMLSERVE_KERNELS_D3D12_RING_ALLOCATOR_H_
