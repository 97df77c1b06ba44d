// AVX-VNNI micro-kernel (Alder Lake, Zen 5 and later; also on AVX-512 VNNI
// CPUs, where it can be forced for testing): the VEX-encoded vpdpbusd on
// 256-bit registers.
//
// Blocking: 6 rows x 1 strip (16 columns, two ymm). 12 accumulators, 2 B
// vectors and a broadcast A quad fit the 16 ymm registers; each quad step
// issues 12 vpdpbusd for 2 vector loads and 6 broadcasts.

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/core/check.h"
#include "kernels/cpu/isa_portability.h"
#include "kernels/cpu/qgemm_ukernel.h"

#if DMLSERVE_X86
#include <immintrin.h>

DMLSERVE_ISA_BEGIN("avx2,avxvnni")

namespace dmlserve {
namespace {

constexpr int kMr = 6;

template <int kRows>
void Kernel(size_t quads, const uint8_t* a, size_t lda, const int8_t* b, int32_t* c, size_t ldc,
            bool accumulate) {
  // Flat and indexed by constants once unrolled, so it lives in registers.
  __m256i acc[2 * kRows];
#pragma GCC unroll 12
  for (int x = 0; x < 2 * kRows; ++x) acc[x] = _mm256_setzero_si256();
  for (size_t q = 0; q < quads; ++q) {
    const int8_t* quad = b + q * kQGemmQuadBytes;
    const __m256i low = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(quad));
    const __m256i high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(quad + 32));
#pragma GCC unroll 6
    for (int i = 0; i < kRows; ++i) {
      int32_t value;
      std::memcpy(&value, a + i * lda + q * 4, 4);
      const __m256i row = _mm256_set1_epi32(value);
      acc[2 * i] = _mm256_dpbusd_avx_epi32(acc[2 * i], row, low);
      acc[2 * i + 1] = _mm256_dpbusd_avx_epi32(acc[2 * i + 1], row, high);
    }
  }
#pragma GCC unroll 12
  for (int x = 0; x < 2 * kRows; ++x) {
    __m256i* out = reinterpret_cast<__m256i*>(c + (x / 2) * ldc + (x % 2) * 8);
    __m256i value = acc[x];
    if (accumulate) value = _mm256_add_epi32(value, _mm256_loadu_si256(out));
    _mm256_storeu_si256(out, value);
  }
}

using KernelFn = void (*)(size_t, const uint8_t*, size_t, const int8_t*, int32_t*, size_t, bool);
constexpr KernelFn kKernels[kMr] = {&Kernel<1>, &Kernel<2>, &Kernel<3>,
                                    &Kernel<4>, &Kernel<5>, &Kernel<6>};

void AvxVnniKernel(size_t quads, const uint8_t* a, size_t lda, int rows, const int8_t* b,
                   size_t /*b_strip_stride*/, int strips, int32_t* c, size_t ldc, bool accumulate) {
  DMLSERVE_DCHECK(1 <= rows && rows <= kMr);
  DMLSERVE_DCHECK(strips == 1);
  kKernels[rows - 1](quads, a, lda, b, c, ldc, accumulate);
}

}  // namespace
}  // namespace dmlserve

DMLSERVE_ISA_END

namespace dmlserve {

const QGemmUkernel* AvxVnniQGemmUkernel() {
  static const QGemmUkernel kernel = {"avxvnni", CpuIsa::kAvxVnni, kMr, 1, &AvxVnniKernel};
  return &kernel;
}

}  // namespace dmlserve

#else  // !DMLSERVE_X86

namespace dmlserve {
const QGemmUkernel* AvxVnniQGemmUkernel() { return nullptr; }
}  // namespace dmlserve

#endif  // DMLSERVE_X86
