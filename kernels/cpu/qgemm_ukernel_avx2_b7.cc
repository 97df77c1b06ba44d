// AVX2 micro-kernel for 7-bit weights: every value of B' in [-64, 63]
// (the "reduce range" quantization ONNX Runtime recommends on AVX2, and any
// int8 B whose values happen to be that small). The driver (qgemm_driver.cc) picks it instead of
// the exact AVX2 kernel when PackB found B' in that range; it is wrong on
// other B and so never runs alone.
//
// Why it is exact there: vpmaddubsw multiplies u8 A' by s8 B' and adds
// adjacent pairs into int16 with saturation. With |B'| <= 64 a pair is at
// most 255 * 64 * 2 = 32640 <= 32767 and at least 255 * -64 * 2 = -32640,
// so nothing saturates. vpmaddwd by ones then adds the two pairs of a quad
// into int32 (exact), which is what vpdpbusd computes in one instruction:
// this kernel is the AVX-VNNI kernel with that step spelled in three. Per 32
// multiply-adds it issues 3 instructions where the exact kernel issues 4.
//
// Blocking: 4 rows x 1 strip (16 columns, two ymm of the packed B layout, A
// read in place as uint8 quads). 8 accumulators, 2 B vectors, the ones, the
// broadcast A quad and 2 products fit the 16 ymm registers (6 rows would need
// 17).

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/core/check.h"
#include "kernels/cpu/isa_portability.h"
#include "kernels/cpu/qgemm_ukernel.h"

#if DMLSERVE_X86
#include <immintrin.h>

DMLSERVE_ISA_BEGIN("avx2")

namespace dmlserve {
namespace {

constexpr int kMr = 4;

template <int kRows>
void Kernel(size_t quads, const uint8_t* a, size_t lda, const int8_t* b, int32_t* c, size_t ldc,
            bool accumulate) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i acc[2 * kRows];
#pragma GCC unroll 8
  for (int x = 0; x < 2 * kRows; ++x) acc[x] = _mm256_setzero_si256();
  for (size_t q = 0; q < quads; ++q) {
    const int8_t* quad = b + q * kQGemmQuadBytes;
    const __m256i low = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(quad));
    const __m256i high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(quad + 32));
#pragma GCC unroll 4
    for (int i = 0; i < kRows; ++i) {
      int32_t value;
      std::memcpy(&value, a + i * lda + q * 4, 4);
      const __m256i row = _mm256_set1_epi32(value);
      acc[2 * i] =
          _mm256_add_epi32(acc[2 * i], _mm256_madd_epi16(_mm256_maddubs_epi16(row, low), ones));
      acc[2 * i + 1] = _mm256_add_epi32(acc[2 * i + 1],
                                        _mm256_madd_epi16(_mm256_maddubs_epi16(row, high), ones));
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < kRows; ++i) {
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      __m256i* out = reinterpret_cast<__m256i*>(c + i * ldc + 8 * h);
      __m256i value = acc[2 * i + h];
      if (accumulate) value = _mm256_add_epi32(value, _mm256_loadu_si256(out));
      _mm256_storeu_si256(out, value);
    }
  }
}

void Avx2SevenBitKernel(size_t quads, const uint8_t* a, size_t lda, int rows, const int8_t* b,
                        size_t /*b_strip_stride*/, int strips, int32_t* c, size_t ldc,
                        bool accumulate) {
  DMLSERVE_DCHECK(1 <= rows && rows <= kMr);
  DMLSERVE_DCHECK(strips == 1);
  ForRowCount<kMr>(rows, [&](auto r) { Kernel<r()>(quads, a, lda, b, c, ldc, accumulate); });
}

}  // namespace
}  // namespace dmlserve

DMLSERVE_ISA_END

namespace dmlserve {

const QGemmUkernel* Avx2SevenBitQGemmUkernel() {
  static const QGemmUkernel kernel = {"avx2_b7", CpuIsa::kAvx2, kMr, 1, &Avx2SevenBitKernel};
  return &kernel;
}

}  // namespace dmlserve

#else  // !DMLSERVE_X86

namespace dmlserve {
const QGemmUkernel* Avx2SevenBitQGemmUkernel() { return nullptr; }
}  // namespace dmlserve

#endif  // DMLSERVE_X86
