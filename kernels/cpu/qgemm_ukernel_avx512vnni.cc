// AVX-512 VNNI micro-kernel (Ice Lake, Zen 4 and later): vpdpbusd multiplies
// 64 u8 x s8 pairs and adds each group of 4 into one of 16 int32 lanes.
//
// Blocking: 6 rows x 4 strips (64 columns). The 24 zmm accumulators, 4 B
// vectors and a broadcast A quad fit the 32 zmm registers; each quad step
// issues 24 vpdpbusd for 4 vector loads and 6 broadcasts, so the multiply
// units, not the loads, set the pace. Only `rows` x `strips` accumulators are
// instantiated, so a GEMV (1 row) or a narrow N (1 strip) does no wasted
// multiplies.

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/core/check.h"
#include "kernels/cpu/isa_portability.h"
#include "kernels/cpu/qgemm_ukernel.h"

#if DMLSERVE_X86
#include <immintrin.h>

// Compiled in an ISA region (a target pragma) rather than with per-file
// flags, and using no library templates, so no inline function built for
// AVX-512 can be merged into code that runs on an older CPU.
DMLSERVE_ISA_BEGIN("avx512f,avx512bw,avx512vl,avx512vnni")
// GCC 12's AVX-512 headers pass _mm512_undefined_epi32() as the unused merge
// operand of unmasked intrinsics, which -Wuninitialized reports.
DMLSERVE_IGNORE_UNINITIALIZED_BEGIN

namespace dmlserve {
namespace {

constexpr int kMr = 6;
constexpr int kMaxStrips = 4;

template <int kRows, int kStrips>
void Kernel(size_t quads, const uint8_t* a, size_t lda, const int8_t* b, size_t b_strip_stride,
            int32_t* c, size_t ldc, bool accumulate) {
  // One flat array, indexed with constants after unrolling, so GCC keeps
  // every accumulator in a register (a 2-D array of vectors gets spilled).
  __m512i acc[kRows * kStrips];
#pragma GCC unroll 24
  for (int x = 0; x < kRows * kStrips; ++x) acc[x] = _mm512_setzero_si512();
  for (size_t q = 0; q < quads; ++q) {
    __m512i columns[kStrips];
#pragma GCC unroll 4
    for (int s = 0; s < kStrips; ++s) {
      columns[s] = _mm512_loadu_si512(b + s * b_strip_stride + q * kQGemmQuadBytes);
    }
#pragma GCC unroll 6
    for (int i = 0; i < kRows; ++i) {
      int32_t quad;
      std::memcpy(&quad, a + i * lda + q * 4, 4);
      const __m512i row = _mm512_set1_epi32(quad);
#pragma GCC unroll 4
      for (int s = 0; s < kStrips; ++s) {
        acc[i * kStrips + s] = _mm512_dpbusd_epi32(acc[i * kStrips + s], row, columns[s]);
      }
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < kRows; ++i) {
#pragma GCC unroll 4
    for (int s = 0; s < kStrips; ++s) {
      int32_t* out = c + i * ldc + s * kQGemmStripColumns;
      __m512i value = acc[i * kStrips + s];
      if (accumulate) value = _mm512_add_epi32(value, _mm512_loadu_si512(out));
      _mm512_storeu_si512(out, value);
    }
  }
}

// One row (a GEMV): nothing to reuse B for, so the kernel streams B from L2
// or L3 and its pace is set by that. Two sets of accumulators (even and odd
// quads) halve the dependency chains. (Software prefetching measured no
// better than the hardware prefetchers on these four sequential streams.)
template <int kStrips>
void OneRowKernel(size_t quads, const uint8_t* a, size_t /*lda*/, const int8_t* b,
                  size_t b_strip_stride, int32_t* c, size_t /*ldc*/, bool accumulate) {
  __m512i even[kStrips], odd[kStrips];
#pragma GCC unroll 4
  for (int s = 0; s < kStrips; ++s) even[s] = odd[s] = _mm512_setzero_si512();
  size_t q = 0;
  for (; q + 2 <= quads; q += 2) {
    int32_t quads_of_a[2];
    std::memcpy(quads_of_a, a + q * 4, 8);
    const __m512i row_even = _mm512_set1_epi32(quads_of_a[0]);
    const __m512i row_odd = _mm512_set1_epi32(quads_of_a[1]);
#pragma GCC unroll 4
    for (int s = 0; s < kStrips; ++s) {
      const int8_t* strip = b + s * b_strip_stride + q * kQGemmQuadBytes;
      even[s] = _mm512_dpbusd_epi32(even[s], row_even, _mm512_loadu_si512(strip));
      odd[s] = _mm512_dpbusd_epi32(odd[s], row_odd, _mm512_loadu_si512(strip + kQGemmQuadBytes));
    }
  }
  if (q < quads) {
    int32_t quad;
    std::memcpy(&quad, a + q * 4, 4);
    const __m512i row = _mm512_set1_epi32(quad);
#pragma GCC unroll 4
    for (int s = 0; s < kStrips; ++s) {
      even[s] = _mm512_dpbusd_epi32(
          even[s], row, _mm512_loadu_si512(b + s * b_strip_stride + q * kQGemmQuadBytes));
    }
  }
#pragma GCC unroll 4
  for (int s = 0; s < kStrips; ++s) {
    int32_t* out = c + s * kQGemmStripColumns;
    __m512i value = _mm512_add_epi32(even[s], odd[s]);
    if (accumulate) value = _mm512_add_epi32(value, _mm512_loadu_si512(out));
    _mm512_storeu_si512(out, value);
  }
}

// One strip (N <= 16) of several rows: with one accumulator per row, six
// dependency chains cannot keep two multipliers with a 4-cycle latency busy
// (75% at most), so even and odd quads get their own accumulators.
template <int kRows>
void OneStripKernel(size_t quads, const uint8_t* a, size_t lda, const int8_t* b,
                    size_t /*b_strip_stride*/, int32_t* c, size_t ldc, bool accumulate) {
  // acc[2i] even quads, acc[2i + 1] odd quads of row i: one flat array
  // indexed by constants once unrolled, so GCC keeps it in registers.
  __m512i acc[2 * kRows];
#pragma GCC unroll 12
  for (int x = 0; x < 2 * kRows; ++x) acc[x] = _mm512_setzero_si512();
  // One loop without a tail (a tail after it makes GCC copy every
  // accumulator on each iteration): an odd last quad pairs with zeros.
  for (size_t q = 0; q < quads; q += 2) {
    const bool has_odd = q + 1 < quads;
    const __m512i columns_even = _mm512_loadu_si512(b + q * kQGemmQuadBytes);
    const __m512i columns_odd =
        has_odd ? _mm512_loadu_si512(b + (q + 1) * kQGemmQuadBytes) : _mm512_setzero_si512();
#pragma GCC unroll 6
    for (int i = 0; i < kRows; ++i) {
      int32_t quad_even, quad_odd = 0;  // broadcast straight from memory
      std::memcpy(&quad_even, a + i * lda + q * 4, 4);
      if (has_odd) std::memcpy(&quad_odd, a + i * lda + q * 4 + 4, 4);
      acc[2 * i] = _mm512_dpbusd_epi32(acc[2 * i], _mm512_set1_epi32(quad_even), columns_even);
      acc[2 * i + 1] =
          _mm512_dpbusd_epi32(acc[2 * i + 1], _mm512_set1_epi32(quad_odd), columns_odd);
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < kRows; ++i) {
    __m512i value = _mm512_add_epi32(acc[2 * i], acc[2 * i + 1]);
    if (accumulate) value = _mm512_add_epi32(value, _mm512_loadu_si512(c + i * ldc));
    _mm512_storeu_si512(c + i * ldc, value);
  }
}

// The narrow path (see qgemm_ukernel.h). The one-strip kernel above issues
// a broadcast of A per multiply, which shares the vector pipes with the
// multiplies and holds it to ~75% of the 4-strip kernel. Here B is in quad
// groups: a 16-byte broadcast of 4 quads of a row (vbroadcasti32x4, done by
// the load unit) feeds 4 vpdpbusd, one per group vector; 6 rows x 4 vectors
// make 24 accumulators, as in the 4-strip kernel. Lane 4g + t of vector v
// sums quads = t (mod 4) of column 4g + v; the sums over t come at the end.

// Rearranges a strip into quad groups: within each 128-bit lane g, the 4x4
// dwords (quad t, column v) of 4 consecutive quads are transposed.
void NarrowPack(const int8_t* strip, size_t quads, int8_t* out) {
  for (size_t q = 0; q < quads; q += 4) {
    __m512i s[4];
#pragma GCC unroll 4
    for (int t = 0; t < 4; ++t) {
      s[t] = q + t < quads ? _mm512_loadu_si512(strip + (q + t) * kQGemmQuadBytes)
                           : _mm512_setzero_si512();
    }
    const __m512i t0 = _mm512_unpacklo_epi32(s[0], s[1]);  // per lane g: s0[0] s1[0] s0[1] s1[1]
    const __m512i t1 = _mm512_unpackhi_epi32(s[0], s[1]);  // s0[2] s1[2] s0[3] s1[3]
    const __m512i t2 = _mm512_unpacklo_epi32(s[2], s[3]);
    const __m512i t3 = _mm512_unpackhi_epi32(s[2], s[3]);
    int8_t* group = out + q * kQGemmQuadBytes;
    _mm512_storeu_si512(group, _mm512_unpacklo_epi64(t0, t2));  // v = 0: s0[0] s1[0] s2[0] s3[0]
    _mm512_storeu_si512(group + 64, _mm512_unpackhi_epi64(t0, t2));
    _mm512_storeu_si512(group + 128, _mm512_unpacklo_epi64(t1, t3));
    _mm512_storeu_si512(group + 192, _mm512_unpackhi_epi64(t1, t3));
  }
}

// Groups [0, groups) of kRows rows. With kPartial, `groups` is 1 and only
// `partial_quads` (1..3) of it are read: a masked load, as A may end right
// after them. Whole groups read 16 bytes of each row, folded into the
// broadcast. (They are separate functions because a tail after the loop
// makes GCC keep the accumulators in memory.)
template <int kRows, bool kPartial>
void NarrowKernel(size_t groups, size_t partial_quads, const uint8_t* a, size_t lda,
                  const int8_t* panel, int32_t* c, size_t ldc, bool accumulate) {
  __m512i acc[4 * kRows];
#pragma GCC unroll 24
  for (int x = 0; x < 4 * kRows; ++x) acc[x] = _mm512_setzero_si512();
  const __mmask8 mask = static_cast<__mmask8>((1u << partial_quads) - 1);
  for (size_t g = 0; g < groups; ++g) {
    __m512i columns[4];
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) columns[v] = _mm512_loadu_si512(panel + g * 256 + v * 64);
#pragma GCC unroll 6
    for (int i = 0; i < kRows; ++i) {
      const uint8_t* quads_of_row = a + i * lda + g * 16;
      const __m512i row = _mm512_broadcast_i32x4(
          kPartial ? _mm_maskz_loadu_epi32(mask, quads_of_row)
                   : _mm_loadu_si128(reinterpret_cast<const __m128i*>(quads_of_row)));
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) {
        acc[4 * i + v] = _mm512_dpbusd_epi32(acc[4 * i + v], row, columns[v]);
      }
    }
  }
  // Stored first, then summed: reducing straight from the registers makes
  // GCC keep the accumulators in memory inside the loop.
  alignas(64) int32_t sums[4 * kRows][16];
#pragma GCC unroll 24
  for (int x = 0; x < 4 * kRows; ++x) _mm512_store_si512(sums[x], acc[x]);
  for (int i = 0; i < kRows; ++i) {
    // Per 128-bit lane g: the sum over t of vector v's lane 4g + t lands in
    // lane 4g + v, which is column 4g + v.
    const __m512i x0 = _mm512_load_si512(sums[4 * i]), x1 = _mm512_load_si512(sums[4 * i + 1]);
    const __m512i x2 = _mm512_load_si512(sums[4 * i + 2]), x3 = _mm512_load_si512(sums[4 * i + 3]);
    const __m512i u0 =
        _mm512_add_epi32(_mm512_unpacklo_epi32(x0, x1), _mm512_unpackhi_epi32(x0, x1));
    const __m512i u1 =
        _mm512_add_epi32(_mm512_unpacklo_epi32(x2, x3), _mm512_unpackhi_epi32(x2, x3));
    __m512i value = _mm512_add_epi32(_mm512_unpacklo_epi64(u0, u1), _mm512_unpackhi_epi64(u0, u1));
    if (accumulate) value = _mm512_add_epi32(value, _mm512_loadu_si512(c + i * ldc));
    _mm512_storeu_si512(c + i * ldc, value);
  }
}

using NarrowFn = void (*)(size_t, size_t, const uint8_t*, size_t, const int8_t*, int32_t*, size_t,
                          bool);
template <bool kPartial>
constexpr NarrowFn kNarrowKernels[kMr - 1] = {
    &NarrowKernel<2, kPartial>, &NarrowKernel<3, kPartial>, &NarrowKernel<4, kPartial>,
    &NarrowKernel<5, kPartial>, &NarrowKernel<6, kPartial>};

void Avx512VnniNarrow(size_t quads, const uint8_t* a, size_t lda, int rows, const int8_t* panel,
                      int32_t* c, size_t ldc, bool accumulate) {
  DMLSERVE_DCHECK(2 <= rows && rows <= kMr);
  const size_t whole = quads / 4;
  if (whole > 0) kNarrowKernels<false>[rows - 2](whole, 0, a, lda, panel, c, ldc, accumulate);
  if (whole * 4 < quads) {
    kNarrowKernels<true>[rows - 2](1, quads - whole * 4, a + whole * 16, lda,
                                   panel + whole * 4 * kQGemmQuadBytes, c, ldc,
                                   accumulate || whole > 0);
  }
}

using KernelFn = void (*)(size_t, const uint8_t*, size_t, const int8_t*, size_t, int32_t*, size_t,
                          bool);

template <int kRows>
constexpr KernelFn kRowKernels[kMaxStrips] = {&OneStripKernel<kRows>, &Kernel<kRows, 2>,
                                              &Kernel<kRows, 3>, &Kernel<kRows, 4>};
constexpr KernelFn kOneRowKernels[kMaxStrips] = {&OneRowKernel<1>, &OneRowKernel<2>,
                                                 &OneRowKernel<3>, &OneRowKernel<4>};

constexpr const KernelFn* kKernels[kMr] = {kOneRowKernels, kRowKernels<2>, kRowKernels<3>,
                                           kRowKernels<4>, kRowKernels<5>, kRowKernels<6>};

void Avx512VnniKernel(size_t quads, const uint8_t* a, size_t lda, int rows, const int8_t* b,
                      size_t b_strip_stride, int strips, int32_t* c, size_t ldc, bool accumulate) {
  DMLSERVE_DCHECK(1 <= rows && rows <= kMr);
  DMLSERVE_DCHECK(1 <= strips && strips <= kMaxStrips);
  kKernels[rows - 1][strips - 1](quads, a, lda, b, b_strip_stride, c, ldc, accumulate);
}

}  // namespace
}  // namespace dmlserve

DMLSERVE_IGNORE_UNINITIALIZED_END
DMLSERVE_ISA_END

namespace dmlserve {

const QGemmUkernel* Avx512VnniQGemmUkernel() {
  static const QGemmUkernel kernel = {"avx512vnni",     CpuIsa::kAvx512Vnni, kMr,
                                      kMaxStrips,       &Avx512VnniKernel,   &NarrowPack,
                                      &Avx512VnniNarrow};
  return &kernel;
}

}  // namespace dmlserve

#else  // !DMLSERVE_X86

namespace dmlserve {
const QGemmUkernel* Avx512VnniQGemmUkernel() { return nullptr; }
}  // namespace dmlserve

#endif  // DMLSERVE_X86
