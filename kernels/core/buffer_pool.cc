#include "kernels/core/buffer_pool.h"

#if defined(_WIN32)
#include <windows.h>
#else
#include <sys/mman.h>
#endif

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <vector>

namespace dmlserve {
namespace {

constexpr size_t kPageBytes = 4096;

size_t RoundUp(size_t value, size_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// The capacity of `size`'s size class: `size` rounded up to a quarter of its
// power of two (and to whole pages), so blocks of one class are
// interchangeable and a class wastes at most 25% of address space.
size_t ClassCapacity(size_t size) {
  size = RoundUp(size, kPageBytes);
  size_t power = 1;
  while (power * 2 <= size) power *= 2;
  const size_t step = power >= 4 * kPageBytes ? power / 4 : kPageBytes;
  return RoundUp(size, step);
}

#if defined(_WIN32)
void* MapBlock(size_t capacity) {
  void* p = VirtualAlloc(nullptr, capacity, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
void UnmapBlock(void* data, size_t) { VirtualFree(data, 0, MEM_RELEASE); }
#else
void UnmapBlock(void* data, size_t capacity) { munmap(data, capacity); }

void* MapBlock(size_t capacity) {
  if (capacity < BufferPool::kHugePageBytes) {
    void* p = mmap(nullptr, capacity, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    return p;
  }
  // Over-map by one huge page and trim, so the block starts on a huge-page
  // boundary and the kernel can back it with 2 MiB pages.
  const size_t span = capacity + BufferPool::kHugePageBytes;
  void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const uintptr_t begin = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = RoundUp(begin, BufferPool::kHugePageBytes);
  if (aligned > begin) munmap(raw, aligned - begin);
  const uintptr_t end = begin + span, block_end = aligned + capacity;
  if (end > block_end) munmap(reinterpret_cast<void*>(block_end), end - block_end);
#ifdef MADV_HUGEPAGE
  madvise(reinterpret_cast<void*>(aligned), capacity, MADV_HUGEPAGE);  // advisory: may fail
#endif
  return reinterpret_cast<void*>(aligned);
}
#endif

// Small blocks up to kLargestSmallClass come in power-of-two classes from 64
// bytes (kBlockAlignment); those between it and kMinPooledBytes get exactly
// their size (no power of two lies there, so Release tells them apart).
constexpr int kSmallClasses = 10;  // 64 B .. 32 KiB
constexpr size_t kLargestSmallClass = BufferPool::kBlockAlignment << (kSmallClasses - 1);
static_assert(kLargestSmallClass * 2 == BufferPool::kMinPooledBytes);

int SmallClass(size_t size) {
  int index = 0;
  while ((BufferPool::kBlockAlignment << index) < size) ++index;
  return index;
}

void* NewSmallBlock(size_t capacity) {
  return ::operator new(capacity, std::align_val_t(BufferPool::kBlockAlignment));
}

void DeleteSmallBlock(void* data) {
  ::operator delete(data, std::align_val_t(BufferPool::kBlockAlignment));
}

// How many released blocks of class `index` the pool keeps: kSmallBlocksKept,
// fewer for large classes, so that no class holds more than
// kSmallCacheBytesPerClass.
size_t SmallBlocksKept(int index) {
  const size_t capacity = BufferPool::kBlockAlignment << index;
  return std::min<size_t>(BufferPool::kSmallBlocksKept,
                          std::max<size_t>(1, BufferPool::kSmallCacheBytesPerClass / capacity));
}

uint64_t ConfiguredCap() {
  if (const char* value = std::getenv("DMLSERVE_BUFFER_POOL_BYTES")) {
    char* end = nullptr;
    const unsigned long long bytes = std::strtoull(value, &end, 10);
    if (end != value && *end == '\0') return bytes;
  }
  return BufferPool::kDefaultCapBytes;
}

}  // namespace

struct BufferPool::State {
  mutable std::mutex mutex;
  std::map<size_t, std::vector<void*>> free;  // by class capacity
  BufferPoolStats stats;

  // Released small blocks by class, each class under its own lock (held for
  // a push or a pop: two threads rarely meet there, unlike on glibc's arena
  // lock, which every other allocation of those threads takes too).
  struct SmallClassCache {
    std::mutex mutex;
    std::vector<void*> blocks;
  };
  SmallClassCache small[kSmallClasses];

  void* TakeSmall(int index) {
    SmallClassCache& cache = small[index];
    std::lock_guard<std::mutex> lock(cache.mutex);
    if (cache.blocks.empty()) return nullptr;
    void* data = cache.blocks.back();
    cache.blocks.pop_back();
    return data;
  }

  // False when the class keeps enough already (the caller frees the block).
  bool KeepSmall(int index, void* data) {
    SmallClassCache& cache = small[index];
    std::lock_guard<std::mutex> lock(cache.mutex);
    if (cache.blocks.size() >= SmallBlocksKept(index)) return false;
    if (cache.blocks.capacity() == 0) cache.blocks.reserve(SmallBlocksKept(index));
    cache.blocks.push_back(data);
    return true;
  }

  void FreeSmall() {
    for (SmallClassCache& cache : small) {
      std::lock_guard<std::mutex> lock(cache.mutex);
      for (void* data : cache.blocks) DeleteSmallBlock(data);
      cache.blocks.clear();
    }
  }

  // Unmaps cached blocks, largest first, until at most `keep` bytes remain.
  void EvictTo(uint64_t keep) {
    while (stats.cached_bytes > keep && !free.empty()) {
      auto it = std::prev(free.end());
      UnmapBlock(it->second.back(), it->first);
      stats.cached_bytes -= it->first;
      it->second.pop_back();
      if (it->second.empty()) free.erase(it);
    }
  }
};

BufferPool& BufferPool::Get() {
  static BufferPool* pool = new BufferPool(ConfiguredCap());
  return *pool;
}

BufferPool::BufferPool(uint64_t cap_bytes) : state_(new State) {
  state_->stats.cap_bytes = cap_bytes;
}

BufferPool::~BufferPool() {
  Trim();
  delete state_;
}

BufferPool::Block BufferPool::Acquire(size_t size) {
  if (size > kLargestSmallClass && size < kMinPooledBytes) {
    return Block{NewSmallBlock(size), size};
  }
  if (size < kMinPooledBytes) {
    const int index = SmallClass(size);
    const size_t capacity = kBlockAlignment << index;
    void* data = state_->TakeSmall(index);
    return Block{data != nullptr ? data : NewSmallBlock(capacity), capacity};
  }
  const size_t capacity = ClassCapacity(size);
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stats.in_use_bytes += capacity;
    auto it = state_->free.find(capacity);
    if (it != state_->free.end()) {
      void* data = it->second.back();
      it->second.pop_back();
      if (it->second.empty()) state_->free.erase(it);
      state_->stats.cached_bytes -= capacity;
      ++state_->stats.hits;
      return Block{data, capacity};
    }
    ++state_->stats.misses;
  }
  // Map outside the lock: it may take a while and needs no shared state.
  try {
    return Block{MapBlock(capacity), capacity};
  } catch (...) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stats.in_use_bytes -= capacity;
    throw;
  }
}

void BufferPool::Release(Block block) {
  if (block.data == nullptr) return;
  if (block.capacity > kLargestSmallClass && block.capacity < kMinPooledBytes) {
    DeleteSmallBlock(block.data);
    return;
  }
  if (block.capacity < kMinPooledBytes) {
    if (!state_->KeepSmall(SmallClass(block.capacity), block.data)) {
      DeleteSmallBlock(block.data);
    }
    return;
  }
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stats.in_use_bytes -= block.capacity;
    if (state_->stats.cached_bytes + block.capacity <= state_->stats.cap_bytes) {
      state_->free[block.capacity].push_back(block.data);
      state_->stats.cached_bytes += block.capacity;
      return;
    }
    ++state_->stats.unmapped;
  }
  UnmapBlock(block.data, block.capacity);
}

void BufferPool::SetCap(uint64_t cap_bytes) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->stats.cap_bytes = cap_bytes;
  state_->EvictTo(cap_bytes);
}

void BufferPool::Trim() {
  state_->FreeSmall();
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->EvictTo(0);
}

BufferPoolStats BufferPool::stats() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->stats;
}

}  // namespace dmlserve
