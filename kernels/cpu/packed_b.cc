#include "kernels/cpu/packed_b.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/int16_dot_kernels.h"
#include "kernels/cpu/parallel_for.h"

namespace dmlserve {
namespace {

int32_t ZeroPoint(const QuantizedMatMulOperation& op, size_t column) {
  if (!op.b_zero_point.present()) return 0;
  const uint64_t index = op.b_quantization == QuantizationAxis::kPerTensor ? 0 : column;
  if (op.b_zero_point.data_type == DataType::kInt8) return op.b_zero_point.data_as<int8_t>()[index];
  return op.b_zero_point.data_as<uint8_t>()[index];
}

// The transpose reads kTileDepth rows of B, each one contiguous run of
// kTileColumns elements, and writes kTileDepth consecutive elements of each
// of kTileColumns packed columns (one 64-byte line each): both sides stay in
// L1, and the padded stride keeps the written lines in distinct sets.
constexpr size_t kTileDepth = 32;
constexpr size_t kTileColumns = 64;

template <typename T>
void PackColumns(const QuantizedMatMulOperation& op, const T* b, size_t begin, size_t end,
                 PackedB& packed) {
  const size_t k = op.k, n = op.n, stride = packed.stride, width = end - begin;
  int32_t zero_points[kTileColumns];
  for (size_t j = 0; j < width; ++j) zero_points[j] = ZeroPoint(op, begin + j);
  int16_t* out = packed.values.get() + begin * stride;
  for (size_t k0 = 0; k0 < k; k0 += kTileDepth) {
    const size_t k1 = std::min(k, k0 + kTileDepth);
    for (size_t kk = k0; kk < k1; ++kk) {
      const T* in = b + kk * n + begin;
      for (size_t j = 0; j < width; ++j) {
        out[j * stride + kk] = static_cast<int16_t>(in[j] - zero_points[j]);
      }
    }
  }
  for (size_t j = 0; j < width; ++j) {
    std::fill(out + j * stride + k, out + (j + 1) * stride, int16_t{0});
  }
}

}  // namespace

std::shared_ptr<const PackedB> PackB(const QuantizedMatMulOperation& op, uint64_t slice) {
  auto packed = std::make_shared<PackedB>();
  packed->n = op.n;
  packed->depth = (op.k + kDotDepthAlignment - 1) / kDotDepthAlignment * kDotDepthAlignment;
  // Left uninitialised: every element, padding included, is written below.
  packed->stride = PackedStride(packed->depth);
  packed->values.reset(new int16_t[packed->n * packed->stride]);
  packed->column_scales.resize(op.n);
  for (uint32_t j = 0; j < op.n; ++j) {
    const uint64_t index = op.b_quantization == QuantizationAxis::kPerTensor ? 0 : j;
    std::memcpy(&packed->column_scales[j], op.b_scale.data_as<float>() + index, sizeof(float));
  }
  const uint64_t offset = slice * op.k * op.n;
  const int64_t tiles = (op.n + kTileColumns - 1) / kTileColumns;
  const int64_t min_tiles = std::max<int64_t>(1, (1 << 16) / (int64_t{op.k} * kTileColumns));
  ParallelFor(tiles, min_tiles, [&](int64_t first, int64_t last) {
    for (int64_t tile = first; tile < last; ++tile) {
      const size_t begin = tile * kTileColumns;
      const size_t end = std::min<size_t>(begin + kTileColumns, op.n);
      if (op.b.data_type == DataType::kInt8) {
        PackColumns(op, op.b.data_as<int8_t>() + offset, begin, end, *packed);
      } else {
        PackColumns(op, op.b.data_as<uint8_t>() + offset, begin, end, *packed);
      }
    }
  });
  return packed;
}

std::shared_ptr<const PackedB> PackedBCache::Get(const QuantizedMatMulOperation& op,
                                                 uint64_t slice) {
  if (op.b.registered_id.empty()) return PackB(op, slice);
  // The scales and zero points are small and part of what was packed.
  auto bytes_of = [](const Tensor& tensor) {
    return tensor.present() ? absl::string_view(*tensor.bytes) : absl::string_view();
  };
  const std::string key =
      absl::StrCat(op.b.registered_id.size(), ":", op.b.registered_id, slice, ":",
                   static_cast<int>(op.b_quantization), ":", bytes_of(op.b_scale).size(), ":",
                   bytes_of(op.b_scale), bytes_of(op.b_zero_point));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = by_key_.find(key);
    if (it != by_key_.end()) {
      // Same id but different storage: the id was released and reused.
      if (it->second->bytes.lock() == op.b.bytes) {
        entries_.splice(entries_.begin(), entries_, it->second);
        return it->second->packed;
      }
      bytes_ -= it->second->packed->byte_size();
      entries_.erase(it->second);
      by_key_.erase(it);
    }
  }
  // Packed outside the lock; two threads may race to pack the same slice,
  // which only wastes work.
  std::shared_ptr<const PackedB> packed = PackB(op, slice);
  std::lock_guard<std::mutex> lock(mutex_);
  if (by_key_.count(key) == 0 && packed->byte_size() <= capacity_bytes_) {
    entries_.push_front(Entry{key, op.b.registered_id, op.b.bytes, packed});
    by_key_[key] = entries_.begin();
    bytes_ += packed->byte_size();
    EvictOverCapacityLocked();
  }
  return packed;
}

bool PackedBCache::Contains(absl::string_view registered_id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Entry& entry : entries_) {
    if (entry.registered_id == registered_id) return true;
  }
  return false;
}

void PackedBCache::Evict(absl::string_view registered_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->registered_id == registered_id) {
      bytes_ -= it->packed->byte_size();
      by_key_.erase(it->key);
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
}

uint64_t PackedBCache::memory_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_;
}

void PackedBCache::EvictOverCapacityLocked() {
  while (bytes_ > capacity_bytes_ && !entries_.empty()) {
    bytes_ -= entries_.back().packed->byte_size();
    by_key_.erase(entries_.back().key);
    entries_.pop_back();
  }
}

}  // namespace dmlserve
