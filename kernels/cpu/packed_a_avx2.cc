// The AVX2 packers of A (PackARowFn, PackAWideRowFn in packed_a.h): 32
// bytes of a row per step. Only this file's functions carry the AVX2 target;
// they run only from the tables of levels the CPU runs (cpu_kernels.h).

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/isa_portability.h"
#include "kernels/cpu/packed_a.h"

#if DMLSERVE_X86
#include <immintrin.h>

DMLSERVE_ISA_BEGIN("avx2")

namespace dmlserve {
namespace {

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

}  // namespace

// 32 bytes per step; vpsadbw sums them into 4 lanes.
int32_t PackARowAvx2(const ARowSource& row, size_t k, size_t padded, uint8_t* out) {
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
int32_t PackAWideRowAvx2(const ARowSource& row, size_t k, size_t padded, int16_t* out) {
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

}  // namespace dmlserve

DMLSERVE_ISA_END
#endif  // DMLSERVE_X86
