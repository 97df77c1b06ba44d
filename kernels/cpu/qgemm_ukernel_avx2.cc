// AVX2 micro-kernel for CPUs without VNNI (Haswell to Ice Lake client, Zen 1
// to 3). vpmaddubsw would multiply u8 x s8 directly but saturates its int16
// pair sums (255 * 127 * 2 > 32767), so this kernel widens both operands to
// int16 and uses vpmaddwd, whose int32 pair sums are exact.
//
// Blocking: 2 rows x 1 strip (16 columns). One quad of 4 columns widens to
// 16 int16 in a ymm; vpmaddwd against the row's quad (broadcast as 4 int16)
// leaves 2 partial sums per column, folded with vphaddd after the loop.
// 8 accumulators, 4 widened B vectors and the broadcast A quads fit the 16
// ymm registers.

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/isa_portability.h"
#include "kernels/cpu/qgemm_ukernel.h"

#if DMLSERVE_X86
#include <immintrin.h>

DMLSERVE_ISA_BEGIN("avx2")

namespace dmlserve {
namespace {

constexpr int kMr = 2;

template <int kRows>
void Kernel(size_t quads, const uint8_t* a, size_t lda, const int8_t* b, int32_t* c, size_t ldc,
            bool accumulate) {
  // acc[4 * i + g]: columns 4g..4g+3 of row i, two partial sums per column.
  // Flat and indexed by constants once unrolled, so it lives in registers.
  __m256i acc[4 * kRows];
#pragma GCC unroll 8
  for (int x = 0; x < 4 * kRows; ++x) acc[x] = _mm256_setzero_si256();
  for (size_t q = 0; q < quads; ++q) {
    const int8_t* quad = b + q * kQGemmQuadBytes;
    __m256i columns[4];
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
      columns[g] =
          _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(quad + 16 * g)));
    }
#pragma GCC unroll 2
    for (int i = 0; i < kRows; ++i) {
      int32_t value;
      std::memcpy(&value, a + i * lda + q * 4, 4);
      const __m256i row = _mm256_broadcastq_epi64(_mm_cvtepu8_epi16(_mm_cvtsi32_si128(value)));
#pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) {
        acc[4 * i + g] = _mm256_add_epi32(acc[4 * i + g], _mm256_madd_epi16(row, columns[g]));
      }
    }
  }
#pragma GCC unroll 2
  for (int i = 0; i < kRows; ++i) {
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      // [c0 c1 c4 c5 | c2 c3 c6 c7] of this half, then into column order.
      const __m256i pairs = _mm256_hadd_epi32(acc[4 * i + 2 * h], acc[4 * i + 2 * h + 1]);
      __m256i value = _mm256_permute4x64_epi64(pairs, _MM_SHUFFLE(3, 1, 2, 0));
      __m256i* out = reinterpret_cast<__m256i*>(c + i * ldc + h * 8);
      if (accumulate) value = _mm256_add_epi32(value, _mm256_loadu_si256(out));
      _mm256_storeu_si256(out, value);
    }
  }
}

void Avx2Kernel(size_t quads, const uint8_t* a, size_t lda, int rows, const int8_t* b,
                size_t /*b_strip_stride*/, int /*strips*/, int32_t* c, size_t ldc,
                bool accumulate) {
  if (rows == 1) {
    Kernel<1>(quads, a, lda, b, c, ldc, accumulate);
  } else {
    Kernel<2>(quads, a, lda, b, c, ldc, accumulate);
  }
}

}  // namespace
}  // namespace dmlserve

DMLSERVE_ISA_END

namespace dmlserve {

const QGemmUkernel* Avx2QGemmUkernel() {
  static const QGemmUkernel kernel = {"avx2", CpuIsa::kAvx2, kMr, 1, &Avx2Kernel};
  return SupportedCpuIsa() >= CpuIsa::kAvx2 ? &kernel : nullptr;
}

}  // namespace dmlserve

#else  // !DMLSERVE_X86

namespace dmlserve {
const QGemmUkernel* Avx2QGemmUkernel() { return nullptr; }
}  // namespace dmlserve

#endif  // DMLSERVE_X86
