#ifndef DMLSERVE_KERNELS_CORE_BUFFER_POOL_H_
#define DMLSERVE_KERNELS_CORE_BUFFER_POOL_H_

// A process-wide cache of large memory blocks for tensor storage.
//
// Freshly mapped memory costs a page fault per 4 KiB page on first touch
// (16k faults, several milliseconds, for a 64 MiB output); a block that comes
// back from this pool is already mapped and resident, so reusing it costs
// nothing. Blocks are grouped in size classes (four per power of two, so at
// most 25% of a block's address space is unused; pages never touched are
// never made resident) and kept up to a byte cap, beyond which released
// blocks are unmapped.
//
// Contracts:
//   - Acquire(size) returns a block of at least `size` bytes, aligned to
//     kBlockAlignment, with unspecified contents (never zero-filled on
//     reuse). size 0 is not allowed.
//   - Every acquired block is given back exactly once with Release, with the
//     capacity Acquire reported.
//   - Blocks of kHugePageBytes or more are aligned to kHugePageBytes and
//     advised as transparent-huge-page candidates (MADV_HUGEPAGE), so even
//     their first touch faults once per 2 MiB instead of once per 4 KiB.
//   - Small requests (below kMinPooledBytes: a request's output, a
//     broadcast zero point) come from the C++ heap, up to 32 KiB in
//     power-of-two classes (their capacity). Released ones are kept per
//     class (kSmallBlocksKept, at most kSmallCacheBytesPerClass a class),
//     each class under its own lock: glibc serves 64-byte-aligned
//     allocations without its per-thread cache, under an arena lock that the
//     threads sending responses contend for. Trim frees them too.
//   - Thread-safe: any thread may acquire and release.

#include <cstddef>
#include <cstdint>

namespace dmlserve {

struct BufferPoolStats {
  uint64_t cached_bytes = 0;  // free blocks kept for reuse
  uint64_t in_use_bytes = 0;  // pooled blocks handed out and not yet released
  uint64_t cap_bytes = 0;     // most bytes kept free
  uint64_t hits = 0;          // acquisitions served from the cache
  uint64_t misses = 0;        // acquisitions that mapped new memory
  uint64_t unmapped = 0;      // releases that unmapped (over the cap)
};

class BufferPool {
 public:
  static constexpr size_t kBlockAlignment = 64;
  static constexpr size_t kMinPooledBytes = size_t{64} << 10;
  static constexpr size_t kSmallBlocksKept = 64;
  static constexpr size_t kSmallCacheBytesPerClass = size_t{256} << 10;
  static constexpr size_t kHugePageBytes = size_t{2} << 20;
  // The default cap: room for a few 64 MiB outputs in flight. Overridden by
  // the DMLSERVE_BUFFER_POOL_BYTES environment variable.
  static constexpr uint64_t kDefaultCapBytes = uint64_t{256} << 20;

  struct Block {
    void* data = nullptr;
    size_t capacity = 0;
  };

  // The process-wide pool (never destroyed: buffers may be released by
  // threads still running at exit).
  static BufferPool& Get();

  explicit BufferPool(uint64_t cap_bytes);
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  Block Acquire(size_t size);
  void Release(Block block);

  // Changes the cap, unmapping cached blocks beyond it.
  void SetCap(uint64_t cap_bytes);
  // Unmaps every cached block.
  void Trim();
  BufferPoolStats stats() const;

 private:
  struct State;
  State* state_;
};

}  // namespace dmlserve

#endif  // DMLSERVE_KERNELS_CORE_BUFFER_POOL_H_
