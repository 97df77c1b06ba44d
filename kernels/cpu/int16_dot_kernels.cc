#include "kernels/cpu/int16_dot_kernels.h"

#include <cstddef>
#include <cstdint>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DMLSERVE_X86 1
#endif

// The SIMD variants are compiled with target pragmas rather than per-file
// flags and use no library templates, so no inline function built for a newer
// ISA can be merged into code that runs on an older CPU.

namespace dmlserve {
namespace {

template <int kRows>
void GenericPanel(const int16_t* a, size_t lda, const int16_t* b, size_t ldb, size_t cols,
                  size_t depth, int32_t* c, size_t ldc) {
  for (size_t j = 0; j < cols; ++j) {
    const int16_t* column = b + j * ldb;
    for (int i = 0; i < kRows; ++i) {
      const int16_t* row = a + i * lda;
      int32_t sum = 0;
      for (size_t k = 0; k < depth; ++k) sum += int32_t{row[k]} * int32_t{column[k]};
      c[i * ldc + j] += sum;
    }
  }
}

void GenericDot(const int16_t* a, size_t lda, int rows, const int16_t* b, size_t ldb, size_t cols,
                size_t depth, int32_t* c, size_t ldc) {
  switch (rows) {
    case 1:
      return GenericPanel<1>(a, lda, b, ldb, cols, depth, c, ldc);
    case 2:
      return GenericPanel<2>(a, lda, b, ldb, cols, depth, c, ldc);
    case 3:
      return GenericPanel<3>(a, lda, b, ldb, cols, depth, c, ldc);
    default:
      return GenericPanel<4>(a, lda, b, ldb, cols, depth, c, ldc);
  }
}

#if DMLSERVE_X86

#pragma GCC push_options
#pragma GCC target("avx2")

inline int32_t HorizontalSum256(__m256i v) {
  __m128i sum = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  sum = _mm_add_epi32(sum, _mm_shuffle_epi32(sum, _MM_SHUFFLE(1, 0, 3, 2)));
  sum = _mm_add_epi32(sum, _mm_shuffle_epi32(sum, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(sum);
}

// kRows x kCols accumulators: 4 x 2 keeps 8 accumulators and 3 operands in
// the 16 ymm registers.
template <int kRows, int kCols>
inline void Avx2Tile(const int16_t* a, size_t lda, const int16_t* b, size_t ldb, size_t depth,
                     int32_t* c, size_t ldc) {
  __m256i acc[kRows][kCols];
  for (int i = 0; i < kRows; ++i)
    for (int j = 0; j < kCols; ++j) acc[i][j] = _mm256_setzero_si256();
  for (size_t k = 0; k < depth; k += 16) {
    __m256i columns[kCols];
    for (int j = 0; j < kCols; ++j)
      columns[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + j * ldb + k));
    for (int i = 0; i < kRows; ++i) {
      const __m256i row = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i * lda + k));
      for (int j = 0; j < kCols; ++j)
        acc[i][j] = _mm256_add_epi32(acc[i][j], _mm256_madd_epi16(row, columns[j]));
    }
  }
  for (int i = 0; i < kRows; ++i)
    for (int j = 0; j < kCols; ++j) c[i * ldc + j] += HorizontalSum256(acc[i][j]);
}

template <int kRows>
void Avx2Panel(const int16_t* a, size_t lda, const int16_t* b, size_t ldb, size_t cols,
               size_t depth, int32_t* c, size_t ldc) {
  size_t j = 0;
  for (; j + 2 <= cols; j += 2) Avx2Tile<kRows, 2>(a, lda, b + j * ldb, ldb, depth, c + j, ldc);
  if (j < cols) Avx2Tile<kRows, 1>(a, lda, b + j * ldb, ldb, depth, c + j, ldc);
}

void Avx2Dot(const int16_t* a, size_t lda, int rows, const int16_t* b, size_t ldb, size_t cols,
             size_t depth, int32_t* c, size_t ldc) {
  switch (rows) {
    case 1:
      return Avx2Panel<1>(a, lda, b, ldb, cols, depth, c, ldc);
    case 2:
      return Avx2Panel<2>(a, lda, b, ldb, cols, depth, c, ldc);
    case 3:
      return Avx2Panel<3>(a, lda, b, ldb, cols, depth, c, ldc);
    default:
      return Avx2Panel<4>(a, lda, b, ldb, cols, depth, c, ldc);
  }
}

#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vnni")
// GCC 12's AVX-512 headers pass _mm512_undefined_epi32() as the unused merge
// operand of unmasked intrinsics, which -Wuninitialized reports.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

inline int32_t HorizontalSum512(__m512i v) {
  const __m256i half = _mm512_castsi512_si256(
      _mm512_add_epi32(v, _mm512_shuffle_i64x2(v, v, _MM_SHUFFLE(1, 0, 3, 2))));
  __m128i sum = _mm_add_epi32(_mm256_castsi256_si128(half), _mm256_extracti128_si256(half, 1));
  sum = _mm_add_epi32(sum, _mm_shuffle_epi32(sum, _MM_SHUFFLE(1, 0, 3, 2)));
  sum = _mm_add_epi32(sum, _mm_shuffle_epi32(sum, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(sum);
}

// 4 x 4 accumulators plus operands fit the 32 zmm registers; vpdpwssd fuses
// the multiply, pairwise add and accumulate.
template <int kRows, int kCols>
inline void Avx512VnniTile(const int16_t* a, size_t lda, const int16_t* b, size_t ldb, size_t depth,
                           int32_t* c, size_t ldc) {
  __m512i acc[kRows][kCols];
  for (int i = 0; i < kRows; ++i)
    for (int j = 0; j < kCols; ++j) acc[i][j] = _mm512_setzero_si512();
  for (size_t k = 0; k < depth; k += 32) {
    __m512i columns[kCols];
    for (int j = 0; j < kCols; ++j) columns[j] = _mm512_loadu_si512(b + j * ldb + k);
    for (int i = 0; i < kRows; ++i) {
      const __m512i row = _mm512_loadu_si512(a + i * lda + k);
      for (int j = 0; j < kCols; ++j) acc[i][j] = _mm512_dpwssd_epi32(acc[i][j], row, columns[j]);
    }
  }
  for (int i = 0; i < kRows; ++i)
    for (int j = 0; j < kCols; ++j) c[i * ldc + j] += HorizontalSum512(acc[i][j]);
}

template <int kRows>
void Avx512VnniPanel(const int16_t* a, size_t lda, const int16_t* b, size_t ldb, size_t cols,
                     size_t depth, int32_t* c, size_t ldc) {
  size_t j = 0;
  for (; j + 4 <= cols; j += 4)
    Avx512VnniTile<kRows, 4>(a, lda, b + j * ldb, ldb, depth, c + j, ldc);
  for (; j < cols; ++j) Avx512VnniTile<kRows, 1>(a, lda, b + j * ldb, ldb, depth, c + j, ldc);
}

void Avx512VnniDot(const int16_t* a, size_t lda, int rows, const int16_t* b, size_t ldb,
                   size_t cols, size_t depth, int32_t* c, size_t ldc) {
  switch (rows) {
    case 1:
      return Avx512VnniPanel<1>(a, lda, b, ldb, cols, depth, c, ldc);
    case 2:
      return Avx512VnniPanel<2>(a, lda, b, ldb, cols, depth, c, ldc);
    case 3:
      return Avx512VnniPanel<3>(a, lda, b, ldb, cols, depth, c, ldc);
    default:
      return Avx512VnniPanel<4>(a, lda, b, ldb, cols, depth, c, ldc);
  }
}

#pragma GCC diagnostic pop
#pragma GCC pop_options

#endif  // DMLSERVE_X86

}  // namespace

std::vector<Int16DotPanel> AvailableInt16DotPanels() {
  std::vector<Int16DotPanel> panels = {{"generic", &GenericDot}};
#if DMLSERVE_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2")) panels.push_back({"avx2", &Avx2Dot});
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vnni")) {
    panels.push_back({"avx512vnni", &Avx512VnniDot});
  }
#endif
  return panels;
}

const Int16DotPanel& BestInt16DotPanel() {
  static const Int16DotPanel best = AvailableInt16DotPanels().back();
  return best;
}

}  // namespace dmlserve
