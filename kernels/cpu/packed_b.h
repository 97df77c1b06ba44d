#ifndef DMLSERVE_KERNELS_CPU_PACKED_B_H_
#define DMLSERVE_KERNELS_CPU_PACKED_B_H_

// The B operand of a quantized matrix multiply in the layout the dot-product
// kernels read, and a cache of it for registered (long-lived) B tensors.

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/strings/string_view.h"
#include "kernels/core/operation.h"

namespace dmlserve {

// One B slice with its zero point subtracted, as int16, transposed to
// [N][stride] so every output element is one contiguous dot product; depth is
// K rounded up to kDotDepthAlignment with zeros.
struct PackedB {
  size_t n = 0;
  size_t depth = 0;
  size_t stride = 0;                  // elements between columns
  std::unique_ptr<int16_t[]> values;  // n * stride
  std::vector<float> column_scales;   // b_scale for each of the N columns

  const int16_t* column(size_t j) const { return values.get() + j * stride; }
  size_t byte_size() const { return n * stride * sizeof(int16_t) + n * sizeof(float); }
};

// Row stride for packed operands of `depth` elements: one cache line more
// than the depth, so rows read together do not all map to the same L1 set
// (depths are often powers of two).
inline size_t PackedStride(size_t depth) { return depth + 32; }

// Packs slice `slice` (b_batch * b_channel order) of op's B.
std::shared_ptr<const PackedB> PackB(const QuantizedMatMulOperation& op, uint64_t slice);

// Packed copies of registered B tensors, keyed by registered id, slice, scales
// and zero points, least recently used first out once over `capacity_bytes`.
// Thread-safe.
class PackedBCache {
 public:
  explicit PackedBCache(uint64_t capacity_bytes) : capacity_bytes_(capacity_bytes) {}

  // The packed slice, from the cache when op.b is registered (and packed
  // before), freshly packed (and remembered) otherwise.
  std::shared_ptr<const PackedB> Get(const QuantizedMatMulOperation& op, uint64_t slice);

  bool Contains(absl::string_view registered_id) const;
  void Evict(absl::string_view registered_id);
  uint64_t memory_bytes() const;

 private:
  struct Entry {
    std::string key;
    std::string registered_id;
    std::weak_ptr<const Buffer> bytes;  // the registered tensor packed
    std::shared_ptr<const PackedB> packed;
  };
  void EvictOverCapacityLocked();

  const uint64_t capacity_bytes_;
  mutable std::mutex mutex_;
  std::list<Entry> entries_;  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> by_key_;
  uint64_t bytes_ = 0;
};

}  // namespace dmlserve

#endif  // DMLSERVE_KERNELS_CPU_PACKED_B_H_
