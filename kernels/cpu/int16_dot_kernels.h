#ifndef DMLSERVE_KERNELS_CPU_INT16_DOT_KERNELS_H_
#define DMLSERVE_KERNELS_CPU_INT16_DOT_KERNELS_H_

// The inner loop of the quantized matrix multiply: dot products of rows of
// int16 values with int32 accumulation, in one portable and several SIMD
// variants picked at run time for the CPU at hand.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace dmlserve {

// Rows of A handled by one call (a panel).
inline constexpr int kDotPanelRows = 4;
// Packed rows are zero-padded to a multiple of this many elements.
inline constexpr size_t kDotDepthAlignment = 32;

// For i < rows (1..kDotPanelRows) and j < cols:
//   c[i * ldc + j] += sum over k < depth of a[i * lda + k] * b[j * ldb + k].
// `depth` is a multiple of kDotDepthAlignment. The caller guarantees the sums
// fit in int32 (see the K limit in operation.cc).
using Int16DotPanelFn = void (*)(const int16_t* a, size_t lda, int rows, const int16_t* b,
                                 size_t ldb, size_t cols, size_t depth, int32_t* c, size_t ldc);

struct Int16DotPanel {
  const char* name;  // "generic", "avx2", "avx512vnni"
  Int16DotPanelFn fn;
};

// Every variant this CPU can run, the portable one first.
std::vector<Int16DotPanel> AvailableInt16DotPanels();

// The fastest variant this CPU can run.
const Int16DotPanel& BestInt16DotPanel();

}  // namespace dmlserve

#endif  // DMLSERVE_KERNELS_CPU_INT16_DOT_KERNELS_H_
