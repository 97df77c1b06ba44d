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

// Copies (when `out` is not null) and sums one row of A': K values, then
// zeros up to `padded`. The wide forms write int16 values (see
// qgemm_ukernel.h).
int32_t PackRowPortable(const ARowSource& row, size_t k, size_t padded, uint8_t* out) {
  const uint8_t flip = row.is_signed ? 0x80 : 0;
  uint32_t sum = 0;
  for (size_t j = 0; j < k; ++j) {
    const uint8_t value = row.data[j] ^ flip;
    sum += value;
    if (out != nullptr) out[j] = value;
  }
  if (out != nullptr) std::fill(out + k, out + padded, uint8_t{0});
  return static_cast<int32_t>(sum);
}

int32_t PackRowWidePortable(const ARowSource& row, size_t k, size_t padded, int16_t* out) {
  const uint8_t flip = row.is_signed ? 0x80 : 0;
  uint32_t sum = 0;
  for (size_t j = 0; j < k; ++j) {
    const uint8_t value = row.data[j] ^ flip;
    sum += value;
    out[j] = value;
  }
  std::fill(out + k, out + padded, int16_t{0});
  return static_cast<int32_t>(sum);
}

#if DMLSERVE_X86
DMLSERVE_ISA_BEGIN("avx2")

// Bytes [j, j + 32) of a row as A': flipped where j + x < k, zero past it
// (AVX2 has no masked loads: the row's last partial vector goes through a
// zeroed copy, so nothing past the row is read).
__m256i LoadRowAvx2(const ARowSource& row, size_t j, size_t k) {
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(row.is_signed ? 0x80 : 0));
  if (j + 32 <= k) {
    return _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row.data + j)),
                            flip);
  }
  alignas(32) uint8_t copy[32] = {};
  if (j < k) std::memcpy(copy, row.data + j, k - j);
  const size_t valid = j < k ? k - j : 0;
  const __m256i index =
      _mm256_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
                       22, 23, 24, 25, 26, 27, 28, 29, 30, 31);
  const __m256i in_row = _mm256_cmpgt_epi8(_mm256_set1_epi8(static_cast<char>(valid)), index);
  return _mm256_xor_si256(_mm256_load_si256(reinterpret_cast<const __m256i*>(copy)),
                          _mm256_and_si256(flip, in_row));
}

int32_t SumOf(__m256i sums) {
  const __m128i half =
      _mm_add_epi64(_mm256_castsi256_si128(sums), _mm256_extracti128_si256(sums, 1));
  return static_cast<int32_t>(_mm_cvtsi128_si64(half) + _mm_extract_epi64(half, 1));
}

// 32 bytes per step; vpsadbw sums them into 4 lanes.
int32_t PackRowAvx2(const ARowSource& row, size_t k, size_t padded, uint8_t* out) {
  __m256i sums = _mm256_setzero_si256();
  for (size_t j = 0; j < padded; j += 32) {
    const __m256i value = LoadRowAvx2(row, j, k);
    sums = _mm256_add_epi64(sums, _mm256_sad_epu8(value, _mm256_setzero_si256()));
    if (out == nullptr) continue;
    if (j + 32 <= padded) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + j), value);
    } else {
      alignas(32) uint8_t last[32];
      _mm256_store_si256(reinterpret_cast<__m256i*>(last), value);
      std::memcpy(out + j, last, padded - j);
    }
  }
  return SumOf(sums);
}

// The same, each byte zero-extended to int16 (vpmovzxbw) as it is stored.
int32_t PackRowWideAvx2(const ARowSource& row, size_t k, size_t padded, int16_t* out) {
  __m256i sums = _mm256_setzero_si256();
  for (size_t j = 0; j < padded; j += 32) {
    const __m256i value = LoadRowAvx2(row, j, k);
    sums = _mm256_add_epi64(sums, _mm256_sad_epu8(value, _mm256_setzero_si256()));
    const __m256i words[2] = {_mm256_cvtepu8_epi16(_mm256_castsi256_si128(value)),
                              _mm256_cvtepu8_epi16(_mm256_extracti128_si256(value, 1))};
    if (j + 32 <= padded) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + j), words[0]);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + j + 16), words[1]);
    } else {
      alignas(32) int16_t last[32];
      _mm256_store_si256(reinterpret_cast<__m256i*>(last), words[0]);
      _mm256_store_si256(reinterpret_cast<__m256i*>(last + 16), words[1]);
      std::memcpy(out + j, last, (padded - j) * sizeof(int16_t));
    }
  }
  return SumOf(sums);
}

DMLSERVE_ISA_END

DMLSERVE_ISA_BEGIN("avx512f,avx512bw")
DMLSERVE_IGNORE_UNINITIALIZED_BEGIN

// 64 bytes per step; vpsadbw sums them into 8 lanes. Masked loads zero the
// bytes past K, which also writes the padding.
int32_t PackRowAvx512(const ARowSource& row, size_t k, size_t padded, uint8_t* out) {
  const __m512i flip_all = _mm512_set1_epi8(static_cast<char>(row.is_signed ? 0x80 : 0));
  __m512i sums = _mm512_setzero_si512();
  for (size_t j = 0; j < padded; j += 64) {
    const size_t valid = j < k ? std::min<size_t>(64, k - j) : 0;
    const __mmask64 mask = valid == 64 ? ~__mmask64{0} : ((__mmask64{1} << valid) - 1);
    const __m512i value = _mm512_xor_si512(_mm512_maskz_loadu_epi8(mask, row.data + j),
                                           _mm512_maskz_mov_epi8(mask, flip_all));
    sums = _mm512_add_epi64(sums, _mm512_sad_epu8(value, _mm512_setzero_si512()));
    if (out != nullptr) {
      const size_t width = std::min<size_t>(64, padded - j);
      const __mmask64 store = width == 64 ? ~__mmask64{0} : ((__mmask64{1} << width) - 1);
      _mm512_mask_storeu_epi8(out + j, store, value);
    }
  }
  return static_cast<int32_t>(_mm512_reduce_add_epi64(sums));
}

DMLSERVE_IGNORE_UNINITIALIZED_END
DMLSERVE_ISA_END
#endif  // DMLSERVE_X86

int32_t PackRow(const ARowSource& row, size_t k, size_t padded, uint8_t* out, CpuIsa isa) {
#if DMLSERVE_X86
  if (isa == CpuIsa::kAvx512Vnni) return PackRowAvx512(row, k, padded, out);
  if (isa >= CpuIsa::kAvx2) return PackRowAvx2(row, k, padded, out);
#endif
  (void)isa;
  return PackRowPortable(row, k, padded, out);
}

int32_t PackRowWide(const ARowSource& row, size_t k, size_t padded, int16_t* out, CpuIsa isa) {
#if DMLSERVE_X86
  if (isa >= CpuIsa::kAvx2) return PackRowWideAvx2(row, k, padded, out);
#endif
  (void)isa;
  return PackRowWidePortable(row, k, padded, out);
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

void PackA(absl::Span<const ARowSource> rows, size_t k, const QGemmUkernel& kernel, bool sums,
           PackedA& packed) {
  const size_t count = rows.size();
  const size_t mr = static_cast<size_t>(kernel.mr);
  const size_t padded = (k + 3) / 4 * 4;
  packed.k = k;
  packed.tail = nullptr;
  packed.tail_first = count;
  const bool in_place = !kernel.wide_a && PacksAInPlace(rows, k);
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
    packed.stride = padded * (kernel.wide_a ? sizeof(int16_t) : 1);
    packed.storage = AllocateAligned(std::max<size_t>(1, count * packed.stride));
    out = reinterpret_cast<uint8_t*>(packed.storage.get());
    packed.data = out;
  }
  if (in_place && !sums) {
    packed.row_sums.clear();
    return;
  }
  packed.row_sums.resize(count);
  ParallelFor(
      static_cast<int64_t>(count), std::max<int64_t>(1, (1 << 18) / static_cast<int64_t>(padded)),
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          uint8_t* row_out = out == nullptr ? nullptr : out + i * packed.stride;
          packed.row_sums[i] =
              kernel.wide_a
                  ? PackRowWide(rows[i], k, padded, reinterpret_cast<int16_t*>(row_out), kernel.isa)
                  : PackRow(rows[i], k, padded, row_out, kernel.isa);
        }
      });
}

}  // namespace dmlserve
