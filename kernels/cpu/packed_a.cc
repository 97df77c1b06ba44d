#include "kernels/cpu/packed_a.h"

#include <algorithm>
#include <cstring>

#include "kernels/cpu/isa_portability.h"

#if DMLSERVE_X86
#include <immintrin.h>
#endif

#include "kernels/cpu/parallel_for.h"

namespace dmlserve {
namespace {

// Copies (when `out` is not null) and sums one row of A'.
int32_t PackRowPortable(const ARowSource& row, size_t k, size_t stride, uint8_t* out) {
  const uint8_t flip = row.is_signed ? 0x80 : 0;
  uint32_t sum = 0;
  for (size_t j = 0; j < k; ++j) {
    const uint8_t value = row.data[j] ^ flip;
    sum += value;
    if (out != nullptr) out[j] = value;
  }
  if (out != nullptr) std::fill(out + k, out + stride, uint8_t{0});
  return static_cast<int32_t>(sum);
}

#if DMLSERVE_X86
DMLSERVE_ISA_BEGIN("avx512f,avx512bw")
DMLSERVE_IGNORE_UNINITIALIZED_BEGIN

// 64 bytes per step; vpsadbw sums them into 8 lanes. Masked loads zero the
// bytes past K, which also writes the padding.
int32_t PackRowAvx512(const ARowSource& row, size_t k, size_t stride, uint8_t* out) {
  const __m512i flip_all = _mm512_set1_epi8(static_cast<char>(row.is_signed ? 0x80 : 0));
  __m512i sums = _mm512_setzero_si512();
  for (size_t j = 0; j < stride; j += 64) {
    const size_t valid = j < k ? std::min<size_t>(64, k - j) : 0;
    const __mmask64 mask = valid == 64 ? ~__mmask64{0} : ((__mmask64{1} << valid) - 1);
    const __m512i value = _mm512_xor_si512(_mm512_maskz_loadu_epi8(mask, row.data + j),
                                           _mm512_maskz_mov_epi8(mask, flip_all));
    sums = _mm512_add_epi64(sums, _mm512_sad_epu8(value, _mm512_setzero_si512()));
    if (out != nullptr) {
      const size_t width = std::min<size_t>(64, stride - j);
      const __mmask64 store = width == 64 ? ~__mmask64{0} : ((__mmask64{1} << width) - 1);
      _mm512_mask_storeu_epi8(out + j, store, value);
    }
  }
  return static_cast<int32_t>(_mm512_reduce_add_epi64(sums));
}

DMLSERVE_IGNORE_UNINITIALIZED_END
DMLSERVE_ISA_END
#endif  // DMLSERVE_X86

int32_t PackRow(const ARowSource& row, size_t k, size_t stride, uint8_t* out, CpuIsa isa) {
#if DMLSERVE_X86
  if (isa == CpuIsa::kAvx512Vnni) return PackRowAvx512(row, k, stride, out);
#endif
  (void)isa;
  return PackRowPortable(row, k, stride, out);
}

}  // namespace

bool PacksAInPlace(absl::Span<const ARowSource> rows, size_t k) {
  if (rows.empty()) return false;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].is_signed || rows[i].data != rows[0].data + i * k) return false;
  }
  return true;
}

int32_t SumBytes(const uint8_t* bytes, size_t count, CpuIsa isa) {
  return PackRow(ARowSource{bytes, false}, count, count, nullptr, isa);
}

void PackA(absl::Span<const ARowSource> rows, size_t k, int mr, bool sums, CpuIsa isa,
           PackedA& packed) {
  const size_t count = rows.size();
  const size_t padded = (k + 3) / 4 * 4;
  packed.k = k;
  packed.tail = nullptr;
  packed.tail_first = count;
  const bool in_place = PacksAInPlace(rows, k);
  // Rows are not padded to dodge L1 set conflicts (as B's strips are): the
  // micro-kernel reads only one quad per row per step, and using a UINT8 A in
  // place measured faster than a padded copy.
  uint8_t* out = nullptr;
  if (in_place) {
    packed.stride = k;
    packed.data = rows[0].data;
    if (padded != k) {
      // A row's last quad reads padded - k bytes of the rows after it; the
      // last rows have too few after them (up to 3 bytes would be read past
      // the request's bytes), so the blocks from the first such row on get a
      // copy with room for them.
      const size_t rows_read_after = (padded - k + k - 1) / k;  // ceil((padded - k) / k)
      const size_t safe_rows = count > rows_read_after ? count - rows_read_after : 0;
      packed.tail_first = safe_rows / mr * mr;
      const size_t tail_rows = count - packed.tail_first;
      packed.storage = AllocateAligned(tail_rows * k + 4);
      uint8_t* tail = reinterpret_cast<uint8_t*>(packed.storage.get());
      std::memcpy(tail, rows[packed.tail_first].data, tail_rows * k);
      std::memset(tail + tail_rows * k, 0, 4);
      packed.tail = tail;
    }
  } else {
    packed.stride = padded;
    packed.storage = AllocateAligned(std::max<size_t>(1, count * padded));
    out = reinterpret_cast<uint8_t*>(packed.storage.get());
    packed.data = out;
  }
  if (in_place && !sums) {
    packed.row_sums.clear();
    return;
  }
  packed.row_sums.resize(count);
  ParallelFor(static_cast<int64_t>(count),
              std::max<int64_t>(1, (1 << 18) / static_cast<int64_t>(padded)),
              [&](int64_t begin, int64_t end) {
                for (int64_t i = begin; i < end; ++i) {
                  packed.row_sums[i] =
                      PackRow(rows[i], k, padded, out == nullptr ? nullptr : out + i * padded, isa);
                }
              });
}

}  // namespace dmlserve
