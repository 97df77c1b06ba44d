#include "kernels/cpu/packed_b.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DMLSERVE_X86 1
#endif

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

// Each task packs kTileColumns columns; their packed rows are written a few
// depth values at a time, and the padded stride keeps those lines in
// distinct L1 sets.
constexpr size_t kTileColumns = 256;

#if DMLSERVE_X86
// Columns [j, j + 16) of rows [k0, k0 + 8), zero points subtracted, written as
// 8 consecutive depth values of each of the 16 packed columns: widening to
// int16 and an 8x8 transpose in SSE2 registers (baseline on x86-64).
template <typename T>
inline void PackTile8x16(const T* in, size_t n, const int16_t* zero_points, int16_t* out,
                         size_t stride) {
  const __m128i zero = _mm_setzero_si128();
  const __m128i zp_low = _mm_loadu_si128(reinterpret_cast<const __m128i*>(zero_points));
  const __m128i zp_high = _mm_loadu_si128(reinterpret_cast<const __m128i*>(zero_points + 8));
  __m128i low[8], high[8];
  for (int r = 0; r < 8; ++r) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + r * n));
    const __m128i extension = std::is_signed_v<T> ? _mm_cmpgt_epi8(zero, bytes) : zero;
    low[r] = _mm_sub_epi16(_mm_unpacklo_epi8(bytes, extension), zp_low);
    high[r] = _mm_sub_epi16(_mm_unpackhi_epi8(bytes, extension), zp_high);
  }
  for (int half = 0; half < 2; ++half) {
    const __m128i* r = half == 0 ? low : high;
    const __m128i t0 = _mm_unpacklo_epi16(r[0], r[1]), t1 = _mm_unpackhi_epi16(r[0], r[1]);
    const __m128i t2 = _mm_unpacklo_epi16(r[2], r[3]), t3 = _mm_unpackhi_epi16(r[2], r[3]);
    const __m128i t4 = _mm_unpacklo_epi16(r[4], r[5]), t5 = _mm_unpackhi_epi16(r[4], r[5]);
    const __m128i t6 = _mm_unpacklo_epi16(r[6], r[7]), t7 = _mm_unpackhi_epi16(r[6], r[7]);
    const __m128i u0 = _mm_unpacklo_epi32(t0, t2), u1 = _mm_unpackhi_epi32(t0, t2);
    const __m128i u2 = _mm_unpacklo_epi32(t1, t3), u3 = _mm_unpackhi_epi32(t1, t3);
    const __m128i u4 = _mm_unpacklo_epi32(t4, t6), u5 = _mm_unpackhi_epi32(t4, t6);
    const __m128i u6 = _mm_unpacklo_epi32(t5, t7), u7 = _mm_unpackhi_epi32(t5, t7);
    const __m128i columns[8] = {_mm_unpacklo_epi64(u0, u4), _mm_unpackhi_epi64(u0, u4),
                                _mm_unpacklo_epi64(u1, u5), _mm_unpackhi_epi64(u1, u5),
                                _mm_unpacklo_epi64(u2, u6), _mm_unpackhi_epi64(u2, u6),
                                _mm_unpacklo_epi64(u3, u7), _mm_unpackhi_epi64(u3, u7)};
    for (int c = 0; c < 8; ++c) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (half * 8 + c) * stride), columns[c]);
    }
  }
}
#endif  // DMLSERVE_X86

template <typename T>
void PackColumns(const QuantizedMatMulOperation& op, const T* b, size_t begin, size_t end,
                 PackedB& packed) {
  const size_t k = op.k, n = op.n, stride = packed.stride, width = end - begin;
  int16_t zero_points[kTileColumns];
  for (size_t j = 0; j < width; ++j)
    zero_points[j] = static_cast<int16_t>(ZeroPoint(op, begin + j));
  int16_t* out = packed.values.get() + begin * stride;
  size_t simd_rows = 0, simd_columns = 0;
#if DMLSERVE_X86
  simd_rows = k / 8 * 8;
  simd_columns = width / 16 * 16;
  for (size_t k0 = 0; k0 < simd_rows; k0 += 8) {
    for (size_t j = 0; j < simd_columns; j += 16) {
      PackTile8x16(b + k0 * n + begin + j, n, zero_points + j, out + j * stride + k0, stride);
    }
  }
#endif
  // What the tiles left: the last k % 8 rows of every column, and every row
  // of the last width % 16 columns.
  for (size_t kk = 0; kk < k; ++kk) {
    const T* in = b + kk * n + begin;
    const size_t first = kk < simd_rows ? simd_columns : 0;
    for (size_t j = first; j < width; ++j) {
      out[j * stride + kk] = static_cast<int16_t>(in[j] - zero_points[j]);
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
