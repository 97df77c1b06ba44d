// Portable micro-kernel: the reference every SIMD micro-kernel must match,
// and the path on CPUs without AVX2. Plain loops over the packed layout
// described in qgemm_ukernel.h; 4 rows x 1 strip per call.

#include <cstddef>
#include <cstdint>

#include "kernels/core/check.h"
#include "kernels/cpu/qgemm_ukernel.h"

namespace dmlserve {
namespace {

constexpr int kMr = 4;

void GenericKernel(size_t quads, const uint8_t* a, size_t lda, int rows, const int8_t* b,
                   size_t /*b_strip_stride*/, int strips, int32_t* c, size_t ldc, bool accumulate) {
  DMLSERVE_DCHECK(1 <= rows && rows <= kMr);
  DMLSERVE_DCHECK(strips == 1);
  for (int i = 0; i < rows; ++i) {
    for (size_t j = 0; j < kQGemmStripColumns; ++j) {
      // uint32 so that intermediate sums wrap instead of overflowing (UB).
      uint32_t sum = accumulate ? static_cast<uint32_t>(c[i * ldc + j]) : 0;
      for (size_t q = 0; q < quads; ++q) {
        const uint8_t* a_quad = a + i * lda + q * 4;
        const int8_t* b_quad = b + q * kQGemmQuadBytes + j * 4;
        for (int r = 0; r < 4; ++r) {
          sum += static_cast<uint32_t>(int32_t{a_quad[r]} * int32_t{b_quad[r]});
        }
      }
      c[i * ldc + j] = static_cast<int32_t>(sum);
    }
  }
}

constexpr QGemmUkernel kGeneric = {"generic", CpuIsa::kGeneric, kMr, 1, &GenericKernel};

}  // namespace

const QGemmUkernel* GenericQGemmUkernel() { return &kGeneric; }

}  // namespace dmlserve
