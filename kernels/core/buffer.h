#ifndef DMLSERVE_KERNELS_CORE_BUFFER_H_
#define DMLSERVE_KERNELS_CORE_BUFFER_H_

// Tensor storage: a contiguous, mutable byte range, shared by reference
// counting through std::shared_ptr<Buffer>. Two tensors share storage iff
// they hold the same Buffer pointer; devices and caches use that pointer as
// the storage's identity.
//
// A Buffer's bytes live in one of three places:
//   - a pooled block (Uninitialized, Zeroed, Copy): aligned to kAlignment
//     (64 bytes, one cache line: whole-line SIMD loads and non-temporal
//     stores), taken from and given back to the process-wide BufferPool, so
//     repeated large allocations neither map nor fault new pages.
//     Uninitialized leaves the contents unspecified: it is for outputs that
//     a kernel overwrites entirely.
//   - an adopted std::string (Adopt): a request's protobuf bytes moved in and
//     used in place, never copied. Its alignment is whatever the string's
//     allocator gave (16 bytes with glibc); kernels use unaligned loads, which
//     cost nothing measurable on streaming data, where re-aligning a copy
//     would cost a full pass over memory.
//   - memory somebody else owns (Borrow): a device's mapped readback memory,
//     handed to the caller instead of copied out; the owner object the
//     buffer holds gives the memory back when the last reference goes.
//
// A Buffer never changes size. data() is never null (a zero-byte buffer
// still has a unique, valid address).

#include <cstddef>
#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "kernels/core/buffer_pool.h"

namespace dmlserve {

class Buffer {
  struct PrivateKey {
    explicit PrivateKey() = default;
  };

 public:
  static constexpr size_t kAlignment = BufferPool::kBlockAlignment;

  // `size` bytes of pooled storage with unspecified contents.
  static std::shared_ptr<Buffer> Uninitialized(size_t size);
  // `size` zero bytes of pooled storage.
  static std::shared_ptr<Buffer> Zeroed(size_t size);
  // A pooled copy of `bytes`.
  static std::shared_ptr<Buffer> Copy(absl::string_view bytes);
  // Takes `bytes` over without copying them.
  static std::shared_ptr<Buffer> Adopt(std::string bytes);
  // The `size` bytes at `data`, which stay valid, and are touched by nobody
  // else, while `owner` lives; the buffer holds `owner` until it is
  // destroyed. `data` must not be null.
  static std::shared_ptr<Buffer> Borrow(char* data, size_t size, std::shared_ptr<void> owner);

  // Only the factories above can call it (PrivateKey is private); public so
  // that std::make_shared allocates the buffer and its reference count at
  // once.
  explicit Buffer(PrivateKey) {}

  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  char* data() { return data_; }
  const char* data() const { return data_; }
  size_t size() const { return size_; }
  absl::string_view view() const { return absl::string_view(data_, size_); }
  explicit operator absl::string_view() const { return view(); }

  // Whether the bytes are an adopted std::string.
  bool adopted() const { return adopted_; }
  // Moves an adopted string out (zero-copy hand-off to a response). Requires
  // adopted() and that nobody else reads this buffer any more: the buffer is
  // left empty (size 0).
  std::string ReleaseString();

 private:
  char* data_ = nullptr;
  size_t size_ = 0;
  bool adopted_ = false;
  std::string string_;           // adopted bytes
  BufferPool::Block block_;      // pooled bytes
  std::shared_ptr<void> owner_;  // keeps borrowed bytes valid
};

}  // namespace dmlserve

#endif  // DMLSERVE_KERNELS_CORE_BUFFER_H_
