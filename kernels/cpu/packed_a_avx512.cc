// The AVX-512 packer of A (PackARowFn in packed_a.h): 64 bytes of a row
// per step. Only this file's functions carry the AVX-512 target; they run
// only from the avx512vnni level's table (cpu_kernels.h).

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/isa_portability.h"
#include "kernels/cpu/packed_a.h"

#if DMLSERVE_X86
#include <immintrin.h>

DMLSERVE_ISA_BEGIN("avx512f,avx512bw")
DMLSERVE_IGNORE_UNINITIALIZED_BEGIN

namespace dmlserve {

// 64 bytes per step; vpsadbw sums them into 8 lanes. Masked loads zero the
// bytes past K, which also writes the padding.
int32_t PackARowAvx512(const ARowSource& row, size_t k, size_t padded, uint8_t* out) {
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

}  // namespace dmlserve

DMLSERVE_IGNORE_UNINITIALIZED_END
DMLSERVE_ISA_END
#endif  // DMLSERVE_X86
