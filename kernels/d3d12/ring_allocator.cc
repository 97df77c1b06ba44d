#include "kernels/d3d12/ring_allocator.h"

namespace dmlserve::d3d12 {
namespace {

uint64_t AlignUp(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) & ~(alignment - 1);
}

}  // namespace

std::optional<uint64_t> RingAllocator::Allocate(uint64_t size, uint64_t alignment) {
  if (size == 0) size = 1;  // every block needs an identity
  if (size > capacity_) return std::nullopt;
  if (blocks_.empty()) {
    blocks_.push_back({0, size, false});
    return 0;
  }
  const uint64_t tail = blocks_.front().begin;
  const uint64_t head = blocks_.back().end;
  if (head > tail) {
    // Not wrapped: free space is [head, capacity) and then [0, tail).
    uint64_t begin = AlignUp(head, alignment);
    if (begin + size <= capacity_) {
      blocks_.push_back({begin, begin + size, false});
      return begin;
    }
    if (size <= tail) {
      blocks_.push_back({0, size, false});
      return 0;
    }
    return std::nullopt;
  }
  // Wrapped (head <= tail with live blocks): free space is [head, tail).
  uint64_t begin = AlignUp(head, alignment);
  if (begin + size <= tail) {
    blocks_.push_back({begin, begin + size, false});
    return begin;
  }
  return std::nullopt;
}

bool RingAllocator::Free(uint64_t offset) {
  bool found = false;
  for (Block& block : blocks_) {
    if (block.begin == offset && !block.freed) {
      block.freed = true;
      found = true;
      break;
    }
  }
  while (!blocks_.empty() && blocks_.front().freed) blocks_.pop_front();
  return found;
}

size_t RingAllocator::live_blocks() const {
  size_t live = 0;
  for (const Block& block : blocks_) live += block.freed ? 0 : 1;
  return live;
}

}  // namespace dmlserve::d3d12
